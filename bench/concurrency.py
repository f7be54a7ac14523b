"""How many agent turns one agentrt worker sustains, against the bare-Temporal floor under the same load.

    python -m bench.concurrency [--sessions 100,300,1000] [--repeats 3] [--rounds 5] [--result-bytes 5120]
        [--steady-seconds 30] [--lone-runs 5] [--start-concurrency 50] [--wait client|update]
        [--max-concurrent-activities 32] [--max-cached-workflows 1000] [--database-url URL]
        [--workdir DIR]

Starts its own Temporal dev server (free ports, headless, its SQLite file in a temporary
directory in WAL mode without fsync: ``SERVER_ARGS``; with the server's default pragmas the
server's own writes capped the floor at about a quarter of its rate here). For each N of ``--sessions`` it runs ``--repeats`` (3)
bursts of each system, one after the other on the same server, the order alternating
(agentrt first, then the floor first, ...), each on a fresh task queue and a fresh worker process
(``bench._bench_worker``, so the worker's memory and CPU are its own and can be read
from ``/proc/<pid>``; this process is only the client); rates are the medians of the repetitions:

- agentrt: N sessions started at once, each one turn of R rounds (``--rounds``, default 5)
  by the scripted model: each round one ``fs.read`` of a different ``--result-bytes``
  (5 KB) workspace file, then a final answer (R + 1 model calls, R tool calls, and the
  session's store writes).
- floor: N ``FloorAgentWorkflow`` runs (``bench._floor``, ``rounds=R``,
  ``result_bytes=--result-bytes``): two activities per round, nothing outside history; the
  least an agent round can cost on Temporal.

Starts are issued through ``asyncio.gather`` with at most ``--start-concurrency`` start
RPCs in flight (default 50); every outcome is awaited concurrently: agentrt's with
``AgentClient.wait`` (``--wait client``, the default), the floor's with the workflow result
(a server long-poll).

What is measured per system and N:
- rounds/s: completed turns x R / wall time, the wall time running from the first start
  request to the last outcome known to this client;
- turn latency p50 / p95: from a turn's start request (once it has a start slot) to its
  outcome known to this client;
- worker peak RSS (MiB, ``VmHWM`` of the fresh worker process, so it includes start-up),
  worker CPU seconds (user + system over the burst) and CPU % (CPU seconds / wall time;
  100 % is one core); the same CPU % for the dev server and this client, since all three
  share the machine;
- agentrt/floor: the ratio of their rounds/s at the same N;
- with a PostgreSQL store (``--database-url postgresql://...``), what agentrt's bursts wrote
  there per round (``bench._pg_stats``): commits (its reads included), rows written, WAL bytes
  and the database's growth, read once the killed worker's connections have closed.

Then the steady-arrival phase, on a fresh agentrt worker: first ``LONE_WARM_RUNS`` (10) lone
sessions from an idle server, then ``--lone-runs`` (5) more one after the other (their
median turn latency is the lone latency: the dev server dispatches the first few dozen
workflow tasks after an idle spell in ~3 ms, later ones in ~35 ms, so the first lone turns
are faster than any turn under continuous traffic; the report also gives p95 over the first
of them), then
sessions arriving at a constant rate of half agentrt's sustained capacity (its median
sessions/s in the bursts of the largest N, the longest ones; short bursts of a fresh worker
run above what it sustains) for ``--steady-seconds`` (30); p95 turn latency there over the
lone latency.

Worker and store settings (all printed with the results):
- ``--max-concurrent-activities`` (default 32, ``build_worker``'s): activity slots of each
  worker; agentrt's synchronous activities (tool calls, tool listing) run on a thread pool
  of the same size, its model calls and store writes on the event loop;
- ``--max-cached-workflows`` (default 1000, the SDK's): the sticky cache; with more open
  sessions than that, evicted sessions replay their history on their next workflow task;
- ``--database-url``: agentrt's store; default SQLite in the run directory, e.g.
  ``postgresql://postgres@127.0.0.1:5432/<db>`` for PostgreSQL (the database must exist;
  the schema is created);
- ``--wait``: ``client`` is ``AgentClient.wait`` with the store, as the CLI's client has it
  (the store once, then the ``wait_turn`` update as a long-poll); ``update`` only the
  ``wait_turn`` update.
Everything else is the SDK's default (workflow task slots, 5 pollers each) or agentrt's
(sticky schedule-to-start timeout 3 s). Server, worker and client share the machine's cores:
the CPU % columns show which of them is busy.

The last line is exactly

    concurrency agentrt_vs_floor_rps=<ratio at the largest N> p95_vs_lone=<ratio>

From a test (small parameters against a running server):

    report = await bench.concurrency.measure(server.address, tmp_path, sessions=[5], steady_seconds=2)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import math
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from temporalio.client import Client

from agentrt.client import AgentClient
from agentrt.schemas import TurnOutcome, WaitTurnInput
from agentrt.store import Store
from agentrt.worker import DevServer
from bench._bench_worker import WorkerProcess, WorkerSettings, agentrt_connection, cpu_seconds
from bench._cli import counts, print_progress, run_and_exit
from bench._floor import FloorAgentWorkflow, FloorInput
from bench._pg_stats import PgCounters, pg_counters
from bench.history import TOOL, prepare_workload

DEFAULT_SESSIONS = (100, 300, 1000)
DEFAULT_REPEATS = 3
DEFAULT_ROUNDS = 5
DEFAULT_RESULT_BYTES = 5 * 1024
DEFAULT_STEADY_SECONDS = 30.0
DEFAULT_LONE_RUNS = 5
# Lone turns run first and left out of the lone latency: the first few dozen workflow tasks the
# dev server dispatches after an idle spell start in ~3 ms, later ones in ~35 ms (docs/benchmarks.md,
# "Lone latency"), so the first lone turns are faster than any turn under continuous traffic can be.
LONE_WARM_RUNS = 10
DEFAULT_START_CONCURRENCY = 50
WAIT_MODES = ("send", "client", "update")
PRINCIPAL = "bench"
# The dev server's SQLite file in WAL mode without fsync: with its defaults (rollback journal,
# synchronous=FULL) the server itself limited the floor to a quarter of these rates.
SERVER_ARGS = ["--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=off"]
PROMPT = "Read the workspace files one by one, one per round, then say done."

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` percentile (0 < q <= 100); nan for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


# ---------------------------------------------------------------------------- results


@dataclass
class Turn:
    """One turn as the client saw it: ``started`` when its start request was issued,
    ``ended`` when its outcome was known (``time.monotonic()``); ``status`` the outcome."""

    started: float
    ended: float
    status: str
    detail: str = ""

    @property
    def latency(self) -> float:
        return self.ended - self.started


@dataclass
class Burst:
    """N turns started at once on one fresh worker process."""

    system: str
    sessions: int
    rounds: int
    wall_seconds: float
    repeat: int
    turns: list[Turn]
    worker_peak_rss_mb: float
    worker_cpu_seconds: float
    server_cpu_seconds: float | None
    client_cpu_seconds: float
    store: PgCounters | None = None  # what the burst wrote to a PostgreSQL store

    @property
    def completed(self) -> int:
        return sum(1 for t in self.turns if t.status == "completed")

    @property
    def rounds_per_second(self) -> float:
        return self.completed * self.rounds / self.wall_seconds if self.wall_seconds > 0 else math.nan

    @property
    def sessions_per_second(self) -> float:
        return self.completed / self.wall_seconds if self.wall_seconds > 0 else math.nan

    def latency(self, q: float) -> float:
        return percentile([t.latency for t in self.turns if t.status == "completed"], q)

    def cpu_percent(self, seconds: float | None) -> float:
        return math.nan if seconds is None or self.wall_seconds <= 0 else 100 * seconds / self.wall_seconds

    def failures(self) -> list[str]:
        return [f"{t.status}: {t.detail}" if t.detail else t.status for t in self.turns if t.status != "completed"]


@dataclass
class Steady:
    """Lone runs (``warm`` first, from an idle server; then ``lone``, back to back), then
    sessions arriving at ``rate`` per second for ``seconds``."""

    rate: float
    capacity: float
    seconds: float
    lone: list[Turn]
    turns: list[Turn]
    warm: list[Turn] = field(default_factory=list)

    @property
    def completed(self) -> int:
        return sum(1 for t in self.turns if t.status == "completed")

    @property
    def lone_latency(self) -> float:
        done = [t.latency for t in self.lone if t.status == "completed"]
        return statistics.median(done) if done else math.nan

    def latency(self, q: float) -> float:
        return percentile([t.latency for t in self.turns if t.status == "completed"], q)

    @property
    def p95_vs_lone(self) -> float:
        lone = self.lone_latency
        return self.latency(95) / lone if lone and lone > 0 else math.nan

    @property
    def p95_vs_first(self) -> float:
        """p95 over the first lone turn (from an idle server), for comparison."""
        first = self.warm[0].latency if self.warm and self.warm[0].status == "completed" else math.nan
        return self.latency(95) / first if first > 0 else math.nan


@dataclass
class ConcurrencyReport:
    settings: WorkerSettings
    rounds: int
    result_bytes: int
    start_concurrency: int
    wait: str
    bursts: list[Burst] = field(default_factory=list)
    steady: Steady | None = None

    def burst(self, system: str, sessions: int) -> Burst | None:
        return next((b for b in self.bursts if b.system == system and b.sessions == sessions), None)

    def rounds_per_second(self, system: str, sessions: int) -> float:
        """The median rounds/s of ``system``'s bursts of ``sessions`` (one per repetition)."""
        rates = [b.rounds_per_second for b in self.bursts if b.system == system and b.sessions == sessions]
        return statistics.median(rates) if rates else math.nan

    def ratio(self, sessions: int) -> float:
        """agentrt's median rounds/s over the floor's, at ``sessions``."""
        floor = self.rounds_per_second("floor", sessions)
        return self.rounds_per_second("agentrt", sessions) / floor if floor else math.nan

    @property
    def largest(self) -> int:
        return max((b.sessions for b in self.bursts), default=0)

    @property
    def turns_expected(self) -> int:
        return sum(b.sessions for b in self.bursts) + (len(self.steady.lone) + len(self.steady.turns) if self.steady else 0)

    @property
    def turns_completed(self) -> int:
        done = sum(b.completed for b in self.bursts)
        if self.steady is not None:
            done += self.steady.completed + sum(1 for t in self.steady.lone if t.status == "completed")
        return done

    def settings_text(self) -> str:
        store = self.settings.database_url
        kind = "PostgreSQL" if store.startswith(("postgres", "postgresql")) else "SQLite"
        return "\n".join([
            f"worker: {self.settings.describe()}",
            f"store: {kind} {store}",
            (
                f"workload: {self.rounds} rounds per turn, {self.result_bytes} bytes per tool result; "
                f"start RPCs in flight <= {self.start_concurrency}; agentrt outcomes by {self.wait}; "
                f"machine: {os.cpu_count()} CPUs shared by server, worker and client"
            ),
        ])

    def table(self) -> str:
        head = (
            f"{'system':<8}{'N':>6}{'rep':>4}{'done':>6}{'wall s':>8}{'rounds/s':>10}{'p50 s':>8}{'p95 s':>8}"
            f"{'RSS MB':>8}{'CPU s':>8}{'CPU %':>7}{'srv %':>7}{'cli %':>7}"
        )
        lines = [head]
        for b in self.bursts:
            lines.append(
                f"{b.system:<8}{b.sessions:>6}{b.repeat:>4}{b.completed:>6}{b.wall_seconds:>8.1f}{b.rounds_per_second:>10.1f}"
                f"{b.latency(50):>8.2f}{b.latency(95):>8.2f}{b.worker_peak_rss_mb:>8.0f}{b.worker_cpu_seconds:>8.1f}"
                f"{b.cpu_percent(b.worker_cpu_seconds):>7.0f}{b.cpu_percent(b.server_cpu_seconds):>7.0f}"
                f"{b.cpu_percent(b.client_cpu_seconds):>7.0f}"
            )
        for n in sorted({b.sessions for b in self.bursts}):
            lines.append(
                f"agentrt/floor rounds/s at N={n}: {self.ratio(n):.2f} (medians: agentrt "
                f"{self.rounds_per_second('agentrt', n):.1f}, floor {self.rounds_per_second('floor', n):.1f})"
            )
        for b in self.bursts:
            if b.store is not None and b.completed:
                per = b.completed * b.rounds
                lines.append(
                    f"{b.system} N={b.sessions} rep {b.repeat} store (PostgreSQL): {b.store.commits / per:.2f} commits, "
                    f"{b.store.rows_written / per:.1f} rows written, {b.store.wal_bytes / per:,.0f} WAL bytes, "
                    f"{b.store.database_bytes / per:,.0f} database bytes per round "
                    "(client reads and the sessions' starts and ends included)"
                )
        for b in self.bursts:
            failures = b.failures()
            if failures:
                lines.append(f"{b.system} N={b.sessions}: {len(failures)} turn(s) not completed, e.g. {failures[0]}")
        if self.steady is not None:
            s = self.steady
            lone = ", ".join(f"{t.latency:.2f}" for t in s.lone)
            warm = ", ".join(f"{t.latency:.2f}" for t in s.warm)
            lines.append(
                f"lone turn latency: median {s.lone_latency:.2f} s of {len(s.lone)} runs ({lone}), after "
                f"{len(s.warm)} from an idle server ({warm})"
            )
            lines.append(
                f"steady arrivals: {s.rate:.2f} sessions/s (half of agentrt's {s.capacity:.2f} sessions/s) for "
                f"{s.seconds:g} s: {s.completed}/{len(s.turns)} completed, p50 {s.latency(50):.2f} s, "
                f"p95 {s.latency(95):.2f} s, p95/lone {s.p95_vs_lone:.2f} (over the first turn from idle: "
                f"{s.p95_vs_first:.2f})"
            )
        return "\n".join(lines)

    def line(self) -> str:
        p95 = self.steady.p95_vs_lone if self.steady is not None else math.nan
        return f"concurrency agentrt_vs_floor_rps={self.ratio(self.largest):.2f} p95_vs_lone={p95:.2f}"


# ---------------------------------------------------------------------------- turns


async def _timed(start: Callable[[], Awaitable[object]], finish: Callable[[object], Awaitable[str]],
                 slots: asyncio.Semaphore, timeout: float) -> Turn:
    """Issue ``start`` (holding a start slot), then ``finish`` with what it returned; never raises."""
    began = time.monotonic()
    try:
        async with slots:
            began = time.monotonic()
            started = await asyncio.wait_for(start(), timeout)
        status = await asyncio.wait_for(finish(started), max(1.0, timeout - (time.monotonic() - began)))
        return Turn(began, time.monotonic(), status)
    except TimeoutError:
        return Turn(began, time.monotonic(), "timeout", f"no outcome within {timeout:g} s")
    except Exception as err:  # noqa: BLE001 - counted as a turn that did not complete
        return Turn(began, time.monotonic(), "error", f"{type(err).__name__}: {err}")


class _AgentrtDriver:
    def __init__(self, agent: AgentClient, workspace: Path, script: Path, rounds: int, wait: str) -> None:
        self.agent = agent
        self.workspace = workspace
        self.script = script
        self.rounds = rounds
        self.wait = wait

    async def turn(self, slots: asyncio.Semaphore, timeout: float) -> Turn:
        config = self.agent.new_config(
            str(self.workspace), profile="scripted", script=str(self.script), tools=[TOOL],
            max_rounds_per_turn=self.rounds + 5,
        )

        if self.wait == "send":
            return await self._send_and_wait(config, slots, timeout)

        async def start() -> object:
            return await self.agent.start(config, PROMPT)

        async def finish(started: object) -> str:
            outcome = await self._outcome(started.session_id, started.turn_id)  # type: ignore[attr-defined]
            return outcome.status

        return await _timed(start, finish, slots, timeout)

    async def _send_and_wait(self, config: object, slots: asyncio.Semaphore, timeout: float) -> Turn:
        """One ``start_and_wait`` call; its start slot is given back once the session accepted the
        message (as ``start`` returns then), not when the turn ends."""
        began = time.monotonic()
        await slots.acquire()
        held = True

        def release() -> None:
            nonlocal held
            if held:
                held = False
                slots.release()

        try:
            began = time.monotonic()
            _, outcome = await asyncio.wait_for(self.agent.start_and_wait(config, PROMPT, on_accepted=release), timeout)  # type: ignore[arg-type]
            return Turn(began, time.monotonic(), outcome.status)
        except TimeoutError:
            return Turn(began, time.monotonic(), "timeout", f"no outcome within {timeout:g} s")
        except Exception as err:  # noqa: BLE001 - counted as a turn that did not complete
            return Turn(began, time.monotonic(), "error", f"{type(err).__name__}: {err}")
        finally:
            release()

    async def _outcome(self, session_id: str, turn_id: str) -> TurnOutcome:
        if self.wait == "client":
            return await self.agent.wait(session_id, turn_id)
        handle = self.agent.temporal.get_workflow_handle(f"session-{session_id}")
        while True:
            outcome = await handle.execute_update("wait_turn", WaitTurnInput(turn_id=turn_id), result_type=TurnOutcome)
            if outcome.status != "pending":
                return outcome


class _FloorDriver:
    def __init__(self, temporal: Client, task_queue: str, rounds: int, result_bytes: int) -> None:
        self.temporal = temporal
        self.task_queue = task_queue
        self.rounds = rounds
        self.result_bytes = result_bytes

    async def turn(self, slots: asyncio.Semaphore, timeout: float) -> Turn:
        async def start() -> object:
            return await self.temporal.start_workflow(
                FloorAgentWorkflow.run, FloorInput(rounds=self.rounds, result_bytes=self.result_bytes),
                id=f"floor-{uuid.uuid4().hex[:12]}", task_queue=self.task_queue,
            )

        async def finish(handle: object) -> str:
            result = await handle.result()  # type: ignore[attr-defined]
            return "completed" if result.rounds == self.rounds else f"rounds={result.rounds}"

        return await _timed(start, finish, slots, timeout)


def _turn_timeout(sessions: int) -> float:
    return 300.0 + 2.0 * sessions


# ---------------------------------------------------------------------------- measuring


class _Bench:
    def __init__(self, address: str, workdir: Path, settings: WorkerSettings, rounds: int, result_bytes: int,
                 start_concurrency: int, wait: str, server_pid: int | None, progress: Progress) -> None:
        self.address = address
        self.workdir = workdir
        self.settings = settings
        self.rounds = rounds
        self.result_bytes = result_bytes
        self.start_concurrency = start_concurrency
        self.wait = wait
        self.server_pid = server_pid
        self.say = progress
        self.workspace, self.script = prepare_workload(workdir, rounds, result_bytes)
        self.store: Store | None = None
        self.agentrt_client: Client | None = None
        self.floor_client: Client | None = None

    async def __aenter__(self) -> Self:
        self.store, self.agentrt_client = await agentrt_connection(self.address, self.settings.database_url)
        self.floor_client = await Client.connect(self.address)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.store is not None:
            self.store.close()

    def _server_cpu(self) -> float | None:
        if self.server_pid is None:
            return None
        try:
            return cpu_seconds(self.server_pid)
        except OSError:
            return None

    async def _worker(self, system: str, label: str) -> tuple[WorkerProcess, object]:
        task_queue = f"conc-{system}-{label}-{uuid.uuid4().hex[:8]}"
        worker = WorkerProcess(system, self.address, task_queue, self.settings, self.workdir / f"worker-{system}-{label}.log")
        await worker.start()
        if system == "agentrt":
            assert self.agentrt_client is not None
            agent = AgentClient(self.agentrt_client, task_queue=task_queue, principal=PRINCIPAL, store=self.store)
            return worker, _AgentrtDriver(agent, self.workspace, self.script, self.rounds, self.wait)
        assert self.floor_client is not None
        return worker, _FloorDriver(self.floor_client, task_queue, self.rounds, self.result_bytes)

    async def burst(self, system: str, sessions: int, repeat: int = 1) -> Burst:
        worker, driver = await self._worker(system, str(sessions))
        try:
            slots = asyncio.Semaphore(self.start_concurrency)
            timeout = _turn_timeout(sessions)
            cpu0, server0, client0 = worker.cpu_seconds(), self._server_cpu(), time.process_time()
            store0 = await asyncio.to_thread(pg_counters, self.settings.database_url) if system == "agentrt" else None
            first = time.monotonic()
            turns = await asyncio.gather(*(driver.turn(slots, timeout) for _ in range(sessions)))  # type: ignore[attr-defined]
            last = max(t.ended for t in turns)
            cpu1, server1, client1 = worker.cpu_seconds(), self._server_cpu(), time.process_time()
            burst = Burst(
                system=system, sessions=sessions, rounds=self.rounds, wall_seconds=last - first, repeat=repeat,
                turns=list(turns),
                worker_peak_rss_mb=worker.peak_rss_mb(), worker_cpu_seconds=cpu1 - cpu0,
                server_cpu_seconds=None if server0 is None or server1 is None else server1 - server0,
                client_cpu_seconds=client1 - client0,
            )
        finally:
            worker.kill()
        if store0 is not None:
            await asyncio.sleep(1.0)  # the killed worker's backends have exited and published their counts
            store1 = await asyncio.to_thread(pg_counters, self.settings.database_url)
            burst.store = store1 - store0 if store1 is not None else None
        self.say(
            f"{system} N={sessions} (repetition {repeat}): {burst.completed}/{sessions} completed in {burst.wall_seconds:.1f} s, "
            f"{burst.rounds_per_second:.1f} rounds/s, p50 {burst.latency(50):.2f} s, p95 {burst.latency(95):.2f} s, "
            f"worker RSS {burst.worker_peak_rss_mb:.0f} MB, CPU {burst.worker_cpu_seconds:.1f} s "
            f"({burst.cpu_percent(burst.worker_cpu_seconds):.0f} %)"
        )
        return burst

    async def steady(self, capacity: float, seconds: float, lone_runs: int) -> Steady:
        rate = capacity / 2
        worker, driver = await self._worker("agentrt", "steady")
        try:
            slots = asyncio.Semaphore(self.start_concurrency)
            warm = [await driver.turn(slots, _turn_timeout(1)) for _ in range(LONE_WARM_RUNS)]  # type: ignore[attr-defined]
            self.say("lone turns from an idle server (not in the lone latency): " + ", ".join(f"{t.latency:.2f} s" for t in warm))
            lone = []
            for _ in range(lone_runs):
                lone.append(await driver.turn(slots, _turn_timeout(1)))  # type: ignore[attr-defined]
            self.say("lone turns: " + ", ".join(f"{t.latency:.2f} s" for t in lone))
            count = max(1, round(rate * seconds))
            tasks = []
            begin = time.monotonic()
            for i in range(count):
                delay = begin + i / rate - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                tasks.append(asyncio.create_task(driver.turn(slots, _turn_timeout(count))))  # type: ignore[attr-defined]
            turns = await asyncio.gather(*tasks)
        finally:
            worker.kill()
        steady = Steady(rate=rate, capacity=capacity, seconds=seconds, lone=lone, turns=list(turns), warm=warm)
        self.say(
            f"steady: {steady.completed}/{count} completed at {rate:.2f} sessions/s, p95 {steady.latency(95):.2f} s, "
            f"lone {steady.lone_latency:.2f} s"
        )
        return steady


def check_parameters(sessions: Sequence[int], rounds: int, result_bytes: int, steady_seconds: float,
                     lone_runs: int, start_concurrency: int, wait: str, repeats: int = 1) -> None:
    """Raise ``ValueError`` for parameters the benchmark cannot run with."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if not sessions or any(n < 1 for n in sessions):
        raise ValueError(f"sessions must be one or more counts >= 1, got {list(sessions)}")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if result_bytes < 1:
        raise ValueError(f"result_bytes must be >= 1, got {result_bytes}")
    if steady_seconds < 0:
        raise ValueError(f"steady_seconds must be >= 0, got {steady_seconds:g}")
    if lone_runs < 1:
        raise ValueError(f"lone_runs must be >= 1, got {lone_runs}")
    if start_concurrency < 1:
        raise ValueError(f"start_concurrency must be >= 1, got {start_concurrency}")
    if wait not in WAIT_MODES:
        raise ValueError(f"wait must be one of {WAIT_MODES}, got {wait!r}")


async def measure(
    address: str,
    workdir: Path,
    *,
    sessions: Sequence[int] = (5,),
    repeats: int = 1,
    rounds: int = DEFAULT_ROUNDS,
    result_bytes: int = DEFAULT_RESULT_BYTES,
    steady_seconds: float = 3.0,
    lone_runs: int = DEFAULT_LONE_RUNS,
    start_concurrency: int = DEFAULT_START_CONCURRENCY,
    wait: str = "send",
    settings: WorkerSettings | None = None,
    server_pid: int | None = None,
    progress: Progress = _quiet,
) -> ConcurrencyReport:
    """``repeats`` bursts of each N in ``sessions`` per system (agentrt and the floor, the order
    alternating) and the steady phase against the
    server at ``address``; worker processes on fresh task queues, files under ``workdir``.

    ``settings.database_url`` empty means a SQLite store in ``workdir``. ``server_pid`` (the
    dev server's process) adds its CPU to the report. ``steady_seconds=0`` skips the steady phase.
    """
    check_parameters(sessions, rounds, result_bytes, steady_seconds, lone_runs, start_concurrency, wait, repeats)
    settings = settings or WorkerSettings()
    if not settings.database_url:
        settings = dataclasses.replace(settings, database_url=f"sqlite:///{workdir / 'agentrt.db'}")
    workdir.mkdir(parents=True, exist_ok=True)
    report = ConcurrencyReport(settings, rounds, result_bytes, start_concurrency, wait)
    async with _Bench(address, workdir, settings, rounds, result_bytes, start_concurrency, wait, server_pid, progress) as bench:
        for n in sessions:
            for repeat in range(1, repeats + 1):
                # The order alternates, so drift on a shared machine does not favour one system.
                order = ("agentrt", "floor") if repeat % 2 else ("floor", "agentrt")
                for system in order:
                    report.bursts.append(await bench.burst(system, n, repeat))
        if steady_seconds > 0:
            capacity = report.rounds_per_second("agentrt", max(sessions)) / rounds  # sustained: the longest bursts
            if capacity > 0:
                report.steady = await bench.steady(capacity, steady_seconds, lone_runs)
    return report


async def run_benchmark(*, workdir: Path | None = None, progress: Progress = _quiet, **options: object) -> ConcurrencyReport:
    """Self-contained: a dev server (and by default a SQLite store) in ``workdir`` (default: a
    temporary directory, removed afterwards), ``measure(**options)``, then everything stopped."""
    own_dir = workdir is None
    directory = Path(tempfile.mkdtemp(prefix="agentrt-concurrency-")) if workdir is None else workdir
    directory.mkdir(parents=True, exist_ok=True)
    server = DevServer.on_free_ports(directory / "server", SERVER_ARGS)
    try:
        await server.start()
        progress(f"temporal dev server on {server.address}; files in {directory}")
        pid = server.process.pid if server.process is not None else None
        return await measure(server.address, directory, server_pid=pid, progress=progress, **options)  # type: ignore[arg-type]
    finally:
        server.stop()
        if own_dir:
            shutil.rmtree(directory, ignore_errors=True)


# ---------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.concurrency", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=counts, default=list(DEFAULT_SESSIONS),
                        help="comma-separated session counts, one burst each (default 100,300,1000)")
    parser.add_argument("--repeats", type=int, default=DEFAULT_REPEATS,
                        help="bursts per system and N, the order alternating; rates are medians (default 3)")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="tool rounds per turn (default 5)")
    parser.add_argument("--result-bytes", type=int, default=DEFAULT_RESULT_BYTES, help="bytes per tool result (default 5120)")
    parser.add_argument("--steady-seconds", type=float, default=DEFAULT_STEADY_SECONDS,
                        help="length of the steady-arrival phase, 0 skips it (default 30)")
    parser.add_argument("--lone-runs", type=int, default=DEFAULT_LONE_RUNS, help="lone sessions for the lone latency (default 5)")
    parser.add_argument("--start-concurrency", type=int, default=DEFAULT_START_CONCURRENCY,
                        help="start RPCs in flight at once (default 50)")
    parser.add_argument("--wait", choices=WAIT_MODES, default="send",
                        help="agentrt outcomes by AgentClient.wait (client, default) or only the wait_turn update")
    parser.add_argument("--max-concurrent-activities", type=int, default=WorkerSettings.max_concurrent_activities,
                        help="activity slots (and agentrt activity threads) per worker (default 32)")
    parser.add_argument("--max-cached-workflows", type=int, default=WorkerSettings.max_cached_workflows,
                        help="sticky cache size per worker (default 1000)")
    parser.add_argument("--database-url", default="",
                        help="agentrt store (default SQLite in the run directory), e.g. postgresql://postgres@127.0.0.1:5432/DB")
    parser.add_argument("--workdir", type=Path, default=None, help="keep run files here (default: a removed temp dir)")
    args = parser.parse_args(argv)
    try:
        check_parameters(args.sessions, args.rounds, args.result_bytes, args.steady_seconds, args.lone_runs,
                         args.start_concurrency, args.wait, args.repeats)
    except ValueError as err:
        parser.error(str(err))
    settings = WorkerSettings(
        max_concurrent_activities=args.max_concurrent_activities,
        max_cached_workflows=args.max_cached_workflows,
        database_url=args.database_url,
    )
    run_and_exit(
        lambda: run_benchmark(
            workdir=args.workdir, progress=print_progress, sessions=args.sessions, repeats=args.repeats,
            rounds=args.rounds, result_bytes=args.result_bytes, steady_seconds=args.steady_seconds,
            lone_runs=args.lone_runs, start_concurrency=args.start_concurrency, wait=args.wait, settings=settings,
        ),
        lambda report: report.turns_completed == report.turns_expected,
        settings=True,
    )


if __name__ == "__main__":
    main()
