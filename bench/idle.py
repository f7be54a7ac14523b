"""Idle sessions cost nothing: thousands of sessions after one turn each, waiting for input on one worker.

    python -m bench.idle [--sessions 10000] [--checkpoints 1000,5000,10000] [--max-cached-workflows N]
        [--wakes 50] [--small-cache N] [--replays N] [--start-concurrency 50] [--seed 1] [--workdir DIR]

Starts its own Temporal dev server (free ports, headless, its SQLite file in the run directory,
``bench.concurrency.SERVER_ARGS``), a SQLite store and ONE agentrt worker process
(``bench._bench_worker``, as ``agentrt worker`` builds it) with a sticky cache of
``--max-cached-workflows`` sessions (default a tenth of ``--sessions``, at most 1000).

1. **Idle sessions.** Starts ``--sessions`` sessions, each with one turn by the scripted model
   (one ``fs.read`` of a small workspace file, then a short answer; ``AgentClient.start_and_wait``),
   at most ``--start-concurrency`` turns at once; the sessions then wait for input. At each of
   ``--checkpoints`` (counts of sessions started) it waits for the turns in flight, asks the
   worker for a full garbage collection, waits until its RSS holds still, and reads: the worker's
   RSS (``VmRSS``) and peak (``VmHWM``), the dev server's RSS, and the bytes in use in the dev
   server's SQLite database and in agentrt's store (pages minus free pages, the write-ahead log
   included). Bytes per session are the growth since before the first session over the sessions.
2. **Wakes.** ``--wakes`` sessions started long before the cache filled (the oldest part, evicted
   since) and as many of the last ones started (still in the cache), alternating, one after another:
   a message each (``AgentClient.send``, a fresh client), its turn's first token delta as
   ``AgentClient.deltas`` yields it, and its outcome (``AgentClient.wait``), each timed from
   just before the send; from history, the first workflow task the message caused: its time on
   the task queue and on the worker (which, for an evicted session, replays its history first).
3. **Replays** (``--small-cache``, default a tenth of the cache; 0 skips): the worker is stopped;
   a fresh worker with the same cache, then one with the small cache, each has ``--replays``
   idle sessions (default twice the cache) asked the ``state`` query, which replays each
   into its cache; the RSS of each after a garbage collection.

The last line is exactly

    idle sessions=N cache=C rss_mib_at_<checkpoint>=... wake_first_token_p95_ms=... wake_end_p95_ms=...
        cached_first_token_p95_ms=... server_db_bytes_per_session=... store_bytes_per_session=...

(one ``rss_mib_at_`` per checkpoint; ``wake_`` for the evicted sessions; on one line).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import random
import shutil
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from agentrt.client import AgentClient
from agentrt.store import Store
from agentrt.worker import DevServer
from bench._bench_worker import WorkerProcess, WorkerSettings, agentrt_connection, rss_mb
from bench._cli import counts, print_progress, run_and_exit
from bench._idle_report import Checkpoint, Footprint, IdleReport, Replays, Wake
from bench.concurrency import SERVER_ARGS

DEFAULT_SESSIONS = 10_000
DEFAULT_WAKES = 50
DEFAULT_START_CONCURRENCY = 50
MAX_DEFAULT_CACHE = 1000
PRINCIPAL = "bench"
PROMPT = "Read notes.txt and say what it is."
WAKE_TEXT = "Are you still there?"
SCRIPT = {"turns": [
    {"text": "Reading notes.txt.", "tool_calls": [{"name": "fs.read", "arguments": {"path": "notes.txt"}}]},
    {"text": "It is a short note."},
    {"text": "Yes, still here: this answer streams a few words at a time, so the first of them "
             "reaches the client before the turn has ended, as a real model's would."},
]}
DELTA_POLL_SECONDS = 0.1  # AgentClient.deltas' poll when its store is not heard from (its default was 0.1 s)
SETTLE_SECONDS = 1.0
SETTLE_LIMIT_SECONDS = 20.0
QUERY_CONCURRENCY = 20

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def default_cache(sessions: int) -> int:
    return max(1, min(MAX_DEFAULT_CACHE, sessions // 10))


def sqlite_bytes(path: Path) -> int:
    """Bytes in use in the SQLite database at ``path`` (its pages less its free pages), read
    through a read-only connection, so what its write-ahead log holds counts too; 0 if missing."""
    if not path.exists():
        return 0
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)) as conn:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    return (pages - free) * size


def load_average() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def check_parameters(sessions: int, checkpoints: Sequence[int], cache: int, wakes: int, start_concurrency: int) -> None:
    """Raise ``ValueError`` for parameters the benchmark cannot run with."""
    if sessions < 1:
        raise ValueError(f"sessions must be >= 1, got {sessions}")
    if not checkpoints or any(c < 1 or c > sessions for c in checkpoints) or list(checkpoints) != sorted(set(checkpoints)):
        raise ValueError(f"checkpoints must be increasing counts from 1 to sessions ({sessions}), got {list(checkpoints)}")
    if checkpoints[-1] != sessions:
        raise ValueError(f"the last checkpoint must be sessions ({sessions}), got {checkpoints[-1]}")
    if cache < 1:
        raise ValueError(f"max_cached_workflows must be >= 1, got {cache}")
    if wakes < 0:
        raise ValueError(f"wakes must be >= 0, got {wakes}")
    if wakes and (sessions - 2 * cache < wakes or cache // 2 < wakes):
        raise ValueError(
            f"{wakes} wakes need at least that many sessions started before the last two cache-fulls and half a "
            f"cache of recent ones: sessions >= {2 * cache + wakes} and cache >= {2 * wakes} (sessions {sessions}, cache {cache})"
        )
    if start_concurrency < 1:
        raise ValueError(f"start_concurrency must be >= 1, got {start_concurrency}")


def wake_candidates(sessions: int, cache: int, wakes: int, rng: random.Random) -> list[tuple[str, int]]:
    """``wakes`` evicted sessions (started before the last two cache-fulls) and as many cached ones
    (among the last half cache-full started), by start index, alternating: evicted first."""
    evicted = rng.sample(range(0, sessions - 2 * cache), wakes)
    cached = rng.sample(range(sessions - cache // 2, sessions), wakes)
    return [pair for both in zip(evicted, cached) for pair in (("evicted", both[0]), ("cached", both[1]))]


async def _bounded(items: Sequence[object], limit: int, call: Callable[[object], Awaitable[bool]]) -> int:
    """``call`` each item with at most ``limit`` at once; the number that returned False or raised."""
    slots = asyncio.Semaphore(limit)

    async def one(item: object) -> bool:
        async with slots:
            try:
                return await call(item)
            except Exception:  # noqa: BLE001 - counted
                return False

    return sum(1 for ok in await asyncio.gather(*(one(i) for i in items)) if not ok)


class _Idle:
    def __init__(self, address: str, workdir: Path, server_db: Path, server_pid: int | None, settings: WorkerSettings,
                 progress: Progress) -> None:
        self.address = address
        self.workdir = workdir
        self.server_db = server_db
        self.server_pid = server_pid
        self.settings = settings
        self.say = progress
        self.store_path = workdir / "agentrt.db"
        self.task_queue = f"idle-{uuid.uuid4().hex[:8]}"
        self.session_ids: list[str] = []
        self.workspace = workdir / "workspace"
        self.workspace.mkdir(parents=True, exist_ok=True)
        (self.workspace / "notes.txt").write_text("A note: idle sessions wait for input.\n")
        self.script = workdir / "script.json"
        self.script.write_text(json.dumps(SCRIPT))
        self.store: Store | None = None
        self.temporal: Client | None = None
        self.worker: WorkerProcess | None = None

    async def __aenter__(self) -> _Idle:
        self.store, self.temporal = await agentrt_connection(self.address, self.settings.database_url)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.worker is not None:
            self.worker.kill()
        if self.store is not None:
            self.store.close()

    def client(self) -> AgentClient:
        assert self.temporal is not None
        return AgentClient(self.temporal, task_queue=self.task_queue, principal=PRINCIPAL, store=self.store)

    async def start_worker(self, cache: int, label: str) -> WorkerProcess:
        if self.worker is not None:
            self.worker.kill()
        settings = WorkerSettings(
            max_concurrent_activities=self.settings.max_concurrent_activities, max_cached_workflows=cache,
            database_url=self.settings.database_url,
        )
        self.worker = await WorkerProcess("agentrt", self.address, self.task_queue, settings,
                                          self.workdir / f"worker-{label}.log").start()
        return self.worker

    async def settled_rss(self) -> float:
        """The worker's RSS (MiB) after a full garbage collection, once two readings a second apart
        differ by less than 1 MiB (at most ``SETTLE_LIMIT_SECONDS``)."""
        assert self.worker is not None
        self.worker.collect_garbage()
        await asyncio.sleep(SETTLE_SECONDS)
        last, deadline = self.worker.rss_mb(), time.monotonic() + SETTLE_LIMIT_SECONDS
        while time.monotonic() < deadline:
            await asyncio.sleep(SETTLE_SECONDS)
            now = self.worker.rss_mb()
            if abs(now - last) < 1.0:
                return now
            last = now
        return last

    async def footprint(self) -> Footprint:
        assert self.worker is not None
        rss = await self.settled_rss()
        server = rss_mb(self.server_pid) if self.server_pid is not None else math.nan
        db, store = await asyncio.to_thread(lambda: (sqlite_bytes(self.server_db), sqlite_bytes(self.store_path)))
        return Footprint(rss, self.worker.peak_rss_mb(), server, db, store)

    async def start_sessions(self, count: int, concurrency: int, began: float, total: int) -> int:
        """Start ``count`` more sessions, one turn each; returns how many did not complete it."""
        agent = self.client()
        step = max(1, total // 20)

        async def one(_: object) -> bool:
            config = agent.new_config(str(self.workspace), profile="scripted", script=str(self.script), tools=["fs.read"])
            _, outcome = await agent.start_and_wait(config, PROMPT)
            self.session_ids.append(config.session_id)
            done = len(self.session_ids)
            if done % step == 0:
                took = time.monotonic() - began
                self.say(f"{done}/{total} sessions idle after {took:.0f} s ({done / took:.1f} sessions/s)")
            return outcome.status == "completed"

        return await _bounded(range(count), concurrency, one)

    async def wake(self, agent: AgentClient, group: str, index: int) -> Wake:
        assert self.temporal is not None
        session_id = self.session_ids[index]
        handle = self.temporal.get_workflow_handle(f"session-{session_id}")
        wake = Wake(group, index, "error")
        try:
            before = (await handle.describe()).raw_description.workflow_execution_info.history_length
            begin = time.monotonic()
            sent = await agent.send(session_id, WAKE_TEXT)
            wake.accepted = time.monotonic() - begin

            async def first_token() -> None:
                async for _ in agent.deltas(session_id, sent.turn_id, poll_seconds=DELTA_POLL_SECONDS):
                    wake.first_token = time.monotonic() - begin
                    return

            async def outcome() -> str:
                result = await agent.wait(session_id, sent.turn_id)
                wake.end = time.monotonic() - begin
                return result.status

            _, wake.status = await asyncio.wait_for(asyncio.gather(first_token(), outcome()), 120)
            wake.queue, wake.run = await _first_task(handle, before)
        except Exception as err:  # noqa: BLE001 - reported with the wake
            wake.detail = f"{type(err).__name__}: {err}"
        return wake

    async def replays(self, cache: int, indices: Sequence[int]) -> Replays:
        await self.start_worker(cache, f"replays-{cache}")
        before = await self.settled_rss()
        agent = self.client()
        began = time.monotonic()

        async def touch(index: object) -> bool:
            await agent.state(self.session_ids[index])  # type: ignore[index]
            return True

        failed = await _bounded(indices, QUERY_CONCURRENCY, touch)
        took = time.monotonic() - began
        return Replays(cache, len(indices), took, before, await self.settled_rss(), failed)


async def _first_task(handle: object, after_event: int) -> tuple[float, float]:
    """From history: the first workflow task after event ``after_event``, its scheduled-to-started
    and started-to-completed seconds (nan when not found)."""
    times: dict[int, float] = {}
    async for event in handle.fetch_history_events():  # type: ignore[attr-defined]
        if event.event_id <= after_event:
            continue
        kind = event.event_type
        if kind in (EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
                    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) and kind not in times:
            times[kind] = event.event_time.ToDatetime().timestamp()
        if EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED in times:
            break
    scheduled = times.get(EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, math.nan)
    started = times.get(EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED, math.nan)
    completed = times.get(EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, math.nan)
    return started - scheduled, completed - started


async def measure(
    address: str,
    workdir: Path,
    server_db: Path,
    *,
    sessions: int = 20,
    checkpoints: Sequence[int] = (10, 20),
    max_cached_workflows: int | None = None,
    wakes: int = 0,
    small_cache: int | None = None,
    replays: int | None = None,
    start_concurrency: int = DEFAULT_START_CONCURRENCY,
    seed: int = 1,
    server_pid: int | None = None,
    progress: Progress = _quiet,
) -> IdleReport:
    """The three phases against the server at ``address`` (its SQLite file ``server_db``), files
    under ``workdir``. ``small_cache`` 0 skips the replays; None is a tenth of the cache."""
    cache = max_cached_workflows or default_cache(sessions)
    check_parameters(sessions, checkpoints, cache, wakes, start_concurrency)
    workdir.mkdir(parents=True, exist_ok=True)
    settings = WorkerSettings(max_cached_workflows=cache, database_url=f"sqlite:///{workdir / 'agentrt.db'}")
    report = IdleReport(settings, sessions, start_concurrency, load_before=load_average(), poll_seconds=DELTA_POLL_SECONDS)
    rng = random.Random(seed)
    async with _Idle(address, workdir, server_db, server_pid, settings, progress) as bench:
        await bench.start_worker(cache, "main")
        report.baseline = await bench.footprint()
        began, failed, done = time.monotonic(), 0, 0
        for checkpoint in checkpoints:
            failed += await bench.start_sessions(checkpoint - done, start_concurrency, began, sessions)
            done = checkpoint
            seconds = time.monotonic() - began
            point = Checkpoint(checkpoint, failed, seconds, await bench.footprint(), load_average())
            report.checkpoints.append(point)
            progress(f"checkpoint {checkpoint}: worker RSS {point.footprint.worker_rss_mib:.0f} MiB, "
                     f"{failed} failed, load average {point.load}")
        agent = bench.client()
        for group, index in wake_candidates(len(bench.session_ids), cache, wakes, rng) if wakes else []:
            report.wakes.append(await bench.wake(agent, group, index))
        if wakes:
            progress(f"wakes: first token p95 evicted {report.wake_ms('evicted', 'first_token', 95):.0f} ms, "
                     f"cached {report.wake_ms('cached', 'first_token', 95):.0f} ms")
        small = cache // 10 if small_cache is None else small_cache
        if small > 0:
            indices = rng.sample(range(len(bench.session_ids)), min(len(bench.session_ids), replays or 2 * cache))
            for size in (cache, small):
                report.replays.append(await bench.replays(size, indices))
                progress(f"replays with cache {size}: RSS {report.replays[-1].rss_after_mib:.0f} MiB")
    report.load_after = load_average()
    return report


async def run_benchmark(*, workdir: Path | None = None, progress: Progress = _quiet, **options: object) -> IdleReport:
    """Self-contained: a dev server and a SQLite store in ``workdir`` (default: a temporary
    directory, removed afterwards), ``measure(**options)``, then everything stopped."""
    own_dir = workdir is None
    directory = Path(tempfile.mkdtemp(prefix="agentrt-idle-")) if workdir is None else workdir
    directory.mkdir(parents=True, exist_ok=True)
    server = DevServer.on_free_ports(directory / "server", SERVER_ARGS)
    try:
        await server.start()
        progress(f"temporal dev server on {server.address}; files in {directory}")
        pid = server.process.pid if server.process is not None else None
        assert server.db_file is not None
        return await measure(server.address, directory, server.db_file, server_pid=pid, progress=progress, **options)  # type: ignore[arg-type]
    finally:
        server.stop()
        if own_dir:
            shutil.rmtree(directory, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.idle", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=DEFAULT_SESSIONS, help="idle sessions to start (default 10000)")
    parser.add_argument("--checkpoints", type=counts, default=None,
                        help="session counts at which to measure, the last one --sessions (default 1000,5000,10000)")
    parser.add_argument("--max-cached-workflows", type=int, default=None,
                        help="the worker's sticky cache (default a tenth of --sessions, at most 1000)")
    parser.add_argument("--wakes", type=int, default=DEFAULT_WAKES, help="evicted sessions to wake, and as many cached ones (default 50)")
    parser.add_argument("--small-cache", type=int, default=None, help="cache of the second replay worker (default a tenth; 0 skips the replays)")
    parser.add_argument("--replays", type=int, default=None, help="idle sessions each replay worker replays (default twice the cache)")
    parser.add_argument("--start-concurrency", type=int, default=DEFAULT_START_CONCURRENCY, help="first turns at once (default 50)")
    parser.add_argument("--seed", type=int, default=1, help="which sessions are woken and replayed")
    parser.add_argument("--workdir", type=Path, default=None, help="keep run files here (default: a removed temp dir)")
    args = parser.parse_args(argv)
    checkpoints = args.checkpoints or [c for c in (1000, 5000) if c < args.sessions] + [args.sessions]
    cache = args.max_cached_workflows or default_cache(args.sessions)
    try:
        check_parameters(args.sessions, checkpoints, cache, args.wakes, args.start_concurrency)
    except ValueError as err:
        parser.error(str(err))
    run_and_exit(
        lambda: run_benchmark(
            workdir=args.workdir, progress=print_progress, sessions=args.sessions, checkpoints=checkpoints,
            max_cached_workflows=cache, wakes=args.wakes, small_cache=args.small_cache, replays=args.replays,
            start_concurrency=args.start_concurrency, seed=args.seed,
        ),
        lambda report: report.passed,
        settings=True,
    )


if __name__ == "__main__":
    main()
