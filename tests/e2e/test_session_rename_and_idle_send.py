"""A session's title changed by ``rename`` and messages sent only if the session is idle, end to end
on the dev server and a real worker: through the Python client, the gateway over loopback HTTP and
the CLI; what a stranger, an operator without a reason and a hostile title meet, and that the
session is unchanged after each refusal."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from temporalio.client import WorkflowUpdateFailedError

from agentrt.client import AgentClient, create_app
from agentrt.schemas import (
    OperatorActed,
    RenameInput,
    RequestRejected,
    SessionBusy,
    SessionNotFound,
    SessionRenamed,
    SessionStateView,
)
from agentrt.worker import GatewayConfig, GatewayToken, token_sha256
from tests.cli.test_cli import agentrt
from tests.conftest import OWNER, Harness
from tests.e2e._support import session_config, write_script
from tests.e2e.test_gateway import gateway_client
from tests.gateway.test_gateway import assert_problem, serving

T = TypeVar("T")
TOKEN = "alice-rename-token-0123456789"
SLOW = [{"text": "done slowly", "delay_seconds": 30}, {"text": "second answer"}]


async def _until(read: Callable[[], Awaitable[T]], holds: Callable[[T], Any], timeout: float = 60) -> T:
    async def poll() -> T:
        while True:
            value = await read()
            if holds(value):
                return value
            await asyncio.sleep(0.1)

    return await asyncio.wait_for(poll(), timeout)


async def started(harness: Harness, workspace: Path, tmp_path: Path, turns: list[dict[str, Any]], **fields: Any) -> tuple[str, str]:
    sid = harness.new_session_id()
    first = await harness.client.start(session_config(harness.client, sid, workspace, write_script(tmp_path, turns), **fields), "hello")
    return sid, first.turn_id


async def running(harness: Harness, sid: str) -> SessionStateView:
    return await _until(lambda: harness.client.state(sid), lambda v: v.active_turn_id is not None and v.status == "running")


@pytest.fixture
async def http(harness: Harness, workspace: Path) -> AsyncIterator[httpx.AsyncClient]:
    config = GatewayConfig(tokens=[GatewayToken(sha256=token_sha256(TOKEN), principal=OWNER, scopes=("sessions",))])
    async with serving(create_app(await gateway_client(harness), config, workspace_root=workspace.parent)) as client:
        yield client


AUTH = {"Authorization": f"Bearer {TOKEN}"}


# ---------------------------------------------------------------- rename


async def test_a_renamed_session_shows_its_title_in_its_state_its_events_the_store_and_the_audit_log(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid, turn = await started(harness, workspace, tmp_path, [{"text": "hi"}], title="first title")
    await harness.client.wait(sid, turn, timeout_seconds=60)

    view = await harness.client.sessions.rename(sid, "release notes draft")

    assert view.title == "release notes draft" and (await harness.client.state(sid)).title == "release notes draft"
    [renamed] = [e for e in (await harness.client.events(sid)).events if isinstance(e, SessionRenamed)]
    assert (renamed.principal, renamed.title, renamed.previous) == (OWNER, "release notes draft", "first title")
    assert {s.session_id: s.title for s in harness.store.list_sessions(500)}[sid] == "release notes draft"
    [act] = harness.store.audit(target=sid, action="rename")
    assert (act.principal, act.detail["title"], act.detail["previous"]) == (OWNER, "release notes draft", "first title")


async def test_a_title_cleared_by_rename_is_gone_and_the_session_takes_its_next_message(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid, turn = await started(harness, workspace, tmp_path, [{"text": "hi"}, {"text": "again"}], title="old")
    await harness.client.wait(sid, turn, timeout_seconds=60)

    view = await harness.client.sessions.rename(sid, None)

    assert view.title is None and {s.session_id: s.title for s in harness.store.list_sessions(500)}[sid] is None
    sent = await harness.client.send(sid, "more")
    assert (await harness.client.wait(sid, sent.turn_id, timeout_seconds=60)).answer == "again"


async def test_a_stranger_cannot_rename_a_session_and_an_operator_needs_a_reason_and_the_title_stays(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid, turn = await started(harness, workspace, tmp_path, [{"text": "hi"}], title="kept", operators=["ops"])
    await harness.client.wait(sid, turn, timeout_seconds=60)

    operator = AgentClient(harness.temporal, task_queue=harness.task_queue, principal="ops", operators=["ops"])

    with pytest.raises(SessionNotFound):
        await harness.as_principal("mallory").sessions.rename(sid, "mine now")
    with pytest.raises(WorkflowUpdateFailedError) as refused:  # past the client, straight to Temporal
        await harness.handle(sid).execute_update("rename", RenameInput(principal="mallory", title="mine now"))
    assert "may not rename session" in str(refused.value.cause) and "not its owner" in str(refused.value.cause)
    with pytest.raises(RequestRejected, match="must give a reason to rename"):
        await operator.sessions.rename(sid, "by ops")
    assert (await harness.client.state(sid)).title == "kept"

    view = await operator.sessions.rename(sid, "by ops", "ticket 42")
    assert view.title == "by ops"
    acted = [e for e in (await harness.client.events(sid)).events if isinstance(e, OperatorActed)]
    assert [(e.principal, e.action, e.reason) for e in acted] == [("ops", "rename", "ticket 42")]


@pytest.mark.parametrize("title", ["\x1b[2J\x1b[31mpwned", "two\nlines", "   ", "x" * 201])
async def test_a_title_that_is_not_one_is_refused_and_the_session_keeps_its_own(
    harness: Harness, workspace: Path, tmp_path: Path, title: str
) -> None:
    sid, turn = await started(harness, workspace, tmp_path, [{"text": "hi"}], title="kept")
    await harness.client.wait(sid, turn, timeout_seconds=60)

    with pytest.raises(RequestRejected) as caught:
        await harness.client.sessions.rename(sid, title)

    assert caught.value.request == "rename" and "\x1b" not in str(caught.value)
    assert (await harness.client.state(sid)).title == "kept"
    assert not [e for e in (await harness.client.events(sid)).events if isinstance(e, SessionRenamed)]


async def test_a_session_renamed_over_http_answers_its_state_and_a_hostile_title_is_422(
    harness: Harness, http: httpx.AsyncClient, workspace: Path, tmp_path: Path
) -> None:
    sid, turn = await started(harness, workspace, tmp_path, [{"text": "hi"}], title="kept")
    await harness.client.wait(sid, turn, timeout_seconds=60)

    hostile = await http.post(f"/v1/sessions/{sid}/rename", json={"title": "\x1b]0;owned\x07"}, headers=AUTH)
    assert "control characters" in json.dumps(assert_problem(hostile, 422))
    assert (await http.get(f"/v1/sessions/{sid}", headers=AUTH)).json()["title"] == "kept"

    renamed = await http.post(f"/v1/sessions/{sid}/rename", json={"title": "from http"}, headers=AUTH)
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["title"] == "from http" and (await harness.client.state(sid)).title == "from http"
    listed = (await http.get("/v1/sessions", headers=AUTH)).json()["sessions"]
    assert [row["title"] for row in listed if row["session_id"] == sid] == ["from http"]


async def test_agentrt_session_rename_sets_and_clears_the_title(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    sid, turn = await started(harness, workspace, tmp_path, [{"text": "hi"}])
    await harness.client.wait(sid, turn, timeout_seconds=60)

    renamed = await agentrt(harness, "session", "rename", sid, "from the shell", cwd=tmp_path)
    assert renamed.returncode == 0, renamed.stderr
    assert renamed.stdout.strip() == f"session {sid} renamed to 'from the shell'"
    cleared = await agentrt(harness, "session", "rename", sid, "--clear", "--json", cwd=tmp_path)
    assert cleared.returncode == 0, cleared.stderr
    assert "title" not in json.loads(cleared.stdout) and (await harness.client.state(sid)).title is None
    stranger = await agentrt(harness, "session", "rename", sid, "mine", cwd=tmp_path, env={"AGENTRT_PRINCIPAL": "mallory"})
    assert stranger.returncode == 2 and f"no session '{sid}'" in stranger.stderr


async def test_agentrt_run_titles_a_session_and_session_list_shows_the_title_as_renamed(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "hi"}])
    bad = await agentrt(harness, "run", "hi", "-w", str(workspace), "--script", script, "--title", "a\tb", cwd=tmp_path)
    assert bad.returncode == 2 and "control characters" in bad.stderr
    run = await agentrt(harness, "run", "hi", "-w", str(workspace), "--script", script, "--title", "release notes", "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    sid = json.loads(run.stdout)["session_id"]
    harness.session_ids.append(sid)
    only = ("-q", f"WorkflowId = 'session-{sid}'")

    listed = await agentrt(harness, "session", "list", *only, "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [row["title"] for row in json.loads(listed.stdout)] == ["release notes"]
    await harness.client.sessions.rename(sid, "release notes, v2")
    text = await agentrt(harness, "session", "list", *only, cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(sid) and text.stdout.rstrip().endswith("  release notes, v2")


# ---------------------------------------------------------------- send only if idle


async def test_a_message_sent_only_if_idle_while_a_turn_runs_is_session_busy_and_nothing_is_queued(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid, turn = await started(harness, workspace, tmp_path, SLOW)
    await running(harness, sid)

    with pytest.raises(SessionBusy) as caught:
        await harness.client.send(sid, "are you done?", if_idle=True)

    assert (caught.value.busy, caught.value.turn_id, caught.value.request) == ("turn", turn, "send_message")
    assert f"turn {turn} is running" in str(caught.value)
    view = await harness.client.state(sid)
    assert view.queued_turn_ids == [] and view.active_turn_id == turn
    queued = await harness.client.send(sid, "queue it then")  # today's send still queues behind the turn
    assert queued.queued_behind == 1
    await harness.client.cancel(sid, include_queued=True)


async def test_a_message_sent_only_if_idle_to_an_idle_session_runs_at_once(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid, turn = await started(harness, workspace, tmp_path, [{"text": "first"}, {"text": "second"}])
    await harness.client.wait(sid, turn, timeout_seconds=60)

    outcome = await harness.client.sessions.send_and_wait(sid, "now?", if_idle=True)

    assert (outcome.status, outcome.answer) == ("completed", "second")


async def test_a_message_sent_only_if_idle_while_messages_are_queued_is_session_busy(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid, turn = await started(harness, workspace, tmp_path, SLOW)
    await running(harness, sid)
    await harness.client.send(sid, "queued first")
    await harness.client.cancel(sid, turn)  # the queued message's turn starts next
    await _until(lambda: harness.client.wait(sid, turn, timeout_seconds=0), lambda o: o.status == "cancelled")

    with pytest.raises(SessionBusy) as caught:
        await harness.client.send_and_wait(sid, "me too", if_idle=True)

    assert caught.value.busy in ("turn", "queued")
    await harness.client.cancel(sid, include_queued=True)


async def test_a_message_sent_only_if_idle_while_a_compaction_runs_is_session_busy_until_it_ends(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    names = []
    for i in range(4):
        (workspace / f"f{i}.txt").write_text(f"file f{i} line; " * 200)
        names.append(f"f{i}.txt")
    turns = [{"text": f"reading {n}", "tool_calls": [{"name": "fs.read", "arguments": {"path": n}}]} for n in names]
    sid, turn = await started(harness, workspace, tmp_path, [*turns[:2], {"text": "one"}, *turns[2:], {"text": "two"}, {"text": "three"}],
                              tools=["fs.read"])
    await harness.client.wait(sid, turn, timeout_seconds=60)
    sent = await harness.client.send(sid, "read more")
    await harness.client.wait(sid, sent.turn_id, timeout_seconds=60)
    await harness.client.sessions.pause(sid)  # a summary is a model call: the compaction holds until resume
    compaction = asyncio.ensure_future(harness.client.compact(sid))
    await _until(lambda: harness.client.state(sid), lambda v: v.status == "paused")
    await asyncio.sleep(0.5)  # the compaction is taken and holds

    with pytest.raises(SessionBusy) as caught:
        await harness.client.send(sid, "summarised yet?", if_idle=True)

    assert (caught.value.busy, caught.value.turn_id) == ("compaction", None)
    assert "its context is being compacted" in str(caught.value)
    await harness.client.sessions.resume(sid)
    assert (await asyncio.wait_for(compaction, 60)).compacted
    outcome = await harness.client.send_and_wait(sid, "now", if_idle=True)
    assert outcome.answer == "three"


async def test_a_keyed_message_sent_again_only_if_idle_while_its_own_turn_runs_names_that_turn(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid, turn = await started(harness, workspace, tmp_path, [{"text": "first"}, {"text": "slow", "delay_seconds": 30}])
    await harness.client.wait(sid, turn, timeout_seconds=60)
    first = await harness.client.send(sid, "once", if_idle=True, idempotency_key="order-7")
    await running(harness, sid)

    again = await harness.client.send(sid, "once", if_idle=True, idempotency_key="order-7")

    assert again.turn_id == first.turn_id
    await harness.client.cancel(sid, include_queued=True)


async def test_a_message_sent_only_if_idle_over_http_while_a_turn_runs_is_409_session_busy(
    harness: Harness, http: httpx.AsyncClient, workspace: Path, tmp_path: Path
) -> None:
    sid, turn = await started(harness, workspace, tmp_path, SLOW)
    await running(harness, sid)

    busy = await http.post(f"/v1/sessions/{sid}/messages", json={"text": "done?", "if_idle": True}, headers=AUTH)

    body = assert_problem(busy, 409)
    assert (body["type"], body["busy"], body["turn_id"]) == ("urn:agentrt:problem:session-busy", "turn", turn)
    state = (await http.get(f"/v1/sessions/{sid}", headers=AUTH)).json()
    assert state["queued_turn_ids"] == [] and state["active_turn_id"] == turn
    queued = await http.post(f"/v1/sessions/{sid}/messages", json={"text": "queue it"}, headers=AUTH)
    assert queued.status_code == 202 and queued.json()["queued_behind"] == 1
    await harness.client.cancel(sid, include_queued=True)


async def test_agentrt_session_send_if_idle_exits_3_with_the_reason_while_a_turn_runs(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid, turn = await started(harness, workspace, tmp_path, SLOW)
    await running(harness, sid)

    result = await agentrt(harness, "session", "send", sid, "done?", "--if-idle", "--no-wait", cwd=tmp_path)

    assert result.returncode == 3, result.stdout + result.stderr
    assert f"is busy: turn {turn} is running; the message was not queued" in result.stderr
    assert (await harness.client.state(sid)).queued_turn_ids == []
    await harness.client.cancel(sid, include_queued=True)

