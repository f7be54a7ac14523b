"""Record the committed replay histories of the current workflow code, one file per scenario.

    python -m tests.record_histories [--out tests/histories] [--prefix lean-start-v1] [--only SCENARIO ...]

Starts its own Temporal dev server (it suggests continue-as-new after 120 history events,
so a short session continues as new; autonomous tasks start on a virtual clock, so their days
of timers pass at once), a SQLite store and a worker, runs each scenario
below with the scripted model and writes ``<prefix>-<scenario>.json`` (the workflow's
history as the Temporal CLI and UI export it). ``tests/test_replay.py`` replays every
committed file. Record new files after a change of command order (behind a new
``workflow.patched`` id); never re-record old ones: they stand for running sessions.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable

from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.worker import WorkerDeploymentVersion

from agentrt.client import AgentClient
from agentrt.schemas import (
    AdvisorPolicy,
    ApprovalPolicy,
    AutonomousTaskCheckpointed,
    AutonomyDecision,
    Budget,
    CancelTurnInput,
    ContextCompactionSkipped,
    GraphControlInput,
    GraphSnapshot,
    GraphSpec,
    McpServerConfig,
    MemoryProposed,
    ModelProfile,
    ModelRequestStarted,
    OutputSpec,
    PermissionRequested,
    RaiseBudgetInput,
    RequestRejected,
    SendMessageInput,
    SessionBusy,
    SessionConfig,
    SessionDelegated,
    SessionInitialized,
    SessionInput,
    SessionParent,
    ToolInvocationStarted,
    TurnOutcome,
    UserMessageAdded,
    WaitTurnInput,
    session_workflow_id,
)
from agentrt.worker import AgentrtConfig, build_worker
from agentrt.workflows.session import SessionWorkflow
from bench.local import local_stack
from tests.e2e._graphs import PASS as NODE_PASS
from tests.e2e._graphs import GraphRig, answer, fail, write_graph_script
from tests.e2e._support import ALLOW_ALL, wait_for_event
from tests.e2e._tasks import TaskRig, write_file, write_task_script
from tests.e2e._versions import make_current, settled_on, versioned_worker
from tests.e2e.agent_tools import order_desk, support
from tests.mcp_servers import everything_stdio, probe_stdio

SUGGEST_AFTER_EVENTS = 120
RUN_HISTORY_EVENTS = 500  # a session run's bound (workflows/_continuation.py)
OWNER = "alice"

Scenario = Callable[["Recorder"], Awaitable[dict[str, WorkflowHandle]]]


class Recorder:
    def __init__(self, temporal: Client, client: AgentClient, root: Path, config: AgentrtConfig) -> None:
        self.temporal = temporal
        self.client = client
        self.root = root
        self.config_of_worker = config
        assert client.store is not None
        # Autonomous tasks start on a virtual clock (days of timers pass at once).
        self.tasks = TaskRig.create(temporal, client.store, client.task_queue)
        self.graphs = GraphRig(temporal, client.task_queue)

    def task_dir(self) -> tuple[Path, Path]:
        """A fresh directory for a task's script, and its workspace in it."""
        run_dir = self.root / uuid.uuid4().hex[:8]
        (run_dir / "ws").mkdir(parents=True)
        return run_dir, run_dir / "ws"

    def config(self, turns: list[dict[str, Any]], advice: list[dict[str, Any]] | None = None, **fields: Any) -> SessionConfig:
        run_dir = self.root / uuid.uuid4().hex[:8]
        (run_dir / "ws").mkdir(parents=True)
        script = run_dir / "script.json"
        script.write_text(json.dumps({"turns": turns, **({"advisor": advice} if advice is not None else {})}))
        return self.client.new_config(str(run_dir / "ws"), script=str(script), profile="scripted", **fields)

    def handle(self, session_id: str, run_id: str | None = None) -> WorkflowHandle:
        return self.temporal.get_workflow_handle(f"session-{session_id}", run_id=run_id)

    async def wait_turn(self, session_id: str, turn_id: str) -> TurnOutcome:
        handle = self.temporal.get_workflow_handle_for(SessionWorkflow.run, f"session-{session_id}")
        while True:
            outcome = await handle.execute_update(SessionWorkflow.wait_turn, WaitTurnInput(turn_id=turn_id))
            if outcome.status != "pending":
                return outcome


async def tool_call_approved(r: Recorder) -> dict[str, WorkflowHandle]:
    config = r.config([{"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]}, {"text": "done"}])
    started = await r.client.start(config, "write a file")
    requested = await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, PermissionRequested))
    await r.client.approve(config.session_id, requested.request.request_id)
    await r.wait_turn(config.session_id, started.turn_id)
    await r.client.archive(config.session_id)
    return {"tool-call-approved-then-archived": r.handle(config.session_id)}


async def _cancel_at(r: Recorder, turns: list[dict[str, Any]], event_type: type, name: str, **fields: Any) -> dict[str, WorkflowHandle]:
    config = r.config(turns, **fields)
    started = await r.client.start(config, "go")
    await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, event_type))
    if event_type is ToolInvocationStarted:
        await asyncio.sleep(1.0)
    await r.client.cancel(config.session_id, reason="recorded")
    await r.wait_turn(config.session_id, started.turn_id)
    return {name: r.handle(config.session_id)}


async def cancel_during_model_call(r: Recorder) -> dict[str, WorkflowHandle]:
    return await _cancel_at(r, [{"text": "late", "delay_seconds": 60}], ModelRequestStarted, "cancel-during-model-call")


async def cancel_during_tool(r: Recorder) -> dict[str, WorkflowHandle]:
    turns = [{"tool_calls": [{"name": "shell.run", "arguments": {"command": "sleep 5"}}]}, {"text": "unreached"}]
    return await _cancel_at(r, turns, ToolInvocationStarted, "cancel-during-tool", approval=ALLOW_ALL)


async def cancel_during_approval(r: Recorder) -> dict[str, WorkflowHandle]:
    turns = [{"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]}, {"text": "unreached"}]
    return await _cancel_at(r, turns, PermissionRequested, "cancel-during-approval-wait")


async def cancel_with_queued_turns(r: Recorder) -> dict[str, WorkflowHandle]:
    config = r.config([{"text": "slow", "delay_seconds": 60}, {"text": "two"}, {"text": "three"}])
    started = await r.client.start(config, "one")
    await r.client.send(config.session_id, "two")
    await r.client.send(config.session_id, "three")
    await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, ModelRequestStarted))
    await r.client.cancel(config.session_id, include_queued=True)
    await r.wait_turn(config.session_id, started.turn_id)
    return {"cancel-with-queued-turns": r.handle(config.session_id)}


async def workflow_cancelled(r: Recorder) -> dict[str, WorkflowHandle]:
    config = r.config([{"text": "slow", "delay_seconds": 60}, {"text": "two"}])
    await r.client.start(config, "one")
    await r.client.send(config.session_id, "two")
    await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, ModelRequestStarted))
    handle = r.handle(config.session_id)
    await handle.cancel()
    try:
        await handle.result()
    except Exception:  # noqa: BLE001 - a cancelled workflow's result raises; its history is what we keep
        pass
    return {"workflow-cancelled-with-a-queued-turn": handle}


async def continued_as_new(r: Recorder) -> dict[str, WorkflowHandle]:
    """Turns with waiters held open on the next ones, until the session continues as new twice."""
    config = r.config([{"text": f"answer {i}", "delay_seconds": 0.2} for i in range(1, 41)])
    started = await r.client.start(config, "message 1")
    first_run = (await r.handle(config.session_id).describe()).run_id
    waiters = [asyncio.create_task(r.wait_turn(config.session_id, started.turn_id))]
    for n in range(2, 41):
        waiters.append(asyncio.create_task(r.wait_turn(config.session_id, (await r.client.send(config.session_id, f"message {n}")).turn_id)))
        if len(waiters) > 3:
            await waiters.pop(0)
        if (await r.client.state(config.session_id)).run >= 3:
            break
    for waiter in waiters:
        await waiter
    history = await r.handle(config.session_id, first_run).fetch_history()
    completed = history.events[-1].workflow_execution_continued_as_new_event_attributes
    second_run = completed.new_execution_run_id
    return {
        "continue-as-new-with-waiters-first-run": r.handle(config.session_id, first_run),
        "continue-as-new-second-run": r.handle(config.session_id, second_run),
    }


async def history_bound(r: Recorder) -> dict[str, WorkflowHandle]:
    """A turn of 45 read-only rounds takes the run's history past ``RUN_HISTORY_EVENTS``: at the
    turn's end the session continues as new (``history-bound-v1``); its second run answers the next turn."""
    rounds = [{"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]} for _ in range(45)]
    config = r.config([*rounds, {"text": "listed 45 times"}, {"text": "second run"}], local_tools=False)
    started = await r.client.start(config, "list the workspace 45 times")
    first_run = (await r.handle(config.session_id).describe()).run_id
    await r.wait_turn(config.session_id, started.turn_id)
    second = await r.client.send(config.session_id, "once more")
    await r.wait_turn(config.session_id, second.turn_id)
    history = await r.handle(config.session_id, first_run).fetch_history()
    assert len(history.events) >= RUN_HISTORY_EVENTS, len(history.events)
    completed = history.events[-1].workflow_execution_continued_as_new_event_attributes
    return {
        "history-bound-first-run": r.handle(config.session_id, first_run),
        "history-bound-second-run": r.handle(config.session_id, completed.new_execution_run_id),
    }


async def _read_only_rounds(r: Recorder, local_tools: bool, name: str) -> dict[str, WorkflowHandle]:
    """Two turns of read-only tool rounds (``fs.read``, ``fs.list``: local activities unless ``local_tools`` is off)."""
    turns = [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "a.txt"}}]},
        {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}, {"name": "fs.read", "arguments": {"path": "b.txt"}}]},
        {"text": "read both"},
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "missing.txt"}}]},
        {"text": "no such file"},
    ]
    config = r.config(turns, local_tools=local_tools)
    for file_name in ("a.txt", "b.txt"):
        (Path(config.workspace) / file_name).write_text(f"content of {file_name}\n" * 20)
    started = await r.client.start(config, "read the files")
    await r.wait_turn(config.session_id, started.turn_id)
    second = await r.client.send(config.session_id, "read a missing file")
    await r.wait_turn(config.session_id, second.turn_id)
    await r.client.archive(config.session_id)
    return {name: r.handle(config.session_id)}


async def read_only_rounds_local(r: Recorder) -> dict[str, WorkflowHandle]:
    return await _read_only_rounds(r, True, "read-only-rounds-local-tools")


async def read_only_rounds_regular(r: Recorder) -> dict[str, WorkflowHandle]:
    return await _read_only_rounds(r, False, "read-only-rounds-regular-tools")


async def fused_rounds(r: Recorder) -> dict[str, WorkflowHandle]:
    """``fused_rounds`` (``fused-rounds-v1``): read-only rounds run inside the model call, a write
    that ends them (asked and granted, then run as a tool activity), a read after it; then a turn
    that reaches its round limit inside one call."""
    read = {"tool_calls": [{"name": "fs.read", "arguments": {"path": "a.txt"}}]}
    turns = [
        read,
        {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}, {"name": "fs.read", "arguments": {"path": "b.txt"}}]},
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "c.txt", "content": "c"}}]},
        read,
        {"text": "read and wrote"},
        read, read, read,
    ]
    config = r.config(turns, fused_rounds=True, max_rounds_per_turn=3)
    for file_name in ("a.txt", "b.txt"):
        (Path(config.workspace) / file_name).write_text(f"content of {file_name}\n" * 20)
    started = await r.client.start(config, "read and write")
    requested = await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, PermissionRequested))
    await r.client.approve(config.session_id, requested.request.request_id)
    await r.wait_turn(config.session_id, started.turn_id)
    second = await r.client.send(config.session_id, "keep reading")
    await r.wait_turn(config.session_id, second.turn_id)
    await r.client.archive(config.session_id)
    return {"reads-a-write-and-a-round-limit": r.handle(config.session_id)}


async def fused_rounds_cancelled(r: Recorder) -> dict[str, WorkflowHandle]:
    """A cancel while a fused call waits for its follow-up model request, then a turn that answers."""
    read = {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]}
    config = r.config([read, {**read, "delay_seconds": 60}, {"text": "after the cancel"}], fused_rounds=True)
    started = await r.client.start(config, "list")
    await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, ModelRequestStarted))
    await asyncio.sleep(1.0)
    await r.client.cancel(config.session_id, reason="recorded")
    await r.wait_turn(config.session_id, started.turn_id)
    sent = await r.client.send(config.session_id, "answer")
    await r.wait_turn(config.session_id, sent.turn_id)
    return {"cancelled-during-a-fused-call": r.handle(config.session_id)}


async def compaction_on_demand(r: Recorder) -> dict[str, WorkflowHandle]:
    config = r.config([{"text": f"answer {i} " + "words " * 40} for i in range(1, 4)] + [{"text": "summary"}])
    for n in range(1, 4):
        sent = await r.client.start(config, f"message {n}") if n == 1 else await r.client.send(config.session_id, f"message {n}")
        await r.wait_turn(config.session_id, sent.turn_id)
    await r.client.compact(config.session_id)
    await r.client.archive(config.session_id)
    return {"compaction-on-demand": r.handle(config.session_id)}


async def context_budget_and_compaction_events(r: Recorder) -> dict[str, WorkflowHandle]:
    """context-events-v1 on a 4k-token profile with a low compaction threshold: a message too big for
    the window (the turn fails context_overflow, no call sent), a turn that fits (ContextAssembled),
    compactions at the session's own threshold, and two compact requests while a turn waits for an
    approval (the second ``already_compacting``)."""
    r.config_of_worker.profiles["tiny"] = ModelProfile(name="tiny", provider="scripted", context_window=4_000, max_output_tokens=1_000)
    turns = [
        {"text": "fits"},
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"text": "written"},
    ]
    config = r.config(turns, compact_threshold=0.2).model_copy(update={"profile": "tiny"})
    sid = config.session_id
    started = await r.client.start(config, "x" * 20_000)
    first_run = (await r.handle(sid).describe()).run_id
    await r.wait_turn(sid, started.turn_id)
    sent = await r.client.send(sid, "a short one")
    await r.wait_turn(sid, sent.turn_id)
    sent = await r.client.send(sid, "write a file")
    requested = await wait_for_event(r.client, sid, lambda e: isinstance(e, PermissionRequested))
    compactions = [asyncio.create_task(r.client.compact(sid)) for _ in range(2)]
    await wait_for_event(r.client, sid, lambda e: isinstance(e, ContextCompactionSkipped) and e.reason == "already_compacting")
    await r.client.approve(sid, requested.request.request_id)
    await r.wait_turn(sid, sent.turn_id)
    await asyncio.gather(*compactions)
    await r.client.archive(sid)
    runs, run_id = {}, first_run
    while run_id:  # every run (the session continues as new after SUGGEST_AFTER_EVENTS)
        handle = r.handle(sid, run_id)
        runs[f"context-budget-and-compaction-events-run-{len(runs) + 1}"] = handle
        last = (await handle.fetch_history()).events[-1]
        run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return runs


async def started_idle_then_message(r: Recorder) -> dict[str, WorkflowHandle]:
    """A session started without a message (as any Temporal client may), idle in the store, then a turn."""
    config = r.config([{"text": "hello"}])
    handle = await r.temporal.start_workflow(
        SessionWorkflow.run, SessionInput(config=config), id=f"session-{config.session_id}", task_queue=r.client.task_queue
    )
    await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, SessionInitialized))
    sent = await handle.execute_update(SessionWorkflow.send_message, SendMessageInput(text="hi", principal=OWNER))
    await r.wait_turn(config.session_id, sent.turn_id)
    return {"started-idle-then-message": r.handle(config.session_id)}


async def round_limit(r: Recorder) -> dict[str, WorkflowHandle]:
    """A turn stopped at max_rounds_per_turn (its assistant message saying so), then a turn that answers."""
    call = {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]}
    config = r.config([call, call, {"text": "done now"}], max_rounds_per_turn=2)
    started = await r.client.start(config, "keep listing")
    await r.wait_turn(config.session_id, started.turn_id)
    sent = await r.client.send(config.session_id, "finish")
    await r.wait_turn(config.session_id, sent.turn_id)
    return {"round-limit": r.handle(config.session_id)}


async def send_and_wait(r: Recorder) -> dict[str, WorkflowHandle]:
    """A session started by start_and_wait (update-with-start of send_and_wait) through a tool
    round, then two send_and_wait calls at once (the second queued behind the first), then archived."""
    call = {"tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}]}
    config = r.config([call, {"text": "read it"}, {"text": "second"}, {"text": "third"}])
    _, outcome = await r.client.start_and_wait(config, "read the readme")
    assert outcome.status == "completed", outcome
    outcomes = await asyncio.gather(
        r.client.send_and_wait(config.session_id, "two"), r.client.send_and_wait(config.session_id, "three")
    )
    assert [o.answer for o in outcomes] == ["second", "third"], outcomes
    await r.client.archive(config.session_id)
    return {"start-queue-and-archive": r.handle(config.session_id)}


async def idempotent_sends(r: Recorder) -> dict[str, WorkflowHandle]:
    """Messages sent with idempotency keys: a start and a send each repeated (the server answers a
    repeat of the same update id; a repeat under another update id is answered by the session), a
    send_and_wait repeated, the same key with another text refused, two texts under one key at
    once; then turns until the session continues as new, where the keys are repeated again; then
    archived. Both runs are kept."""
    config = r.config([{"text": f"answer {n}"} for n in range(1, 41)])
    sid = config.session_id
    handle = r.temporal.get_workflow_handle_for(SessionWorkflow.run, session_workflow_id(sid))

    async def raw_send(text: str, key: str) -> str:
        message = SendMessageInput(text=text, principal=OWNER, idempotency_key=key)
        return (await handle.execute_update(SessionWorkflow.send_message, message, id=f"raw-{uuid.uuid4().hex}")).turn_id

    started = await r.client.start(config, "message 1", idempotency_key="start-1")
    first_run = (await handle.describe()).run_id
    assert (await r.client.start(config, "message 1", idempotency_key="start-1")).turn_id == started.turn_id
    sent = await r.client.send(sid, "message 2", idempotency_key="send-2")
    assert await raw_send("message 2", "send-2") == sent.turn_id
    waited = await r.client.send_and_wait(sid, "message 3", idempotency_key="wait-3")
    assert await r.client.send_and_wait(sid, "message 3", idempotency_key="wait-3") == waited
    refused = await asyncio.gather(
        r.client.send(sid, "message 2, changed", idempotency_key="send-2"),
        r.client.send(sid, "message 4", idempotency_key="race-4"), r.client.send(sid, "message 4b", idempotency_key="race-4"),
        return_exceptions=True,
    )
    assert isinstance(refused[0], RequestRejected) and sum(isinstance(x, RequestRejected) for x in refused) == 2, refused
    count = 4
    while (await r.client.state(sid)).run < 2:
        count += 1
        assert count < 40, "the session never continued as new"
        await r.client.send_and_wait(sid, f"message {count}")
    assert (await r.client.start(config, "message 1", idempotency_key="start-1")).turn_id == started.turn_id
    assert await raw_send("message 2", "send-2") == sent.turn_id
    assert await r.client.send_and_wait(sid, "message 3", idempotency_key="wait-3") == waited
    last = await r.client.send_and_wait(sid, "the last one", idempotency_key="last")
    assert (await r.client.send(sid, "the last one", idempotency_key="last")).turn_id == last.turn_id
    await r.client.archive(sid)
    history = await r.handle(sid, first_run).fetch_history()
    second_run = history.events[-1].workflow_execution_continued_as_new_event_attributes.new_execution_run_id
    return {
        "idempotent-sends-first-run": r.handle(sid, first_run),
        "idempotent-sends-second-run": r.handle(sid, second_run),
    }


async def policy_sandbox(r: Recorder) -> dict[str, WorkflowHandle]:
    """The second policy engine: a network command denied by the sandbox, a destructive one asked
    about and granted, a read allowed, in one batch; then a session no one can answer, whose
    file write is denied (``no_interactive_route``) instead of waiting."""
    batch = [
        {"name": "shell.run", "arguments": {"command": "curl -s https://example.com"}},
        {"name": "shell.run", "arguments": {"command": "rm -rf build"}},
        {"name": "fs.list", "arguments": {}},
    ]
    config = r.config([{"tool_calls": batch}, {"text": "done"}])
    started = await r.client.start(config, "clean up")
    requested = await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, PermissionRequested))
    await r.client.approve(config.session_id, requested.request.request_id)
    await r.wait_turn(config.session_id, started.turn_id)
    await r.client.archive(config.session_id)
    unattended = r.config(
        [{"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]}, {"text": "could not"}],
        interactive=False,
    )
    second = await r.client.start(unattended, "write a file")
    await r.wait_turn(unattended.session_id, second.turn_id)
    await r.client.archive(unattended.session_id)
    return {
        "sandbox-denies-network-and-asks-about-destructive": r.handle(config.session_id),
        "no-interactive-route-denies": r.handle(unattended.session_id),
    }


async def policy_decisions(r: Recorder) -> dict[str, WorkflowHandle]:
    """The third policy engine (``policy-decisions-v1``): one batch of a read the policy allows
    (``PermissionGranted``, scope ``policy``), a file write outside the workspace denied before
    anyone is asked, a write asked about and denied by the owner, an unknown tool and a listing,
    their results in call order; then a session with ``danger_full_access`` and approval mode
    ``never`` whose destructive command runs without asking."""
    batch = [
        {"name": "fs.read", "arguments": {"path": "README.md"}},
        {"name": "fs.write", "arguments": {"path": "../escape.txt", "content": "x"}},
        {"name": "fs.write", "arguments": {"path": "notes.md", "content": "n"}},
        {"name": "no.such_tool", "arguments": {}},
        {"name": "fs.list", "arguments": {}},
    ]
    config = r.config([{"tool_calls": batch}, {"text": "done"}])
    Path(config.workspace, "README.md").write_text("hello\n")
    started = await r.client.start(config, "look around")
    requested = await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, PermissionRequested))
    await r.client.deny(config.session_id, requested.request.request_id, "not now")
    await r.wait_turn(config.session_id, started.turn_id)
    await r.client.archive(config.session_id)
    full = r.config(
        [{"tool_calls": [{"name": "shell.run", "arguments": {"command": "rm -rf build"}}]}, {"text": "cleaned"}],
        sandbox="danger_full_access", approval=ApprovalPolicy(mode="never"),
    )
    Path(full.workspace, "build").mkdir()
    second = await r.client.start(full, "clean up")
    await r.wait_turn(full.session_id, second.turn_id)
    await r.client.archive(full.session_id)
    return {
        "batch-in-call-order-with-policy-grants": r.handle(config.session_id),
        "full-access-never-runs-destructive": r.handle(full.session_id),
    }


async def session_grant_and_edit(r: Recorder) -> dict[str, WorkflowHandle]:
    """A destructive command granted for the session (the next one under the same rule runs
    without asking), then a file write granted with edited arguments."""
    config = r.config([
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "rm -rf a"}}]},
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "rm -r b"}}]},
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "n.md", "content": "model"}}]},
        {"text": "done"},
    ])
    started = await r.client.start(config, "clean up")
    first = await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, PermissionRequested))
    await r.client.approve(config.session_id, first.request.request_id, for_session=True)
    write = await wait_for_event(
        r.client, config.session_id,
        lambda e: isinstance(e, PermissionRequested) and e.request.request_id != first.request.request_id,
    )
    await r.client.approve(config.session_id, write.request.request_id, arguments={"path": "n.md", "content": "edited"})
    await r.wait_turn(config.session_id, started.turn_id)
    await r.client.archive(config.session_id)
    return {"grant-for-session-then-edited-write": r.handle(config.session_id)}


async def operator_acts(r: Recorder) -> dict[str, WorkflowHandle]:
    """An operator (not the owner) grants an approval, cancels the next turn and archives the
    session, each with a reason (``OperatorActed``)."""
    config = r.config(
        [{"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]}, {"text": "done"},
         {"text": "slow", "delay_seconds": 30}],
        operators=["ops"],
    )
    operator = AgentClient(r.temporal, task_queue=r.client.task_queue, principal="ops", store=r.client.store)
    started = await r.client.start(config, "write")
    requested = await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, PermissionRequested))
    await operator.approve(config.session_id, requested.request.request_id, "owner away")
    await r.wait_turn(config.session_id, started.turn_id)
    second = await r.client.send(config.session_id, "again")
    await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, ModelRequestStarted) and e.turn_id == second.turn_id)
    await operator.cancel(config.session_id, reason="runaway")
    await r.wait_turn(config.session_id, second.turn_id)
    await operator.archive(config.session_id, "cleanup")
    return {"operator-grants-cancels-archives": r.handle(config.session_id)}


async def stranger_flood(r: Recorder) -> dict[str, WorkflowHandle]:
    """Twenty-five cancel signals from strangers during a model call: twenty recorded as
    ``CancelIgnored``, the rest only counted; the turn completes."""
    config = r.config([{"text": "slow answer", "delay_seconds": 2}])
    started = await r.client.start(config, "go")
    await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, ModelRequestStarted))
    for i in range(25):
        await r.handle(config.session_id).signal(SessionWorkflow.cancel_turn, CancelTurnInput(principal=f"stranger-{i}"))
    await r.wait_turn(config.session_id, started.turn_id)
    await r.client.archive(config.session_id)
    return {"stranger-flood-counted": r.handle(config.session_id)}


async def cancel_without_principal(r: Recorder) -> dict[str, WorkflowHandle]:
    """A ``cancel_turn`` signal with no principal during a model call: ignored (``no_principal``),
    the turn completes."""
    config = r.config([{"text": "slow answer", "delay_seconds": 1.5}])
    started = await r.client.start(config, "go")
    await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, ModelRequestStarted))
    await r.handle(config.session_id).signal(SessionWorkflow.cancel_turn, CancelTurnInput())
    await r.wait_turn(config.session_id, started.turn_id)
    await r.client.archive(config.session_id)
    return {"cancel-signal-without-principal-ignored": r.handle(config.session_id)}


async def trajectory_demo_turn(r: Recorder) -> dict[str, WorkflowHandle]:
    """The demo's turn: a listing, a read and an approved write, each a trajectory step."""
    config = r.config([
        {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]},
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "missing.md"}}]},
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "NOTES.md", "content": "notes"}}]},
        {"text": "done"},
    ])
    started = await r.client.start(config, "take notes")
    requested = await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, PermissionRequested))
    await r.client.approve(config.session_id, requested.request.request_id)
    await r.wait_turn(config.session_id, started.turn_id)
    await r.client.archive(config.session_id)
    return {"demo-turn-with-an-approved-write": r.handle(config.session_id)}


async def advisor_reviews(r: Recorder) -> dict[str, WorkflowHandle]:
    """A full advisor: a batch rejected (the turn ends with the block explained), then in the next
    turn a review that fails and approves (fail-open) before the call runs."""
    rm = {"tool_calls": [{"name": "shell.run", "arguments": {"command": "rm -rf build"}}]}
    config = r.config(
        [rm, {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]}, {"text": "listed"}],
        advice=[{"verdict": "reject", "concerns": ["deletes build/"], "summary": "destructive"}, {"error": "down", "status": 400}],
        approval=ALLOW_ALL,
        advisor=AdvisorPolicy(mode="full"),
    )
    started = await r.client.start(config, "clean up")
    await r.wait_turn(config.session_id, started.turn_id)
    second = await r.client.send(config.session_id, "then list")
    await r.wait_turn(config.session_id, second.turn_id)
    await r.client.archive(config.session_id)
    return {"advisor-rejects-then-fails-open": r.handle(config.session_id)}


async def memory_decided(r: Recorder) -> dict[str, WorkflowHandle]:
    """A session memory stored at once and a user memory proposed, which the owner accepts with
    the ``decide_memory`` update while the session idles."""
    config = r.config(
        [
            {"tool_calls": [
                {"name": "memory.write", "arguments": {"key": "style", "text": "short answers"}},
                {"name": "memory.write", "arguments": {"key": "deploy", "text": "staging", "scope": "user"}},
            ]},
            {"text": "noted"},
        ],
        approval=ALLOW_ALL,
    )
    started = await r.client.start(config, "remember")
    await r.wait_turn(config.session_id, started.turn_id)
    proposed = await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, MemoryProposed))
    await r.client.decide_memory(proposed.memory_id, "accept", "right")
    await r.client.archive(config.session_id)
    return {"memory-proposed-and-accepted": r.handle(config.session_id)}


async def mcp_call_and_elicitation(r: Recorder) -> dict[str, WorkflowHandle]:
    """A turn that lists two MCP servers' tools, calls ``everything.echo``, then ``probe.ask_name``,
    whose question the owner answers (update ``answer_elicitation``) before the call runs again."""
    config = r.config(
        [
            {"tool_calls": [{"name": "everything.echo", "arguments": {"message": "hi"}}]},
            {"tool_calls": [{"name": "probe.ask_name", "arguments": {}}]},
            {"text": "greeted"},
        ],
        approval=ALLOW_ALL, mcp_servers=["everything", "probe"],
    )
    started = await r.client.start(config, "echo, then ask my name")
    asked = await wait_for_event(
        r.client, config.session_id, lambda e: isinstance(e, PermissionRequested) and e.request.kind == "elicitation"
    )
    await r.client.answer(config.session_id, asked.request.request_id, {"name": "Ada"})
    await r.wait_turn(config.session_id, started.turn_id)
    await r.client.archive(config.session_id)
    return {"mcp-call-and-elicitation-answered": r.handle(config.session_id)}


async def skill_activated(r: Recorder) -> dict[str, WorkflowHandle]:
    """A session that finds a workspace skill, activates it and runs its script with shell.run."""
    config = r.config(
        [
            {"tool_calls": [{"name": "skill.activate", "arguments": {"name": "greeting"}}]},
            {"tool_calls": [{"name": "shell.run", "arguments": {"command": "sh .agentrt/skills/greeting/greet.sh"}}]},
            {"text": "greeted"},
        ],
        approval=ALLOW_ALL,
    )
    skill = Path(config.workspace) / ".agentrt" / "skills" / "greeting"
    skill.mkdir(parents=True)
    (skill / "greet.sh").write_text("echo hello\n")
    (skill / "SKILL.md").write_text("---\nname: greeting\ndescription: Greets.\n---\nRun greet.sh with shell.run.\n")
    started = await r.client.start(config, "greet me")
    await r.wait_turn(config.session_id, started.turn_id)
    await r.client.archive(config.session_id)
    return {"skill-activated-and-script-run": r.handle(config.session_id)}


async def budget_exceeded_and_raised(r: Recorder) -> dict[str, WorkflowHandle]:
    """A turn stopped at its token budget after a reply that asked for a tool call; a message
    that ends at once (the budget is spent); ``raise_budget`` by the owner; a message that runs to
    its answer; then a turn stopped before a batch that would pass its tool-call limit."""
    batch = {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}, {"name": "fs.list", "arguments": {}}]}
    config = r.config(
        [{"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]}, {"text": "listed"}, batch],
        approval=ALLOW_ALL, budget=Budget(max_tokens=100),
    )
    started = await r.client.start(config, "list the files")
    assert (await r.wait_turn(config.session_id, started.turn_id)).status == "budget_exceeded"
    blocked = await r.client.send(config.session_id, "go on")
    assert (await r.wait_turn(config.session_id, blocked.turn_id)).status == "budget_exceeded"
    handle = r.temporal.get_workflow_handle_for(SessionWorkflow.run, f"session-{config.session_id}")
    raised = Budget(max_tokens=1_000_000, max_tool_calls=1)
    await handle.execute_update(SessionWorkflow.raise_budget, RaiseBudgetInput(principal=OWNER, budget=raised))
    sent = await r.client.send(config.session_id, "go on now")
    assert (await r.wait_turn(config.session_id, sent.turn_id)).status == "completed"
    again = await r.client.send(config.session_id, "list twice")
    assert (await r.wait_turn(config.session_id, again.turn_id)).status == "budget_exceeded"
    await r.client.archive(config.session_id)
    return {"session-budget-exceeded-and-raised": r.handle(config.session_id)}


async def ends_after_turn(r: Recorder) -> dict[str, WorkflowHandle]:
    """A session started with only its config, as an autonomous task starts one: its prompt runs
    as the first turn (a tool round, then an answer) and the session ends after it, returning
    the turn's outcome and its spend."""
    config = r.config(
        [{"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]}, {"text": "listed them"}],
        approval=ALLOW_ALL, interactive=False, prompt="list the files", ends_after_turn=True,
        parent=SessionParent(id="recorded", number=1), budget=Budget(max_tokens=1_000_000), max_rounds_per_turn=5,
    )
    result = await r.temporal.execute_workflow(
        SessionWorkflow.run, SessionInput(config=config), id=f"session-{config.session_id}",
        task_queue=r.client.task_queue,
    )
    assert result.outcome is not None and result.outcome.status == "completed", result
    return {"session-ends-after-turn": r.handle(config.session_id)}


# ---------------------------------------------------------------- autonomous tasks

DAY = 86_400.0
PASS = {"verdict": "pass", "summary": "the goal is met"}
FAIL = {"verdict": "fail", "findings": ["not finished"], "summary": "more to do"}


async def task_three_sessions(r: Recorder) -> dict[str, WorkflowHandle]:
    """A daily task whose first two sessions write a file each and whose third writes done.txt,
    which its acceptance command checks: three sessions over three (virtual) days, then completed."""
    run_dir, ws = r.task_dir()
    script = write_task_script(run_dir, [
        [write_file("part1.txt", "one"), {"text": "wrote part 1"}],
        [write_file("part2.txt", "two"), {"text": "wrote part 2"}],
        [write_file("done.txt", "done"), {"text": "all parts written"}],
    ])
    config = r.tasks.config(
        ws, script, acceptance={"command": "test -f done.txt"}, schedule={"every_seconds": DAY}, approval=ALLOW_ALL,
        max_sessions=5,
    )
    task_id = await r.tasks.start(config)
    result = await r.tasks.wait(task_id, timeout=120)
    assert result.status == "completed" and result.sessions == 3, result
    return {"task-three-sessions-completed": r.tasks.handle(task_id)}


async def task_budget_exceeded_and_raised(r: Recorder) -> dict[str, WorkflowHandle]:
    """A task whose first session crosses the task's token budget in its first model call: the
    task stops at budget_exceeded; raise_budget by the owner; the second session's answer passes review."""
    run_dir, ws = r.task_dir()
    script = write_task_script(run_dir, [[write_file("a.txt", "a"), {"text": "unreached"}], [{"text": "done"}]])
    config = r.tasks.config(ws, script, approval=ALLOW_ALL, budget=Budget(max_tokens=1_000))
    task_id = await r.tasks.start(config)
    await r.tasks.wait_status(task_id, "budget_exceeded")
    await r.tasks.client.raise_task_budget(task_id, Budget(max_tokens=1_000_000))
    result = await r.tasks.wait(task_id, timeout=120)
    assert result.status == "completed" and result.sessions == 2, result
    return {"task-budget-exceeded-and-raised": r.tasks.handle(task_id)}


async def budget_refused_before_call(r: Recorder) -> dict[str, WorkflowHandle]:
    """A turn whose model call is refused before it is sent (its prompt alone passes the token
    budget: no attempt, no receipt); ``raise_budget`` by the owner; a turn that runs to its answer."""
    config = r.config([{"text": "answered"}], approval=ALLOW_ALL, budget=Budget(max_tokens=100))
    started = await r.client.start(config, "summarise " + "the quick brown fox " * 100)
    refused = await r.wait_turn(config.session_id, started.turn_id)
    assert refused.status == "budget_exceeded" and refused.crossing is not None and refused.crossing.estimated, refused
    handle = r.temporal.get_workflow_handle_for(SessionWorkflow.run, f"session-{config.session_id}")
    await handle.execute_update(SessionWorkflow.raise_budget, RaiseBudgetInput(principal=OWNER, budget=Budget(max_tokens=1_000_000)))
    sent = await r.client.send(config.session_id, "go on")
    assert (await r.wait_turn(config.session_id, sent.turn_id)).status == "completed"
    await r.client.archive(config.session_id)
    return {"session-refused-before-call-and-raised": r.handle(config.session_id)}


async def task_session_refused_before_call(r: Recorder) -> dict[str, WorkflowHandle]:
    """A task whose first session's model call is refused before it is sent (its prompt passes the
    task's remaining budget): the task stops at budget_exceeded (refused-call-v1); raise_budget by
    the owner; the second session's answer passes review."""
    run_dir, ws = r.task_dir()
    script = write_task_script(run_dir, [[{"text": "never sent"}], [{"text": "done"}]])
    config = r.tasks.config(ws, script, approval=ALLOW_ALL, budget=Budget(max_tokens=100))
    task_id = await r.tasks.start(config)
    await r.tasks.wait_status(task_id, "budget_exceeded")
    await r.tasks.client.raise_task_budget(task_id, Budget(max_tokens=1_000_000))
    result = await r.tasks.wait(task_id, timeout=120)
    assert result.status == "completed" and result.sessions == 2, result
    return {"task-session-refused-before-call": r.tasks.handle(task_id)}


async def task_cancelled_mid_session(r: Recorder) -> dict[str, WorkflowHandle]:
    """A task cancelled (update cancel) during its first session's model call: the child session
    is cancelled and the task ends cancelled. Both workflows' histories."""
    run_dir, ws = r.task_dir()
    script = write_task_script(run_dir, [[{"text": "too late", "delay_seconds": 120}]])
    task_id = await r.tasks.start(r.tasks.config(ws, script, schedule={"every_seconds": DAY}))
    session_id = await r.tasks.session_id(task_id, 1)
    await wait_for_event(r.client, session_id, lambda e: isinstance(e, ModelRequestStarted))
    await r.tasks.client.cancel_task(task_id, reason="recorded")
    result = await r.tasks.wait(task_id, timeout=120)
    assert result.status == "cancelled", result
    return {"task-cancelled-mid-session": r.tasks.handle(task_id), "task-cancelled-mid-session-child": r.tasks.session_handle(task_id, 1)}


async def task_paused_and_resumed(r: Recorder) -> dict[str, WorkflowHandle]:
    """A daily task paused while it sleeps after its first session (review failed), resumed, and
    completed by its second session (review passed)."""
    run_dir, ws = r.task_dir()
    script = write_task_script(run_dir, [[{"text": "half done"}], [{"text": "all done"}]], reviews=[FAIL, PASS])
    task_id = await r.tasks.start(r.tasks.config(ws, script, schedule={"every_seconds": DAY}), skipping=False)
    await r.tasks.wait_stored(task_id, lambda e: isinstance(e, AutonomousTaskCheckpointed))
    await r.tasks.wait_status(task_id, "waiting")
    await r.tasks.client.pause_task(task_id, reason="recorded")
    await r.tasks.client.resume_task(task_id)
    await r.tasks.skipper.fast_forward(r.tasks.handle(task_id))
    result = await r.tasks.wait(task_id, timeout=120)
    assert result.status == "completed" and result.sessions == 2, result
    return {"task-paused-and-resumed": r.tasks.handle(task_id)}


async def task_trigger_continuation_amend_nudge(r: Recorder) -> dict[str, WorkflowHandle]:
    """A daily task with a trigger command (execute) whose first session stops at its round limit
    and is continued at once; the second's answer fails review; while the task sleeps the owner
    amends the goal and nudges it; the third session's answer passes."""
    run_dir, ws = r.task_dir()
    listing = {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]}
    script = write_task_script(
        run_dir, [[listing, listing], [{"text": "drafted"}], [{"text": "translated"}]], reviews=[FAIL, PASS]
    )
    config = r.tasks.config(
        ws, script, max_rounds_per_session=2, schedule={"every_seconds": DAY, "trigger_command": "echo execute"},
    )
    task_id = await r.tasks.start(config, skipping=False)
    await r.tasks.wait_stored(task_id, lambda e: isinstance(e, AutonomousTaskCheckpointed) and e.checkpoint.number == 2)
    await r.tasks.wait_status(task_id, "waiting")
    await r.tasks.client.amend_task_goal(task_id, "build the thing in French", reason="recorded")
    await r.tasks.client.nudge_task(task_id)
    result = await r.tasks.wait(task_id, timeout=120)
    assert result.status == "completed" and result.sessions == 3, result
    return {"task-trigger-round-limit-amend-and-nudge": r.tasks.handle(task_id)}


async def task_trigger_ignore_dismissed(r: Recorder) -> dict[str, WorkflowHandle]:
    """A task with no clock whose trigger says ignore: the run is dismissed for good (no timer);
    the owner makes the trigger's file and nudges it, the trigger says execute, the session passes."""
    run_dir, ws = r.task_dir()
    script = write_task_script(run_dir, [[{"text": "went"}]], reviews=[PASS])
    trigger = "if [ -f go ]; then echo execute; else echo ignore nothing to do; fi"
    task_id = await r.tasks.start(r.tasks.config(ws, script, schedule={"trigger_command": trigger}), skipping=False)
    await r.tasks.wait_stored(task_id, lambda e: isinstance(e, AutonomyDecision))
    await r.tasks.wait_status(task_id, "waiting")
    (ws / "go").write_text("")
    await r.tasks.client.nudge_task(task_id)
    result = await r.tasks.wait(task_id, timeout=120)
    assert result.status == "completed" and result.sessions == 1, result
    return {"task-trigger-ignore-dismissed-then-nudged": r.tasks.handle(task_id)}


async def task_in_a_git_workspace(r: Recorder) -> dict[str, WorkflowHandle]:
    """A task whose workspace is a git repository: before each of its two sessions it reads the
    commit (``task.workspace_commit``) for the orientation prompt; the second session's answer passes."""
    run_dir, ws = r.task_dir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    for args in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "start"]):
        subprocess.run(["git", *args], cwd=ws, env=env, check=True, capture_output=True)
    script = write_task_script(run_dir, [[{"text": "half done"}], [{"text": "all done"}]], reviews=[FAIL, PASS])
    task_id = await r.tasks.start(r.tasks.config(ws, script, schedule={"every_seconds": DAY}))
    result = await r.tasks.wait(task_id, timeout=120)
    assert result.status == "completed" and result.sessions == 2, result
    return {"task-two-sessions-in-a-git-workspace": r.tasks.handle(task_id)}


async def task_max_sessions(r: Recorder) -> dict[str, WorkflowHandle]:
    """A task whose acceptance command never passes fails after its two sessions (``max_sessions``)."""
    run_dir, ws = r.task_dir()
    script = write_task_script(run_dir, [[{"text": "tried"}], [{"text": "tried again"}]])
    config = r.tasks.config(ws, script, acceptance={"command": "test -f never.txt"}, max_sessions=2)
    task_id = await r.tasks.start(config)
    result = await r.tasks.wait(task_id, timeout=120)
    assert result.status == "failed" and result.failure_reason == "max_sessions", result
    return {"task-max-sessions-failed": r.tasks.handle(task_id)}


# ---------------------------------------------------------------- delegation

def _delegation_config(
    r: Recorder, turns: list[dict[str, Any]], sessions: list[list[dict[str, Any]]], **fields: Any
) -> SessionConfig:
    """A session config whose script has the parent's ``turns`` and the ``sessions`` of its delegated sessions."""
    config = r.config(turns, **fields)
    assert config.script is not None
    script = Path(config.script)
    script.write_text(json.dumps({**json.loads(script.read_text()), "sessions": [{"turns": t} for t in sessions]}))
    return config


def _delegate(prompt: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "delegate", "arguments": {"prompt": prompt, **arguments}}]}


async def _delegated_id(r: Recorder, session_id: str) -> str:
    delegated = await wait_for_event(r.client, session_id, lambda e: isinstance(e, SessionDelegated))
    return delegated.child_session_id


async def delegation_foreground(r: Recorder) -> dict[str, WorkflowHandle]:
    """A ``delegate`` call asking for a tool the session lacks (CapabilityWidened, nothing started),
    then one that waits: the child lists the workspace and answers, its answer is the call's
    result and its spend rolls up; the session answers, then is archived. Both histories."""
    config = _delegation_config(
        r,
        [
            _delegate("run it", tools=["shell.run"]),
            _delegate("list the workspace", tools=["fs.list"]),
            {"text": "the child listed it"},
        ],
        [[{"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]}, {"text": "one file"}]],
        approval=ALLOW_ALL, tools=["fs.list", "delegate"], budget=Budget(max_tokens=1_000_000),
    )
    started = await r.client.start(config, "what is there?")
    assert (await r.wait_turn(config.session_id, started.turn_id)).status == "completed"
    child = await _delegated_id(r, config.session_id)
    await r.client.archive(config.session_id)
    return {"foreground-after-a-widened-request": r.handle(config.session_id), "foreground-child": r.handle(child)}


async def delegation_background(r: Recorder) -> dict[str, WorkflowHandle]:
    """A ``delegate`` call that does not wait: its handle at once; eight turns while the child runs
    (the history passes the continue-as-new suggestion, which waits for the child); the child's
    answer arrives as a message and its turn answers; then the session continues as new. Its first
    run, and the child's history."""
    quick = [{"text": f"answer {n}"} for n in range(2, 10)]
    config = _delegation_config(
        r,
        [_delegate("slow work", wait=False), {"text": "started"}, *quick, {"text": "heard back"}, {"text": "last"}],
        [[{"text": "slow result", "delay_seconds": 3.0}]],
        approval=ALLOW_ALL,
    )
    started = await r.client.start(config, "start it")
    first_run = (await r.handle(config.session_id).describe()).run_id
    await r.wait_turn(config.session_id, started.turn_id)
    child = await _delegated_id(r, config.session_id)
    for n in range(2, 10):
        sent = await r.client.send(config.session_id, f"message {n}")
        await r.wait_turn(config.session_id, sent.turn_id)
    heard = await wait_for_event(
        r.client, config.session_id, lambda e: isinstance(e, UserMessageAdded) and e.text.startswith("[delegated session")
    )
    await r.wait_turn(config.session_id, heard.turn_id)
    last = await r.client.send(config.session_id, "one more")
    await r.wait_turn(config.session_id, last.turn_id)
    assert (await r.client.state(config.session_id)).run > 1
    await r.client.archive(config.session_id)
    return {"background-holds-continue-as-new-first-run": r.handle(config.session_id, first_run), "background-child": r.handle(child)}


async def delegation_cancelled(r: Recorder) -> dict[str, WorkflowHandle]:
    """A turn cancelled while its foreground child's model call runs: the child is cancelled and has
    ended before the turn ends cancelled. Both histories."""
    config = _delegation_config(r, [_delegate("take your time"), {"text": "unreached"}], [[{"text": "late", "delay_seconds": 60}]], approval=ALLOW_ALL)
    started = await r.client.start(config, "go")
    child = await _delegated_id(r, config.session_id)
    await wait_for_event(r.client, child, lambda e: isinstance(e, ModelRequestStarted))
    await r.client.cancel(config.session_id, reason="recorded")
    assert (await r.wait_turn(config.session_id, started.turn_id)).status == "cancelled"
    await r.client.archive(config.session_id)
    return {"turn-cancelled-mid-child": r.handle(config.session_id), "turn-cancelled-mid-child-child": r.handle(child)}


async def delegation_archived(r: Recorder) -> dict[str, WorkflowHandle]:
    """A session archived while its background child's model call runs: the child is cancelled and
    has ended before the session's end is recorded. Both histories."""
    config = _delegation_config(
        r, [_delegate("slow work", wait=False), {"text": "started it"}], [[{"text": "late", "delay_seconds": 60}]], approval=ALLOW_ALL
    )
    started = await r.client.start(config, "go")
    await r.wait_turn(config.session_id, started.turn_id)
    child = await _delegated_id(r, config.session_id)
    await wait_for_event(r.client, child, lambda e: isinstance(e, ModelRequestStarted))
    await r.client.archive(config.session_id)
    await asyncio.wait_for(r.handle(config.session_id).result(), 60)
    return {"archived-with-a-background-child": r.handle(config.session_id), "archived-with-a-background-child-child": r.handle(child)}


async def console_two_approvals(r: Recorder) -> dict[str, WorkflowHandle]:
    """Search attributes and details (``console-v1``): a batch of two writes waiting together
    (two pending), one granted by update ``decide`` with the plain JSON the current details show
    (as the UI's Send an Update sends it), the other denied by signal; a turn of read rounds
    that changes no attribute until its end; then archived."""
    read = {"tool_calls": [{"name": "fs.read", "arguments": {"path": "a.txt"}}]}
    writes = {"tool_calls": [
        {"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}},
        {"name": "fs.write", "arguments": {"path": "b.txt", "content": "b"}},
    ]}
    config = r.config([writes, {"text": "one written"}, read, read, {"text": "read"}])
    started = await r.client.start(config, "write two files")
    handle = r.handle(config.session_id)
    for _ in range(600):
        if len((await r.client.state(config.session_id)).pending_approvals) == 2:
            break
        await asyncio.sleep(0.1)
    first, second = (await r.client.state(config.session_id)).pending_approvals
    await handle.execute_update("decide", {"request_id": first.request_id, "decision": "grant", "principal": OWNER})
    await r.client.deny(config.session_id, second.request_id, "not b")
    await r.wait_turn(config.session_id, started.turn_id)
    reads = await r.client.send(config.session_id, "read it twice")
    await r.wait_turn(config.session_id, reads.turn_id)
    await r.client.archive(config.session_id)
    return {"two-approvals-then-read-rounds": handle}


# ---------------------------------------------------------------- task graphs


async def _graph_histories(r: Recorder, graph_id: str, name: str) -> dict[str, WorkflowHandle]:
    """The graph's history and its first node session's."""
    handles = {name: r.graphs.handle(graph_id)}
    sessions = await r.graphs.session_ids(graph_id)
    if sessions:
        handles[f"{name}-child"] = r.temporal.get_workflow_handle(session_workflow_id(sessions[0]))
    return handles


async def graph_diamond(r: Recorder) -> dict[str, WorkflowHandle]:
    """A diamond (a -> b, c -> d; e after b; f after c) under max_parallel 2, approved
    automatically: b's first review fails and its retry passes; c fails review twice and fails
    for good, blocking d and f; the graph fails. The graph's history and a's session's."""
    run_dir, ws = r.task_dir()
    spec = GraphSpec.model_validate({"max_parallel": 2, "nodes": [
        {"id": "a", "prompt": "lay the foundation"},
        {"id": "b", "prompt": "build the left side", "depends_on": ["a"]},
        {"id": "c", "prompt": "build the right side", "depends_on": ["a"]},
        {"id": "d", "prompt": "join both sides", "depends_on": ["b", "c"]},
        {"id": "e", "prompt": "paint the left side", "depends_on": ["b"]},
        {"id": "f", "prompt": "paint the right side", "depends_on": ["c"]},
    ]})
    script = write_graph_script(run_dir, {
        "a": [{"turns": [answer("foundation laid")]}],
        "b": [{"turns": [answer("half built")], "review": fail("half built")}, {"turns": [answer("built")], "review": NODE_PASS}],
        "c": [{"turns": [answer("wobbles")], "review": fail("wobbles")}, {"turns": [answer("still wobbles")], "review": fail("still")}],
        "e": [{"turns": [answer("painted")]}],
    })
    graph_id = await r.graphs.start(r.graphs.config(ws, script, graph=spec, approve_plan="auto", tools=["fs.read"]))
    result = await r.graphs.wait(graph_id)
    assert result.status == "failed" and result.nodes["d"] == "blocked", result
    return await _graph_histories(r, graph_id, "diamond-retry-and-blocked-branch")


async def graph_error_answer_and_retry_by_hand(r: Recorder) -> dict[str, WorkflowHandle]:
    """A chain a -> b (max_retries 1, a retry window of an hour): a answers ``Error: ...`` (no
    review; graph-error-answer-v1), then fails review for good, blocking b; the graph waits; its
    owner retries a by hand (update retry_node), a passes, b runs, the graph completes."""
    run_dir, ws = r.task_dir()
    spec = GraphSpec.model_validate({"nodes": [
        {"id": "a", "prompt": "lay the foundation"}, {"id": "b", "prompt": "build on it", "depends_on": ["a"]},
    ]})
    script = write_graph_script(run_dir, {
        "a": [{"turns": [answer("Error: the mixer broke")]}, {"turns": [answer("half laid")], "review": fail("half")},
              {"turns": [answer("foundation laid")], "review": NODE_PASS}],
        "b": [{"turns": [answer("built")]}],
    })
    config = r.graphs.config(ws, script, graph=spec, approve_plan="auto", max_retries=1, retry_window_seconds=3600)
    graph_id = await r.graphs.start(config)
    await r.graphs.wait_until(graph_id, lambda v: v.retry_until is not None)
    await r.client.graphs.retry_node(graph_id, "a", "the mixer is fixed")
    result = await r.graphs.wait(graph_id)
    assert result.status == "completed", result
    return await _graph_histories(r, graph_id, "graph-error-answer-then-retried-by-hand")


async def graph_planned_and_approved(r: Recorder) -> dict[str, WorkflowHandle]:
    """A goal planned into two nodes, approved by its owner; the first node's call outside its
    grant is refused; both complete. The graph's history and the first node's session's."""
    run_dir, ws = r.task_dir()
    plan = {"graph": {"nodes": [
        {"id": "survey", "prompt": "list what is there", "tools": ["fs.list"]},
        {"id": "write", "prompt": "write the notes", "depends_on": ["survey"], "tools": ["fs.write"]},
    ]}}
    script = write_graph_script(run_dir, {
        "survey": [{"turns": [write_file("sneaky.txt", "no"), answer("README.md")]}],
        "write": [{"turns": [write_file("notes.md", "notes"), answer("wrote notes.md")]}],
    }, plan=[plan])
    graph_id = await r.graphs.start(r.graphs.config(ws, script, goal="write notes", tools=["fs.list", "fs.write"]))
    await r.graphs.wait_until(graph_id, lambda v: v.status == "pending_approval")
    await r.graphs.approve(graph_id, reason="recorded")
    result = await r.graphs.wait(graph_id)
    assert result.status == "completed", result
    return await _graph_histories(r, graph_id, "planned-approved-and-a-call-outside-the-grant")


async def graph_rejected_and_direct_answer(r: Recorder) -> dict[str, WorkflowHandle]:
    """A high-risk plan (network) that waits although approval is automatic, then rejected; and a
    planner that answers in plain text (the graph completes with that answer)."""
    run_dir, ws = r.task_dir()
    spec = GraphSpec.model_validate({"nodes": [{"id": "fetch", "prompt": "fetch it"}]})
    script = write_graph_script(run_dir, {}, plan=[{"text": "42"}])
    rejected = await r.graphs.start(r.graphs.config(ws, script, graph=spec, approve_plan="auto", network=True, tools=["fs.read"]))
    await r.graphs.wait_until(rejected, lambda v: v.status == "pending_approval")
    await r.graphs.approve(rejected, approve=False, reason="recorded")
    direct = await r.graphs.start(r.graphs.config(ws, script, goal="six times seven?"))
    assert (await r.graphs.wait(rejected)).status == "rejected"
    assert (await r.graphs.wait(direct)).answer == "42"
    return {"high-risk-rejected": r.graphs.handle(rejected), "direct-answer": r.graphs.handle(direct)}


async def graph_cancelled_mid_run(r: Recorder) -> dict[str, WorkflowHandle]:
    """A graph cancelled (update cancel) while its node's model call runs: the child is cancelled."""
    run_dir, ws = r.task_dir()
    spec = GraphSpec.model_validate({"nodes": [{"id": "slow", "prompt": "take long"}, {"id": "next", "prompt": "then", "depends_on": ["slow"]}]})
    script = write_graph_script(run_dir, {"slow": [{"turns": [answer("too late", 120)]}]})
    graph_id = await r.graphs.start(r.graphs.config(ws, script, graph=spec, approve_plan="auto"))
    await r.graphs.wait_until(graph_id, lambda v: v.running == 1)
    session_id = (await r.graphs.session_ids(graph_id))[0]
    await wait_for_event(r.client, session_id, lambda e: isinstance(e, ModelRequestStarted))
    await r.graphs.handle(graph_id).execute_update("cancel", GraphControlInput(principal=OWNER, reason="recorded"), result_type=GraphSnapshot)
    assert (await r.graphs.wait(graph_id)).status == "cancelled"
    return await _graph_histories(r, graph_id, "cancelled-mid-run")


# ---------------------------------------------------------------- a cancelled child's spend

# A child's turn that spends (a listing: a model call and a tool call), then stalls in its next model call.
_SPEND_THEN_STALL: list[dict[str, Any]] = [
    {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]}, {"text": "too late", "delay_seconds": 120},
]


async def _stalled(r: Recorder, session_id: str) -> None:
    await wait_for_event(r.client, session_id, lambda e: isinstance(e, ModelRequestStarted) and e.round == 2)


async def task_session_cancelled_after_spending(r: Recorder) -> dict[str, WorkflowHandle]:
    """A task cancelled while its session, which has listed the workspace, waits for its second
    model call: the session signals its spend (``child_spend``) as it ends cancelled and the task
    counts it. Both histories."""
    run_dir, ws = r.task_dir()
    script = write_task_script(run_dir, [_SPEND_THEN_STALL])
    task_id = await r.tasks.start(r.tasks.config(ws, script, schedule={"every_seconds": DAY}, approval=ALLOW_ALL))
    session_id = await r.tasks.session_id(task_id, 1)
    await _stalled(r, session_id)
    await r.tasks.client.cancel_task(task_id, reason="recorded")
    result = await r.tasks.wait(task_id, timeout=120)
    assert result.status == "cancelled" and result.spend.tool_calls == 1, result
    return {
        "task-session-cancelled-after-spending": r.tasks.handle(task_id),
        "task-session-cancelled-after-spending-child": r.tasks.session_handle(task_id, 1),
    }


async def delegation_child_cancelled_after_spending(r: Recorder) -> dict[str, WorkflowHandle]:
    """A turn cancelled while its foreground child, which has listed the workspace, waits for its
    second model call: the child signals its spend as it ends cancelled, and the session adds it
    to its own. Both histories."""
    config = _delegation_config(r, [_delegate("take your time"), {"text": "unreached"}], [_SPEND_THEN_STALL], approval=ALLOW_ALL)
    started = await r.client.start(config, "go")
    child = await _delegated_id(r, config.session_id)
    await _stalled(r, child)
    await r.client.cancel(config.session_id, reason="recorded")
    assert (await r.wait_turn(config.session_id, started.turn_id)).status == "cancelled"
    await r.client.archive(config.session_id)
    return {"delegation-child-cancelled-after-spending": r.handle(config.session_id), "delegation-child-cancelled-after-spending-child": r.handle(child)}


async def graph_node_cancelled_after_spending(r: Recorder) -> dict[str, WorkflowHandle]:
    """A graph cancelled while its node's session, which has listed the workspace, waits for its
    second model call: the session signals its spend as it ends cancelled, and the graph counts it."""
    run_dir, ws = r.task_dir()
    spec = GraphSpec.model_validate({"nodes": [{"id": "slow", "prompt": "list, then take long"}]})
    script = write_graph_script(run_dir, {"slow": [{"turns": _SPEND_THEN_STALL}]})
    graph_id = await r.graphs.start(r.graphs.config(ws, script, graph=spec, approve_plan="auto", approval=ALLOW_ALL))
    await r.graphs.wait_until(graph_id, lambda v: v.running == 1)
    session_id = (await r.graphs.session_ids(graph_id))[0]
    await _stalled(r, session_id)
    await r.graphs.handle(graph_id).execute_update("cancel", GraphControlInput(principal=OWNER, reason="recorded"), result_type=GraphSnapshot)
    assert (await r.graphs.wait(graph_id)).status == "cancelled"
    assert (await r.graphs.snapshot(graph_id)).spend.tool_calls == 1
    return await _graph_histories(r, graph_id, "graph-node-cancelled-after-spending")


_TRIAGE = {
    "type": "object",
    "properties": {"priority": {"enum": ["low", "high"]}, "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["priority", "tags"],
}


async def structured_output_invalid_then_valid(r: Recorder) -> dict[str, WorkflowHandle]:
    """A session whose answers must match an output schema: an invalid answer, its errors fed back,
    a valid one; then a turn with its own schema whose answer comes by the output tool."""
    spec = OutputSpec.from_schema(_TRIAGE, name="Triage")
    config = r.config(
        [
            {"text": '{"priority": "urgent"}'},
            {"text": '{"priority": "high", "tags": ["billing"]}'},
            {"tool_calls": [{"name": "final_result", "arguments": {"answer": 42}}]},
        ],
        output=spec,
    )
    _, outcome = await r.client.start_and_wait(config, "triage: my invoice is wrong")
    assert outcome.status == "completed" and outcome.rounds == 2, outcome
    answer = OutputSpec.from_schema({"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]})
    outcome = await r.client.send_and_wait(config.session_id, "six times seven?", output=answer)
    assert outcome.output == {"answer": 42}, outcome
    return {"invalid-then-valid": r.handle(config.session_id)}


async def structured_output_invalid(r: Recorder) -> dict[str, WorkflowHandle]:
    """A turn whose two allowed answers (max_attempts 2) both miss the schema: it ends output_invalid."""
    spec = OutputSpec.from_schema(_TRIAGE, name="Triage", max_attempts=2)
    config = r.config([{"text": "not json"}, {"text": '{"priority": "urgent"}'}], output=spec)
    _, outcome = await r.client.start_and_wait(config, "triage: my invoice is wrong")
    assert outcome.status == "output_invalid", outcome
    return {"output-invalid": r.handle(config.session_id)}

async def agent_session(r: Recorder) -> dict[str, WorkflowHandle]:
    """A session of the user agent ``support`` (tests/e2e/agent_tools.py): its read-only tool as a
    local activity, its effectful async tool approved and run through the effect ledger."""
    turns = [
        {"tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "A-1"}}]},
        {"tool_calls": [{"name": "refund", "arguments": {"order_id": "A-1", "amount_cents": 500}}]},
        {"text": "refunded"},
    ]
    config = r.config(turns, agent="support")
    started = await r.client.start(config, "refund 5 euros on A-1")
    requested = await wait_for_event(r.client, config.session_id, lambda e: isinstance(e, PermissionRequested))
    assert isinstance(requested, PermissionRequested)
    await r.client.approve(config.session_id, requested.request.request_id)
    assert (await r.wait_turn(config.session_id, started.turn_id)).status == "completed"
    await r.client.archive(config.session_id)
    return {"agent-session-effectful-tool-approved": r.handle(config.session_id)}


async def agent_output(r: Recorder) -> dict[str, WorkflowHandle]:
    """A session of ``order-desk``, whose ``output_type`` is an Order: a text answer fails the
    check and goes back; the next answer is an Order."""
    turns = [
        {"tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "A-1"}}]},
        {"text": "it shipped"},
        {"text": json.dumps({"order_id": "A-1", "status": "shipped", "total_cents": 1250})},
    ]
    config = r.config(turns, agent="order-desk")
    _, outcome = await r.client.start_and_wait(config, "where is A-1?")
    assert outcome.status == "completed" and outcome.output is not None, outcome
    return {"agent-output-type-invalid-then-valid": r.handle(config.session_id)}


async def names_not_registered(r: Recorder) -> dict[str, WorkflowHandle]:
    """Sessions that fail at their start: one names a tool, one an agent, the worker lacks."""
    handles: dict[str, WorkflowHandle] = {}
    for name, fields in (("unknown-tool-fails-at-start", {"tools": ["fs.read", "no_such_tool"]}), ("unknown-agent-fails-at-start", {"agent": "billing"})):
        config = r.config([{"text": "never"}], **fields)
        await r.client.start(config, "hello")
        handle = r.handle(config.session_id)
        try:
            await handle.result()
        except WorkflowFailureError:
            handles[name] = handle
    assert len(handles) == 2
    return handles


# ---------------------------------------------------------------- versioned deploys


async def upgraded_to_new_build(r: Recorder) -> dict[str, WorkflowHandle]:
    """Build A serves an idle session, a session whose turn waits for an approval and a task asleep
    after its first session; build B is made current. The idle session and the task, woken by B's
    workers, continue as new onto B at once; the waiting turn ends on A once approved, then that
    session moves. Each first run (on A) and second run (on B, with a turn or a session there)."""
    queue, deployment = f"{r.client.task_queue}-versioned", f"recorded-{uuid.uuid4().hex[:6]}"
    client = AgentClient(r.temporal, task_queue=queue, principal=OWNER, store=r.client.store)
    tasks = TaskRig.create(r.temporal, r.tasks.store, queue)

    def worker(build_id: str):  # type: ignore[no-untyped-def]
        assert r.client.store is not None
        return versioned_worker(r.temporal, r.config_of_worker, r.client.store, queue, deployment, build_id)

    idle = r.config([{"text": "one"}, {"text": "two"}])
    busy = r.config([write_file("notes.md", "once"), {"text": "written"}, {"text": "next"}])
    run_dir, ws = r.task_dir()
    task = tasks.config(
        ws, write_task_script(run_dir, [[write_file("one.txt", "1"), {"text": "first"}], [write_file("two.txt", "2"), {"text": "second"}]]),
        acceptance={"command": "test -f two.txt"}, schedule={"every_seconds": DAY}, approval=ALLOW_ALL,
    )
    first_runs: dict[str, str] = {}
    async with worker("build-a"):
        await make_current(r.temporal, deployment, "build-a")
        _, outcome = await client.start_and_wait(idle, "first")
        assert outcome.answer == "one", outcome
        started = await client.start(busy, "write it")
        asked = await wait_for_event(client, busy.session_id, lambda e: isinstance(e, PermissionRequested))
        assert isinstance(asked, PermissionRequested)
        await tasks.start(task, skipping=False)
        await tasks.wait_stored(task.task_id, lambda e: isinstance(e, AutonomousTaskCheckpointed))
        for workflow_id in (session_workflow_id(idle.session_id), session_workflow_id(busy.session_id), f"task-{task.task_id}"):
            first_runs[workflow_id] = (await r.temporal.get_workflow_handle(workflow_id).describe()).run_id or ""
        async with worker("build-b"):
            await make_current(r.temporal, deployment, "build-b")
            await settled_on(r.temporal, session_workflow_id(idle.session_id), "build-b")
            await settled_on(r.temporal, f"task-{task.task_id}", "build-b")
            await client.approve(busy.session_id, asked.request.request_id)
            assert (await client.wait(busy.session_id, started.turn_id)).answer == "written"
            await settled_on(r.temporal, session_workflow_id(busy.session_id), "build-b")
            for session in (idle, busy):
                assert (await client.send_and_wait(session.session_id, "again")).status == "completed"
                await client.archive(session.session_id)
            await tasks.client.nudge_task(task.task_id, reason="recorded")
            assert (await tasks.wait(task.task_id, timeout=120)).status == "completed"
    handles: dict[str, WorkflowHandle] = {}
    for name, workflow_id in (("idle-session", session_workflow_id(idle.session_id)), ("approval-waiting-session", session_workflow_id(busy.session_id)), ("asleep-task", f"task-{task.task_id}")):
        handles[f"{name}-first-run-on-a"] = r.temporal.get_workflow_handle(workflow_id, run_id=first_runs[workflow_id])
        handles[f"{name}-second-run-on-b"] = r.temporal.get_workflow_handle(workflow_id)
    return handles
# ---------------------------------------------------------------- pause and resume

_SLOW_LISTING: dict[str, Any] = {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}], "delay_seconds": 1.5}


async def _state_until(r: Recorder, session_id: str, holds: Callable[[Any], bool]) -> None:
    while not holds(await r.client.state(session_id)):
        await asyncio.sleep(0.05)


async def session_paused_with_a_queued_message(r: Recorder) -> dict[str, WorkflowHandle]:
    """An idle session paused (and paused again: no change); a message sent meanwhile waits as its
    turn, which starts no model call; resumed, the turn runs; then archived."""
    config = r.config([{"text": "one"}, {"text": "two"}])
    sid = config.session_id
    started = await r.client.start(config, "one")
    await r.wait_turn(sid, started.turn_id)
    await r.client.sessions.pause(sid, reason="recorded")
    await r.client.sessions.pause(sid)
    sent = await r.client.send(sid, "two")
    await _state_until(r, sid, lambda s: s.active_turn_id == sent.turn_id)
    await r.client.sessions.resume(sid, reason="recorded")
    await r.wait_turn(sid, sent.turn_id)
    await r.client.archive(sid)
    return {"session-paused-with-a-queued-message": r.handle(sid)}


async def session_paused_during_an_approval_wait(r: Recorder) -> dict[str, WorkflowHandle]:
    """A session paused while a write waits for approval: the grant is taken, the call waits until
    the resume, then runs; then archived."""
    config = r.config([{"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]}, {"text": "done"}])
    sid = config.session_id
    started = await r.client.start(config, "write a file")
    requested = await wait_for_event(r.client, sid, lambda e: isinstance(e, PermissionRequested))
    await r.client.sessions.pause(sid, reason="recorded")
    await r.client.approve(sid, requested.request.request_id)
    await _state_until(r, sid, lambda s: not s.pending_approvals)
    await r.client.sessions.resume(sid)
    await r.wait_turn(sid, started.turn_id)
    await r.client.archive(sid)
    return {"session-paused-during-an-approval-wait": r.handle(sid)}


async def graph_paused_with_a_running_node(r: Recorder) -> dict[str, WorkflowHandle]:
    """A graph paused during its first node's model call: the node's session pauses (the listing it
    asked for waits), no other node starts; resumed, both nodes complete."""
    run_dir, ws = r.task_dir()
    spec = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "list"}, {"id": "b", "prompt": "then", "depends_on": ["a"]}]})
    script = write_graph_script(run_dir, {
        "a": [{"turns": [_SLOW_LISTING, answer("listed")], "review": NODE_PASS}],
        "b": [{"turns": [answer("b done")], "review": NODE_PASS}],
    })
    graph_id = await r.graphs.start(r.graphs.config(ws, script, graph=spec, approve_plan="auto", tools=["fs.list"]))
    await r.graphs.wait_until(graph_id, lambda v: v.running == 1)
    session_id = (await r.graphs.session_ids(graph_id))[0]
    await wait_for_event(r.client, session_id, lambda e: isinstance(e, ModelRequestStarted))
    await r.graphs.handle(graph_id).execute_update("pause", GraphControlInput(principal=OWNER, reason="recorded"), result_type=GraphSnapshot)
    await wait_for_event(r.client, session_id, lambda e: e.type == "AssistantMessageCompleted")
    await r.graphs.handle(graph_id).execute_update("resume", GraphControlInput(principal=OWNER), result_type=GraphSnapshot)
    assert (await r.graphs.wait(graph_id)).status == "completed"
    return await _graph_histories(r, graph_id, "graph-paused-with-a-running-node")


async def task_paused_during_a_session(r: Recorder) -> dict[str, WorkflowHandle]:
    """A task paused during its first session's model call (pause-v1): the session pauses too (the
    listing it asked for waits); resumed, the session ends, its review fails, the second passes."""
    run_dir, ws = r.task_dir()
    script = write_task_script(run_dir, [[_SLOW_LISTING, {"text": "half done"}], [{"text": "all done"}]], reviews=[FAIL, PASS])
    task_id = await r.tasks.start(r.tasks.config(ws, script, schedule={"every_seconds": DAY}))
    session_id = await r.tasks.session_id(task_id, 1)
    await wait_for_event(r.client, session_id, lambda e: isinstance(e, ModelRequestStarted))
    await r.tasks.client.pause_task(task_id, reason="recorded")
    await wait_for_event(r.client, session_id, lambda e: e.type == "AssistantMessageCompleted")
    await r.tasks.client.resume_task(task_id)
    result = await r.tasks.wait(task_id, timeout=120)
    assert result.status == "completed" and result.sessions == 2, result
    return {"task-paused-during-a-session": r.tasks.handle(task_id), "task-paused-during-a-session-child": r.tasks.session_handle(task_id, 1)}


def _mcp_servers(root: Path) -> dict[str, McpServerConfig]:
    return {"everything": everything_stdio(root), "probe": probe_stdio(root)}


async def renamed_and_sent_if_idle(r: Recorder) -> dict[str, WorkflowHandle]:
    """A turn that runs while a message sent only if idle is refused (``SessionBusy``: nothing in
    history); the owner renames the session, an operator renames it with a reason, then clears its
    title; a message sent only if idle runs at once; then archived."""
    config = r.config([{"text": "slow", "delay_seconds": 2}, {"text": "idle now"}], title="first", operators=["ops"])
    sid = config.session_id
    operator = AgentClient(r.temporal, task_queue=r.client.task_queue, principal="ops", operators=["ops"])
    started = await r.client.start(config, "one")
    await _state_until(r, sid, lambda s: s.active_turn_id == started.turn_id)
    try:
        await r.client.send(sid, "now?", if_idle=True)
        raise AssertionError("a message sent only if idle was queued behind a running turn")
    except SessionBusy:
        pass
    await r.wait_turn(sid, started.turn_id)
    await r.client.sessions.rename(sid, "second")
    await operator.sessions.rename(sid, "third", "ticket 42")
    await r.client.sessions.rename(sid, None)
    sent = await r.client.send(sid, "two", if_idle=True)
    await r.wait_turn(sid, sent.turn_id)
    await r.client.archive(sid)
    return {"session-renamed-and-sent-if-idle": r.handle(sid)}


async def model_queue_session(r: Recorder) -> dict[str, WorkflowHandle]:
    """Model calls on a queue of their own (``model_task_queue``), run by a providers-only worker."""
    queue = f"{r.client.task_queue}-models"
    assert r.client.store is not None
    providers = build_worker(
        r.temporal, AgentrtConfig(task_queue=r.client.task_queue, model_task_queue=queue), r.client.store, role="providers"
    )
    config = r.config(
        [{"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]}, {"text": "done"}],
        approval=ALLOW_ALL, model_task_queue=queue,
    )
    async with providers:
        started = await r.client.start(config, "write a file")
        await r.wait_turn(config.session_id, started.turn_id)
        await r.client.archive(config.session_id)
    return {"model-calls-on-their-own-queue-then-archived": r.handle(config.session_id)}


async def tools_queue_session(r: Recorder) -> dict[str, WorkflowHandle]:
    """Tool calls on a queue of their own (``tool_task_queue``), run by a tools-only worker; the
    session writes its staged events with a store.append before each (``tools-queue-writes-v1``)."""
    queue = f"{r.client.task_queue}-tools"
    assert r.client.store is not None
    tools = build_worker(
        r.temporal, AgentrtConfig(task_queue=r.client.task_queue, tool_task_queue=queue), r.client.store, role="tools"
    )
    config = r.config(
        [{"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]},
         {"tool_calls": [{"name": "fs.read", "arguments": {"path": "a.txt"}}]}, {"text": "done"}],
        approval=ALLOW_ALL, tool_task_queue=queue,
    )
    async with tools:
        started = await r.client.start(config, "write a file and read it")
        await r.wait_turn(config.session_id, started.turn_id)
        await r.client.archive(config.session_id)
    return {"tool-calls-on-their-own-queue-then-archived": r.handle(config.session_id)}



async def pinned_tools_queue_session(r: Recorder) -> dict[str, WorkflowHandle]:
    """A pinned session (one build, its workflows worker and its tools worker) whose tool calls go
    to a tools queue of their own: a write and a read, each call carrying the staged events in its
    input (``pinned-tools-writes-v1``; before it, a store.append before each), then archived."""
    queue, deployment = f"{r.client.task_queue}-pinned", f"recorded-{uuid.uuid4().hex[:6]}"
    tools_queue = f"{queue}-tools"
    assert r.client.store is not None
    config = dataclasses.replace(r.config_of_worker, task_queue=queue, tool_task_queue=tools_queue)
    version = WorkerDeploymentVersion(deployment_name=deployment, build_id="build-a")
    models = build_worker(r.temporal, config, r.client.store, task_queue=queue, role="models", deployment=version)
    tools = build_worker(r.temporal, config, r.client.store, task_queue=tools_queue, role="tools", deployment=version)
    client = AgentClient(r.temporal, task_queue=queue, principal=OWNER, store=r.client.store)
    session = r.config(
        [{"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]},
         {"tool_calls": [{"name": "fs.read", "arguments": {"path": "a.txt"}}]}, {"text": "done"}],
        approval=ALLOW_ALL, tool_task_queue=tools_queue,
    )
    async with models, tools:
        await make_current(r.temporal, deployment, "build-a")
        _, outcome = await client.start_and_wait(session, "write a file and read it")
        assert outcome.answer == "done", outcome
        await client.archive(session.session_id)
    return {"tool-calls-on-their-own-queue-then-archived": r.handle(session.session_id)}


SCENARIOS: list[Scenario] = [
    budget_refused_before_call,
    task_session_refused_before_call,
    read_only_rounds_local,
    read_only_rounds_regular,
    compaction_on_demand,
    context_budget_and_compaction_events,
    tool_call_approved,
    cancel_during_model_call,
    cancel_during_tool,
    cancel_during_approval,
    cancel_with_queued_turns,
    workflow_cancelled,
    continued_as_new,
    history_bound,
    started_idle_then_message,
    round_limit,
    send_and_wait,
    idempotent_sends,
    policy_sandbox,
    policy_decisions,
    cancel_without_principal,
    session_grant_and_edit,
    operator_acts,
    stranger_flood,
    trajectory_demo_turn,
    advisor_reviews,
    memory_decided,
    mcp_call_and_elicitation,
    skill_activated,
    budget_exceeded_and_raised,
    ends_after_turn,
    task_three_sessions,
    task_budget_exceeded_and_raised,
    task_cancelled_mid_session,
    task_paused_and_resumed,
    task_trigger_continuation_amend_nudge,
    task_max_sessions,
    delegation_foreground,
    delegation_background,
    delegation_cancelled,
    delegation_archived,
    graph_diamond,
    graph_planned_and_approved,
    graph_rejected_and_direct_answer,
    graph_cancelled_mid_run,
    console_two_approvals,
    task_session_cancelled_after_spending,
    delegation_child_cancelled_after_spending,
    graph_node_cancelled_after_spending,
    structured_output_invalid_then_valid,
    structured_output_invalid,
    agent_session,
    agent_output,
    names_not_registered,
    upgraded_to_new_build,
    session_paused_with_a_queued_message,
    session_paused_during_an_approval_wait,
    graph_paused_with_a_running_node,
    task_paused_during_a_session,
    model_queue_session,
    tools_queue_session,
    pinned_tools_queue_session,
    fused_rounds,
    fused_rounds_cancelled,
    renamed_and_sent_if_idle,
    task_trigger_ignore_dismissed,
    task_in_a_git_workspace,
    graph_error_answer_and_retry_by_hand,
]


async def record(out: Path, prefix: str, only: list[str] | None = None) -> list[Path]:
    """Run every scenario on a fresh server and write its histories into ``out``; returns the files."""
    written: list[Path] = []
    server_args = [
        "--dynamic-config-value", f"limit.historyCount.suggestContinueAsNew={SUGGEST_AFTER_EVENTS}",
        "--dynamic-config-value", "frontend.WorkflowTimeSkippingEnabled=true",  # tasks' virtual clocks
    ]
    async with local_stack(OWNER, server_args, mcp_servers=_mcp_servers, agents=[support, order_desk]) as stack:
        recorder = Recorder(stack.temporal, stack.client, stack.root, stack.config)
        for scenario in SCENARIOS:
            if only and scenario.__name__ not in only:
                continue
            for name, handle in (await scenario(recorder)).items():
                history = await handle.fetch_history()
                path = out / f"{prefix}-{name}.json"
                path.write_text(history.to_json())
                written.append(path)
                print(f"wrote {path} ({len(history.events)} events)")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "histories")
    parser.add_argument("--prefix", default="lean-start-v1")
    parser.add_argument("--only", nargs="*", help="scenario functions to record (default: all)")
    args = parser.parse_args()
    asyncio.run(record(args.out, args.prefix, args.only))


if __name__ == "__main__":
    main()
