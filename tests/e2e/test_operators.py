"""Operators: principals of the configuration that may act on sessions they do not own, each time
with a reason, recorded as ``OperatorActed``; everyone else stays a stranger."""

from __future__ import annotations

from pathlib import Path

import pytest

from temporalio.client import WorkflowUpdateFailedError

from agentrt.client import AgentClient
from agentrt.schemas import (
    OperatorActed,
    PermissionDecision,
    PermissionGranted,
    PermissionRequested,
    RequestRejected,
    SessionNotFound,
    TurnStarted,
)
from agentrt.workflows.session import SessionWorkflow
from agentrt.worker import AgentrtConfig
from tests.conftest import Harness
from tests.e2e._support import session_config, wait_for_event, write_script

OPERATOR = "ops-oliver"


def operator_client(harness: Harness) -> AgentClient:
    """The operator's client: its configuration names it an operator (``[principals] operators``),
    so it sees sessions it does not own."""
    return AgentClient(harness.temporal, task_queue=harness.task_queue, principal=OPERATOR, operators=[OPERATOR])


async def _acts(harness: Harness, session_id: str) -> list[tuple[str, str, str | None, str]]:
    events = (await harness.client.events(session_id)).events
    return [(e.principal, e.action, e.target, e.reason) for e in events if isinstance(e, OperatorActed)]


async def test_an_operator_decides_an_approval_with_a_reason_and_it_is_recorded(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"text": "done"},
    ])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, operators=[OPERATOR])
    started = await harness.client.start(config, "write")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    operator = operator_client(harness)

    with pytest.raises(RequestRejected, match="must give a reason"):
        await operator.approve(sid, requested.request.request_id)
    # The session itself refuses it too (a client that skips the check, a plain Temporal client).
    decision = PermissionDecision(request_id=requested.request.request_id, decision="grant", principal=OPERATOR)
    with pytest.raises(WorkflowUpdateFailedError):
        await harness.handle(sid).execute_update(SessionWorkflow.decide, decision)
    await operator.approve(sid, requested.request.request_id, "owner on leave; ticket OPS-12")
    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "completed" and (workspace / "a.txt").read_text() == "a"
    granted = [e for e in (await harness.client.events(sid)).events if isinstance(e, PermissionGranted)]
    assert [g.principal for g in granted] == [OPERATOR]
    assert await _acts(harness, sid) == [(OPERATOR, "grant", requested.request.request_id, "owner on leave; ticket OPS-12")]


async def test_an_operator_cancels_and_archives_with_a_reason_and_a_stranger_cannot(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "slow", "delay_seconds": 30}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, operators=[OPERATOR])
    started = await harness.client.start(config, "go")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, TurnStarted))
    operator, stranger = operator_client(harness), harness.as_principal("mallory")

    with pytest.raises(SessionNotFound):  # another owner's session answers as a missing one
        await stranger.cancel(sid, reason="because")
    with pytest.raises(RequestRejected, match="must give a reason to cancel"):
        await operator.cancel(sid)
    await operator.cancel(sid, reason="runaway turn")
    outcome = await harness.client.wait(sid, started.turn_id)
    with pytest.raises(RequestRejected, match="may not send"):
        await operator.send(sid, "hello from ops")
    await operator.archive(sid, "cleanup after incident")

    assert outcome.status == "cancelled"
    assert await _acts(harness, sid) == [
        (OPERATOR, "cancel", None, "runaway turn"),
        (OPERATOR, "archive", None, "cleanup after incident"),
    ]


def test_operators_come_from_the_configuration(tmp_path: Path) -> None:
    file = tmp_path / "agentrt.toml"
    file.write_text('[principals]\noperators = ["ops-oliver", "ops-ada"]\n')

    assert AgentrtConfig.load(file).operators == ["ops-oliver", "ops-ada"]
    file.write_text('[principals]\noperators = "ops-oliver"\n')
    with pytest.raises(Exception, match=r"\[principals\] operators must be a list of principal names"):
        AgentrtConfig.load(file)
