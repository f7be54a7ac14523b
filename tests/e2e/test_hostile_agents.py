"""A hostile model and a careless user against ``@tool`` and ``Agent`` on the real server: what the
model sends that JSON does not allow never reaches a tool, and a tool that calls ``sys.exit()``
is a crash like any other (retried, then reported), not an effect left for a person to reconcile."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentrt.client import AgentClient
from agentrt.worker import build_worker
from tests.conftest import Harness
from tests.e2e._support import event_types, session_config, write_script
from tests.e2e.hostile_tools import careless


@pytest.fixture
async def desk(harness: Harness) -> AsyncIterator[AgentClient]:
    queue = harness.task_queue + "-hostile"
    worker = build_worker(harness.temporal, harness.config, harness.store, task_queue=queue, agents=[careless])
    async with worker:
        yield harness.client_on(queue)


def tool_texts(harness: Harness, session_id: str) -> list[str]:
    return [m.text for _, m in harness.store.messages(session_id) if m.role == "tool"]


def ran(workspace: Path) -> list[str]:
    log = workspace / "ran.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.parametrize(("raw", "word"), [
    ('{"length": NaN}', "NaN"), ('{"length": Infinity}', "Infinity"), ('{"length": 1, "label": -Infinity}', "-Infinity"),
])
async def test_nan_or_infinity_in_a_model_s_arguments_never_reaches_the_tool_and_the_model_is_told_why(
    harness: Harness, desk: AgentClient, workspace: Path, tmp_path: Path, raw: str, word: str
) -> None:
    sid = harness.new_session_id()
    script = write_script(tmp_path, [{"tool_calls": [{"name": "measure", "arguments_raw": raw}]}, {"text": "done"}])

    _, outcome = await desk.start_and_wait(session_config(desk, sid, workspace, script, agent="careless"), "measure")

    assert outcome.status == "completed"
    [text] = tool_texts(harness, sid)
    assert f"arguments hold {word}, which is not a JSON number" in text  # not "None is not of type 'number'"
    assert ran(workspace) == []


async def test_an_effectful_tool_that_calls_sys_exit_is_retried_then_reported_not_left_to_reconcile(
    harness: Harness, desk: AgentClient, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    script = write_script(tmp_path, [{"tool_calls": [{"name": "quit_writer", "arguments": {}}]}, {"text": "done"}])
    config = session_config(desk, sid, workspace, script, agent="careless", approval={"effectful": "allow"})

    _, outcome = await desk.start_and_wait(config, "go")

    assert outcome.status == "completed"
    assert tool_texts(harness, sid) == ["error: quit_writer failed unexpectedly: SystemExit: 2"]
    assert ran(workspace) == ["quit_writer"] * 5  # each attempt released its claim for the next
    assert "PermissionRequested" not in event_types((await desk.events(sid)).events)
    record = harness.store.effect(f"session-{sid}/turn-1/2/call_0_0")
    assert record is not None and record.state == "failed"
