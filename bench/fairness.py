"""Whether one tenant's flood holds up another tenant's interactive turns, without lanes and with them.

    python -m bench.fairness [--flood 500] [--turns 20] [--interval 2.0] [--model-seconds 2.0]
        [--max-concurrent-activities 4] [--max-concurrent-workflow-tasks N] [--start-concurrency 50]
        [--workdir DIR]

Starts its own Temporal dev server (free ports, headless; task queue fairness on and one write
partition per task queue, as every embedded server has them, ``DevServer``; its SQLite file as
``bench.concurrency`` keeps it). Three phases run one after the other on that server, on one task
queue served by one agentrt worker process (``bench._bench_worker``), after three turns of B
that warm it up and are not measured; each flood has ended before the next phase starts:

- **unloaded**: tenant B alone sends ``--turns`` (20) interactive turns, one every ``--interval``
  (2 s), each the first turn of a new session (``start_and_wait``): a person opening a chat;
- **flood, no lanes**: tenant A starts ``--flood`` (500) sessions, one turn each, at most
  ``--start-concurrency`` (50) starts in flight; once every one of them has accepted its message
  (A has 500 turns queued), B sends its turns as above. Both clients have ``Lanes(enabled=False)``:
  no priority, no fairness key: Temporal's order of arrival;
- **flood, lanes**: the same with ``Lanes()``, agentrt's default: A's sessions and B's turns are
  both interactive (priority 2), so only the fairness key (the owner's tenant) tells them apart.

Every model call is the scripted model answering after ``--model-seconds`` (2 s) of an
asynchronous sleep: a model that thinks, holding an activity slot and no CPU. The worker's
``--max-concurrent-activities`` (4) slots are what the tenants share: A's turns go through them
at about slots / model-seconds (2) a second, so A's 500 queued turns take minutes, and the CPU
(2 cores shared by server, worker, this client and whatever else runs) is not what runs out. B's
turns need a quarter of the slots (a 2 s call every 2 s of 4 slots): less than its fair half, so
with fairness B's calls wait only for the next slot to free, not behind A's queue.
Once B's last turn has ended, A's sessions still running are terminated (the phase is over);
without lanes B's turns wait behind all of A's, so that phase lasts until A's flood has drained.

What is measured: each B turn's latency, from its ``start_and_wait`` call to its outcome; its
p50 and p95 per phase, and the flood phases' over the unloaded ones (the ratios); from B's
histories, how long its workflow tasks and its activities waited on their task queues (median
per turn, ``q wft`` and ``q act``: what lanes order) and the rest of its latency (``rest``: the
model call and the CPU time of server, worker and client, which a busy machine stretches); A's turns not yet ended when B's first turn started and when
its last ended. The load average before and after is printed: a busy machine shows
in the unloaded latency too. The last line is exactly

    fairness no_lanes_p95_vs_unloaded=<ratio> lanes_p95_vs_unloaded=<ratio>
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import math
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.service import RPCError

from agentrt.client import AgentClient
from agentrt.schemas import Lanes, session_workflow_id
from agentrt.store import Store
from agentrt.worker import DevServer
from bench._bench_worker import WorkerProcess, WorkerSettings, agentrt_connection
from bench._cli import print_progress, run_and_exit
from bench.concurrency import SERVER_ARGS, percentile

PHASES = ("unloaded", "flood, no lanes", "flood, lanes")
TENANT_A = "tenant-a"
TENANT_B = "tenant-b"
TURN_TIMEOUT_SECONDS = 1800.0
WARM_TURNS = 3  # turns of B before the phases, not measured
DEFAULT_SETTINGS = WorkerSettings(max_concurrent_activities=4)

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


@dataclass
class Turn:
    """One session's first turn: ``started`` and ``ended`` (``time.monotonic()``), its ``status``."""

    started: float
    ended: float
    status: str
    session_id: str = ""
    # Seconds its workflow tasks and its activity tasks waited on their task queues (from history).
    workflow_tasks_queued: float = math.nan
    activities_queued: float = math.nan

    @property
    def latency(self) -> float:
        return self.ended - self.started


@dataclass
class Phase:
    name: str
    b_turns: list[Turn]
    a_turns: list[Turn] = field(default_factory=list)
    a_accepted_seconds: float = math.nan  # from A's first start until all its sessions had accepted their message
    a_left_at_b_start: int = 0  # A's turns not yet ended when B's first turn started
    a_left_at_b_end: int = 0  # and when B's last turn ended

    def latency(self, q: float) -> float:
        return percentile([t.latency for t in self.b_turns if t.status == "completed"], q)

    def rest(self, q: float) -> float:
        """The ``q`` percentile of B's turns' latency less their time on task queues: the time their
        tasks ran (model calls included) and moved between client, server and worker."""
        rests = [t.latency - t.workflow_tasks_queued - t.activities_queued for t in self.b_turns if t.status == "completed"]
        return percentile([r for r in rests if not math.isnan(r)], q)

    def queued(self, q: float, activities: bool) -> float:
        """The ``q`` percentile of B's turns' time on task queues: their activities' or their workflow tasks'."""
        waits = [t.activities_queued if activities else t.workflow_tasks_queued for t in self.b_turns if t.status == "completed"]
        return percentile([w for w in waits if not math.isnan(w)], q)

    @property
    def b_completed(self) -> int:
        return sum(1 for t in self.b_turns if t.status == "completed")

    @property
    def a_completed(self) -> int:
        return sum(1 for t in self.a_turns if t.status == "completed")


@dataclass
class FairnessReport:
    flood: int
    turns: int
    interval: float
    model_seconds: float
    settings: WorkerSettings
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float] = (math.nan, math.nan, math.nan)
    phases: list[Phase] = field(default_factory=list)

    def phase(self, name: str) -> Phase | None:
        return next((p for p in self.phases if p.name == name), None)

    def ratio(self, name: str, q: float) -> float:
        base, other = self.phase("unloaded"), self.phase(name)
        if base is None or other is None or not base.latency(q) > 0:
            return math.nan
        return other.latency(q) / base.latency(q)

    @property
    def passed(self) -> bool:
        """Every B turn completed, and in every flood B's turns came while A had turns queued."""
        return all(
            p.b_completed == len(p.b_turns) and (p.name == "unloaded" or p.a_left_at_b_start > 0) for p in self.phases
        )

    def settings_text(self) -> str:
        load = " ".join(f"{x:.2f}" for x in self.load_before)
        return "\n".join([
            f"worker: {self.settings.describe()}",
            (
                f"workload: tenant A queues {self.flood} sessions of one turn; then tenant B sends {self.turns} turns, one "
                f"every {self.interval:g} s, each a new session; every model call answers after {self.model_seconds:g} s"
            ),
            f"machine: {os.cpu_count()} CPUs shared by server, worker, client and other processes; load average before {load}",
        ])

    def table(self) -> str:
        head = (
            f"{'phase':<17}{'B done':>8}{'p50 s':>8}{'p95 s':>8}{'p50 x':>7}{'p95 x':>7}{'q wft':>7}{'q act':>7}{'rest':>7}"
            f"{'A queued in s':>15}{'A left at B start/end':>23}"
        )
        lines = [head]
        for p in self.phases:
            line = (
                f"{p.name:<17}{p.b_completed:>5}/{len(p.b_turns):<2}{p.latency(50):>8.2f}{p.latency(95):>8.2f}"
                f"{self.ratio(p.name, 50):>7.2f}{self.ratio(p.name, 95):>7.2f}{p.queued(50, False):>7.2f}{p.queued(50, True):>7.2f}"
                f"{p.rest(50):>7.2f}"
            )
            if p.name != "unloaded":
                line += f"{p.a_accepted_seconds:>15.1f}{f'{p.a_left_at_b_start}/{p.a_left_at_b_end}':>23}"
            lines.append(line)
        for p in self.phases:
            lines.append(f"B's turns, {p.name} (s): " + ", ".join(f"{t.latency:.2f}" for t in p.b_turns))
        for p in self.phases:
            failed = [t.status for t in p.b_turns if t.status != "completed"]
            if failed:
                lines.append(f"{p.name}: {len(failed)} of B's turns not completed, e.g. {failed[0]}")
        lines.append("load average after: " + " ".join(f"{x:.2f}" for x in self.load_after))
        return "\n".join(lines)

    def line(self) -> str:
        return (
            f"fairness no_lanes_p95_vs_unloaded={self.ratio('flood, no lanes', 95):.2f} "
            f"lanes_p95_vs_unloaded={self.ratio('flood, lanes', 95):.2f}"
        )


async def queued_seconds(temporal: Client, workflow_id: str) -> tuple[float, float]:
    """How long the workflow tasks and the activity tasks of ``workflow_id`` waited on their task
    queues, each in all: a task's started event time minus its scheduled event time (history)."""
    scheduled: dict[int, float] = {}
    workflow_tasks = activities = 0.0
    async for event in temporal.get_workflow_handle(workflow_id).fetch_history_events():
        at = event.event_time.ToDatetime().timestamp()
        if event.event_type in (EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED):
            scheduled[event.event_id] = at
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            workflow_tasks += at - scheduled.get(event.workflow_task_started_event_attributes.scheduled_event_id, at)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            activities += at - scheduled.get(event.activity_task_started_event_attributes.scheduled_event_id, at)
    return workflow_tasks, activities


class _Bench:
    def __init__(self, address: str, workdir: Path, settings: WorkerSettings, model_seconds: float,
                 start_concurrency: int, progress: Progress) -> None:
        self.address = address
        self.workdir = workdir
        self.settings = settings
        self.start_concurrency = start_concurrency
        self.say = progress
        self.workspace = workdir / "workspace"
        self.workspace.mkdir(parents=True, exist_ok=True)
        (self.workspace / "README.md").write_text("# fairness\n")
        self.script = workdir / "script.json"
        self.script.write_text(json.dumps({"turns": [{"text": "done", "delay_seconds": model_seconds}]}))
        self.store: Store | None = None
        self.temporal: Client | None = None

    async def __aenter__(self) -> "_Bench":
        self.store, self.temporal = await agentrt_connection(self.address, self.settings.database_url)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.store is not None:
            self.store.close()

    def _client(self, task_queue: str, tenant: str, lanes: Lanes) -> AgentClient:
        assert self.temporal is not None
        return AgentClient(self.temporal, task_queue=task_queue, principal=tenant, store=self.store, lanes=lanes)

    async def _turn(self, client: AgentClient, session_id: str, slots: asyncio.Semaphore | None = None,
                    accepted: Callable[[], None] | None = None) -> Turn:
        """Session ``session_id``'s first turn (``start_and_wait``); with ``slots``, a start slot held
        until the session accepted the message, when ``accepted`` is called."""
        config = client.new_config(str(self.workspace), session_id=session_id, profile="scripted", script=str(self.script), tools=[])
        held = False
        if slots is not None:
            await slots.acquire()
            held = True

        def on_accepted() -> None:
            nonlocal held
            if held and slots is not None:
                held = False
                slots.release()
            if accepted is not None:
                accepted()

        began = time.monotonic()
        try:
            _, outcome = await asyncio.wait_for(
                client.start_and_wait(config, "hello", on_accepted=on_accepted if slots is not None else None),
                TURN_TIMEOUT_SECONDS,
            )
            return Turn(began, time.monotonic(), outcome.status, session_id)
        except Exception as err:  # noqa: BLE001 - counted as a turn that did not complete
            return Turn(began, time.monotonic(), f"{type(err).__name__}: {err}"[:200], session_id)
        finally:
            if held and slots is not None:
                slots.release()

    async def _b_turns(self, client: AgentClient, turns: int, interval: float) -> list[Turn]:
        tasks = []
        begin = time.monotonic()
        for i in range(turns):
            delay = begin + i * interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(self._turn(client, f"b-{uuid.uuid4().hex[:12]}")))
        return list(await asyncio.gather(*tasks))

    async def _flood(self, a: AgentClient, b: AgentClient, name: str, flood: int, turns: int, interval: float) -> Phase:
        """A queues ``flood`` turns; once all are accepted, B sends its; then A's leftovers are terminated."""
        assert self.temporal is not None
        slots = asyncio.Semaphore(self.start_concurrency)
        all_accepted = asyncio.Event()
        count = 0

        def accepted() -> None:
            nonlocal count
            count += 1
            if count == flood:
                all_accepted.set()

        ids = [f"a-{uuid.uuid4().hex[:12]}" for _ in range(flood)]
        began = time.monotonic()
        a_tasks = [asyncio.create_task(self._turn(a, sid, slots, accepted)) for sid in ids]
        await all_accepted.wait()
        queued_in = time.monotonic() - began
        left_at_start = sum(1 for task in a_tasks if not task.done())
        self.say(f"{name}: A's {flood} sessions accepted their turns in {queued_in:.1f} s ({left_at_start} not ended); B starts")
        b_turns = await self._b_turns(b, turns, interval)
        left = sum(1 for task in a_tasks if not task.done())
        for sid, task in zip(ids, a_tasks):
            if not task.done():
                try:
                    await self.temporal.get_workflow_handle(session_workflow_id(sid)).terminate("benchmark phase over")
                except RPCError:
                    pass  # ended meanwhile
        return Phase(name, b_turns, list(await asyncio.gather(*a_tasks)), queued_in, left_at_start, left)

    async def phase(self, task_queue: str, name: str, flood: int, turns: int, interval: float) -> Phase:
        lanes = Lanes(enabled=name == "flood, lanes")
        a, b = self._client(task_queue, TENANT_A, lanes), self._client(task_queue, TENANT_B, lanes)
        if name == "unloaded":
            result = Phase(name, await self._b_turns(b, turns, interval))
        else:
            result = await self._flood(a, b, name, flood, turns, interval)
        assert self.temporal is not None
        for turn in result.b_turns:
            if turn.status == "completed":
                turn.workflow_tasks_queued, turn.activities_queued = await queued_seconds(
                    self.temporal, session_workflow_id(turn.session_id)
                )
        self.say(
            f"{name}: B {result.b_completed}/{turns} turns, p50 {result.latency(50):.2f} s, p95 {result.latency(95):.2f} s"
            + (f"; A had {result.a_left_at_b_start} turns left when B started, {result.a_left_at_b_end} when B ended" if result.a_turns else "")
        )
        return result

    async def run(self, flood: int, turns: int, interval: float) -> list[Phase]:
        """The phases one after the other on one task queue and one worker process: each flood has
        ended (drained, or its rest terminated) before the next phase starts."""
        task_queue = f"fair-{uuid.uuid4().hex[:8]}"
        worker = WorkerProcess("agentrt", self.address, task_queue, self.settings, self.workdir / f"worker-{task_queue}.log")
        await worker.start()
        try:
            warm = self._client(task_queue, TENANT_B, Lanes())
            for _ in range(WARM_TURNS):  # a fresh worker's first turns are slower than any after
                await self._turn(warm, f"w-{uuid.uuid4().hex[:12]}")
            return [await self.phase(task_queue, name, flood, turns, interval) for name in PHASES]
        finally:
            worker.kill()


def check_parameters(flood: int, turns: int, interval: float, model_seconds: float, start_concurrency: int) -> None:
    """Raise ``ValueError`` for parameters the benchmark cannot run with."""
    if flood < 1:
        raise ValueError(f"flood must be >= 1, got {flood}")
    if turns < 1:
        raise ValueError(f"turns must be >= 1, got {turns}")
    if interval <= 0 or model_seconds < 0:
        raise ValueError(f"interval must be > 0 and model_seconds >= 0, got {interval:g} and {model_seconds:g}")
    if start_concurrency < 1:
        raise ValueError(f"start_concurrency must be >= 1, got {start_concurrency}")


async def measure(
    address: str,
    workdir: Path,
    *,
    flood: int = 500,
    turns: int = 20,
    interval: float = 2.0,
    model_seconds: float = 2.0,
    start_concurrency: int = 50,
    settings: WorkerSettings = DEFAULT_SETTINGS,
    progress: Progress = _quiet,
) -> FairnessReport:
    """The three phases against the server at ``address`` (fairness on), files under ``workdir``
    (and a SQLite store there unless ``settings.database_url`` names one)."""
    check_parameters(flood, turns, interval, model_seconds, start_concurrency)
    if not settings.database_url:
        settings = dataclasses.replace(settings, database_url=f"sqlite:///{workdir / 'agentrt.db'}")
    workdir.mkdir(parents=True, exist_ok=True)
    report = FairnessReport(flood, turns, interval, model_seconds, settings, os.getloadavg())
    async with _Bench(address, workdir, settings, model_seconds, start_concurrency, progress) as bench:
        report.phases = await bench.run(flood, turns, interval)
    report.load_after = os.getloadavg()
    return report


async def run_benchmark(*, workdir: Path | None = None, progress: Progress = _quiet, **options: object) -> FairnessReport:
    """Self-contained: a dev server in ``workdir`` (default: a temporary directory, removed
    afterwards), ``measure(**options)``, then everything stopped."""
    own_dir = workdir is None
    directory = Path(tempfile.mkdtemp(prefix="agentrt-fairness-")) if workdir is None else workdir
    directory.mkdir(parents=True, exist_ok=True)
    server = DevServer.on_free_ports(directory / "server", SERVER_ARGS)
    try:
        await server.start()
        progress(f"temporal dev server on {server.address}; files in {directory}")
        return await measure(server.address, directory, progress=progress, **options)  # type: ignore[arg-type]
    finally:
        server.stop()
        if own_dir:
            shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.fairness", description=__doc__.split("\n\n")[0])
    parser.add_argument("--flood", type=int, default=500, help="tenant A's sessions, queued before B starts (default 500)")
    parser.add_argument("--turns", type=int, default=20, help="tenant B's turns per phase (default 20)")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between B's turns (default 2)")
    parser.add_argument("--model-seconds", type=float, default=2.0, help="how long every model call takes (default 2)")
    parser.add_argument("--max-concurrent-activities", type=int, default=DEFAULT_SETTINGS.max_concurrent_activities,
                        help="the worker's activity slots, which the tenants share (default 4)")
    parser.add_argument("--max-concurrent-workflow-tasks", type=int, default=None,
                        help="the worker's workflow task slots (default: the SDK's)")
    parser.add_argument("--start-concurrency", type=int, default=50, help="A's starts in flight at once (default 50)")
    parser.add_argument("--workdir", type=Path, default=None, help="keep run files here (default: a removed temp dir)")
    args = parser.parse_args(argv)
    try:
        check_parameters(args.flood, args.turns, args.interval, args.model_seconds, args.start_concurrency)
    except ValueError as err:
        parser.error(str(err))
    settings = WorkerSettings(
        max_concurrent_activities=args.max_concurrent_activities, max_concurrent_workflow_tasks=args.max_concurrent_workflow_tasks
    )
    run_and_exit(
        lambda: run_benchmark(
            workdir=args.workdir, progress=print_progress, flood=args.flood, turns=args.turns, interval=args.interval,
            model_seconds=args.model_seconds, start_concurrency=args.start_concurrency, settings=settings,
        ),
        lambda report: report.passed,
        settings=True,
    )


if __name__ == "__main__":
    main()
