"""How soon a turn interrupted by a worker crash goes on once a new worker starts.

    python -m bench.recovery [--kills 10] [--seed 0] [--rounds 15] [--heartbeat-timeout SECONDS]
        [--sticky-timeout SECONDS] [--database-url URL] [--workdir DIR]

Starts its own Temporal dev server (free ports, headless, database in a temporary
directory), a SQLite store (or ``--database-url``) and an agentrt worker process
(``bench._bench_worker``, the worker ``agentrt worker`` builds). Then, ``--kills`` times:

1. start a session whose one turn has R rounds (``--rounds``, default 15): each round the
   scripted model answers after a delay drawn from 0.3-1.0 s (``delay_seconds``) with one
   ``fs.read`` of a 5 KB workspace file, so a model call is usually in flight;
2. SIGKILL the worker's process group at a random moment 1-4 s after the start request
   (``--seed``), i.e. somewhere in rounds 1-6: a model call, a tool call, a store write,
   a workflow task or the gap between them;
3. read what was in flight from Temporal (``DescribeWorkflowExecution``: pending activities
   with their timeouts and last heartbeat, the pending workflow task) and the session's
   last stored event;
4. start a new worker process at once and poll the store (every 20 ms) for the session's
   next event: the resume time is from the new worker's process start (just before its
   spawn) to that event being visible in the store; the work time is from the same start
   to the new worker's first write for the session (the retried model call's "started"
   usage receipt, or that event), i.e. without the retried call's own run;
5. wait for the turn to complete (the next kill hits the new worker).

The session config is the default one (``SessionConfig``: heartbeat timeout 3 s, model
timeout 600 s, tool timeout 300 s) except the scripted profile, the script and
``tools=["fs.read"]``; ``--heartbeat-timeout`` overrides ``heartbeat_timeout_seconds`` and
``--sticky-timeout`` the workers' ``sticky_queue_schedule_to_start_timeout`` (default
agentrt's ``STICKY_SCHEDULE_TO_START``, 3 s; the SDK's own is 10 s), to show their effect. A
killed worker's activity is retried only when Temporal times the attempt out (its heartbeat
timeout: model and tool calls), then after the retry policy's first interval (0.5 s), and
frees the session from the dead worker's sticky queue (``ResumeInterceptor``); a
workflow task the dead worker held (with the local activities it ran: store writes, fast
read-only tools) is retried after the workflow task timeout (10 s); a workflow task on the
dead worker's sticky queue moves to the normal queue after the sticky schedule-to-start
timeout, counted from the task's schedule. Each kill's
row shows what was in flight and when its timeout was due, counted from the new
worker's spawn ("due"), so what dominates the resume time can be read off.

The last line is exactly

    recovery resume_p50=<s> resume_p95=<s> resume_max=<s>

From a test (small parameters against a running server):

    report = await bench.recovery.measure(server.address, tmp_path, kills=1, heartbeat_timeout_seconds=2)
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import math
import random
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client

from agentrt.client import AgentClient, connect
from agentrt.schemas import Event, SessionConfig
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, DevServer
from agentrt.workflows.session import workflow_id_for
from bench._bench_worker import DEFAULT_STICKY_TIMEOUT_SECONDS, WorkerProcess, WorkerSettings
from bench._cli import print_progress, run_and_exit
from bench.concurrency import percentile
from bench.history import TOOL, file_content, file_name

DEFAULT_KILLS = 10
DEFAULT_ROUNDS = 15
RESULT_BYTES = 5 * 1024
MODEL_DELAY = (0.3, 1.0)
KILL_AFTER = (1.0, 4.0)
POLL_SECONDS = 0.02
TARGET_SECONDS = 5.0
PRINCIPAL = "bench"
PROMPT = "Read the workspace files one by one, one per round, then say done."

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


# ---------------------------------------------------------------------------- results


@dataclass
class InFlight:
    """Something the killed worker was running: an activity or a workflow task.

    ``due`` is when Temporal gives up on the dead worker's attempt (``time.monotonic()``
    clock): the last heartbeat (or the attempt's start) plus the heartbeat timeout, or the
    start plus the start-to-close timeout; for a workflow task its schedule plus the sticky
    schedule-to-start timeout. None when it was not started (nothing to time out).
    """

    kind: str
    name: str
    state: str
    timeout: str = ""
    due: float | None = None

    @property
    def label(self) -> str:
        return f"{self.name} {self.state}" + (f" ({self.timeout})" if self.timeout else "")


@dataclass
class Kill:
    number: int
    session_id: str
    kill_after: float
    in_flight: list[InFlight]
    last_seq: int
    spawned_at: float = 0.0
    ready_at: float = 0.0
    resumed_at: float | None = None
    next_event: str = ""
    status: str = "pending"
    working_at: float | None = None  # the new worker's first write for the session (an attempt's receipt or an event)

    @property
    def resume_seconds(self) -> float | None:
        return None if self.resumed_at is None else self.resumed_at - self.spawned_at

    @property
    def work_seconds(self) -> float | None:
        """From the new worker's spawn to its first write for the session: the retried model
        call's "started" receipt, or an event when nothing had to be retried."""
        return None if self.working_at is None else self.working_at - self.spawned_at

    @property
    def worker_start_seconds(self) -> float:
        return self.ready_at - self.spawned_at

    @property
    def due_seconds(self) -> float | None:
        """Seconds from the new worker's spawn to the latest due time of what was in flight."""
        dues = [f.due for f in self.in_flight if f.due is not None]
        return max(dues) - self.spawned_at if dues else None

    @property
    def cause(self) -> str:
        """The in-flight item whose timeout came last, the one the turn had to wait for."""
        timed = [f for f in self.in_flight if f.due is not None]
        if timed:
            latest = max(timed, key=lambda f: f.due or 0.0)
            return f"{latest.name} ({latest.timeout})"
        return "nothing started" if not self.in_flight else self.in_flight[0].label


@dataclass
class RecoveryReport:
    heartbeat_timeout_seconds: float
    sticky_timeout_seconds: float
    rounds: int
    seed: int
    database_url: str
    kills: list[Kill] = field(default_factory=list)

    @property
    def resumes(self) -> list[float]:
        return [k.resume_seconds for k in self.kills if k.resume_seconds is not None]

    @property
    def completed(self) -> int:
        return sum(1 for k in self.kills if k.status == "completed")

    def resume(self, q: float) -> float:
        return percentile(self.resumes, q)

    @property
    def resume_p50(self) -> float:
        return statistics.median(self.resumes) if self.resumes else math.nan

    @property
    def resume_max(self) -> float:
        return max(self.resumes, default=math.nan)

    def causes(self) -> dict[str, list[float]]:
        by_cause: dict[str, list[float]] = collections.defaultdict(list)
        for kill in self.kills:
            if kill.resume_seconds is not None:
                by_cause[kill.cause].append(kill.resume_seconds)
        return dict(by_cause)

    def settings_text(self) -> str:
        return (
            f"session config: SessionConfig defaults (heartbeat_timeout_seconds={self.heartbeat_timeout_seconds:g}, "
            f"model_timeout_seconds=600, tool_timeout_seconds=300); store writes start_to_close 30 s; retry first "
            f"interval 0.5 s; worker sticky schedule-to-start timeout {self.sticky_timeout_seconds:g} s; turn of {self.rounds} rounds, model "
            f"delay {MODEL_DELAY[0]:g}-{MODEL_DELAY[1]:g} s; kill {KILL_AFTER[0]:g}-{KILL_AFTER[1]:g} s after the start "
            f"request; seed {self.seed}; store {self.database_url}"
        )

    @property
    def works(self) -> list[float]:
        return [k.work_seconds for k in self.kills if k.work_seconds is not None]

    def table(self) -> str:
        lines = [
            f"{'kill':>4}{'at s':>6}{'up s':>6}{'due s':>7}{'work s':>8}{'resume s':>10}  {'next event':<26}{'status':<11}in flight"
        ]
        for k in self.kills:
            due = "-" if k.due_seconds is None else f"{k.due_seconds:.1f}"
            work = "-" if k.work_seconds is None else f"{k.work_seconds:.2f}"
            resume = "-" if k.resume_seconds is None else f"{k.resume_seconds:.2f}"
            flight = "; ".join(f.label for f in k.in_flight) or "nothing"
            lines.append(
                f"{k.number:>4}{k.kill_after:>6.1f}{k.worker_start_seconds:>6.1f}{due:>7}{work:>8}{resume:>10}  "
                f"{k.next_event:<26}{k.status:<11}{flight}"
            )
        lines.append(
            "at: kill time after the start request; up: new worker spawn -> polling; due: new worker spawn -> "
            "Temporal times out the dead worker's attempt; work: new worker spawn -> its first write for the "
            "session (the retried call's receipt); resume: new worker spawn -> next event in the store "
            "(after the retried call's own run)"
        )
        if self.works:
            lines.append(
                f"work resumed: median {statistics.median(self.works):.2f} s, max {max(self.works):.2f} s after the "
                f"restart; within {TARGET_SECONDS:g} s: {sum(1 for w in self.works if w <= TARGET_SECONDS)}/{len(self.kills)}"
            )
        for cause, values in sorted(self.causes().items(), key=lambda item: -len(item[1])):
            lines.append(
                f"waited for {cause}: {len(values)} kill(s), resume median {statistics.median(values):.2f} s, "
                f"max {max(values):.2f} s"
            )
        slow = [k for k in self.kills if k.resume_seconds is not None and k.resume_seconds > TARGET_SECONDS]
        lines.append(f"resumed within {TARGET_SECONDS:g} s of the restart: {len(self.resumes) - len(slow)}/{len(self.kills)}")
        return "\n".join(lines)

    def line(self) -> str:
        return (
            f"recovery resume_p50={self.resume_p50:.2f} resume_p95={self.resume(95):.2f} "
            f"resume_max={self.resume_max:.2f}"
        )


# ---------------------------------------------------------------------------- the run


def _timestamp(proto_time) -> float | None:  # type: ignore[no-untyped-def]
    """A protobuf Timestamp as ``time.monotonic()`` seconds (None when unset)."""
    if proto_time is None or (proto_time.seconds == 0 and proto_time.nanos == 0):
        return None
    wall = proto_time.seconds + proto_time.nanos / 1e9
    return time.monotonic() - (time.time() - wall)


def _seconds(duration) -> float:  # type: ignore[no-untyped-def]
    return duration.seconds + duration.nanos / 1e9


async def in_flight(temporal: Client, workflow_id: str, sticky_timeout: float = 10.0) -> list[InFlight]:
    """What the workflow waits for right now: pending activities and the pending workflow task."""
    description = (await temporal.get_workflow_handle(workflow_id).describe()).raw_description
    found = []
    for activity in description.pending_activities:
        state = PendingActivityState.Name(activity.state).removeprefix("PENDING_ACTIVITY_STATE_").lower()
        options = activity.activity_options
        heartbeat = _seconds(options.heartbeat_timeout) if options.HasField("heartbeat_timeout") else 0.0
        start_to_close = _seconds(options.start_to_close_timeout)
        started = _timestamp(activity.last_started_time) if state == "started" else None
        due = None
        if started is not None and heartbeat > 0:
            last = _timestamp(activity.last_heartbeat_time) or started
            due, timeout = max(last, started) + heartbeat, f"heartbeat timeout {heartbeat:g} s"
        elif started is not None:
            due, timeout = started + start_to_close, f"start-to-close {start_to_close:g} s"
        else:
            timeout = ""
        found.append(InFlight("activity", activity.activity_type.name, state, timeout, due))
    if description.HasField("pending_workflow_task"):
        task = description.pending_workflow_task
        scheduled = _timestamp(task.scheduled_time)
        due = None if scheduled is None else scheduled + sticky_timeout
        found.append(InFlight("workflow_task", "workflow task", "pending", f"sticky timeout {sticky_timeout:g} s", due))
    return found


def _last_seq(store: Store, session_id: str) -> int:
    last = 0
    while events := store.events(session_id, last, 1000):
        last = events[-1].seq
    return last


def _receipts(store: Store, session_id: str) -> set[tuple[str, int, int]]:
    return {(r.turn_id, r.round, r.attempt) for r in store.usage_receipts(session_id)}


async def _watch(
    store: Store, session_id: str, after_seq: int, receipts: set[tuple[str, int, int]], timeout: float
) -> tuple[float | None, tuple[float, Event] | None]:
    """Poll the store until the session has an event after ``after_seq``. Returns when its
    first new write was seen (a usage receipt not in ``receipts``, or that event; a
    ``time.monotonic()``) and (when the event was seen, the event); None for what did not come."""
    first_write: float | None = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = await asyncio.to_thread(store.events, session_id, after_seq, 1)
        now = time.monotonic()
        if events:
            return first_write or now, (now, events[0])
        if first_write is None and await asyncio.to_thread(_receipts, store, session_id) - receipts:
            first_write = now
        await asyncio.sleep(POLL_SECONDS)
    return first_write, None


class _Recovery:
    def __init__(self, address: str, workdir: Path, settings: WorkerSettings, rounds: int, seed: int,
                 heartbeat_timeout_seconds: float | None, progress: Progress) -> None:
        self.address = address
        self.workdir = workdir
        self.settings = settings
        self.rounds = rounds
        self.rng = random.Random(seed)
        self.heartbeat = heartbeat_timeout_seconds
        self.say = progress
        self.task_queue = f"recovery-{uuid.uuid4().hex[:8]}"
        self.workspace = workdir / "workspace"
        self.worker: WorkerProcess | None = None
        self.generation = 0

    def prepare(self) -> None:
        self.workspace.mkdir(parents=True, exist_ok=True)
        for k in range(1, self.rounds + 1):
            (self.workspace / file_name(k)).write_text(file_content(k, RESULT_BYTES), encoding="ascii")

    def script(self, number: int) -> Path:
        turns: list[dict[str, object]] = [
            {
                "text": f"Reading {file_name(k)}.",
                "delay_seconds": round(self.rng.uniform(*MODEL_DELAY), 3),
                "tool_calls": [{"name": TOOL, "arguments": {"path": file_name(k)}}],
            }
            for k in range(1, self.rounds + 1)
        ]
        turns.append({"text": "done", "delay_seconds": round(self.rng.uniform(*MODEL_DELAY), 3)})
        path = self.workdir / f"script-{number}.json"
        path.write_text(json.dumps({"turns": turns}), encoding="utf-8")
        return path

    async def start_worker(self) -> WorkerProcess:
        self.generation += 1
        self.worker = WorkerProcess("agentrt", self.address, self.task_queue, self.settings, self.workdir / "worker.log")
        return await self.worker.start()

    def config(self, agent: AgentClient, script: Path) -> SessionConfig:
        fields: dict[str, object] = {"tools": [TOOL], "max_rounds_per_turn": self.rounds + 5}
        if self.heartbeat is not None:
            fields["heartbeat_timeout_seconds"] = self.heartbeat
        return agent.new_config(str(self.workspace), profile="scripted", script=str(script), **fields)

    async def one(self, number: int, agent: AgentClient, store: Store) -> Kill:
        config = self.config(agent, self.script(number))
        kill_after = self.rng.uniform(*KILL_AFTER)
        began = time.monotonic()
        started = await agent.start(config, PROMPT)
        await asyncio.sleep(max(0.0, began + kill_after - time.monotonic()))
        assert self.worker is not None
        self.worker.kill()
        flight = await in_flight(
            agent.temporal, workflow_id_for(started.session_id), self.settings.sticky_timeout_seconds
        )
        last = await asyncio.to_thread(_last_seq, store, started.session_id)
        receipts = await asyncio.to_thread(_receipts, store, started.session_id)
        kill = Kill(number, started.session_id, kill_after, flight, last)
        # The store does not move while no worker runs: poll it from the new worker's spawn on.
        watch = asyncio.create_task(_watch(store, started.session_id, last, receipts, timeout=600.0))
        worker = await self.start_worker()
        kill.spawned_at, kill.ready_at = worker.spawned_at, worker.ready_at
        kill.working_at, seen = await watch
        if seen is not None:
            kill.resumed_at, event = seen
            kill.next_event = event.type
        outcome = await asyncio.wait_for(agent.wait(started.session_id, started.turn_id), 600.0)
        kill.status = outcome.status
        self.say(
            f"kill {number}: at {kill_after:.1f} s, in flight: {'; '.join(f.label for f in flight) or 'nothing'}; "
            f"resumed {kill.resume_seconds if kill.resume_seconds is not None else float('nan'):.2f} s after the "
            f"new worker's spawn ({kill.next_event or 'no event'}); turn {outcome.status}"
        )
        return kill

    async def run(self, kills: int, report: RecoveryReport) -> RecoveryReport:
        await asyncio.to_thread(self.prepare)
        store = await asyncio.to_thread(Store.open, self.settings.database_url)
        try:
            config = AgentrtConfig(temporal_address=self.address, database_url=self.settings.database_url)
            temporal = await connect(self.address, plugin=AgentrtPlugin(config, store))
            agent = AgentClient(temporal, task_queue=self.task_queue, principal=PRINCIPAL)
            await self.start_worker()
            for number in range(1, kills + 1):
                report.kills.append(await self.one(number, agent, store))
        finally:
            if self.worker is not None:
                self.worker.kill()
            store.close()
        return report


async def measure(
    address: str,
    workdir: Path,
    *,
    kills: int = 1,
    seed: int = 0,
    rounds: int = DEFAULT_ROUNDS,
    heartbeat_timeout_seconds: float | None = None,
    sticky_timeout_seconds: float = DEFAULT_STICKY_TIMEOUT_SECONDS,
    database_url: str = "",
    progress: Progress = _quiet,
) -> RecoveryReport:
    """``kills`` kill-and-restart cycles against the server at ``address`` (a fresh task queue,
    worker processes of its own; files under ``workdir``, a SQLite store there unless
    ``database_url``). ``heartbeat_timeout_seconds`` None keeps ``SessionConfig``'s default;
    ``sticky_timeout_seconds`` is the workers' sticky schedule-to-start timeout."""
    check_parameters(kills, rounds, heartbeat_timeout_seconds, sticky_timeout_seconds)
    workdir.mkdir(parents=True, exist_ok=True)
    url = database_url or f"sqlite:///{workdir / 'agentrt.db'}"
    heartbeat = heartbeat_timeout_seconds if heartbeat_timeout_seconds is not None else (
        SessionConfig.model_fields["heartbeat_timeout_seconds"].default
    )
    settings = WorkerSettings(database_url=url, sticky_timeout_seconds=sticky_timeout_seconds)
    report = RecoveryReport(
        heartbeat_timeout_seconds=heartbeat, sticky_timeout_seconds=sticky_timeout_seconds, rounds=rounds, seed=seed,
        database_url=url,
    )
    recovery = _Recovery(address, workdir, settings, rounds, seed, heartbeat_timeout_seconds, progress)
    return await recovery.run(kills, report)


def check_parameters(
    kills: int, rounds: int, heartbeat_timeout_seconds: float | None, sticky_timeout_seconds: float
) -> None:
    """Raise ``ValueError`` for parameters the benchmark cannot run with."""
    if kills < 1:
        raise ValueError(f"kills must be >= 1, got {kills}")
    if rounds < 6:
        raise ValueError(f"rounds must be >= 6 (the kill lands 1-4 s into the turn), got {rounds}")
    if heartbeat_timeout_seconds is not None and heartbeat_timeout_seconds <= 0:
        raise ValueError(f"heartbeat timeout must be > 0, got {heartbeat_timeout_seconds:g}")
    if sticky_timeout_seconds <= 0:
        raise ValueError(f"sticky timeout must be > 0, got {sticky_timeout_seconds:g}")


async def run_benchmark(*, workdir: Path | None = None, progress: Progress = _quiet, **options: object) -> RecoveryReport:
    """Self-contained: a dev server in ``workdir`` (default: a temporary directory, removed
    afterwards), ``measure(**options)``, then everything stopped."""
    own_dir = workdir is None
    directory = Path(tempfile.mkdtemp(prefix="agentrt-recovery-")) if workdir is None else workdir
    directory.mkdir(parents=True, exist_ok=True)
    server = DevServer.on_free_ports(directory / "server")
    try:
        await server.start()
        progress(f"temporal dev server on {server.address}; files in {directory}")
        return await measure(server.address, directory, progress=progress, **options)  # type: ignore[arg-type]
    finally:
        server.stop()
        if own_dir:
            shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.recovery", description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=DEFAULT_KILLS, help="worker kills, one turn each (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="seed for kill moments and model delays (default 0)")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="tool rounds per turn (default 15)")
    parser.add_argument("--heartbeat-timeout", type=float, default=None,
                        help="session heartbeat_timeout_seconds (default: SessionConfig's, 3)")
    parser.add_argument("--sticky-timeout", type=float, default=DEFAULT_STICKY_TIMEOUT_SECONDS,
                        help="workers' sticky_queue_schedule_to_start_timeout in seconds (default: agentrt's, 3)")
    parser.add_argument("--database-url", default="", help="agentrt store (default SQLite in the run directory)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep run files here (default: a removed temp dir)")
    args = parser.parse_args(argv)
    try:
        check_parameters(args.kills, args.rounds, args.heartbeat_timeout, args.sticky_timeout)
    except ValueError as err:
        parser.error(str(err))
    run_and_exit(
        lambda: run_benchmark(
            workdir=args.workdir, progress=print_progress, kills=args.kills, seed=args.seed,
            rounds=args.rounds, heartbeat_timeout_seconds=args.heartbeat_timeout,
            sticky_timeout_seconds=args.sticky_timeout, database_url=args.database_url,
        ),
        lambda report: report.completed == len(report.kills),
        settings=True,
    )


if __name__ == "__main__":
    main()
