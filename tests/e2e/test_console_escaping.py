"""A delegated session's prompt and title, chosen by the model, are inert in the child's static
summary and details in the Temporal UI (code spans; tests/workflows/test_console_escaping.py)."""

from __future__ import annotations

from pathlib import Path

from agentrt.schemas import SessionDelegated
from tests.conftest import Harness
from tests.e2e._support import ALLOW_ALL, session_config, wait_for_event
from tests.e2e.test_delegation import child_handle, delegate, delegation_script
from tests.workflows.test_console_escaping import HOSTILE, assert_inert, rendered


async def test_a_delegated_prompt_and_title_are_inert_in_the_child_s_summary_and_details(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    title = "[t](javascript:alert(9))\n| x | <img src=z onerror=1>"
    script = delegation_script(tmp_path, [delegate(HOSTILE, title=title), {"text": "done"}], [[{"text": "ok"}]])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL), "go")
    delegated = await wait_for_event(harness.client, sid, lambda e: isinstance(e, SessionDelegated))

    description = await child_handle(harness, delegated.child_session_id).describe()
    summary, details = await description.static_summary() or "", await description.static_details() or ""

    assert details.startswith("prompt: `") and "\n" not in details
    assert_inert(details)
    assert "\n" not in summary and "<a " not in rendered(summary) and "<img" not in rendered(summary)
    assert (await harness.client.wait(sid, started.turn_id)).status == "completed"
