"""A legacy query that reaches a fresh worker ahead of a workflow task (docs/durability.md).

The moment of the chaos run's last stuck sessions, made on purpose: a worker dies while its
workflow's activity runs; a query waits on the dead worker's sticky queue; the activity ends,
so its workflow task waits there too; the query moves on first (its sticky timeout started
first) and reaches a worker with the run in no cache, with the activity's result in its
history; an update follows and rides the workflow task. Without the guard (temporalio
1.35.0) the worker runs the workflow ahead of that task while answering the query and the
history then fails replay; ``LegacyQueryGuard`` refuses the query instead, and the history
replays.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle, WorkflowQueryFailedError
from temporalio.worker import Replayer, UnsandboxedWorkflowRunner, Worker, WorkflowRunner

from agentrt.client import query_workflow
from agentrt.schemas import QUERY_RAN_AHEAD
from agentrt.worker import LegacyQueryGuard
from tests.e2e._ahead_worker import AheadWorkflow, finish, park

ROOT = Path(__file__).parents[2]
# Bound on every wait here (seconds); none comes near it when things work.
BOUND = 60.0


async def _race(temporal_server: Any, tmp_path: Path, runner: WorkflowRunner) -> tuple[WorkflowHandle, Any]:
    """Runs the moment (module docstring) with a live worker using ``runner``; returns the
    workflow's handle and what the raced query gave (its answer or its exception)."""
    client = await Client.connect(temporal_server.address)
    queue = f"ahead-{uuid.uuid4().hex[:8]}"
    token_file = tmp_path / "token"
    dying = subprocess.Popen(
        [sys.executable, "-m", "tests.e2e._ahead_worker", temporal_server.address, queue, str(token_file)], cwd=ROOT
    )
    try:
        handle = await client.start_workflow(AheadWorkflow.run, id=f"ahead-{uuid.uuid4().hex}", task_queue=queue)
        for _ in range(int(BOUND * 10)):
            if token_file.exists():
                break
            await asyncio.sleep(0.1)
        assert token_file.exists(), "the dying worker never started the activity"
        async with Worker(client, task_queue=queue, workflows=[AheadWorkflow], activities=[park, finish], workflow_runner=runner):
            dying.send_signal(signal.SIGKILL)
            dying.wait()
            await asyncio.sleep(0.5)

            async def query_then_ping() -> Any:
                try:
                    answer: Any = await handle.query(AheadWorkflow.state, rpc_timeout=timedelta(seconds=BOUND))
                except WorkflowQueryFailedError as err:
                    answer = err
                await handle.execute_update(AheadWorkflow.ping)  # rides the workflow task the query came ahead of
                return answer

            raced = asyncio.create_task(query_then_ping())
            await asyncio.sleep(1.0)  # the query's sticky timeout runs out a second before the task's
            await client.get_async_activity_handle(task_token=token_file.read_bytes()).complete("parked")
            answer = await asyncio.wait_for(raced, BOUND)
            assert await asyncio.wait_for(handle.result(), BOUND) == ["parked", "finished"]
            if isinstance(runner, LegacyQueryGuard):  # unguarded, the query replays into the same error
                assert await query_workflow(handle, AheadWorkflow.state) == ["parked", "finished"]
        return handle, answer
    finally:
        if dying.poll() is None:
            dying.kill()
            dying.wait()


async def test_sdk_still_runs_a_workflow_ahead_of_its_task_while_answering_a_legacy_query(
    temporal_server: Any, tmp_path: Path
) -> None:
    """The SDK defect itself: the day this fails, check the SDK's changelog; the guard may go."""
    handle, answer = await _race(temporal_server, tmp_path, UnsandboxedWorkflowRunner())
    assert answer == ["parked"]  # the parked result, which no workflow task had handled yet
    replay = await Replayer(workflows=[AheadWorkflow]).replay_workflow(await handle.fetch_history(), raise_on_replay_failure=False)
    assert "Nondeterminism error: Update machine does not handle this event" in str(replay.replay_failure)


async def test_the_guard_refuses_the_query_and_the_history_replays(temporal_server: Any, tmp_path: Path) -> None:
    handle, answer = await _race(temporal_server, tmp_path, LegacyQueryGuard(UnsandboxedWorkflowRunner()))
    assert isinstance(answer, WorkflowQueryFailedError)
    assert QUERY_RAN_AHEAD in str(answer)
    assert "ask again" in str(answer)
    replay = await Replayer(workflows=[AheadWorkflow]).replay_workflow(await handle.fetch_history(), raise_on_replay_failure=False)
    assert replay.replay_failure is None


async def test_the_guard_answers_legacy_queries_of_a_run_in_step_with_its_history(temporal_server: Any) -> None:
    """Queries to an idle run (cached, and evicted so the worker replays it) are answered as before."""
    client = await Client.connect(temporal_server.address)
    queue = f"ahead-{uuid.uuid4().hex[:8]}"
    runner = LegacyQueryGuard(UnsandboxedWorkflowRunner())
    os.environ.setdefault("AHEAD_TOKEN_FILE", os.devnull)
    async with Worker(client, task_queue=queue, workflows=[AheadWorkflow], activities=[finish], workflow_runner=runner):
        handle = await client.start_workflow(AheadWorkflow.run, id=f"ahead-{uuid.uuid4().hex}", task_queue=queue)
        assert await handle.query(AheadWorkflow.state) == []
    async with Worker(client, task_queue=queue, workflows=[AheadWorkflow], activities=[finish], workflow_runner=runner):
        for _ in range(3):
            assert await handle.query(AheadWorkflow.state) == []
        await handle.terminate()


async def test_a_run_that_ended_with_its_task_pending_is_answered_once_no_task_can_come(
    temporal_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Terminated while its activity's result waited for a workflow task: the guard refuses at
    first (it cannot tell), then answers, since no task comes; the client's retries wait for that."""
    client = await Client.connect(temporal_server.address)
    queue = f"ahead-{uuid.uuid4().hex[:8]}"
    token_file = tmp_path / "token"
    monkeypatch.setenv("AHEAD_TOKEN_FILE", str(token_file))
    plain = UnsandboxedWorkflowRunner()
    async with Worker(client, task_queue=queue, workflows=[AheadWorkflow], activities=[park], workflow_runner=plain):
        handle = await client.start_workflow(AheadWorkflow.run, id=f"ahead-{uuid.uuid4().hex}", task_queue=queue)
        for _ in range(int(BOUND * 10)):
            if token_file.exists():
                break
            await asyncio.sleep(0.1)
    await client.get_async_activity_handle(task_token=token_file.read_bytes()).complete("parked")
    await handle.terminate(reason="ended with its task pending")
    runner = LegacyQueryGuard(UnsandboxedWorkflowRunner(), no_task_coming_seconds=1.0)
    async with Worker(client, task_queue=queue, workflows=[AheadWorkflow], activities=[finish], workflow_runner=runner):
        with pytest.raises(WorkflowQueryFailedError, match=r"\[agentrt:query-ran-ahead\]"):
            await handle.query(AheadWorkflow.state)
        assert await query_workflow(handle, AheadWorkflow.state) == ["parked"]
