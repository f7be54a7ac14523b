"""The chaos harness for autonomous tasks, task graphs, delegating sessions and sessions calling a
stdio MCP server: all run while workers are SIGKILLed and the Temporal server restarts.

The processes are ``bench/_chaos_harness.py``'s (``_Chaos``): its own ``temporal server
start-dev`` on free ports with a SQLite file in the run directory, worker subprocesses
(``bench._chaos_worker``: the normal worker plus the effectful tool ``chaos.append``), the chaos
loop that SIGKILLs the worker's process group (``random`` / ``before`` / ``after`` the effect)
and stops the server (SIGKILL or SIGTERM) to start it again on the same ports and file.

What runs under it:

- ``tasks`` autonomous tasks (``AgentClient.start_task``), each needing 2 or 3 sessions: the
  acceptance reviewer fails every session but the last. Session ``k`` of task ``i`` calls
  ``chaos.append`` with the line ``task<i> session<k>`` (in the task's workspace file) and
  answers. Between sessions a task sleeps ``every_seconds`` (3-8 s) on a durable timer, so
  timers fire while workers die and the server is down.
- ``graphs`` task graphs (``AgentClient.start_graph`` with a goal): the scripted planner answers
  a graph of 3 or 4 nodes with dependencies (two of them able to run side by side), the plan is
  approved automatically (``approve_plan="auto"``), each node's child session calls
  ``chaos.append`` with ``graph<i> node<id>`` (a second attempt: ``graph<i> node<id> a2``) and
  answers, and the reviewer passes it.

- ``delegations`` and ``mcp``: one-turn sessions, the kinds ``bench/_chaos_session_kinds.py``
  adds (``SessionKinds``: their scripts, checks, and the MCP server's processes, which
  ``mcp_chaos`` SIGKILLs mid-call beside the chaos loop). Their turns are sent and waited for as
  ``_Chaos`` does a session's.

Starts are spread over the time the kills are expected to take, so sessions, acceptance checks,
timers, plans, reviews and child starts are all in flight when kills land. An effect claimed
before a kill whose outcome is unknown comes back in the child session as ``PermissionRequested``
with ``request.kind == "reconcile"``; the harness finds the child sessions of each task
(``AutonomousTaskSessionStarted``) and graph (``AgentTaskStarted``) and answers like an operator:
the call's line is in the file -> ``applied``, else ``not_applied``.

Checks (``KindsReport``) run once every task and graph has ended or the bound has passed, the
worker is up and the store has caught up with each child session; then every task's, graph's
and child session's history is replayed.
"""

from __future__ import annotations

import asyncio
import collections
import json
import time
from pathlib import Path
from typing import Any, Callable, Coroutine

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from agentrt.client import AgentClient
from agentrt.schemas import (
    AutonomousTaskResult,
    TaskGraphResult,
    TurnOutcome,
    graph_workflow_id,
    session_workflow_id,
    task_workflow_id,
)
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin
from bench._chaos_budgets import describe, largest_call, overspend, review_tokens, small_budget
from bench._chaos_harness import LOG_FILE, LONG_PAUSE, OWNER, RPC_TIMEOUT, TOOL_PAUSE, _Chaos, _Session, _Turn
from bench._chaos_session_kinds import KindRun, SessionKinds
from bench._kinds_report import KindCounts, KindsReport
from bench._reconciles import is_reconcile, line_in_file
from bench._turn_checks import count_lost, open_reconciles, read_lines

TASK_INTERVAL = (3.0, 8.0)  # seconds a task sleeps between sessions (a durable timer)
PASS = {"verdict": "pass", "summary": "the goal is met"}
FAIL = {"verdict": "fail", "findings": ["not finished yet"], "summary": "more to do"}
# Graph shapes: node id -> the nodes it depends on. Each has two nodes that may run side by side.
GRAPH_SHAPES: dict[str, dict[str, list[str]]] = {
    "fan": {"a": [], "b": ["a"], "c": ["a"]},
    "join": {"a": [], "b": [], "c": ["a", "b"]},
    "diamond": {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]},
    "fork-chain": {"a": [], "b": ["a"], "c": ["a"], "d": ["c"]},
}
SECONDS_PER_KILL = 4.0  # a kill's wall time: a wait of 0.3-3 s and a worker start


_Run = KindRun


class _KindsChaos(SessionKinds, _Chaos):
    def __init__(
        self, tasks: int, graphs: int, kills: int, server_restarts: int, seed: int, workdir: Path,
        deadline_seconds: float, progress: Callable[[str], None], fork_workers: bool, append_risk: str,
        delegations: int = 0, mcp: int = 0, mcp_kills: int = 0, budgets: int = 0,
    ) -> None:
        super().__init__(
            tasks + graphs + delegations + mcp, 1, kills, server_restarts, seed, workdir, deadline_seconds, progress,
            append_risk=append_risk, fork_workers=fork_workers,
        )
        self.n_tasks = tasks
        self.n_graphs = graphs
        self.n_delegations = delegations
        self.n_mcp = mcp
        self.n_budgets = budgets  # of the tasks, and of the graphs, this many have a small budget
        self.mcp_kills_target = mcp_kills if mcp else 0
        self.task_queue = f"chaos-kinds-{seed}"
        self.kinds = KindsReport(run_dir=str(self.run_dir))
        self.runs: list[_Run] = []

    # ------------------------------------------------------------ plans

    def plan_runs(self) -> None:
        """Scripts, workspaces and start times of every task and graph."""
        spread = 0.6 * (SECONDS_PER_KILL * self.target_kills + 10.0 * self.target_restarts)
        for i in range(1, self.n_tasks + 1):
            self.runs.append(self._plan_task(i, self.rng.uniform(0.0, spread)))
        for i in range(1, self.n_graphs + 1):
            self.runs.append(self._plan_graph(i, self.rng.uniform(0.0, spread)))
        for i in range(1, self.n_delegations + 1):
            self.runs.append(self.plan_delegation(i, self.rng.uniform(0.0, spread)))
        for i in range(1, self.n_mcp + 1):
            self.runs.append(self.plan_mcp(i, self.rng.uniform(0.0, spread)))

    def _append(self, line: str) -> dict[str, Any]:
        pause = LONG_PAUSE if self.rng.random() < 0.15 else TOOL_PAUSE
        return {
            "text": "",
            "tool_calls": [{
                "name": "chaos.append",
                "arguments": {
                    "path": LOG_FILE,
                    "line": line,
                    "pause_before_seconds": round(self.rng.uniform(*pause), 2),
                    "pause_after_seconds": round(self.rng.uniform(*TOOL_PAUSE), 2),
                },
            }],
            "delay_seconds": self._model_delay(),
        }

    def _answer(self, text: str) -> dict[str, Any]:
        return {"text": text, "delay_seconds": self._model_delay()}

    def _plan_task(self, i: int, start_at: float) -> _Run:
        workspace = self.run_dir / "ws" / f"task{i}"
        workspace.mkdir(parents=True)
        needed = self.rng.choice([2, 3])
        sessions = []
        lines = set()
        for k in range(1, needed + 1):
            line = f"task{i} session{k}"
            lines.add(line)
            sessions.append({"turns": [self._append(line), self._answer(f"task{i} session{k} done")]})
        # Sessions past the ones needed (if acceptance were to fail) would write these lines.
        for k in range(needed + 1, needed + 3):
            sessions.append({"turns": [self._append(f"task{i} session{k}"), self._answer(f"task{i} session{k} done")]})
        reviews = [FAIL] * (needed - 1) + [PASS]
        script = self.run_dir / f"script-task{i}.json"
        script.write_text(json.dumps({"sessions": sessions, "reviews": reviews}, indent=1))
        return _Run(
            kind="tasks", index=i, run_id=f"kinds{self.seed}-task{i}", workspace=workspace, script=script,
            start_at=start_at, lines=lines, sessions=needed, interval=round(self.rng.uniform(*TASK_INTERVAL), 1),
            budget=small_budget(self.rng, needed) if i <= self.n_budgets else None,
        )

    def _plan_graph(self, i: int, start_at: float) -> _Run:
        workspace = self.run_dir / "ws" / f"graph{i}"
        workspace.mkdir(parents=True)
        shape = self.rng.choice(sorted(GRAPH_SHAPES))
        spec_nodes = []
        script_nodes: dict[str, list[dict[str, Any]]] = {}
        lines_by_node: dict[str, list[str]] = {}
        for node_id, deps in GRAPH_SHAPES[shape].items():
            spec_nodes.append({
                "id": node_id, "prompt": f"append the line of node {node_id}", "depends_on": deps,
                "acceptance": "the node's line is in the file", "tools": ["chaos.append"],
            })
            attempts = [f"graph{i} node{node_id}", f"graph{i} node{node_id} a2"]
            lines_by_node[node_id] = attempts
            script_nodes[node_id] = [
                {"turns": [self._append(line), self._answer(f"{line} done")], "review": PASS} for line in attempts
            ]
        budget = small_budget(self.rng, len(spec_nodes)) if i <= self.n_budgets else None
        # A budgeted graph runs its nodes one at a time: side by side they may pass it together (documented).
        plan = [{"graph": {"max_parallel": 1 if budget else 3, "nodes": spec_nodes}, "delay_seconds": self._model_delay()}]
        script = self.run_dir / f"script-graph{i}.json"
        script.write_text(json.dumps({"plan": plan, "nodes": script_nodes}, indent=1))
        return _Run(
            kind="graphs", index=i, run_id=f"kinds{self.seed}-graph{i}", workspace=workspace, script=script,
            start_at=start_at, lines={line for lines in lines_by_node.values() for line in lines},
            shape=shape, nodes=lines_by_node, budget=budget,
        )

    # ------------------------------------------------------------ driving

    async def drive(self, run: _Run) -> None:  # type: ignore[override]
        """Start the run at its time, then wait (bounded) until it ends."""
        try:
            await asyncio.sleep(max(0.0, run.start_at - self.elapsed()))
            while run.after_kills and not self.chaos_done:
                await asyncio.sleep(0.5)
            if run.is_session:
                await self._drive_session(run)
                return
            if not await self._start(run):
                return
            getattr(self.kinds, run.kind).started += 1
            await self._wait_run(run)
        finally:
            run.done = True
            if all(r.done for r in self.runs) and not self.chaos_done:
                self.log("every task and graph has ended; the remaining kills hit an idle worker")

    async def _drive_session(self, run: _Run) -> None:
        """A session kind's one turn, as ``_Chaos`` sends and waits for a session's turns."""
        turn = _Turn(number=1, text=f"{run.kind} {run.index}: do the work", lines=sorted(run.lines))
        run.session = _Session(
            index=run.index, session_id=run.run_id, workspace=run.workspace, script=run.script, ask=False,
            turns=[turn], config=self.session_config(run),
        )
        if not await self._send(run.session, turn):
            return
        run.started = True
        getattr(self.kinds, run.kind).started += 1
        self.log(f"{run.workflow_id} started ({self._describe_plan(run)})")
        if await self._wait(run.session, turn):
            run.result = turn.outcome

    async def _start(self, run: _Run) -> bool:
        assert self.client is not None
        while time.monotonic() < self.turn_deadline:
            try:
                if run.kind == "tasks":
                    await asyncio.wait_for(self.client.start_task(
                        f"append the line of each session of task {run.index}",
                        workspace=str(run.workspace), task_id=run.run_id, script=str(run.script),
                        tools=["chaos.append"], every_seconds=run.interval, max_sessions=run.sessions + 2,
                        max_rounds_per_session=10, budget=run.budget,
                    ), RPC_TIMEOUT + 10)
                else:
                    await asyncio.wait_for(self.client.start_graph(
                        goal=f"append the line of each node of graph {run.index}",
                        workspace=str(run.workspace), graph_id=run.run_id, script=str(run.script),
                        approve_plan="auto", tools=["chaos.append"], max_retries=1, max_rounds_per_node=10,
                        budget=run.budget,
                    ), RPC_TIMEOUT + 10)
                run.started = True
                self.log(f"{run.workflow_id} started ({self._describe_plan(run)})")
                return True
            except Exception as err:  # noqa: BLE001 - server gone, or an earlier attempt got through
                exists = await self._exists(run)
                if exists:
                    run.started = True
                    self.log(f"{run.workflow_id} start answered {type(err).__name__}, but it runs")
                    return True
                self.log(f"{run.workflow_id}: start failed ({type(err).__name__}: {err}); again")
                await asyncio.sleep(1.0)
        self.problem(f"{run.workflow_id}: not started by the deadline")
        return False

    def _describe_plan(self, run: _Run) -> str:
        budget = f", budget {run.budget.describe()}" if run.budget else ""
        if run.kind == "tasks":
            return f"{run.sessions} sessions, every {run.interval} s{budget}"
        if run.kind == "delegations":
            return f"{run.sessions} delegated sessions"
        if run.kind == "mcp":
            return f"{len(run.lines)} MCP calls"
        return f"{run.shape}: {len(run.nodes)} nodes{budget}"

    async def _exists(self, run: _Run) -> bool:
        assert self.temporal is not None
        try:
            await asyncio.wait_for(self.temporal.get_workflow_handle(run.workflow_id).describe(), RPC_TIMEOUT)
            return True
        except Exception:  # noqa: BLE001 - not there, or not answering
            return False

    async def _wait_run(self, run: _Run) -> None:
        """Wait until the run ends; a budgeted task that stopped at ``budget_exceeded`` (it waits
        there for a ``raise_budget``) is cancelled, as its owner would."""
        assert self.client is not None
        wait = self.client.wait_task if run.kind == "tasks" else self.client.wait_graph
        patience = 5.0 if run.budget and run.kind == "tasks" else 15.0
        while time.monotonic() < self.turn_deadline:
            try:
                left = max(1.0, min(patience, self.turn_deadline - time.monotonic()))
                run.result = await asyncio.wait_for(wait(run.run_id), left)
                self.log(f"{run.workflow_id} {run.result.status}")
                return
            except asyncio.TimeoutError:
                if run.budget and run.kind == "tasks":
                    await self._cancel_at_budget(run)
                continue
            except Exception as err:  # noqa: BLE001 - server or worker gone; ask again
                if "not found" in str(err).lower() and not await self._exists(run):
                    self.problem(f"{run.workflow_id}: waiting failed: {type(err).__name__}: {err}")
                await asyncio.sleep(0.5)

    async def _cancel_at_budget(self, run: _Run) -> None:
        assert self.client is not None
        try:
            status = await asyncio.wait_for(self.client.task_status(run.run_id), RPC_TIMEOUT)
            if status.status == "budget_exceeded":
                run.stopped_at_budget = True
                self.log(f"{run.workflow_id} stopped at its budget ({status.budget_crossing.text() if status.budget_crossing else '?'}); cancelling it")
                await asyncio.wait_for(self.client.cancel_task(run.run_id, reason="chaos harness: stopped at its budget"), RPC_TIMEOUT)
        except Exception as err:  # noqa: BLE001 - server or worker gone; next time
            self.log(f"{run.workflow_id}: budget stop not handled yet: {type(err).__name__}: {err}")

    # ------------------------------------------------------------ operating

    async def child_sessions(self, run: _Run) -> list[str]:
        """The child sessions of ``run`` it has recorded, in order (its events, from the store or the workflow)."""
        if run.is_session:
            if run.kind == "delegations" and run.started:
                await self.session_children(run)
            return list(run.children)
        events = await self.run_events(run)
        kind = "AutonomousTaskSessionStarted" if run.kind == "tasks" else "AgentTaskStarted"
        ended = {"AutonomousTaskSessionEnded", "AgentTaskCompleted", "AgentTaskFailed"}
        for event in events:
            if event.type == kind:
                run.children.setdefault(event.session_id, False)
            elif event.type in ended:
                run.children[event.session_id] = True
        return list(run.children)

    async def run_events(self, run: _Run) -> list[Any]:
        assert self.client is not None
        if run.is_session:
            return await self.workflow_events(run.run_id)
        read = self.client.task_events if run.kind == "tasks" else self.client.graph_events
        events: list[Any] = []
        since = 0
        while True:
            page = await asyncio.wait_for(read(run.run_id, since_seq=since, limit=1000), RPC_TIMEOUT)
            events.extend(page.events)
            if not page.events or page.events[-1].seq >= page.last_seq:
                return events
            since = page.events[-1].seq

    async def operate(self, run: _Run) -> None:  # type: ignore[override]
        """Answer reconcile requests (and any approval) in the run's child sessions, and approve a
        graph's plan that ``auto`` left waiting, as the owner, until the run has ended."""
        assert self.client is not None
        while not run.done:
            await asyncio.sleep(0.5)
            if not run.started:
                continue
            try:
                await self.child_sessions(run)
            except Exception:  # noqa: BLE001 - server or worker gone; next round
                continue
            if run.kind == "graphs":
                try:
                    await self._approve_plan(run)
                except Exception:  # noqa: BLE001 - its query timed out; the reconciles below go on
                    pass
            for sid in self._sessions_of(run, running=True):
                try:
                    state = await asyncio.wait_for(self.client.state(sid), RPC_TIMEOUT)
                except Exception:  # noqa: BLE001
                    continue
                for request in state.pending_approvals:
                    now = time.monotonic()
                    try:
                        if is_reconcile(request):
                            if await self.reconciler.answer(sid, request, line_in_file(run.file)):
                                getattr(self.kinds, run.kind).reconciles += 1
                        elif now - run.approved.get(request.request_id, -1e9) >= 3.0:
                            await asyncio.wait_for(self.client.approve(sid, request.request_id), RPC_TIMEOUT)
                            if request.request_id not in run.approved:
                                self.log(f"{sid}: approved {request.request_id} ({request.tool})")
                            run.approved[request.request_id] = now
                    except Exception as err:  # noqa: BLE001 - retried on the next round
                        self.log(f"{sid}: answering {request.request_id} failed: {type(err).__name__}: {err}")

    def _sessions_of(self, run: _Run, running: bool = False) -> list[str]:
        """The sessions of ``run``: a session kind's own and its children (``running``: those not ended)."""
        own = [run.run_id] if run.is_session and not (running and run.result is not None) else []
        return own + [sid for sid, ended in run.children.items() if not (running and ended)]

    async def _approve_plan(self, run: _Run) -> None:
        assert self.client is not None
        view = await asyncio.wait_for(self.client.graph_status(run.run_id), RPC_TIMEOUT)
        if view.status != "pending_approval":
            run.pending_since = None
            return
        now = time.monotonic()
        if run.pending_since is None:
            run.pending_since = now
        elif now - run.pending_since > 10.0:
            await asyncio.wait_for(self.client.approve_graph(run.run_id, reason="chaos harness"), RPC_TIMEOUT)
            self.kinds.plan_approvals += 1
            self.problem(f"{run.workflow_id}: plan waited {now - run.pending_since:.0f} s for approval; approved by hand")
            run.pending_since = None

    # ------------------------------------------------------------ checks

    async def settle(self) -> None:
        """Wait (bounded) until the store holds every event each child session has emitted."""
        assert self.client is not None and self.store is not None
        limit = min(self.deadline - 10, time.monotonic() + 30)
        waiting = []
        for run in self.runs:
            if run.started:
                try:
                    await self.child_sessions(run)
                    waiting += self._sessions_of(run)
                except Exception as err:  # noqa: BLE001
                    self.problem(f"{run.workflow_id}: events not read: {type(err).__name__}: {err}")
        while waiting and time.monotonic() < limit:
            still = []
            for sid in waiting:
                try:
                    page = await asyncio.wait_for(self.client.events(sid, limit=1), RPC_TIMEOUT)
                    stored = await asyncio.to_thread(self.store.events, sid, page.last_seq - 1, 10)
                    if not any(e.seq == page.last_seq for e in stored):
                        still.append(sid)
                except Exception:  # noqa: BLE001
                    still.append(sid)
            waiting = still
            if waiting:
                await asyncio.sleep(0.5)

    async def check(self) -> None:
        assert self.store is not None
        for run in self.runs:
            if not run.started:
                continue
            counts = getattr(self.kinds, run.kind)
            name = run.workflow_id
            lines = await asyncio.to_thread(read_lines, run.file)
            seen = collections.Counter(lines)
            for line, n in sorted(seen.items()):
                if n > 1:
                    counts.duplicates += 1
                    self.problem(f"{name}: DUPLICATE line {line!r} appears {n} times in {run.file}")
                if line not in run.lines:
                    self.problem(f"{name}: unexpected line {line!r} in {run.file}")
            try:
                events = await self.run_events(run)
            except Exception as err:  # noqa: BLE001
                self.problem(f"{name}: events not read: {type(err).__name__}: {err}")
                events = []
            if run.result is None:
                counts.stuck += 1
                waiting = await self._open_reconciles(run)
                if waiting:
                    counts.awaiting_reconcile += 1
                self.problem(
                    f"{name}: STUCK, not ended by the deadline"
                    + (f" (child sessions wait for reconciles: {waiting})" if waiting else "")
                )
            elif run.result.status == "completed":
                counts.completed += 1
            elif self._ended_at_budget(run):
                counts.budget_stopped += 1
            else:
                counts.failed += 1
                why = run.result.error if isinstance(run.result, TurnOutcome) else f"{run.result.failure_reason} {run.result.failure}"
                self.problem(f"{name}: ended {run.result.status}: {why}")
            if run.is_session:
                counts.lost += await self.check_session_run(run, events, seen)
                counts.call_errors += sum(1 for e in events if e.type == "ToolInvocationFailed" and e.reason != "outcome_unknown")
                try:
                    counts.orphaned += await self.count_orphans(run)
                except Exception as err:  # noqa: BLE001
                    self.problem(f"{name}: children not described: {type(err).__name__}: {err}")
            else:
                counts.lost += self._check_run(run, events, seen)
            counts.child_sessions += len(run.children)
            for sid in run.children:
                counts.lost += await self._check_child(sid, seen)
            if run.budget is not None:
                counts.budgeted += 1
                counts.overspent += await self._check_budget(run, events)

    def _check_run(self, run: _Run, events: list[Any], seen: collections.Counter[str]) -> int:
        """Lost work of the run itself (see ``KindCounts.lost``)."""
        lost = 0
        name = run.workflow_id

        def bad(text: str) -> None:
            nonlocal lost
            lost += 1
            self.problem(f"{name}: LOST {text}")

        completed = run.result is not None and run.result.status == "completed"
        if run.kind == "tasks":
            ended = [e for e in events if e.type == "AutonomousTaskSessionEnded"]
            for event in ended:
                line = f"task{run.index} session{event.number}"
                if event.status == "completed" and seen[line] == 0:
                    bad(f"session {event.number} ({event.session_id}) completed without its line {line!r}")
            if completed:
                for k in range(1, run.sessions + 1):
                    line = f"task{run.index} session{k}"
                    if seen[line] != 1:
                        bad(f"completed, but line {line!r} is in the file {seen[line]} times")
                numbers = sorted(e.number for e in events if e.type == "AutonomousTaskSessionStarted")
                if numbers != list(range(1, run.sessions + 1)):
                    self.problem(f"{name}: completed after sessions {numbers}, {run.sessions} planned")
        else:
            done = {e.node_id: e.attempt for e in events if e.type == "AgentTaskCompleted"}
            for node_id, attempt in sorted(done.items()):
                line = run.nodes[node_id][min(attempt, 2) - 1]
                if seen[line] != 1:
                    bad(f"node {node_id} completed (attempt {attempt}), but line {line!r} is in the file {seen[line]} times")
            if completed:
                missing = sorted(set(run.nodes) - set(done))
                if missing:
                    bad(f"completed, but nodes {missing} have no AgentTaskCompleted")
                assert isinstance(run.result, TaskGraphResult)
                not_completed = {n: s for n, s in run.result.nodes.items() if s != "completed"}
                if not_completed or set(run.result.nodes) != set(run.nodes):
                    bad(f"completed, but its nodes are {run.result.nodes}")
        return lost

    def _ended_at_budget(self, run: _Run) -> bool:
        """A budgeted run that ended at its budget: a task the harness cancelled there, a graph
        that failed ``budget_exceeded``."""
        result = run.result
        if run.budget is None or result is None:
            return False
        if run.kind == "tasks":
            return run.stopped_at_budget and result.status == "cancelled"
        return isinstance(result, TaskGraphResult) and result.status == "failed" and result.failure_reason == "budget_exceeded"

    async def _check_budget(self, run: _Run, events: list[Any]) -> int:
        """1 when the run's spend passed its budget by more than one call (``bench/_chaos_budgets.py``), else 0."""
        assert self.client is not None and self.store is not None and run.budget is not None
        if run.result is None or isinstance(run.result, TurnOutcome):
            return 0
        receipts = []
        for sid in run.children:
            receipts += await asyncio.to_thread(self.store.usage_receipts, sid)
        if run.kind == "tasks":
            status = await asyncio.wait_for(self.client.task_status(run.run_id), RPC_TIMEOUT)
            others = review_tokens(status.receipts)
        else:
            others = [e.usage.input_tokens + e.usage.output_tokens for e in events if e.type == "TaskDecomposed"]
        found = overspend(run.result.spend, run.budget, largest_call(receipts, others))
        self.log(f"{run.workflow_id} budget: {describe(found)}")
        for problem in found.problems:
            self.problem(f"{run.workflow_id}: OVERSPENT {problem}")
        return 1 if found.problems else 0

    async def _check_child(self, sid: str, seen: collections.Counter[str]) -> int:
        assert self.client is not None and self.store is not None
        try:
            events = await self.workflow_events(sid)
        except Exception as err:  # noqa: BLE001
            self.problem(f"{sid}: events query failed: {type(err).__name__}: {err}")
            return 0
        stored_events = await asyncio.to_thread(self.store.events, sid, 0, 100_000)
        messages = await asyncio.to_thread(self.store.messages, sid)
        return count_lost(sid, [], events, stored_events, messages, seen, "chaos.append", self.problem)

    async def _open_reconciles(self, run: _Run) -> list[str]:
        waiting = []
        for sid in self._sessions_of(run):
            try:
                if open_reconciles(await self.workflow_events(sid)):
                    waiting.append(sid)
            except Exception:  # noqa: BLE001
                pass
        return waiting

    async def replay(self) -> None:
        """Replay every task's, graph's and child session's history; keep each under ``histories/``."""
        assert self.temporal is not None and self.store is not None
        folder = self.run_dir / "histories"
        folder.mkdir(exist_ok=True)
        kind_of: dict[str, str] = {}
        histories: list[WorkflowHistory] = []
        for run in self.runs:
            if not run.started:
                continue
            for workflow_id in [run.workflow_id, *(session_workflow_id(s) for s in run.children)]:
                kind_of[workflow_id] = run.kind
                try:
                    handle = self.temporal.get_workflow_handle(workflow_id)
                    history = await asyncio.wait_for(handle.fetch_history(), 30)
                    histories.append(history)
                    (folder / f"{history.workflow_id}.json").write_text(history.to_json())
                except Exception as err:  # noqa: BLE001
                    getattr(self.kinds, run.kind).replay_failures += 1
                    self.problem(f"{workflow_id}: history not fetched: {type(err).__name__}: {err}")

        async def each():  # type: ignore[no-untyped-def]
            for history in histories:
                yield history

        plugin = AgentrtPlugin(AgentrtConfig(database_url=self.store_url), self.store)
        replayer = Replayer(workflows=[], plugins=[plugin])
        results = await replayer.replay_workflows(each(), raise_on_replay_failure=False)
        for workflow_id, err in results.replay_failures.items():
            getattr(self.kinds, kind_of.get(workflow_id, "tasks")).replay_failures += 1
            self.problem(f"{workflow_id}: REPLAY failed: {err}")
        self.log(f"replayed {len(histories)} histories, {len(results.replay_failures)} failed")

    # ------------------------------------------------------------ the run

    def plan(self) -> None:
        self.plan_runs()
        if self.n_mcp:
            self.mcp_toml()

    def work(self) -> list[Any]:
        return list(self.runs)

    def describe(self) -> str:
        return (
            f"{self.n_tasks} tasks, {self.n_graphs} graphs, {self.n_delegations} delegating sessions, "
            f"{self.n_mcp} MCP sessions ({self.mcp_kills_target} MCP server kills)"
        )

    def worker_env(self) -> dict[str, str]:
        env = super().worker_env()
        if self.n_mcp:
            env["AGENTRT_CONFIG"] = str(self.run_dir / "agentrt.toml")
        return env

    def chaos_extras(self) -> list[Coroutine[Any, Any, None]]:
        return [self.mcp_chaos()] if self.mcp_kills_target else []

    def make_client(self) -> AgentClient:
        return AgentClient(self.temporal, task_queue=self.task_queue, principal=OWNER, store=self.store)

    def finish(self) -> None:
        chaos_report = self.report
        self.kinds.kills = chaos_report.kills
        self.kinds.server_restarts = chaos_report.server_restarts
        self.kinds.kill_phases = dict(chaos_report.kill_phases)
        self.kinds.worker_starts = chaos_report.worker_starts
        self.kinds.worker_exits = chaos_report.worker_exits
        self.kinds.reconnect_failures = chaos_report.reconnect_failures
        self.kinds.problems = list(chaos_report.problems)
        self.kinds.elapsed_seconds = self.elapsed()

    async def run(self) -> KindsReport:  # type: ignore[override]
        """The chaos harness's run over tasks and graphs; the per-kind report."""
        await super().run()
        if self.n_mcp:
            await self.count_leaked()
            self.kinds.problems = list(self.report.problems)
        return self.kinds


async def run_chaos_kinds(
    tasks: int,
    graphs: int,
    kills: int,
    server_restarts: int,
    seed: int,
    workdir: Path,
    *,
    deadline_seconds: float | None = None,
    progress: Callable[[str], None] | None = None,
    fork_workers: bool = False,
    append_risk: str = "effectful",
    delegations: int = 0,
    mcp: int = 0,
    mcp_kills: int = 0,
    budgets: int = 0,
) -> KindsReport:
    """Run ``tasks`` autonomous tasks and ``graphs`` task graphs under ``kills`` worker SIGKILLs
    and ``server_restarts`` server restarts (see the module docstring); return what was found.

    Everything is bounded by ``deadline_seconds`` (default: a budget from the sizes); runs must
    end 1/4 of it (at most 30 s) before the deadline, leaving time for the checks and the replay
    (a run not ended by then is ``stuck``). ``progress`` receives log lines (default: none).
    ``fork_workers``: each worker is forked from a process with the worker's modules imported
    (``bench/_chaos_zygote.py``) instead of started as a fresh interpreter. Every process started
    here is stopped before returning. ``append_risk`` other than ``effectful`` (e.g. ``idempotent``)
    takes ``chaos.append`` out of the effect ledger, to see the duplicates that come back counted.
    """
    if deadline_seconds is None:
        deadline_seconds = 180 + SECONDS_PER_KILL * kills + 20.0 * server_restarts + 3.0 * (tasks + graphs + delegations + mcp)
    chaos = _KindsChaos(
        tasks, graphs, kills, server_restarts, seed, Path(workdir), deadline_seconds,
        progress or (lambda _text: None), fork_workers, append_risk, delegations, mcp, mcp_kills, budgets,
    )
    return await chaos.run()


__all__ = ["KindCounts", "KindsReport", "run_chaos_kinds"]
