"""The fleet run: sessions shared by worker processes on one task queue while one of them is SIGKILLed.

``run_fleet`` uses a running Temporal server and a loopback model (``bench._fleet_provider``),
writes an ``agentrt.toml`` for the run (the loopback profile, the task queue, the store,
``[worker] agents = ["bench._fleet_tools"]`` and the sticky timeout under test), starts
``workers`` processes of ``python -m agentrt.cli worker`` (the ``agentrt worker`` command) and
drives ``sessions`` sessions of ``turns`` turns each through ``AgentClient`` (``start_and_wait``,
``send_and_wait``), each turn after a pause drawn from ``think``: each turn asks the model, which
calls ``fleet.append`` once (an effectful tool, a line in the session's file), then answers.
Messages carry idempotency keys, so a wait that ran out asks again without sending twice.

Once ``kill_fraction`` of the turns have completed, the first worker's process group is
SIGKILLed (the time just before is the kill time ``K``), and every session is described at once
(which activities ran on the dead worker). The other workers finish the run. Then the store
catches up, the effects and the durable record are checked (``bench._turn_checks``) and every
session's history is read for the sessions the dead worker held and their next step
(``bench._fleet_steps``).
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.api.workflowservice.v1 import DescribeWorkflowExecutionRequest
from temporalio.client import Client

from agentrt.client import AgentClient
from agentrt.schemas import ApprovalPolicy, SessionConfig, TurnOutcome
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, connect_when_ready
from agentrt.workflows.session import workflow_id_for
from bench._fleet_steps import HeldSession, held_session, live_task_timeouts, timeline
from bench._fleet_tools import LOG_FILE
from bench._reconciles import Reconciler, line_in_file
from bench._turn_checks import count_lost, open_reconciles, read_lines, workflow_events

REPO_ROOT = Path(__file__).resolve().parents[1]
OWNER = "fleet-operator"
TERMINAL = {"completed", "failed", "cancelled", "round_limit", "budget_exceeded"}
RPC_TIMEOUT = 20.0
TURN_TIMEOUT = 20.0
PARALLEL_RPCS = 16
PARALLEL_DESCRIBES = 64  # right after the kill, all sessions before the first retries start


@dataclass
class FleetResult:
    """One run's findings (see ``bench/fleet.py`` for what each means)."""

    label: str
    sticky_seconds: float
    heartbeat_seconds: float
    sessions: int
    turns_per_session: int
    workers: int
    turns_sent: int = 0
    turns_completed: int = 0
    turns_failed: int = 0
    duplicates: int = 0
    lost: int = 0
    stuck: int = 0
    reconciles: int = 0
    killed_pid: int = 0
    kill_at: float = 0.0  # seconds into the run
    describe_seconds: float = 0.0
    workflow_slots: int | None = None
    live_timeouts: int = 0  # workflow tasks of live workers that timed out (starved, not killed)
    held: list[HeldSession] = field(default_factory=list)
    elapsed: float = 0.0
    run_dir: str = ""
    problems: list[str] = field(default_factory=list)


@dataclass
class _Turn:
    number: int
    text: str
    line: str
    turn_id: str | None = None
    outcome: TurnOutcome | None = None


@dataclass
class _Session:
    session_id: str
    workspace: Path
    turns: list[_Turn]


def die_with_parent() -> None:
    """In a child before it runs: SIGKILL it when the benchmark's process dies (Linux
    ``PR_SET_PDEATHSIG``), so no worker outlives a benchmark that was killed."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG


def stop_process_groups(processes: list[subprocess.Popen[bytes]], timeout: float = 30.0) -> None:
    """SIGTERM the process group of each of ``processes`` still running (each started with
    ``start_new_session``), then wait for each; SIGKILL a group not gone within ``timeout`` seconds."""
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


class _Fleet:
    def __init__(
        self, address: str, provider_port: int, run_dir: Path, *, label: str, sessions: int, turns: int, workers: int,
        sticky_seconds: float, heartbeat_seconds: float, kill_fraction: float, database_url: str | None,
        deadline_seconds: float, progress: Callable[[str], None], think: tuple[float, float], seed: int,
        workflow_slots: int | None = None,
    ) -> None:
        self.think = think
        self.rng = random.Random(seed)
        self.address = address
        self.provider_port = provider_port
        self.run_dir = run_dir
        self.n_workers = workers
        self.heartbeat_seconds = heartbeat_seconds
        self.kill_fraction = kill_fraction
        self.store_url = database_url or f"sqlite:///{run_dir / 'agentrt.db'}"
        self.task_queue = f"fleet-{run_dir.name}"
        self.started = time.monotonic()
        self.deadline = self.started + deadline_seconds
        self.say = progress
        self.result = FleetResult(
            label=label, sticky_seconds=sticky_seconds, heartbeat_seconds=heartbeat_seconds, sessions=sessions,
            turns_per_session=turns, workers=workers, run_dir=str(run_dir), workflow_slots=workflow_slots,
        )
        self.sessions = [
            _Session(
                session_id=f"{run_dir.name}-s{i}",
                workspace=run_dir / "ws" / f"s{i}",
                turns=[_Turn(t, f"s{i} turn {t}: append s{i} t{t}", f"s{i} t{t}") for t in range(1, turns + 1)],
            )
            for i in range(1, sessions + 1)
        ]
        self.workers: list[subprocess.Popen[bytes]] = []
        self.completed = 0
        self.kill_time = 0.0  # time.time() just before the kill
        self.dead_identity = ""
        self.dead_activities: set[str] = set()  # sessions with an activity running on the dead worker
        self.described_late: set[str] = set()  # sessions described after the heartbeat timeout
        self.temporal: Client | None = None
        self.client: AgentClient | None = None
        self.reconciler: Reconciler | None = None

    def log(self, text: str) -> None:
        self.say(f"[fleet {self.result.label} {time.monotonic() - self.started:6.1f}s] {text}")

    def problem(self, text: str) -> None:
        self.result.problems.append(text)
        self.log(f"PROBLEM {text}")

    # ------------------------------------------------------------ processes

    def write_config(self) -> Path:
        path = self.run_dir / "agentrt.toml"
        path.write_text(
            'default_profile = "loopback"\n\n'
            "[profiles.loopback]\n"
            'provider = "openai"\nmodel = "fleet-fake"\n'
            f'base_url = "http://127.0.0.1:{self.provider_port}"\n'
            "context_window = 32000\nmax_output_tokens = 1000\ntimeout_seconds = 60\n\n"
            "[temporal]\n"
            f'address = "{self.address}"\ntask_queue = "{self.task_queue}"\n\n'
            f'[store]\nurl = "{self.store_url}"\n\n'
            '[codec]\nencryption = false\n\n'
            '[worker]\nagents = ["bench._fleet_tools"]\n'
            f"sticky_schedule_to_start_seconds = {self.result.sticky_seconds}\n"
            + (f"max_concurrent_workflow_tasks = {self.result.workflow_slots}\n" if self.result.workflow_slots else "")
        )
        return path

    def worker_env(self, config: Path) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if not key.startswith("AGENTRT_")}
        env.update({
            "AGENTRT_CONFIG": str(config),
            "AGENTRT_HOME": str(self.run_dir / "home"),
            "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        })
        return env

    async def start_workers(self, config: Path) -> None:
        env = self.worker_env(config)
        logs = [self.run_dir / f"worker-{n}.log" for n in range(1, self.n_workers + 1)]
        for log in logs:
            with open(log, "ab") as out:
                self.workers.append(subprocess.Popen(
                    [sys.executable, "-m", "agentrt.cli", "worker"], cwd=self.run_dir, env=env,
                    stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                    preexec_fn=die_with_parent,
                ))
        limit = time.monotonic() + 120
        for process, log in zip(self.workers, logs):
            while "worker polling" not in log.read_text(errors="replace"):
                if process.poll() is not None or time.monotonic() > limit:
                    raise RuntimeError(f"worker {process.pid} did not start; see {log}")
                await asyncio.sleep(0.1)
        self.log(f"{self.n_workers} workers polling {self.task_queue!r}: pids {[p.pid for p in self.workers]}")

    def stop_workers(self) -> None:
        stop_process_groups(self.workers)

    # ------------------------------------------------------------ the kill

    async def kill_when_due(self) -> None:
        total = sum(len(s.turns) for s in self.sessions)
        while self.completed < self.kill_fraction * total and time.monotonic() < self.deadline:
            await asyncio.sleep(0.05)
        victim = self.workers[0]
        self.dead_identity = f"{victim.pid}@"
        self.kill_time = time.time()
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
        self.result.killed_pid = victim.pid
        self.result.kill_at = time.monotonic() - self.started
        self.log(f"SIGKILLed worker {victim.pid} after {self.completed} of {total} turns")
        began = time.monotonic()
        gate = asyncio.Semaphore(PARALLEL_DESCRIBES)
        await asyncio.gather(*(self._describe(s, gate) for s in self.sessions))
        self.result.describe_seconds = time.monotonic() - began
        self.log(
            f"described {len(self.sessions)} sessions in {self.result.describe_seconds:.1f} s: "
            f"{len(self.dead_activities)} with an activity running on the dead worker, "
            f"{len(self.described_late)} described after the heartbeat timeout"
        )

    async def _describe(self, session: _Session, gate: asyncio.Semaphore) -> None:
        assert self.temporal is not None
        async with gate:
            try:
                described = await self.temporal.workflow_service.describe_workflow_execution(
                    DescribeWorkflowExecutionRequest(
                        namespace=self.temporal.namespace,
                        execution=WorkflowExecution(workflow_id=workflow_id_for(session.session_id)),
                    ),
                    timeout=timedelta(seconds=RPC_TIMEOUT),
                )
            except Exception:  # noqa: BLE001 - not started yet
                return
        if time.time() > self.kill_time + self.heartbeat_seconds:
            self.described_late.add(session.session_id)
        for activity in described.pending_activities:
            if (
                activity.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
                and activity.last_worker_identity.startswith(self.dead_identity)
            ):
                self.dead_activities.add(session.session_id)

    # ------------------------------------------------------------ sessions

    def config_for(self, session: _Session) -> SessionConfig:
        assert self.client is not None
        session.workspace.mkdir(parents=True, exist_ok=True)
        return self.client.new_config(
            str(session.workspace), session_id=session.session_id, profile="loopback", tools=["fleet.append"],
            approval=ApprovalPolicy(read_only="allow", idempotent="allow", effectful="allow"),
            heartbeat_timeout_seconds=self.heartbeat_seconds,
        )

    async def drive(self, session: _Session) -> None:
        """The session's turns one after another, each after a pause drawn from ``think`` (the
        first after a pause drawn from 0 to its upper bound, so the sessions start spread out)."""
        await asyncio.sleep(self.rng.uniform(0.0, self.think[1]))
        for turn in session.turns:
            if turn.number > 1:
                await asyncio.sleep(self.rng.uniform(*self.think))
            self.result.turns_sent += 1
            if not await self._turn(session, turn):
                return
            self.completed += 1

    async def _turn(self, session: _Session, turn: _Turn) -> bool:
        """Send the turn's message and wait for its outcome in one update (``start_and_wait``,
        ``send_and_wait``), asked again with the same idempotency key until it ends: a repeat
        answers the first message's outcome and queues nothing. A turn that takes long may wait
        for a reconcile: those are answered in between."""
        assert self.client is not None
        key = f"{session.session_id}.t{turn.number}"
        while time.monotonic() < self.deadline:
            try:
                if turn.number == 1:
                    _, outcome = await asyncio.wait_for(
                        self.client.start_and_wait(self.config_for(session), turn.text, idempotency_key=key), TURN_TIMEOUT
                    )
                else:
                    outcome = await asyncio.wait_for(
                        self.client.send_and_wait(session.session_id, turn.text, idempotency_key=key), TURN_TIMEOUT
                    )
                turn.turn_id = outcome.turn_id
                if outcome.status in TERMINAL:
                    turn.outcome = outcome
                    return True
            except asyncio.TimeoutError:
                pass
            except Exception as err:  # noqa: BLE001 - the key makes the resend safe
                self.log(f"{session.session_id}: turn {turn.number} ({type(err).__name__}: {err}); asking again")
                await asyncio.sleep(1.0)
            await self._answer_reconciles(session)
        self.problem(f"{session.session_id}: turn {turn.number} not ended by the deadline")
        return False

    async def _answer_reconciles(self, session: _Session) -> None:
        """A turn that waits long may wait for a reconcile (a kill between the effect and its
        record): answer as an operator would, from the file."""
        assert self.client is not None
        if self.reconciler is None:
            self.reconciler = Reconciler(self.client, "fleet", self.log, RPC_TIMEOUT)
        self.result.reconciles += await self.reconciler.answer_pending(session.session_id, line_in_file(session.workspace / LOG_FILE))

    # ------------------------------------------------------------ checks

    async def check(self, store: Store) -> None:
        assert self.client is not None
        gate = asyncio.Semaphore(PARALLEL_RPCS)
        await asyncio.gather(*(self._check(session, store, gate) for session in self.sessions))

    async def _check(self, session: _Session, store: Store, gate: asyncio.Semaphore) -> None:
        assert self.client is not None and self.temporal is not None
        result = self.result
        sid = session.session_id
        lines = await asyncio.to_thread(read_lines, session.workspace / LOG_FILE)
        counts = collections.Counter(lines)
        result.duplicates += sum(1 for n in counts.values() if n > 1)
        for line, n in counts.items():
            if n > 1:
                self.problem(f"{sid}: {line!r} appended {n} times")
        for turn in session.turns:
            if turn.outcome is None:
                continue
            if turn.outcome.status == "completed":
                result.turns_completed += 1
                if counts[turn.line] != 1:
                    result.lost += 1
                    self.problem(f"{sid}: {turn.turn_id} completed, its line {turn.line!r} appended {counts[turn.line]} times")
            else:
                result.turns_failed += 1
                self.problem(f"{sid}: {turn.turn_id} ended {turn.outcome.status}: {turn.outcome.error}")
        async with gate:
            assert self.client is not None
            events = await workflow_events(self.client, store, sid, RPC_TIMEOUT)
            history = await self.temporal.get_workflow_handle(workflow_id_for(sid)).fetch_history()
        stored = await asyncio.to_thread(store.events, sid, 0, 100_000)
        messages = await asyncio.to_thread(store.messages, sid)
        if any(t.outcome is None for t in session.turns):
            result.stuck += 1
            waiting = sorted(open_reconciles(events))
            self.problem(f"{sid}: a turn did not end{f' (waits for reconcile {waiting})' if waiting else ''}")
        result.lost += count_lost(sid, session.turns, events, stored, messages, counts, "fleet.append", self.problem)
        result.live_timeouts += live_task_timeouts(history.events, self.dead_identity)
        held = held_session(
            sid, history.events, self.dead_identity, self.kill_time, sid in self.dead_activities, sid in self.described_late
        )
        if held is not None:
            result.held.append(held)
            with open(self.run_dir / "held.txt", "a") as out:
                out.write(f"{sid} {held.kind}: next step {held.next_step} after {held.delay} s, {held.queued} s of it queued\n")
                out.writelines(f"  {entry}\n" for entry in timeline(history.events, self.kill_time))


    async def settle(self, store: Store) -> None:
        """Wait (at most 60 s) until the store holds each session's last event."""
        assert self.client is not None
        waiting = list(self.sessions)
        limit = time.monotonic() + 60
        while waiting and time.monotonic() < limit:
            still = []
            for session in waiting:
                try:
                    page = await asyncio.wait_for(self.client.events(session.session_id, limit=1), RPC_TIMEOUT)
                    stored = await asyncio.to_thread(store.events, session.session_id, page.last_seq - 1, 10)
                    if not any(e.seq == page.last_seq for e in stored):
                        still.append(session)
                except Exception:  # noqa: BLE001
                    still.append(session)
            waiting = still
            if waiting:
                await asyncio.sleep(0.5)

    # ------------------------------------------------------------ the run

    async def report_progress(self) -> None:
        """Every 30 s: the turns so far; a worker that died without being killed is a problem."""
        total = sum(len(s.turns) for s in self.sessions)
        reported: set[int] = set()
        while True:
            await asyncio.sleep(30)
            self.log(f"{self.completed} of {total} turns completed, {self.result.turns_sent} sent")
            for process in self.workers:
                if process.poll() is not None and process.pid != self.result.killed_pid and process.pid not in reported:
                    reported.add(process.pid)
                    self.problem(f"worker {process.pid} exited on its own (code {process.returncode}); see its log")

    async def run(self) -> FleetResult:
        config = self.write_config()
        store = await asyncio.to_thread(Store.open, self.store_url)
        try:
            plugin = AgentrtPlugin(AgentrtConfig.load(config, env={}), store)
            self.temporal = await connect_when_ready(self.address, "default", [plugin])
            self.client = AgentClient(self.temporal, task_queue=self.task_queue, principal=OWNER)
            await self.start_workers(config)
            self.log(f"{len(self.sessions)} sessions x {self.result.turns_per_session} turns")
            killer = asyncio.create_task(self.kill_when_due())
            progress = asyncio.create_task(self.report_progress())
            await asyncio.gather(*(self.drive(s) for s in self.sessions))
            await killer
            progress.cancel()
            self.log(f"every driver finished; {self.completed} turns completed; checking")
            await self.settle(store)
            await self.check(store)
        finally:
            self.stop_workers()
            store.close()
            self.result.elapsed = time.monotonic() - self.started
        return self.result


async def run_fleet(
    address: str, provider_port: int, run_dir: Path, *, label: str, sessions: int, turns: int, workers: int = 3,
    sticky_seconds: float = 3.0, heartbeat_seconds: float = 3.0, kill_fraction: float = 0.3,
    database_url: str | None = None, deadline_seconds: float | None = None, progress: Callable[[str], None] = print,
    think: tuple[float, float] = (0.0, 0.0), seed: int = 1, workflow_slots: int | None = None,
) -> FleetResult:
    """One fleet run (see the module docstring) in ``run_dir`` (created), against the server at
    ``address`` and the loopback model on ``provider_port``; each session pauses ``think`` (a range
    of seconds, drawn with ``seed``) before each turn; ``workflow_slots``: the workers' ``[worker]
    max_concurrent_workflow_tasks`` (None: the SDK's default). Every process it starts is stopped before it
    returns."""
    run_dir.mkdir(parents=True)
    fleet = _Fleet(
        address, provider_port, run_dir, label=label, sessions=sessions, turns=turns, workers=workers,
        sticky_seconds=sticky_seconds, heartbeat_seconds=heartbeat_seconds, kill_fraction=kill_fraction,
        database_url=database_url, progress=progress, think=think, seed=seed, workflow_slots=workflow_slots,
        deadline_seconds=deadline_seconds or 300 + turns * think[1] + 1.0 * sessions * turns,
    )
    return await fleet.run()
