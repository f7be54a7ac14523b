"""The two session kinds of ``bench.chaos_kinds``: sessions that delegate to a child session, and
sessions that call a stdio MCP server the harness SIGKILLs mid-call.

``KindRun`` is one item of any kind the harness (``bench/_chaos_kinds_harness.py``) drives: a
task, a graph, or here a one-turn session. ``SessionKinds`` is the part of that harness these
two kinds add: their scripts, their sessions' configurations, their checks, and the MCP
server's processes (found by their command line, which names the run's ``mcp`` directory).

- ``delegations``: the session's one turn calls ``delegate`` (``wait: true``, tools
  ``chaos.append``) once or twice, one round each; delegated session ``k`` of session ``i``
  appends the line ``deleg<i> child<k>`` and answers ``deleg<i> child<k> answer``; then the
  parent answers. Parent and children share the workspace, so their lines land in one file.
- ``mcp``: the session's one turn asks for one or two rounds of one or two calls of
  ``chaosmcp.append`` (``bench/_chaos_mcp_server.py``: effectful, the effect ledger guards it),
  each appending its own line ``mcp<i> c<j>`` to the session's workspace file. The odd ones start
  among the worker kills; the even ones once those are over (a worker lives a few seconds between
  two kills, less than a server's start takes on a loaded machine, so calls rarely reach a server
  during them: the even sessions' calls do, while the server is killed under them). Beside the chaos
  loop, ``mcp_chaos`` SIGKILLs the server's processes ``mcp_kills`` times, each while a call is
  in flight (its phase ``before`` or ``after`` the line was written). The server runs
  unsandboxed (``sandbox = "none"``): it writes into each session's workspace, outside what a
  sandbox would give it.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentrt.schemas import (
    Budget,
    ApprovalPolicy,
    AutonomousTaskResult,
    SessionConfig,
    TaskGraphResult,
    TurnOutcome,
    graph_workflow_id,
    session_workflow_id,
    task_workflow_id,
)
from bench._turn_checks import count_lost

if TYPE_CHECKING:
    from bench._chaos_harness import _Session

LOG_FILE = "log.txt"
MCP_SERVER = "chaosmcp"
MCP_TOOL = f"{MCP_SERVER}.append"
SESSION_KINDS = ("delegations", "mcp")
MCP_KILL_GAP = (0.5, 3.0)  # seconds between two kills of the MCP server
MCP_AIM_SECONDS = 5.0  # how long a kill waits for a call in flight


@dataclass
class KindRun:
    """One item of a kind: its id, workspace (where its lines go: ``LOG_FILE``), the lines it may
    write, when it starts, and what became of it. ``session`` is a session kind's session (its
    one turn), ``answers`` the answers its delegated sessions give."""

    kind: str  # "tasks", "graphs", "delegations" or "mcp"
    index: int
    run_id: str
    workspace: Path
    script: Path
    start_at: float
    lines: set[str]
    sessions: int = 0  # tasks: sessions needed; delegations: children
    interval: float = 0.0  # tasks: every_seconds
    shape: str = ""  # graphs
    nodes: dict[str, list[str]] = field(default_factory=dict)  # graphs: node id -> lines, by attempt
    answers: list[str] = field(default_factory=list)  # delegations: child k's answer at k-1
    after_kills: bool = False  # mcp: starts once the worker kills are over
    budget: Budget | None = None  # tasks and graphs: a small budget (bench/_chaos_budgets.py)
    stopped_at_budget: bool = False  # a budgeted task seen at ``budget_exceeded`` (then cancelled)
    session: "_Session | None" = None
    started: bool = False
    result: AutonomousTaskResult | TaskGraphResult | TurnOutcome | None = None
    children: dict[str, bool] = field(default_factory=dict)  # child session id -> ended
    approved: dict[str, float] = field(default_factory=dict)
    pending_since: float | None = None
    done: bool = False

    @property
    def file(self) -> Path:
        return self.workspace / LOG_FILE

    @property
    def workflow_id(self) -> str:
        if self.kind == "tasks":
            return task_workflow_id(self.run_id)
        if self.kind == "graphs":
            return graph_workflow_id(self.run_id)
        return session_workflow_id(self.run_id)

    @property
    def is_session(self) -> bool:
        return self.kind in SESSION_KINDS


def processes_with(marker: str) -> list[tuple[int, str]]:
    """Live processes (pid, command line) whose command line contains ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue  # exited already
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError):
            continue
        if marker in cmdline:
            found.append((int(entry.name), cmdline))
    return found


class SessionKinds:
    """The delegation and MCP kinds, as a part of ``_KindsChaos``: it holds the attributes below
    and the methods used here (``log``, ``problem``, ``_append``, ``_answer``, ``_model_delay``,
    ``workflow_events``: ``_Chaos``'s and its own)."""

    rng: Any
    run_dir: Path
    seed: int
    client: Any
    temporal: Any
    store: Any
    kinds: Any
    runs: list[KindRun]
    turn_deadline: float
    source: Path
    mcp_kills_target: int
    mcp_command: str = "(no MCP server)"

    @property
    def mcp_marks(self) -> Path:
        """The MCP server's marks directory: in its command line, so its processes are found by it."""
        return self.run_dir / "mcp"

    # ------------------------------------------------------------ plans

    def plan_delegation(self, i: int, start_at: float) -> KindRun:
        workspace = self.run_dir / "ws" / f"deleg{i}"
        workspace.mkdir(parents=True)
        children = self.rng.choice([1, 2])
        turns: list[dict[str, Any]] = []
        sessions = []
        answers = []
        for k in range(1, children + 1):
            turns.append({
                "text": "",
                "tool_calls": [{"name": "delegate", "arguments": {
                    "prompt": f"append the line of child {k}", "tools": ["chaos.append"], "title": f"deleg{i} child{k}",
                }}],
                "delay_seconds": self._model_delay(),
            })
            answers.append(f"deleg{i} child{k} answer")
        turns.append(self._answer(f"deleg{i} done"))
        # Spare children past the planned ones: a child started twice would take the next entry.
        for k in range(1, children + 3):
            sessions.append({"turns": [self._append(f"deleg{i} child{k}"), self._answer(f"deleg{i} child{k} answer")]})
        script = self.run_dir / f"script-deleg{i}.json"
        script.write_text(json.dumps({"turns": turns, "sessions": sessions}, indent=1))
        return KindRun(
            kind="delegations", index=i, run_id=f"kinds{self.seed}-deleg{i}", workspace=workspace, script=script,
            start_at=start_at, lines={f"deleg{i} child{k}" for k in range(1, children + 1)}, sessions=children,
            answers=answers,
        )

    def plan_mcp(self, i: int, start_at: float) -> KindRun:
        from bench._chaos_harness import LONG_PAUSE, TOOL_PAUSE

        workspace = self.run_dir / "ws" / f"mcp{i}"
        workspace.mkdir(parents=True)
        lines: list[str] = []
        turns: list[dict[str, Any]] = []
        for _round in range(self.rng.choice([1, 2])):
            calls = []
            for _ in range(self.rng.choice([1, 2])):
                line = f"mcp{i} c{len(lines) + 1}"
                lines.append(line)
                pause = LONG_PAUSE if self.rng.random() < 0.15 else TOOL_PAUSE
                calls.append({"name": MCP_TOOL, "arguments": {
                    "path": str(workspace / LOG_FILE), "line": line,
                    "pause_before_seconds": round(self.rng.uniform(*pause), 2),
                    "pause_after_seconds": round(self.rng.uniform(*TOOL_PAUSE), 2),
                }})
            turns.append({"text": "", "tool_calls": calls, "delay_seconds": self._model_delay()})
        turns.append(self._answer(f"mcp{i} done"))
        script = self.run_dir / f"script-mcp{i}.json"
        script.write_text(json.dumps({"turns": turns}, indent=1))
        return KindRun(
            kind="mcp", index=i, run_id=f"kinds{self.seed}-mcp{i}", workspace=workspace, script=script,
            start_at=start_at, lines=set(lines), after_kills=i % 2 == 0,
        )

    def session_config(self, run: KindRun) -> SessionConfig:
        from bench._chaos_harness import HEARTBEAT_TIMEOUT_SECONDS

        allow = ApprovalPolicy(read_only="allow", idempotent="allow", effectful="allow")
        fields: dict[str, Any] = (
            {"tools": ["chaos.append", "delegate"]} if run.kind == "delegations" else {"tools": [], "mcp_servers": [MCP_SERVER]}
        )
        return self.client.new_config(
            str(run.workspace), session_id=run.run_id, profile="scripted", script=str(run.script), approval=allow,
            heartbeat_timeout_seconds=HEARTBEAT_TIMEOUT_SECONDS, **fields,
        )

    def mcp_toml(self) -> Path:
        """The worker's agentrt.toml: the chaos MCP server (from the run's snapshot of ``bench``)."""
        import sys

        self.mcp_marks.mkdir(exist_ok=True)
        server = self.source / "bench" / "_chaos_mcp_server.py"
        self.mcp_command = f"{sys.executable} {server} "
        path = self.run_dir / "agentrt.toml"
        path.write_text(
            f"[mcp.servers.{MCP_SERVER}]\n"
            f"command = {json.dumps(sys.executable)}\n"
            f"args = [{json.dumps(str(server))}, {json.dumps(str(self.mcp_marks))}]\n"
            f"cwd = {json.dumps(str(self.run_dir / 'mcp-cwd'))}\n"
            'sandbox = "none"\n'
        )
        return path

    # ------------------------------------------------------------ the MCP server's processes

    def mcp_processes(self) -> list[int]:
        """The chaos MCP server's processes of this run: the server itself, not the launcher's
        relay and shell before it (their command lines name it too)."""
        return [pid for pid, cmdline in processes_with(str(self.mcp_marks)) if cmdline.startswith(self.mcp_command)]

    def mcp_phases(self) -> list[str]:
        """The phases of the calls in flight in live server processes (a killed one leaves its mark)."""
        folder = self.mcp_marks / "inflight"
        phases = []
        for mark in folder.glob("*") if folder.exists() else []:
            if not Path("/proc", mark.name.split("-")[0]).exists():
                mark.unlink(missing_ok=True)
                continue
            try:
                phases.append(mark.read_text())
            except OSError:
                continue
        return phases

    async def mcp_chaos(self) -> None:
        """SIGKILL the MCP server's processes ``mcp_kills_target`` times while the chaos runs, each
        time once a call is in flight (waiting up to ``MCP_AIM_SECONDS`` for one; none: no kill
        this round): before its line is written (``before``) or after (``after``), as it falls."""
        kills = 0
        mcp_runs = [r for r in self.runs if r.kind == "mcp"]
        while kills < self.mcp_kills_target and time.monotonic() < self.turn_deadline and not all(r.done for r in mcp_runs):
            await asyncio.sleep(self.rng.uniform(*MCP_KILL_GAP))
            limit = time.monotonic() + MCP_AIM_SECONDS
            while not self.mcp_phases() and time.monotonic() < limit:
                await asyncio.sleep(0.05)
            if not self.mcp_phases():
                continue
            await asyncio.sleep(self.rng.uniform(0.0, 0.4))
            phases = sorted(set(self.mcp_phases()))
            pids = self.mcp_processes()
            if not pids or not phases:
                continue
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            phase = "after" if "after" in phases else "before"
            kills += 1
            self.kinds.mcp_kills += 1
            self.kinds.mcp_kill_phases[phase] = self.kinds.mcp_kill_phases.get(phase, 0) + 1
            self.log(f"MCP server kill {kills}/{self.mcp_kills_target} (pids {pids}, a call {phase} its line)")

    async def count_leaked(self) -> None:
        """After the teardown (every worker killed): MCP server processes of the run still alive
        10 s later are leaked; each is counted, named, and killed."""
        limit = time.monotonic() + 10.0
        while (found := processes_with(str(self.mcp_marks))) and time.monotonic() < limit:
            await asyncio.sleep(0.2)
        self.kinds.mcp.leaked = len(found)
        for pid, cmdline in found:
            self.problem(f"LEAKED MCP server process {pid} alive 10 s after its worker died: {cmdline[:200]}")
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    # ------------------------------------------------------------ checks

    async def session_children(self, run: KindRun) -> None:
        """A delegation run's children from its session's events (``SessionDelegated``, ``DelegatedSessionEnded``)."""
        for event in await self.workflow_events(run.run_id):
            if event.type == "SessionDelegated":
                run.children.setdefault(event.child_session_id, False)
            elif event.type == "DelegatedSessionEnded":
                run.children[event.child_session_id] = True

    async def check_session_run(self, run: KindRun, events: list[Any], seen: collections.Counter[str]) -> int:
        """Lost work of a session kind's session: its durable record (``count_lost``, with the
        turn it sent) and, for a delegation whose turn completed, each child's answer in the
        result of its ``delegate`` call and each child's line in the file exactly once."""
        assert run.session is not None
        sid = run.run_id
        stored_events = await asyncio.to_thread(self.store.events, sid, 0, 100_000)
        messages = await asyncio.to_thread(self.store.messages, sid)
        tool = MCP_TOOL if run.kind == "mcp" else "chaos.append"
        lost = count_lost(sid, run.session.turns, events, stored_events, messages, seen, tool, self.problem)
        self.kinds.mcp.applied_but_failed += self.applied_but_failed(sid, events, seen, tool) if run.kind == "mcp" else 0
        if run.kind != "delegations" or run.result is None or run.result.status != "completed":
            return lost
        results = [m.text for _, m in messages if m.role == "tool" and m.name == "delegate"]
        for k, answer in enumerate(run.answers, start=1):
            if not any("completed. Its answer:" in text and text.rstrip().endswith(answer) for text in results):
                lost += 1
                self.problem(f"{sid}: LOST the turn completed without child {k}'s answer {answer!r} in a delegate result")
            line = f"deleg{run.index} child{k}"
            if seen[line] != 1:
                lost += 1
                self.problem(f"{sid}: LOST the turn completed, but child {k}'s line {line!r} is in the file {seen[line]} times")
        return lost

    def applied_but_failed(self, sid: str, events: list[Any], seen: collections.Counter[str], tool: str) -> int:
        """Calls of ``tool`` that ended as failed (a final ``ToolInvocationFailed``) although their
        line is in the file: an effect the session says did not happen, which a model would
        answer by calling again under a new key."""
        calls = {(e.turn_id, e.call.id): e.call for e in events if e.type == "ModelToolCallRequested"}
        found = 0
        for event in events:
            if event.type != "ToolInvocationFailed" or event.reason == "outcome_unknown":
                continue
            call = calls.get((event.turn_id, event.call_id))
            if call is None or call.name != tool:
                continue
            line = (call.arguments or {}).get("line")
            if seen[line]:
                found += 1
                self.problem(f"{sid}: APPLIED BUT FAILED {event.call_id}: its line {line!r} is in the file; "
                             f"the session says {event.error}")
        return found

    async def count_orphans(self, run: KindRun) -> int:
        """Delegated sessions of ``run`` still running although its turn has ended: those its
        events name and any other workflow running under its children's id prefix."""
        if run.kind != "delegations" or run.result is None:
            return 0
        prefix = session_workflow_id(f"{run.run_id}-d")
        running = set()
        async for found in self.temporal.list_workflows("ExecutionStatus = 'Running'"):
            if found.id.startswith(prefix):
                running.add(found.id)
        for sid in run.children:
            workflow_id = session_workflow_id(sid)
            if workflow_id in running:
                continue
            description = await asyncio.wait_for(self.temporal.get_workflow_handle(workflow_id).describe(), 10)
            if description.status is not None and description.status.name == "RUNNING":
                running.add(workflow_id)
        for workflow_id in sorted(running):
            self.problem(f"{run.workflow_id}: ORPHANED child {workflow_id} runs after its parent's turn ended {run.result.status}")
        return len(running)
