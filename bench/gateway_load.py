"""The HTTP gateway under load: many SSE clients following sessions' streams while messages are
sent at a fixed rate, for minutes. Nothing may fail, be lost or come twice; the figures are how
long a send takes to be accepted, how long a streamed token takes to reach its client, and what
the gateway process holds in memory.

    python -m bench.gateway_load [--clients 200] [--sends-per-s 50] [--minutes 5] [--chunks 20]
        [--chunk-ms 25] [--drain-seconds 120] [--database-url URL] [--workdir DIR]

Starts, each a process of its own (``bench._long_stream_stack``): a Temporal dev server, the
paced model (``bench._paced_provider``: OpenAI Chat Completions on loopback, every answer
``--chunks`` chunks one every ``--chunk-ms`` ms), one ``agentrt worker`` and the gateway
(``bench._gateway_process``: ``create_app`` under uvicorn as ``agentrt serve`` runs it), on one
SQLite store (or ``--database-url``).

``--clients`` sessions are started over HTTP, 16 at a time (``POST /v1/sessions``, the first turn
with it), and one SSE client per session follows its stream (``GET /v1/sessions/{id}/stream``,
native encoding, httpx-sse, a connection each) from its first item to its ``SessionArchived``. Then for
``--minutes`` one ``POST /v1/sessions/{id}/messages`` (with an ``Idempotency-Key``) goes out every
``1 / --sends-per-s`` seconds on a fixed schedule, whatever the answers before it (an open loop),
to the sessions in turn. After the window, the sessions' last turns get up to ``--drain-seconds``
to end, then every session is archived (``POST …/archive``: a turn still queued is cancelled) and
the clients read to the end.

What is measured:

- **errors**: every non-2xx answer or transport failure of a create, send or archive; at the
  clients, every item of the session's stream (as a reader of the store hands it out after the
  fact, ``bench._long_stream_clients.reference``) never received, received twice, out of order,
  or not in that stream; every stream that ended or was refused before its ``SessionArchived``
  (the client resumes it with ``Last-Event-ID`` and counts it) and every client that never got there;
- **send → accepted**: from just before a send to its 202, in seconds;
- **delta → client**: from the moment the model sent a delta's chunk to the client parsing it,
  for the model calls of the window (not the first turns' backlog a client reads when it
  connects): the model stamps the time its request arrived in an answer's first chunk and sends
  chunk ``i`` ``i × --chunk-ms`` after it, so this is model → worker → store (the worker writes a
  call's deltas every 0.2 s or 32 chunks) → gateway → client;
- the gateway process's RSS when the clients have connected and at the end of the window, and its
  peak; turns ended by status; the load average at the start and the end.

The last line is exactly

    gateway_load clients=C sends_per_s=R minutes=M errors=E send_accepted_p50=A p95=B delta_to_client_p50=D p95=F gateway_rss_mb=X->Y

(seconds; MiB). The exit code is 0 when ``errors`` is 0.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import shutil
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from agentrt.store import Store
from bench._bench_worker import cpu_seconds
from bench._cli import print_progress, run_and_exit
from bench._long_stream_clients import DELTA, Reference, Tally, follow_sse, guarded, reference
from bench._long_stream_stack import Stack, load_average, rss_mb
from bench.concurrency import percentile

__all__ = ["Reference", "Report", "Settings", "TimedTally", "main", "run_benchmark"]

CREATES_AT_ONCE = 16  # sessions started at a time before the window (each start waits for a worker to take it)
FOLLOWERS_TIMEOUT = 120.0  # seconds for the clients to read to the end once the sessions are archived
_ARRIVED = re.compile(r"\[(\d+(?:\.\d+)?)\] ")
_CHUNK = re.compile(r"t\d+c(\d+) ")


@dataclass
class Settings:
    clients: int = 200
    sends_per_s: float = 50.0
    minutes: float = 5.0
    chunks: int = 20
    chunk_ms: float = 25.0
    drain_seconds: float = 120.0
    database_url: str = ""
    workdir: str = ""


@dataclass
class TimedTally(Tally):
    """A ``Tally`` that also times each delta from the model's chunk to this client
    (``latencies``, seconds) of the model calls that arrived at or after ``since``
    (``time.time()``: not the backlog a client reads when it connects), and keeps the status of
    each turn that ended (``turns``)."""

    chunk_seconds: float = 0.0
    since: float = float("inf")
    latencies: list[float] = field(default_factory=list)
    turns: dict[str, str] = field(default_factory=dict)
    arrived: dict[tuple[str, int, int], float] = field(default_factory=dict)

    def take_item(self, item_id: str, event: str, data: dict[str, object]) -> None:
        now = time.time()
        super().take_item(item_id, event, data)
        if event == DELTA:
            self.time_delta(now, (str(data["turn_id"]), int(data["round"]), int(data["attempt"])), str(data.get("text", "")))  # type: ignore[arg-type]
        elif event == "TurnEnded":
            self.turns[str(data.get("turn_id"))] = str(data.get("status"))

    def time_delta(self, now: float, call: tuple[str, int, int], text: str) -> None:
        """The delta ``text`` of model call ``call`` parsed at ``now`` (``time.time()``): its
        latency from when the model sent its last chunk (none before the call's first delta)."""
        if (stamp := _ARRIVED.match(text)) is not None and float(stamp.group(1)) >= self.since:
            self.arrived[call] = float(stamp.group(1))
        chunks = _CHUNK.findall(text)
        if call in self.arrived and chunks:
            self.latencies.append(now - (self.arrived[call] + int(chunks[-1]) * self.chunk_seconds))


@dataclass
class Report:
    settings: Settings
    tallies: list[TimedTally] = field(default_factory=list)
    references: dict[str, Reference] = field(default_factory=dict)  # by session id
    sessions: dict[str, str] = field(default_factory=dict)  # tally name -> session id
    http_errors: Counter[str] = field(default_factory=Counter)  # "create 503", "send ConnectError", ...
    send_seconds: list[float] = field(default_factory=list)
    sends: int = 0
    window_seconds: float = 0.0
    undrained: int = 0  # sessions whose last turn had not ended when the drain ended
    rss: tuple[float, float] = (float("nan"), float("nan"))
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds over the window: gateway, worker, benchmark
    peak_mb: float = float("nan")
    load: tuple[str, str] = ("", "")
    run_dir: str = ""

    def stream_errors(self, tally: TimedTally) -> int:
        ref = self.references.get(self.sessions.get(tally.name, ""))
        faults = tally.duplicates + tally.out_of_order + tally.mismatched + tally.breaks + (0 if tally.ended else 1)
        return faults + (tally.gaps(ref) + tally.extras(ref) if ref is not None else 1)

    def errors(self) -> int:
        return sum(self.http_errors.values()) + sum(self.stream_errors(t) for t in self.tallies)

    def latencies(self) -> list[float]:
        return [x for t in self.tallies for x in t.latencies]

    def turn_statuses(self) -> Counter[str]:
        return Counter(status for t in self.tallies for status in t.turns.values())

    def settings_text(self) -> str:
        s = self.settings
        return (
            f"clients={s.clients} (one session each) sends={s.sends_per_s:g}/s for {s.minutes:g} min; answer={s.chunks} chunks "
            f"every {s.chunk_ms:g} ms; drain up to {s.drain_seconds:g} s; store {s.database_url or 'SQLite'}; run directory {self.run_dir}"
        )

    def table(self) -> str:
        sends, deltas = self.send_seconds, self.latencies()
        rows = [f"{'figure':<26}{'n':>9}{'p50 s':>9}{'p95 s':>9}{'p99 s':>9}{'max s':>9}"]
        for name, values in (("send -> accepted", sends), ("delta -> client", deltas)):
            rows.append(
                f"{name:<26}{len(values):>9}{percentile(values, 50):>9.3f}{percentile(values, 95):>9.3f}"
                f"{percentile(values, 99):>9.3f}{max(values, default=float('nan')):>9.3f}"
            )
        rate = self.sends / self.window_seconds if self.window_seconds else float("nan")
        rows.append(f"sends: {self.sends} in {self.window_seconds:.0f} s ({rate:.1f}/s); sessions not drained: {self.undrained}")
        statuses = ", ".join(f"{status} {n}" for status, n in sorted(self.turn_statuses().items())) or "none"
        rows.append(f"turns ended (as the clients saw them): {statuses}")
        http = ", ".join(f"{what} x{n}" for what, n in sorted(self.http_errors.items())) or "none"
        rows.append(f"HTTP errors: {http}")
        faults = Counter[str]()
        for t in self.tallies:
            ref = self.references.get(self.sessions.get(t.name, ""))
            faults.update({
                "dropped": t.gaps(ref) if ref else 0, "duplicated": t.duplicates, "out of order": t.out_of_order + t.mismatched,
                "extra": t.extras(ref) if ref else 0, "streams ended early": t.breaks, "clients not at the end": 0 if t.ended else 1,
            })
        rows.append("stream faults: " + ", ".join(f"{what} {n}" for what, n in faults.items()))
        received = sum(t.deltas for t in self.tallies), sum(t.events for t in self.tallies)
        rows.append(f"items received: {received[0]:,} deltas, {received[1]:,} events over {len(self.tallies)} streams")
        rows.append(f"gateway RSS MiB: {self.rss[0]:.1f} with the clients connected, {self.rss[1]:.1f} at the window's end; peak {self.peak_mb:.1f}")
        if self.cpu and self.window_seconds:
            shares = ", ".join(f"{name} {seconds / self.window_seconds:.0%}" for name, seconds in self.cpu.items())
            rows.append(f"CPU over the window (of one core): {shares}")
        rows.append(f"load average (1, 5, 15 min): {self.load[0]} at the start, {self.load[1]} at the end")
        return "\n".join(rows)

    def line(self) -> str:
        s, sends, deltas = self.settings, self.send_seconds, self.latencies()
        return (
            f"gateway_load clients={s.clients} sends_per_s={s.sends_per_s:g} minutes={s.minutes:g} errors={self.errors()} "
            f"send_accepted_p50={percentile(sends, 50):.3f} p95={percentile(sends, 95):.3f} "
            f"delta_to_client_p50={percentile(deltas, 50):.3f} p95={percentile(deltas, 95):.3f} "
            f"gateway_rss_mb={self.rss[0]:.0f}->{self.rss[1]:.0f}"
        )

    @property
    def ok(self) -> bool:
        return bool(self.tallies) and self.errors() == 0 and bool(self.send_seconds) and bool(self.latencies())


class _Run:
    """One run on a started ``Stack``: the sessions, their clients, the sends (``run``)."""

    def __init__(self, settings: Settings, stack: Stack, progress: Callable[[str], None]) -> None:
        self.settings = settings
        self.stack = stack
        self.say = progress
        self.report = Report(settings, run_dir=str(stack.run_dir))
        self.headers = {"Authorization": f"Bearer {stack.token}"}
        self.http = httpx.AsyncClient(  # past the gateway's own 60 s bound on an update, so its 503 is what is seen
            base_url=stack.gateway_url, timeout=httpx.Timeout(90.0, connect=10.0),
            # a send waits for no other; an idle connection is dropped before uvicorn's 5 s keep-alive ends it under a request
            limits=httpx.Limits(max_connections=1024, max_keepalive_connections=256, keepalive_expiry=3.0),
        )
        self.last_turn: dict[str, tuple[int, str]] = {}  # session id -> (turn number, turn id) of its last send
        self.pending: set[asyncio.Task[None]] = set()

    async def post(self, what: str, path: str, body: dict[str, object], headers: dict[str, str] | None = None) -> dict[str, object] | None:
        """POST ``body`` as JSON; its answer, or None after counting a non-2xx or a transport failure."""
        try:
            response = await self.http.post(path, json=body, headers={**self.headers, **(headers or {})})
        except httpx.TransportError as err:
            self.report.http_errors[f"{what} {type(err).__name__}"] += 1
            return None
        if not response.is_success:
            self.report.http_errors[f"{what} {response.status_code}"] += 1
            return None
        return response.json()

    def note_turn(self, session_id: str, turn_id: str) -> None:
        number = int(turn_id.rsplit("-", 1)[-1])
        if number > self.last_turn.get(session_id, (0, ""))[0]:
            self.last_turn[session_id] = (number, turn_id)

    async def create(self, i: int) -> str | None:
        body = {"text": "turn 1", "workspace": "ws", "tools": [], "session_id": f"gl-{i:04d}-{uuid.uuid4().hex[:6]}"}
        created = await self.post("create", "/v1/sessions", body, {"Idempotency-Key": str(uuid.uuid4())})
        if created is None:
            return None
        self.note_turn(str(created["session_id"]), str(created["turn_id"]))
        return str(created["session_id"])

    async def send(self, session_id: str, number: int) -> None:
        began = time.monotonic()
        sent = await self.post("send", f"/v1/sessions/{session_id}/messages", {"text": f"message {number}"}, {"Idempotency-Key": str(uuid.uuid4())})
        if sent is not None:
            self.report.send_seconds.append(time.monotonic() - began)
            self.note_turn(session_id, str(sent["turn_id"]))

    def follow(self, name: str, session_id: str) -> tuple[TimedTally, asyncio.Task[None]]:
        tally = TimedTally(name, "sse", chunk_seconds=self.settings.chunk_ms / 1000)
        http = httpx.AsyncClient(base_url=self.stack.gateway_url, timeout=httpx.Timeout(60.0, connect=10.0))

        async def run() -> None:
            try:
                await follow_sse(http, session_id, self.stack.token, tally, random.Random(0), 0)  # 0: no drops on purpose
            finally:
                await http.aclose()

        return tally, asyncio.create_task(guarded(tally, run))

    async def sends(self, session_ids: list[str]) -> None:
        """One send every 1 / sends_per_s seconds to the sessions in turn until the window has passed."""
        s, report = self.settings, self.report
        began, step, k = time.monotonic(), 1 / s.sends_per_s, 0
        while (at := began + k * step) < began + s.minutes * 60:
            await asyncio.sleep(at - time.monotonic())
            task = asyncio.create_task(self.send(session_ids[k % len(session_ids)], k))
            self.pending.add(task)
            task.add_done_callback(self.pending.discard)
            k += 1
            if k % max(1, int(s.sends_per_s * 30)) == 0:
                self.say(f"[{time.monotonic() - began:5.0f}s] {k} sends, {len(report.send_seconds)} accepted, {len(self.pending)} in flight")
        if self.pending:
            await asyncio.wait(list(self.pending))
        report.sends, report.window_seconds = k, time.monotonic() - began

    async def drained(self, followers: dict[str, TimedTally]) -> int:
        """Wait (up to drain_seconds) until every session's client saw its last turn end; the
        number of sessions whose last turn had not."""
        deadline = time.monotonic() + self.settings.drain_seconds

        def left() -> int:
            return sum(1 for sid, tally in followers.items() if self.last_turn[sid][1] not in tally.turns)

        while left() and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        return left()

    async def run(self) -> Report:
        report, s = self.report, self.settings
        report.load = (load_average(), "")
        starting = asyncio.Semaphore(CREATES_AT_ONCE)

        async def create(i: int) -> str | None:
            async with starting:
                return await self.create(i)

        started = await asyncio.gather(*(create(i) for i in range(s.clients)))
        if report.http_errors:
            self.say(f"creates refused: {dict(report.http_errors)}")
        session_ids = [sid for sid in started if sid is not None]
        if not session_ids:
            raise RuntimeError(f"no session started: {dict(report.http_errors)}")
        followers: dict[str, TimedTally] = {}
        tasks: list[asyncio.Task[None]] = []
        for i, sid in enumerate(session_ids):
            tally, task = self.follow(f"sse-{i + 1:03d}", sid)
            followers[sid], report.sessions[tally.name] = tally, sid
            tasks.append(task)
        report.tallies = list(followers.values())
        deadline = time.monotonic() + 60
        while any(not t.events for t in report.tallies) and time.monotonic() < deadline:  # every client has its first item
            await asyncio.sleep(0.1)
        rss_start = rss_mb(self.stack.gateway_pid)
        self.say(f"{len(session_ids)} sessions started and followed; gateway RSS {rss_start:.1f} MiB; sending")
        pids = {"gateway": self.stack.gateway_pid, "worker": self.stack.children["worker"].pid, "benchmark": os.getpid()}
        cpu_start = {name: cpu_seconds(pid) for name, pid in pids.items()}
        now = time.time()
        for tally in report.tallies:
            tally.since = now
        await self.sends(session_ids)
        report.cpu = {name: cpu_seconds(pid) - cpu_start[name] for name, pid in pids.items()}
        report.rss = (rss_start, rss_mb(self.stack.gateway_pid))
        report.undrained = await self.drained(followers)
        self.say(f"window over: {report.sends} sends; {report.undrained} sessions not drained; archiving")
        await asyncio.gather(*(self.post("archive", f"/v1/sessions/{sid}/archive", {}) for sid in session_ids))
        _, pending = await asyncio.wait(tasks, timeout=FOLLOWERS_TIMEOUT)
        for task in pending:
            task.cancel()
        report.peak_mb = rss_mb(self.stack.gateway_pid, "VmHWM")
        report.load = (report.load[0], load_average())
        with Store.open(self.stack.store_url) as store:
            for sid in session_ids:
                report.references[sid] = await asyncio.to_thread(reference, store, sid)
        await self.http.aclose()
        return report


async def run_benchmark(settings: Settings, progress: Callable[[str], None] = print_progress) -> Report:
    own_dir = not settings.workdir
    run_dir = Path(tempfile.mkdtemp(prefix="agentrt-gateway-load-")) if own_dir else Path(settings.workdir)
    run_dir.mkdir(parents=True, exist_ok=True)
    stack = Stack(run_dir, settings.chunks, settings.chunk_ms, max_streams_per_principal=settings.clients + 4, database_url=settings.database_url)
    try:
        await stack.start()
        (stack.workspace_root / "ws").mkdir(parents=True, exist_ok=True)
        progress(f"server {stack.server.address if stack.server else '?'}, gateway {stack.gateway_url}, files in {run_dir}")
        async with httpx.AsyncClient(base_url=stack.gateway_url, timeout=30) as http:
            while (await http.get("/healthz")).status_code != 200:
                await asyncio.sleep(0.1)
        return await _Run(settings, stack, progress).run()
    finally:
        stack.stop()
        if own_dir:
            shutil.rmtree(run_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.gateway_load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=200, help="sessions, each followed by one SSE client (default 200)")
    parser.add_argument("--sends-per-s", type=float, default=50.0, help="messages sent per second, to the sessions in turn (default 50)")
    parser.add_argument("--minutes", type=float, default=5.0, help="minutes of sends (default 5)")
    parser.add_argument("--chunks", type=int, default=20, help="chunks of each answer (default 20)")
    parser.add_argument("--chunk-ms", type=float, default=25.0, help="ms between two chunks (default 25)")
    parser.add_argument("--drain-seconds", type=float, default=120.0, help="seconds the last turns get to end after the window (default 120)")
    parser.add_argument("--database-url", default="", help="agentrt's store (default SQLite in the run directory)")
    parser.add_argument("--workdir", default="", help="keep the run's files (logs, store, server database) here")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.sends_per_s <= 0 or args.minutes <= 0 or args.chunks < 1 or args.chunk_ms < 0 or args.drain_seconds < 0:
        parser.error("need --clients >= 1, --sends-per-s > 0, --minutes > 0, --chunks >= 1, --chunk-ms >= 0, --drain-seconds >= 0")
    settings = Settings(
        clients=args.clients, sends_per_s=args.sends_per_s, minutes=args.minutes, chunks=args.chunks, chunk_ms=args.chunk_ms,
        drain_seconds=args.drain_seconds, database_url=args.database_url, workdir=args.workdir,
    )
    run_and_exit(lambda: run_benchmark(settings), lambda report: report.ok, settings=True)


if __name__ == "__main__":
    main()
