"""A child session cancelled after it spent: its spend reaches its parent (signal ``child_spend``,
``child-spend-v1``), though a cancelled workflow returns no result. For each kind of parent:
an autonomous task, a task graph and a delegating session. A session whose parent has closed
(a task terminated: parent close policy ``REQUEST_CANCEL``) still ends Canceled."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Iterator

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.exceptions import CancelledError

from agentrt.schemas import (
    AssistantMessageCompleted,
    AutonomousTaskSessionEnded,
    DelegatedSessionEnded,
    GraphControlInput,
    GraphSnapshot,
    GraphSpec,
    ModelRequestStarted,
    SessionDelegated,
    Spend,
    ToolInvocationCompleted,
    Usage,
)
from tests.conftest import RECORDED_HISTORIES, Harness
from tests.e2e._graphs import GraphRig, write_graph_script
from tests.e2e._support import ALLOW_ALL, session_config, wait_for_event
from tests.e2e._tasks import TaskRig, write_task_script
from tests.e2e.test_delegation import child_handle, delegate, delegation_script, events_of, own_usage

DAY = 86_400.0
LIST = {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]}
# A child's turn: a listing (a model call and a tool call spent), then a reply that takes a minute.
SPEND_THEN_STALL = [LIST, {"text": "late", "delay_seconds": 60}]


@pytest.fixture
def rig(harness: Harness) -> Iterator[TaskRig]:
    rig = TaskRig.on(harness)
    yield rig
    RECORDED_HISTORIES.extend(rig.workflow_handles())  # tests/test_replay.py replays them


async def _spent(harness: Harness, session_id: str) -> Spend:
    """What the child session spent by its own account (its ``state`` query, after its end)."""
    view = await harness.client.state(session_id)
    return Spend(usage=view.usage, cost_usd=view.spend.cost_usd if view.spend else 0.0, tool_calls=view.spend.tool_calls if view.spend else 0)


async def _stalled(harness: Harness, session_id: str) -> None:
    """Wait until the child has run its listing and asked the model again (the stalled reply)."""
    await wait_for_event(harness.client, session_id, lambda e: isinstance(e, ToolInvocationCompleted))
    await wait_for_event(harness.client, session_id, lambda e: isinstance(e, ModelRequestStarted) and e.round == 2)


async def test_a_task_counts_the_spend_of_its_session_cancelled_mid_turn(
    harness: Harness, rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [SPEND_THEN_STALL])
    task_id = await rig.start(rig.config(workspace, script, schedule={"every_seconds": DAY}, approval=ALLOW_ALL))
    session_id = await rig.session_id(task_id, 1)
    await _stalled(harness, session_id)

    await rig.client.cancel_task(task_id, reason="enough")
    await rig.wait(task_id)

    assert (await rig.session_handle(task_id, 1).describe()).status == WorkflowExecutionStatus.CANCELED
    spent = await _spent(harness, session_id)
    assert spent.usage.output_tokens > 0 and spent.tool_calls == 1
    [ended] = [e for e in rig.stored_events(task_id) if isinstance(e, AutonomousTaskSessionEnded)]
    assert ended.status == "cancelled" and (ended.spend.usage, ended.spend.tool_calls) == (spent.usage, 1)
    view = await rig.client.task_status(task_id)
    assert view.spend.usage == spent.usage and view.spend.tool_calls == 1


async def test_a_graph_counts_the_spend_of_its_node_session_cancelled_mid_turn(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    rig = GraphRig(harness.temporal, harness.task_queue)
    spec = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "list the files"}]})
    script = write_graph_script(tmp_path, {"a": [{"turns": SPEND_THEN_STALL}]})
    graph_id = await rig.start(rig.config(workspace, script, graph=spec, approve_plan="auto", approval=ALLOW_ALL))
    await rig.wait_until(graph_id, lambda v: v.running == 1)
    [session_id] = await rig.session_ids(graph_id)
    await _stalled(harness, session_id)

    await rig.handle(graph_id).execute_update(
        "cancel", GraphControlInput(principal="alice", reason="enough"), result_type=GraphSnapshot
    )
    result = await rig.wait(graph_id)
    RECORDED_HISTORIES.extend(await rig.workflow_handles())

    assert result.status == "cancelled"
    spent = await _spent(harness, session_id)
    assert spent.usage.output_tokens > 0 and spent.tool_calls == 1
    view = await rig.snapshot(graph_id)
    assert view.spend.usage == spent.usage and view.spend.tool_calls == 1


async def test_a_delegating_session_counts_the_spend_of_its_child_cancelled_with_its_turn(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = delegation_script(tmp_path, [delegate("take your time"), {"text": "unreached"}], [SPEND_THEN_STALL])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL), "go")
    delegated = await wait_for_event(harness.client, sid, lambda e: isinstance(e, SessionDelegated))
    child = delegated.child_session_id
    child_handle(harness, child)  # replayed too
    await _stalled(harness, child)

    await harness.client.cancel(sid, reason="enough")
    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "cancelled"
    spent = await _spent(harness, child)
    assert spent.usage.output_tokens > 0
    events = await events_of(harness, sid)
    [ended] = [e for e in events if isinstance(e, DelegatedSessionEnded)]
    assert ended.status == "cancelled" and ended.spend.usage == spent.usage
    own: Usage = own_usage(events)
    assert any(isinstance(e, AssistantMessageCompleted) for e in events)
    assert (await harness.client.state(sid)).usage.output_tokens == own.output_tokens + spent.usage.output_tokens


async def test_a_session_whose_parent_has_closed_still_ends_cancelled(
    harness: Harness, rig: TaskRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [SPEND_THEN_STALL])
    task_id = await rig.start(rig.config(workspace, script, schedule={"every_seconds": DAY}, approval=ALLOW_ALL))
    session_id = await rig.session_id(task_id, 1)
    await _stalled(harness, session_id)

    await rig.handle(task_id).terminate(reason="gone")  # REQUEST_CANCEL: the session is asked to end, its parent closed

    session = rig.session_handle(task_id, 1)
    with pytest.raises(WorkflowFailureError) as ended:
        await asyncio.wait_for(session.result(), 60)
    assert isinstance(ended.value.cause, CancelledError)
    assert (await session.describe()).status == WorkflowExecutionStatus.CANCELED
