"""A hostile model and a careless user against ``@tool`` and ``Agent`` on the real server: what the
model sends that JSON does not allow never reaches a tool, a tool that calls ``sys.exit()`` is a
crash like any other (retried, then reported), not an effect left for a person to reconcile, and
sync tools that never return are stopped at their bound without taking the worker's slots."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from temporalio.api.failure.v1 import Failure
from temporalio.client import WorkflowHandle

from agentrt.client import AgentClient
from agentrt.worker import build_worker
from tests.conftest import Harness
from agentrt.schemas import PermissionRequested
from tests.e2e._support import event_types, session_config, wait_for_event, write_script
from tests.e2e.hostile_tools import careless, stuck_desk


@pytest.fixture
async def desk(harness: Harness) -> AsyncIterator[AgentClient]:
    queue = harness.task_queue + "-hostile"
    worker = build_worker(harness.temporal, harness.config, harness.store, task_queue=queue, agents=[careless])
    async with worker:
        yield harness.client_on(queue)


async def pending_failure(handle: WorkflowHandle[Any, Any]) -> Failure:
    """The last failure of the run's one pending activity, once it has one."""
    while True:
        pending = (await handle.describe()).raw_description.pending_activities
        if pending and pending[0].HasField("last_failure"):
            return pending[0].last_failure
        await asyncio.sleep(0.1)


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


async def test_sync_tools_that_never_return_are_stopped_at_their_bound_and_the_worker_goes_on(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """More stuck calls than the worker has activity slots: each is stopped at its time bound
    (its thread left to itself), and the worker still runs the next session's tools."""
    queue = harness.task_queue + "-stuck"
    worker = build_worker(harness.temporal, harness.config, harness.store, task_queue=queue, agents=[stuck_desk],
                          max_concurrent_activities=2)
    async with worker:
        desk = harness.client_on(queue)
        for i in range(3):
            sid = harness.new_session_id()
            script = write_script(tmp_path, [{"tool_calls": [{"name": "stuck", "arguments": {}}]}, {"text": "done"}], name=f"s{i}.json")
            config = session_config(desk, sid, workspace, script, agent="stuck-desk")
            _, outcome = await asyncio.wait_for(desk.start_and_wait(config, "go"), 120)  # a wedged worker: fail, not hang
            assert outcome.status == "completed"
            assert tool_texts(harness, sid) == ["error: stopped after 2 s: the call's time bound"]
        sid = harness.new_session_id()
        script = write_script(tmp_path, [{"tool_calls": [{"name": "measure", "arguments": {"length": 3}}]}, {"text": "done"}])
        _, outcome = await asyncio.wait_for(desk.start_and_wait(session_config(desk, sid, workspace, script, agent="stuck-desk"), "go"), 120)

    assert outcome.status == "completed" and tool_texts(harness, sid) == ["measured 3.0"]
    assert ran(workspace) == ["stuck"] * 3 + ["measure 3.0 "]


async def test_an_effectful_sync_tool_stopped_at_its_bound_asks_a_person_what_happened_not_records_failed(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """Its function still runs on its thread and may yet charge: the outcome is unknown."""
    queue = harness.task_queue + "-stuck-charge"
    async with build_worker(harness.temporal, harness.config, harness.store, task_queue=queue, agents=[stuck_desk]):
        desk = harness.client_on(queue)
        sid = harness.new_session_id()
        script = write_script(tmp_path, [{"tool_calls": [{"name": "stuck_charge", "arguments": {"order_id": "A-1"}}]}, {"text": "done"}])
        started = await desk.start(session_config(desk, sid, workspace, script, agent="stuck-desk", approval={"effectful": "allow"}), "charge")

        asked = await wait_for_event(desk, sid, lambda e: isinstance(e, PermissionRequested))
        assert isinstance(asked, PermissionRequested) and asked.request.kind == "reconcile"
        record = harness.store.effect(f"session-{sid}/turn-1/2/call_0_0")
        assert record is not None and record.state == "claimed"
        await desk.reconcile(sid, asked.request.request_id, "applied", "the provider shows the charge")
        outcome = await asyncio.wait_for(desk.wait(sid, started.turn_id), 60)

    assert outcome.status == "completed" and ran(workspace) == ["stuck_charge A-1"]


async def test_a_tool_whose_own_database_does_not_answer_crashes_as_itself_not_as_the_store(
    harness: Harness, desk: AgentClient, workspace: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The tool's SQLAlchemy ``OperationalError`` is in its ``ToolCrashed``'s chain; the worker's
    store answers. It was taken for the store's outage: the attempt waited for the store, and failed
    as ``StoreUnavailable`` with the tool's own error, unredacted, as the store's reason."""
    sid = harness.new_session_id()
    script = write_script(tmp_path, [{"tool_calls": [{"name": "ledger_total", "arguments": {}}]}, {"text": "done"}])
    started = await desk.start(session_config(desk, sid, workspace, script, agent="careless"), "total")
    handle = desk.temporal.get_workflow_handle(started.workflow_id)
    try:
        failure = await asyncio.wait_for(pending_failure(handle), 60)
    finally:
        await handle.terminate("test over")

    assert failure.application_failure_info.type == "ToolCrashed"
    assert failure.message.startswith("ledger_total raised OperationalError: (sqlite3.OperationalError) unable to open database file")
    assert "met a store that does not answer" not in caplog.text


async def test_a_tool_exception_of_three_megabytes_is_retried_with_a_short_failure_and_reported(
    harness: Harness, desk: AgentClient, workspace: Path, tmp_path: Path
) -> None:
    """A failure of 3 MB exceeds the server's limits: the attempt's failure never reached it."""
    sid = harness.new_session_id()
    script = write_script(tmp_path, [{"tool_calls": [{"name": "shout", "arguments": {}}]}, {"text": "done"}])
    started = await desk.start(session_config(desk, sid, workspace, script, agent="careless"), "shout")
    handle = desk.temporal.get_workflow_handle(started.workflow_id)
    try:
        failure = await asyncio.wait_for(pending_failure(handle), 60)
    finally:
        await handle.terminate("test over")

    assert failure.application_failure_info.type == "ToolCrashed"
    assert failure.message.startswith("shout raised RuntimeError: AAAA") and len(failure.message) <= 600
