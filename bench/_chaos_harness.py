"""The chaos harness: sessions run while workers are SIGKILLed and the Temporal server restarts.

``run_chaos`` starts its own ``temporal server start-dev`` (free ports, headless, SQLite
file in the run directory) and a worker subprocess (``python -m bench._chaos_worker``:
the normal worker plus the effectful tool ``chaos.append``; with ``fork_workers`` each worker
is forked from one process that imported its modules once, ``bench/_chaos_zygote.py``). It drives ``sessions``
sessions of ``turns_per_session`` turns each through ``AgentClient`` while a chaos loop

- SIGKILLs the worker's process group ``kills`` times and starts a new worker, and
- stops the server ``server_restarts`` times (SIGKILL or SIGTERM, alternating) and starts
  it again on the same ports with the same database file, checking that the surviving
  worker and the harness's own client reconnect.

Where kills land. After each (re)start the worker prints that it polls, and prints
``@chaos <phase> <line>`` as ``chaos.append`` moves through ``before`` (sleeping before
the effect), ``applying``, ``after`` (the line is in the file, the activity has not
returned) and ``done``. Each kill picks a mode: ``random`` (half of the kills: a delay
drawn uniformly from 0.3-3 s after the worker became ready, so it lands in whatever is in
flight: model calls of 0.2-1.5 s, tool pauses, approval waits, store writes, idle time),
``before`` or ``after`` (a quarter each: wait up to 3 s for a call to enter that phase,
then kill after 0-0.3 s; ``after`` is exactly the claimed-but-unrecorded window). The
phase each kill actually hit is counted in ``ChaosReport.kill_phases``.

Every turn asks the scripted model for one or two rounds of ``chaos.append`` calls (one
or two calls each; unique lines ``s<session> t<turn> c<call>``, random pauses before and
after the effect) and then a final answer; some responses are delayed 0.2-1.5 s so model
calls are in flight too. Every second session has ``fused_rounds``: each of its turns first
reads the log (``fs.read``) inside its model call (``fused-rounds-v1``), so kills land in fused
calls too. Every third session needs approval for ``chaos.append``; the
harness grants what it sees as the owner. Outcome-unknown effects (the effect ledger)
come back as ``PermissionRequested`` with ``request.kind == "reconcile"``; the harness
answers like an operator (``bench/_reconciles.py``): the call's line is in the file ->
``applied``, else ``not_applied``.

Messages are sent with ``AgentClient.start`` / ``AgentClient.send`` and never resent
blindly: a send that failed (server gone) is resent only after the session's ``state``
query shows the turn is unknown, so a duplicate user message in the transcript is a
runtime fault, not a harness artefact.

The packages a worker imports are copied into the run directory when the run starts, so
every worker generation runs the same code even while the working tree changes (a workflow
edit mid-run would otherwise show up as non-determinism).

Checks (see ``ChaosReport``) run after the chaos stops, the worker is up and the store has
caught up with each workflow (its last event ``seq`` is stored), then every session's
history is replayed.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import random
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable, Coroutine

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from agentrt.client import AgentClient
from agentrt.schemas import ApprovalPolicy, RequestRejected, SessionConfig, TurnOutcome
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, DevServer, connect_when_ready
from agentrt.workflows.session import workflow_id_for
from bench._chaos_worker import MARK
from bench._turn_checks import count_lost, open_reconciles, read_lines, workflow_events
from bench._chaos_zygote import ForkedWorker, WorkerForks
from bench._reconciles import Reconciler, is_reconcile, line_in_file

REPO_ROOT = Path(__file__).resolve().parents[1]
# What a worker imports: copied into the run directory when the run starts, so every worker
# generation (and the replay) runs the same code even if the working tree changes meanwhile.
SOURCE_PACKAGES = ("schemas", "workflows", "activities", "worker", "client", "store")
OWNER = "chaos-operator"
LOG_FILE = "log.txt"
TERMINAL = {"completed", "failed", "cancelled", "round_limit"}

RANDOM_KILL_DELAY = (0.3, 3.0)
MODEL_DELAY = (0.2, 1.5)
TOOL_PAUSE = (0.0, 0.8)
LONG_PAUSE = (1.5, 4.0)  # some calls sleep this long before their effect (15 %)
HEARTBEAT_TIMEOUT_SECONDS = 2.0
RPC_TIMEOUT = 10.0


@dataclass
class ChaosReport:
    """What a chaos run did and what it found.

    - ``kills``: worker process groups SIGKILLed by the chaos loop; ``server_restarts``:
      times the Temporal server was stopped (SIGKILL or SIGTERM) and started again.
    - ``turns_completed``: turns whose outcome is ``completed``; ``turns_failed``: turns
      that ended otherwise (``failed``, ``round_limit``, ``cancelled``).
    - ``reconciles``: reconcile requests the harness answered (distinct request ids).
    - ``duplicates``: distinct lines that occur more than once in any session's file (an
      effect applied twice).
    - ``lost``: violations of the durable record, one per item:
      (1) a user message the session acknowledged (it returned the turn id, or its state
      showed the turn) that is not in the store transcript exactly once, as a ``user``
      message with the sent text;
      (2) a transcript position named by a workflow event (``UserMessageAdded``,
      ``AssistantMessageCompleted``, ``ToolInvocationCompleted`` / ``ToolInvocationFailed``
      with a position) missing from the store or holding the wrong role, or a stored
      position no event names;
      (3) stored events whose ``seq`` values are not exactly 1..``last_seq`` of the workflow,
      or whose type differs from the workflow's event with the same ``seq``;
      (4) a ``chaos.append`` call recorded as completed whose line is not in the file;
      (5) a tool call the model requested, in a turn that ended, without exactly one final
      result (``ToolInvocationCompleted`` or a ``ToolInvocationFailed`` other than
      ``outcome_unknown``);
      (6) a turn with more or fewer than one ``TurnEnded`` event once it has an outcome.
    - ``stuck``: turns without a terminal outcome at the deadline (including one whose
      message could not be sent) in a session with no open reconcile request;
      ``awaiting_reconcile`` counts those that do wait for one.
    - ``replay_failures``: sessions whose history does not replay with the current
      workflow code (``Replayer`` with the worker's sandbox runner).
    - ``worker_exits``: worker processes that died without being killed (restarted);
      ``reconnect_failures``: server restarts after which the live worker or the
      harness's client did not reconnect within 30 s.
    - ``problems``: one line per finding, for the log.
    """

    sessions: int = 0
    kills: int = 0
    server_restarts: int = 0
    turns_sent: int = 0
    turns_completed: int = 0
    turns_failed: int = 0
    reconciles: int = 0
    approvals: int = 0
    duplicates: int = 0
    lost: int = 0
    stuck: int = 0
    awaiting_reconcile: int = 0
    replay_failures: int = 0
    worker_starts: int = 0
    worker_exits: int = 0
    reconnect_failures: int = 0
    kill_phases: dict[str, int] = field(default_factory=dict)
    elapsed_seconds: float = 0.0
    run_dir: str = ""
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"chaos sessions={self.sessions} kills={self.kills} server_restarts={self.server_restarts} "
            f"turns_completed={self.turns_completed} reconciles={self.reconciles} duplicates={self.duplicates} "
            f"lost={self.lost} stuck={self.stuck}"
        )

    def details(self) -> str:
        phases = " ".join(f"{k}={v}" for k, v in sorted(self.kill_phases.items()))
        return (
            f"turns_sent={self.turns_sent} turns_failed={self.turns_failed} approvals={self.approvals} "
            f"awaiting_reconcile={self.awaiting_reconcile} replay_failures={self.replay_failures} "
            f"worker_starts={self.worker_starts} worker_exits={self.worker_exits} "
            f"reconnect_failures={self.reconnect_failures} kill_phases[{phases}] "
            f"elapsed={self.elapsed_seconds:.1f}s run_dir={self.run_dir}"
        )


@dataclass
class _Turn:
    number: int
    text: str
    lines: list[str]
    turn_id: str | None = None
    outcome: TurnOutcome | None = None


@dataclass
class _Session:
    index: int
    session_id: str
    workspace: Path
    script: Path
    ask: bool
    turns: list[_Turn]
    fused: bool = False  # fused_rounds: each turn first reads the log inside its model call
    config: SessionConfig | None = None
    approved: dict[str, float] = field(default_factory=dict)
    done: bool = False

    @property
    def file(self) -> Path:
        return self.workspace / LOG_FILE


class _Chaos:
    # Where kills and server stops aim (see the module docstring): a harness whose workers run no
    # chaos.append aims at random moments only.
    kill_modes: tuple[str, ...] = ("random", "random", "before", "after")
    restart_modes: tuple[str, ...] = ("random", "before")

    def __init__(
        self,
        sessions: int,
        turns_per_session: int,
        kills: int,
        server_restarts: int,
        seed: int,
        workdir: Path,
        deadline_seconds: float,
        progress: Callable[[str], None],
        append_risk: str = "effectful",
        fork_workers: bool = False,
    ) -> None:
        self.append_risk = append_risk
        self.fork_workers = fork_workers
        self.forks: WorkerForks | None = None
        self.rng = random.Random(seed)
        self.seed = seed
        self.n_sessions = sessions
        self.turns_per_session = turns_per_session
        self.target_kills = kills
        self.target_restarts = server_restarts
        self.started = time.monotonic()
        self.deadline = self.started + deadline_seconds
        # Turns must end this long before the deadline, leaving time for the checks and the replay.
        self.turn_deadline = self.deadline - min(30.0, deadline_seconds / 4)
        self.say = progress
        self.run_dir = workdir / f"chaos-{seed}-{os.getpid()}-{int(time.time())}"
        self.run_dir.mkdir(parents=True)
        self.task_queue = f"chaos-{seed}"
        self.report = ChaosReport(sessions=sessions, run_dir=str(self.run_dir))
        self.server = DevServer.on_free_ports(self.run_dir)
        self.store_url = f"sqlite:///{self.run_dir / 'agentrt.db'}"
        self.source = self.run_dir / "src"
        self.store: Store | None = None
        self.temporal: Client | None = None
        self.client: AgentClient | None = None
        self._reconciler: Reconciler | None = None
        self.sessions: list[_Session] = []
        self.worker: asyncio.subprocess.Process | ForkedWorker | None = None
        self.worker_generation = 0
        self.worker_reader: asyncio.Task[None] | None = None
        self.effect_phase: dict[str, str] = {}  # line -> last phase printed by the live worker
        self.phase_changed = asyncio.Event()
        self.ops = asyncio.Lock()  # kill / start / restart, one at a time
        self.killing = False
        self.chaos_done = False

    # ------------------------------------------------------------ logging

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def log(self, text: str) -> None:
        self.say(f"[chaos {self.elapsed():6.1f}s] {text}")

    def problem(self, text: str) -> None:
        self.report.problems.append(text)
        self.log(f"PROBLEM {text}")

    # ------------------------------------------------------------ processes

    def snapshot_source(self) -> None:
        """Copy the packages a worker imports (as ``agentrt.*``, and this harness) into ``run_dir/src``."""
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        for package in SOURCE_PACKAGES:
            shutil.copytree(REPO_ROOT / package, self.source / "agentrt" / package, ignore=ignore)
        shutil.copytree(REPO_ROOT / "bench", self.source / "bench", ignore=ignore)

    async def start_server(self) -> None:
        await self.server.start(timeout=60)

    async def stop_server(self, how: str) -> None:
        process = self.server.process
        if process is None:
            return
        if how == "SIGKILL":
            self.server.process = None
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await asyncio.to_thread(process.wait)
        else:
            await asyncio.to_thread(self.server.stop, 20.0)

    def worker_env(self) -> dict[str, str]:
        """A worker's environment (without its ``CHAOS_READY_FILE``): the snapshot first on its path."""
        env = {
            **os.environ,
            "PYTHONPATH": str(self.source) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "AGENTRT_TEMPORAL_ADDRESS": self.server.address,
            "AGENTRT_TASK_QUEUE": self.task_queue,
            "AGENTRT_DATABASE_URL": self.store_url,
            "CHAOS_APPEND_RISK": self.append_risk,
            # In clear, as the harness's client: the machine's own keys (made by `agentrt dev` or `make demo`) stay out.
            "AGENTRT_ENCRYPTION": "off",
        }
        env.pop("AGENTRT_CONFIG", None)
        return env

    async def start_worker(self) -> None:
        """Start a worker and wait until it polls; a worker that dies first is started again."""
        for attempt in range(10):
            self.worker_generation += 1
            ready = self.run_dir / f"worker-{self.worker_generation}.ready"
            env = {**self.worker_env(), "CHAOS_READY_FILE": str(ready)}
            process: asyncio.subprocess.Process | ForkedWorker
            if self.forks is not None:
                # A fresh interpreter polls only after its imports: the task queue stays without a
                # poller that long after a kill, so the server times out the killed attempts and
                # work piles up for the new worker, as it does when a real worker restarts.
                await asyncio.sleep(self.forks.startup_seconds)
                process = await self.forks.start(env, self.run_dir)
            else:
                process = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "bench._chaos_worker",
                    cwd=self.run_dir, env=env, stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
                )
            self.worker = process
            self.effect_phase.clear()
            self.worker_reader = asyncio.create_task(self._read_worker(process, self.worker_generation))
            self.report.worker_starts += 1
            limit = time.monotonic() + 30
            while not ready.exists() and process.returncode is None and time.monotonic() < limit:
                await asyncio.sleep(0.05)
            if ready.exists() and process.returncode is None:
                return
            if process.returncode is None:
                self.problem(f"worker {process.pid} not polling after 30 s; killing it")
                await self._kill(process)
            else:
                self.log(f"worker {process.pid} exited with {process.returncode} before polling (attempt {attempt + 1})")
            await asyncio.sleep(1.0)
        raise RuntimeError("could not start a worker")

    async def _read_worker(self, process: asyncio.subprocess.Process | ForkedWorker, generation: int) -> None:
        assert process.stdout is not None
        with open(self.run_dir / "worker.log", "ab") as out:
            out.write(f"--- worker generation {generation} pid {process.pid}\n".encode())
            while line := await process.stdout.readline():
                out.write(line)
                text = line.decode(errors="replace").rstrip("\n")
                if text.startswith(MARK + " ") and self.worker is process:
                    _, phase, effect_line = text.split(" ", 2)
                    if phase == "done":
                        self.effect_phase.pop(effect_line, None)
                    else:
                        self.effect_phase[effect_line] = phase
                    self.phase_changed.set()
            out.flush()

    async def _kill(self, process: asyncio.subprocess.Process | ForkedWorker) -> None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        await process.wait()

    async def kill_worker(self) -> str:
        """SIGKILL the worker's process group; returns the phase the kill landed in."""
        process = self.worker
        assert process is not None
        phases = set(self.effect_phase.values())
        phase = "append:after" if "after" in phases or "applying" in phases else "append:before" if phases else "other"
        self.killing = True
        try:
            await self._kill(process)
        finally:
            self.killing = False
        self.effect_phase.clear()
        self.report.kills += 1
        self.report.kill_phases[phase] = self.report.kill_phases.get(phase, 0) + 1
        return phase

    async def watch_worker(self) -> None:
        """Restart a worker that died on its own (not by the chaos loop)."""
        while True:
            await asyncio.sleep(0.5)
            process = self.worker
            if process is None or process.returncode is None or self.killing or self.ops.locked():
                continue
            async with self.ops:
                if self.worker is process and process.returncode is not None:
                    self.report.worker_exits += 1
                    self.problem(f"worker {process.pid} exited on its own with code {process.returncode}; restarting")
                    await self.start_worker()

    async def pollers(self) -> int:
        """Pollers the server has seen on the workflow and activity task queues (0 if it cannot tell)."""
        assert self.temporal is not None
        total = 0
        for kind in (TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW, TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY):
            response = await self.temporal.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=self.temporal.namespace, task_queue=TaskQueue(name=self.task_queue), task_queue_type=kind
                ),
                timeout=timedelta(seconds=5),
            )
            if not response.pollers:
                return 0
            total += len(response.pollers)
        return total

    async def restart_server(self, how: str) -> None:
        """Stop the server (``how``), start it on the same ports and file, check the worker and client reconnect."""
        process = self.worker
        await self.stop_server(how)
        self.report.server_restarts += 1
        down = self.rng.uniform(0.2, 1.5)
        await asyncio.sleep(down)
        await self.start_server()
        self.log(f"server restarted ({how}, down {down:.1f} s + start)")
        # The harness's client: the same Client object must work again.
        limit = time.monotonic() + 30
        client_ok = False
        while time.monotonic() < limit:
            try:
                await self.pollers()
                client_ok = True
                break
            except Exception:  # noqa: BLE001 - still reconnecting
                await asyncio.sleep(0.3)
        if not client_ok:
            self.report.reconnect_failures += 1
            self.problem("the harness's client did not reconnect within 30 s of the server restart; connecting anew")
            self.temporal = await self.connect()
            assert self.client is not None
            self.client.temporal = self.temporal
        # The worker that was running before the restart: it must poll the new server.
        limit = time.monotonic() + 30
        while time.monotonic() < limit:
            if process is None or process.returncode is not None:
                break
            try:
                if await self.pollers() > 0:
                    self.log(f"worker {process.pid} reconnected after {time.monotonic() - limit + 30:.1f} s")
                    return
            except Exception:  # noqa: BLE001
                pass
            await asyncio.sleep(0.3)
        if process is not None and process.returncode is not None:
            self.report.worker_exits += 1
            self.problem(f"worker {process.pid} died with the server (exit code {process.returncode}); restarting it")
        else:
            self.report.reconnect_failures += 1
            self.problem(f"worker {process.pid if process else '?'} did not poll within 30 s of the server restart")
            if process is not None:
                await self._kill(process)
        await self.start_worker()

    # ------------------------------------------------------------ the chaos loop

    async def chaos_loop(self) -> None:
        kills, restarts = self.target_kills, self.target_restarts
        # Server restarts follow evenly spread kills (after the worker is back and has run a while).
        restart_after = {max(1, round((j + 1) * kills / (restarts + 1))) for j in range(restarts)} if kills else set()
        pending_restarts = restarts
        k = 0
        try:
            while time.monotonic() < self.turn_deadline and (k < kills or pending_restarts > 0):
                if k < kills:
                    mode = self.rng.choice(self.kill_modes)
                    await self._wait_for_kill_point(mode)
                    async with self.ops:
                        phase = await self.kill_worker()
                        k += 1
                        gap = self.rng.uniform(0.0, 0.3)
                        self.log(f"kill {k}/{kills} ({mode} -> {phase}); new worker in {gap:.1f} s")
                        await asyncio.sleep(gap)
                        await self.start_worker()
                if pending_restarts > 0 and (k in restart_after or k >= kills):
                    mode = self.rng.choice(self.restart_modes)
                    await self._wait_for_kill_point(mode)
                    how = "SIGKILL" if (restarts - pending_restarts) % 2 == 0 else "SIGTERM"
                    async with self.ops:
                        phases = sorted(set(self.effect_phase.values()))
                        self.log(f"stopping the server ({how}, {mode} -> effects in flight: {phases or 'none'})")
                        await self.restart_server(how)
                    pending_restarts -= 1
            if k < kills or pending_restarts:
                self.problem(f"chaos stopped at the deadline after {k} kills, {restarts - pending_restarts} restarts")
        finally:
            self.chaos_done = True

    async def _wait_for_kill_point(self, mode: str) -> None:
        if mode == "random":
            await asyncio.sleep(self.rng.uniform(*RANDOM_KILL_DELAY))
            return
        wanted = {"before": {"before"}, "after": {"applying", "after"}}[mode]
        limit = time.monotonic() + RANDOM_KILL_DELAY[1]
        await asyncio.sleep(RANDOM_KILL_DELAY[0])
        while time.monotonic() < limit:
            if wanted & set(self.effect_phase.values()):
                await asyncio.sleep(self.rng.uniform(0.0, 0.3) if mode == "before" else self.rng.uniform(0.0, 0.15))
                return
            self.phase_changed.clear()
            try:
                await asyncio.wait_for(self.phase_changed.wait(), max(0.01, limit - time.monotonic()))
            except asyncio.TimeoutError:
                pass

    # ------------------------------------------------------------ sessions

    def plan_sessions(self) -> None:
        for i in range(1, self.n_sessions + 1):
            workspace = self.run_dir / "ws" / f"s{i}"
            workspace.mkdir(parents=True)
            responses: list[dict[str, Any]] = []
            turns: list[_Turn] = []
            fused = i % 2 == 0
            for t in range(1, self.turns_per_session + 1):
                lines: list[str] = []
                if fused:  # a read-only round the model call runs itself (fused-rounds-v1)
                    responses.append({"text": "", "tool_calls": [{"name": "fs.read", "arguments": {"path": LOG_FILE}}]})
                for _round in range(self.rng.choice([1, 1, 2])):
                    calls = []
                    for _ in range(self.rng.choice([1, 1, 2])):
                        line = f"s{i} t{t} c{len(lines) + 1}"
                        lines.append(line)
                        calls.append({
                            "name": "chaos.append",
                            "arguments": {
                                "path": LOG_FILE,
                                "line": line,
                                "pause_before_seconds": round(
                                    self.rng.uniform(*(LONG_PAUSE if self.rng.random() < 0.15 else TOOL_PAUSE)), 2
                                ),
                                "pause_after_seconds": round(self.rng.uniform(*TOOL_PAUSE), 2),
                            },
                        })
                    responses.append({"text": "", "tool_calls": calls, "delay_seconds": self._model_delay()})
                responses.append({"text": f"s{i} t{t} done", "delay_seconds": self._model_delay()})
                turns.append(_Turn(number=t, text=f"s{i} turn {t}: append {', '.join(lines)}", lines=lines))
            script = self.run_dir / f"script-s{i}.json"
            script.write_text(json.dumps({"turns": responses}, indent=1))
            self.sessions.append(
                _Session(
                    index=i,
                    session_id=f"chaos{self.seed}-s{i}",
                    workspace=workspace,
                    script=script,
                    ask=i % 3 == 0,
                    turns=turns,
                    fused=fused,
                )
            )

    def _model_delay(self) -> float:
        return round(self.rng.uniform(*MODEL_DELAY), 2) if self.rng.random() < 0.5 else 0.0

    def _config(self, session: _Session) -> SessionConfig:
        assert self.client is not None
        tools = {"chaos.append": "ask"} if session.ask else {}
        return self.client.new_config(
            str(session.workspace),
            session_id=session.session_id,
            profile="scripted",
            script=str(session.script),
            tools=["chaos.append", "fs.read"] if session.fused else ["chaos.append"],
            approval=ApprovalPolicy(read_only="allow", idempotent="allow", effectful="allow", tools=tools),
            heartbeat_timeout_seconds=HEARTBEAT_TIMEOUT_SECONDS,
            fused_rounds=session.fused,
        )

    async def drive(self, session: _Session) -> None:
        """Send each turn's message, wait for the turn to end, then send the next."""
        try:
            for turn in session.turns:
                if not await self._send(session, turn):
                    return
                self.report.turns_sent += 1
                if not await self._wait(session, turn):
                    return
        finally:
            session.done = True
            if all(s.done for s in self.sessions) and not self.chaos_done:
                self.log("every session has finished its turns; the remaining kills hit an idle worker")

    async def _send(self, session: _Session, turn: _Turn) -> bool:
        assert self.client is not None
        expected = f"turn-{turn.number}"
        while time.monotonic() < self.turn_deadline:
            try:
                left = max(1.0, self.turn_deadline - time.monotonic())
                if turn.number == 1:
                    session.config = session.config or self._config(session)
                    started = await asyncio.wait_for(self.client.start(session.config, turn.text), left)
                    turn.turn_id = started.turn_id
                else:
                    result = await asyncio.wait_for(self.client.send(session.session_id, turn.text), left)
                    turn.turn_id = result.turn_id
                if turn.turn_id != expected:
                    self.problem(f"{session.session_id}: message {turn.number} got {turn.turn_id}, expected {expected}")
                return True
            except RequestRejected as err:
                self.problem(f"{session.session_id}: message {turn.number} rejected: {err}")
                return False
            except asyncio.TimeoutError:
                break  # never resend while the first attempt may still be delivered
            except Exception as err:  # noqa: BLE001 - server or worker gone: find out whether it arrived
                self.log(f"{session.session_id}: send {turn.number} failed ({type(err).__name__}: {err}); checking")
                known = await self._turn_known(session, turn.number)
                if known:
                    turn.turn_id = expected
                    return True
                if known is None:
                    break
        self.problem(f"{session.session_id}: message {turn.number} not delivered by the deadline")
        return False

    async def _turn_known(self, session: _Session, number: int) -> bool | None:
        """Whether the session has turn ``number`` (queued, running or ended); None if it cannot tell in time."""
        assert self.client is not None
        while time.monotonic() < self.turn_deadline:
            try:
                state = await asyncio.wait_for(self.client.state(session.session_id), RPC_TIMEOUT)
            except Exception as err:  # noqa: BLE001
                if type(err).__name__ == "SessionNotFound":
                    return False
                await asyncio.sleep(0.5)
                continue
            turn_id = f"turn-{number}"
            return state.active_turn_id == turn_id or turn_id in state.queued_turn_ids or state.turns_completed >= number
        return None

    async def _wait(self, session: _Session, turn: _Turn) -> bool:
        assert self.client is not None and turn.turn_id is not None
        while time.monotonic() < self.turn_deadline:
            try:
                outcome = await asyncio.wait_for(
                    self.client.wait(session.session_id, turn.turn_id, timeout_seconds=5.0), RPC_TIMEOUT + 5
                )
            except Exception:  # noqa: BLE001 - server or worker gone; ask again
                await asyncio.sleep(0.5)
                continue
            if outcome.status in TERMINAL:
                turn.outcome = outcome
                self.log(f"{session.session_id} {turn.turn_id} {outcome.status}")
                return True
        return False

    async def operate(self, session: _Session) -> None:
        """Grant tool-call approvals and answer reconcile requests, as the owner, until the session is done."""
        assert self.client is not None
        while not session.done:
            await asyncio.sleep(0.3)
            try:
                state = await asyncio.wait_for(self.client.state(session.session_id), RPC_TIMEOUT)
            except Exception:  # noqa: BLE001 - not started yet, or server / worker gone
                continue
            for request in state.pending_approvals:
                now = time.monotonic()
                try:
                    if is_reconcile(request):
                        if await self.reconciler.answer(session.session_id, request, line_in_file(session.file)):
                            self.report.reconciles += 1
                    else:
                        if now - session.approved.get(request.request_id, -1e9) < 3.0:
                            continue
                        await asyncio.wait_for(self.client.approve(session.session_id, request.request_id), RPC_TIMEOUT)
                        if request.request_id not in session.approved:
                            self.report.approvals += 1
                        session.approved[request.request_id] = now
                except Exception as err:  # noqa: BLE001 - retried on the next round
                    self.log(f"{session.session_id}: answering {request.request_id} failed: {type(err).__name__}: {err}")

    @property
    def reconciler(self) -> Reconciler:
        """Answers reconcile requests from the sessions' files (made with the client)."""
        if self._reconciler is None:
            assert self.client is not None
            self._reconciler = Reconciler(self.client, "chaos harness", self.log, RPC_TIMEOUT)
        return self._reconciler

    # ------------------------------------------------------------ checks

    async def settle(self) -> None:
        """Wait (bounded) until the store holds every event each workflow has emitted."""
        assert self.client is not None and self.store is not None
        limit = min(self.deadline - 10, time.monotonic() + 30)
        waiting = list(self.sessions)
        while waiting and time.monotonic() < limit:
            still = []
            for session in waiting:
                try:
                    page = await asyncio.wait_for(self.client.events(session.session_id, limit=1), RPC_TIMEOUT)
                    stored = await asyncio.to_thread(self.store.events, session.session_id, page.last_seq - 1, 10)
                    if not any(e.seq == page.last_seq for e in stored):
                        still.append(session)
                except Exception:  # noqa: BLE001
                    still.append(session)
            waiting = still
            if waiting:
                await asyncio.sleep(0.5)

    async def workflow_events(self, session_id: str) -> list[Any]:
        assert self.client is not None and self.store is not None
        return await workflow_events(self.client, self.store, session_id, RPC_TIMEOUT)

    async def check(self) -> None:
        assert self.store is not None
        report = self.report
        for session in self.sessions:
            sid = session.session_id
            lines = await asyncio.to_thread(read_lines, session.file)
            counts = collections.Counter(lines)
            for line, n in sorted(counts.items()):
                if n > 1:
                    report.duplicates += 1
                    self.problem(f"{sid}: line {line!r} appears {n} times in {session.file.name}")
            planned = {line for turn in session.turns for line in turn.lines}
            for line in counts:
                if line not in planned:
                    self.problem(f"{sid}: unexpected line {line!r} in {session.file.name}")

            for turn in session.turns:
                if turn.outcome is not None:
                    if turn.outcome.status == "completed":
                        report.turns_completed += 1
                    else:
                        report.turns_failed += 1
                        self.problem(f"{sid}: {turn.turn_id} ended {turn.outcome.status}: {turn.outcome.error}")

            try:
                events = await self.workflow_events(sid)
            except Exception as err:  # noqa: BLE001
                self.problem(f"{sid}: events query failed: {type(err).__name__}: {err}")
                events = []
            stored_events = await asyncio.to_thread(self.store.events, sid, 0, 100_000)
            messages = await asyncio.to_thread(self.store.messages, sid)

            # Turns go one at a time: the first turn without an outcome is the one that did not finish
            # (the later ones were never sent).
            open_requests = open_reconciles(events)
            unfinished = next((t for t in session.turns if t.outcome is None), None)
            if unfinished is not None:
                if open_requests:
                    report.awaiting_reconcile += 1
                    self.problem(f"{sid}: turn {unfinished.number} waits for reconcile {sorted(open_requests)}")
                else:
                    report.stuck += 1
                    self.problem(f"{sid}: turn {unfinished.number} ({unfinished.turn_id or 'not sent'}) not finished by the deadline")

            report.lost += self._check_session(session, events, stored_events, messages, counts)

    def _check_session(
        self, session: _Session, events: list[Any], stored_events: list[Any], messages: list[tuple[int, Any]],
        counts: collections.Counter[str],
    ) -> int:
        return count_lost(session.session_id, session.turns, events, stored_events, messages, counts, "chaos.append", self.problem)

    async def replay(self) -> None:
        assert self.temporal is not None
        histories: list[WorkflowHistory] = []
        for session in self.sessions:
            try:
                handle = self.temporal.get_workflow_handle(workflow_id_for(session.session_id))
                history = await asyncio.wait_for(handle.fetch_history(), 30)
                histories.append(history)
                # Kept beside the run's logs: a session that failed is a replay test to be.
                folder = self.run_dir / "histories"
                folder.mkdir(exist_ok=True)
                (folder / f"{history.workflow_id}.json").write_text(history.to_json())
            except Exception as err:  # noqa: BLE001
                if any(t.turn_id for t in session.turns):
                    self.report.replay_failures += 1
                    self.problem(f"{session.session_id}: history not fetched: {type(err).__name__}: {err}")

        async def each():  # type: ignore[no-untyped-def]
            for history in histories:
                yield history

        replayer = Replayer(workflows=[], plugins=[AgentrtPlugin(AgentrtConfig(database_url=self.store_url))])
        results = await replayer.replay_workflows(each(), raise_on_replay_failure=False)
        for workflow_id, err in results.replay_failures.items():
            self.report.replay_failures += 1
            self.problem(f"{workflow_id}: replay failed: {err}")

    # ------------------------------------------------------------ the run

    async def connect(self) -> Client:
        """A client with the plugin, once the (re)started server's frontend answers: its port
        opens before the frontend is healthy ("Frontend is not healthy yet")."""
        plugin = AgentrtPlugin(AgentrtConfig(database_url=self.store_url))
        return await connect_when_ready(
            self.server.address, "default", [plugin], first_delay=0.2, max_delay=2.0, attempts=60
        )

    # The hooks a harness of other workflow kinds overrides (bench/_chaos_kinds_harness.py).

    def plan(self) -> None:
        """Decide the work before anything starts."""
        self.plan_sessions()

    def work(self) -> list[Any]:
        """What the drivers and operators run: one of each per item."""
        return list(self.sessions)

    def describe(self) -> str:
        return f"{self.n_sessions} sessions x {self.turns_per_session} turns"

    async def start_services(self) -> None:
        """After the server, before the first worker: processes and tasks a harness runs beside
        them (none here). ``stop_services`` ends them, whatever happened."""

    async def stop_services(self) -> None:
        """In the teardown, before the server stops: end what ``start_services`` started."""

    def make_client(self) -> AgentClient:
        """The harness's client (its sessions' owner), once connected."""
        return AgentClient(self.temporal, task_queue=self.task_queue, principal=OWNER)

    def chaos_extras(self) -> list[Coroutine[Any, Any, None]]:
        """More chaos to run beside the chaos loop and the drivers (each ends by itself)."""
        return []

    def finish(self) -> None:
        """After the teardown, whatever happened: the report's last figures."""
        self.report.elapsed_seconds = self.elapsed()

    async def run(self) -> ChaosReport:
        """The whole run: server, worker, the chaos loop beside the drivers, then the checks and
        the replays; the teardown runs whatever happened. Returns ``self.report``."""
        tasks: list[asyncio.Task[Any]] = []
        try:
            self.plan()
            await asyncio.to_thread(self.snapshot_source)
            await self.start_server()
            await self.start_services()
            self.temporal = await self.connect()
            self.store = await asyncio.to_thread(Store.open, self.store_url)
            self.client = self.make_client()
            if self.fork_workers:
                self.forks = await WorkerForks.open(self.worker_env(), self.run_dir, self.run_dir / "zygote.log")
                self.log(f"worker zygote up in {self.forks.startup_seconds:.1f} s; each forked worker waits that long")
            await self.start_worker()
            self.log(
                f"server {self.server.address}, {self.describe()}, "
                f"{self.target_kills} kills, {self.target_restarts} server restarts, run dir {self.run_dir}"
            )
            watcher = asyncio.create_task(self.watch_worker())
            operators = [asyncio.create_task(self.operate(item)) for item in self.work()]
            drivers = [asyncio.create_task(self.drive(item)) for item in self.work()]
            chaos = asyncio.create_task(self.chaos_loop())
            extras = [asyncio.create_task(extra) for extra in self.chaos_extras()]
            tasks = [watcher, *operators, *drivers, chaos, *extras]
            await asyncio.gather(chaos, *drivers, *extras)
            self.log("chaos over and every driver finished; settling")
            async with self.ops:
                if self.worker is None or self.worker.returncode is not None:
                    await self.start_worker()
            await self.settle()
            for task in operators:
                task.cancel()
            await self.check()
            await self.replay()
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.worker is not None and self.worker.returncode is None:
                await self._kill(self.worker)
            if self.worker_reader is not None:
                await asyncio.gather(self.worker_reader, return_exceptions=True)
            if self.forks is not None:
                await self.forks.close()
            await self.stop_services()
            await self.stop_server("SIGTERM")
            if self.store is not None:
                self.store.close()
            self.finish()
        return self.report


async def run_chaos(
    sessions: int,
    turns_per_session: int,
    kills: int,
    server_restarts: int,
    seed: int,
    workdir: Path,
    *,
    deadline_seconds: float | None = None,
    progress: Callable[[str], None] | None = None,
    append_risk: str = "effectful",
    fork_workers: bool = False,
) -> ChaosReport:
    """Run the chaos scenario (see the module docstring) and return what it found.

    Everything is bounded by ``deadline_seconds`` (default: a budget from the sizes);
    turns must end 1/4 of it (at most 30 s) before the deadline, leaving time for the
    checks and the replay. ``progress`` receives log lines (default: none). ``append_risk``
    other than ``effectful`` (e.g. ``idempotent``) takes ``chaos.append`` out of the effect
    ledger, to see the harness catch the duplicates that come back. ``fork_workers``: each
    worker is forked from one process that imported the worker's modules once
    (``bench/_chaos_zygote.py``) instead of started as a fresh ``python -m bench._chaos_worker``:
    about two CPU-seconds less per worker start. The fork waits as long as the zygote took to
    start and import (``WorkerForks.startup_seconds``), so a kill leaves the queue without a worker
    about as long as a fresh start does; without that wait the new worker polled within a second,
    before the server had timed out the killed attempts, and fewer kills landed in an effect.
    Every process started here is stopped before returning.
    """
    if deadline_seconds is None:
        deadline_seconds = 120 + 4.0 * kills + 20.0 * server_restarts + 2.0 * sessions * turns_per_session
    chaos = _Chaos(
        sessions, turns_per_session, kills, server_restarts, seed, Path(workdir), deadline_seconds,
        progress or (lambda _text: None), append_risk, fork_workers,
    )
    return await chaos.run()
