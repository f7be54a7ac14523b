"""Many clients following one session's token stream for minutes while the session runs turn
after turn: nothing lost, nothing twice, and nothing of it in the session's history.

    python -m bench.long_stream [--clients 20] [--python-clients 2] [--minutes 10] [--chunks 300]
        [--chunk-ms 20] [--drop-seconds 120] [--suggest-continue-as-new 0] [--database-url URL]
        [--workdir DIR] [--seed 1]

Starts its own Temporal dev server (free ports, database in the run directory), the paced model
(``bench._paced_provider``: an OpenAI Chat Completions server on loopback streaming every answer
as ``--chunks`` chunks, one every ``--chunk-ms`` ms), one agentrt worker (``agentrt worker``)
and the HTTP gateway (``bench._gateway_process``: ``create_app`` under uvicorn, its
``StreamHub`` readable), each a process of its own, on one SQLite store (or ``--database-url``).

Two sessions run the same turns side by side, each turn one model call streamed by the paced
model: the **followed** session and a **control** session nobody follows. Each turn is sent to
both, and the next once both have ended, until ``--minutes`` have passed; then both are archived.
``--clients`` followers follow the followed session from its first turn to its
``SessionArchived``: ``--clients`` minus ``--python-clients`` read the gateway's
``GET /v1/sessions/{id}/stream`` with httpx-sse (native encoding), each dropping its connection
after a time drawn from an exponential distribution of mean ``--drop-seconds`` and resuming with
``Last-Event-ID``; the others follow each turn with ``AgentClient.sessions.deltas``.

What is measured:

- per follower: deltas and events received, **dropped** (items of the session's stream, as a
  reader of the store hands them out after the fact, never received; for a Python follower, delta
  rows of the store never received), **duplicated** (items received twice), out-of-order items,
  items that should not have come, connections dropped on purpose and broken, all resumed;
- per session: turns, workflow runs (continue-as-new followed back), ``SessionContinuedAsNew``
  events, history bytes (the server's ``history_size_bytes`` summed over the runs) per turn and
  by source; the followed session's over the control's is **ratio**;
- the gateway process's RSS over the window and its peak, and its hub's store reads;
- the machine's load average (/proc/loadavg) at the start and at the end.

The last line is exactly

    long_stream clients=C minutes=M deltas=D dropped=X duplicated=Y continue_as_new=N history_bytes_per_turn=H baseline_history_bytes_per_turn=B ratio=R

``deltas``: delta rows the followed session wrote; ``dropped``, ``duplicated``: summed over the
followers; ``continue_as_new``: the followed session's. Exit code 0 when every follower reached the
end with nothing dropped, duplicated, out of order or extra, and both sessions continued as new
equally often.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from temporalio.client import WorkflowExecutionStatus

from agentrt.client import AgentClient
from agentrt.schemas import SessionConfig
from agentrt.store import Store
from agentrt.worker import AgentrtConfig
from agentrt.workflows.session import workflow_id_for
from bench._cli import print_progress, run_and_exit
from bench._long_stream_clients import Reference, Tally, follow_python, follow_sse, guarded, reference
from bench._long_stream_stack import PRINCIPAL, PROFILE, Stack, load_average, rss_mb
from bench.history import RunSize, run_chain

__all__ = ["Reference", "Report", "SessionFacts", "Settings", "Tally", "main", "run_benchmark"]

FOLLOWERS_TIMEOUT = 180.0  # seconds for the followers to read to the end once the sessions are archived


@dataclass
class Settings:
    clients: int = 20
    python_clients: int = 2
    minutes: float = 10.0
    chunks: int = 300
    chunk_ms: float = 20.0
    drop_seconds: float = 120.0
    suggest_continue_as_new: int = 0
    database_url: str = ""
    workdir: str = ""
    seed: int = 1

    @property
    def sse_clients(self) -> int:
        return self.clients - self.python_clients


@dataclass
class SessionFacts:
    """One session after it was archived."""

    name: str
    session_id: str
    turns: int
    runs: list[RunSize]
    continued_events: int  # SessionContinuedAsNew events in the store
    by_source: dict[str, int]  # serialized event bytes by source (bench.history's breakdown)
    by_kind: dict[str, int]  # history events by kind (their attributes' name)

    @property
    def continue_as_new(self) -> int:
        return len(self.runs) - 1

    @property
    def history_bytes(self) -> int:
        return sum(r.history_bytes for r in self.runs)

    @property
    def history_events(self) -> int:
        return sum(r.history_events for r in self.runs)

    @property
    def bytes_per_turn(self) -> float:
        return self.history_bytes / self.turns if self.turns else float("nan")


@dataclass
class Report:
    settings: Settings
    tallies: list[Tally] = field(default_factory=list)
    reference: Reference | None = None
    followed: SessionFacts | None = None
    control: SessionFacts | None = None
    turn_seconds: list[float] = field(default_factory=list)
    window_seconds: float = 0.0
    rss: list[tuple[str, float]] = field(default_factory=list)  # (when, MiB) of the gateway process
    gateway_peak_mb: float = float("nan")
    hub_reads: tuple[int, int] = (0, 0)  # the hub's store reads at the window's start and end
    load: tuple[str, str] = ("", "")
    run_dir: str = ""

    def dropped(self) -> int:
        assert self.reference is not None
        return sum(t.gaps(self.reference) for t in self.tallies)

    def duplicated(self) -> int:
        return sum(t.duplicates for t in self.tallies)

    def ratio(self) -> float:
        assert self.followed is not None and self.control is not None
        return self.followed.bytes_per_turn / self.control.bytes_per_turn

    def settings_text(self) -> str:
        s = self.settings
        can = f"after {s.suggest_continue_as_new} events" if s.suggest_continue_as_new else "at its default (4,096 events or 4 MiB)"
        return (
            f"followers={s.clients} ({s.sse_clients} on the gateway's SSE stream, {s.python_clients} on AgentClient.sessions.deltas) "
            f"minutes={s.minutes:g} answer={s.chunks} chunks every {s.chunk_ms:g} ms ({s.chunks * s.chunk_ms / 1000:g} s) "
            f"drop mean={s.drop_seconds:g} s; server suggests continue-as-new {can}; run directory {self.run_dir}"
        )

    def table(self) -> str:
        assert self.reference is not None and self.followed is not None and self.control is not None
        ref = self.reference
        rows = [f"{'follower':<10}{'kind':<8}{'deltas':>8}{'events':>8}{'dropped':>9}{'duplicated':>12}"
                f"{'order':>7}{'extra':>7}{'drops':>7}{'breaks':>8}  ended  last error"]
        for t in self.tallies:
            rows.append(
                f"{t.name:<10}{t.kind:<8}{t.deltas:>8}{t.events:>8}{t.gaps(ref):>9}{t.duplicates:>12}"
                f"{t.out_of_order + t.mismatched:>7}{t.extras(ref):>7}{t.drops:>7}{t.breaks:>8}  {'yes' if t.ended else 'NO ':<5}  {t.error[:60]}"
            )
        rows.append(
            f"followed session: {ref.rows:,} delta rows written ({len(ref.written):,} distinct), {len(ref.handed_out):,} deltas "
            f"and {len(ref.event_seqs):,} events handed out by a reader of the store after the fact"
        )
        rows.append(f"{'session':<10}{'turns':>6}{'runs':>6}{'CaN events':>12}{'history bytes':>15}{'bytes/turn':>12}{'events/turn':>13}")
        for facts in (self.followed, self.control):
            rows.append(
                f"{facts.name:<10}{facts.turns:>6}{len(facts.runs):>6}{facts.continued_events:>12}{facts.history_bytes:>15,}"
                f"{facts.bytes_per_turn:>12,.0f}{facts.history_events / facts.turns:>13.2f}"
            )
        for facts in (self.followed, self.control):
            parts = ", ".join(f"{name} {size:,}" for name, size in facts.by_source.items())
            rows.append(f"{facts.name} history bytes by source: {parts}")
        differ = {
            kind: self.followed.by_kind.get(kind, 0) - self.control.by_kind.get(kind, 0)
            for kind in sorted(set(self.followed.by_kind) | set(self.control.by_kind))
        }
        rows.append(
            "history events by kind, followed minus control: "
            + (", ".join(f"{kind} {n:+d}" for kind, n in differ.items() if n) or "none differ")
        )
        rows.append(
            f"history bytes per turn, followed / control: {self.ratio():.3f}; continue-as-new: followed "
            f"{self.followed.continue_as_new}, control {self.control.continue_as_new}"
        )
        if self.turn_seconds:
            rows.append(
                f"turns: {len(self.turn_seconds)} in {self.window_seconds:.0f} s, each (both sessions) median "
                f"{statistics.median(self.turn_seconds):.2f} s, max {max(self.turn_seconds):.2f} s"
            )
        samples = ", ".join(f"{when} {mb:.1f}" for when, mb in self.rss)
        rows.append(f"gateway RSS MiB: {samples}; peak {self.gateway_peak_mb:.1f}")
        reads = self.hub_reads[1] - self.hub_reads[0]
        per_second = reads / self.window_seconds if self.window_seconds else float("nan")
        rows.append(
            f"gateway hub store reads over the window: {reads:,} ({per_second:.1f}/s) for "
            f"{self.settings.sse_clients} SSE followers of one session (their own backlog reads on resuming included)"
        )
        rows.append(f"load average (1, 5, 15 min): {self.load[0]} at the start, {self.load[1]} at the end")
        return "\n".join(rows)

    def line(self) -> str:
        assert self.reference is not None and self.followed is not None and self.control is not None
        return (
            f"long_stream clients={self.settings.clients} minutes={self.settings.minutes:g} deltas={self.reference.rows} "
            f"dropped={self.dropped()} duplicated={self.duplicated()} continue_as_new={self.followed.continue_as_new} "
            f"history_bytes_per_turn={self.followed.bytes_per_turn:.0f} "
            f"baseline_history_bytes_per_turn={self.control.bytes_per_turn:.0f} ratio={self.ratio():.3f}"
        )

    @property
    def ok(self) -> bool:
        ref = self.reference
        if ref is None or self.followed is None or self.control is None:
            return False
        clean = all(
            t.ended and t.gaps(ref) == 0 and t.duplicates == 0 and t.out_of_order == 0 and t.mismatched == 0
            and t.extras(ref) == 0
            for t in self.tallies
        )
        return clean and self.followed.continue_as_new == self.control.continue_as_new


# ---------------------------------------------------------------- the run


async def _session_facts(agent: AgentClient, store: Store, name: str, session_id: str, turns: int) -> SessionFacts:
    workflow_id = workflow_id_for(session_id)
    handle = agent.temporal.get_workflow_handle(workflow_id)
    for _ in range(600):
        if (await handle.describe()).status != WorkflowExecutionStatus.RUNNING:
            break
        await asyncio.sleep(0.1)
    runs = await run_chain(agent.temporal, workflow_id)
    by_source, by_kind = await _history_counts(agent, workflow_id, [r.run_id for r in runs])

    def continued() -> int:
        count, after = 0, 0
        while page := store.events(session_id, after, 5000):
            count += sum(1 for e in page if e.type == "SessionContinuedAsNew")
            after = page[-1].seq
        return count

    return SessionFacts(name, session_id, turns, runs, await asyncio.to_thread(continued), by_source, by_kind)


async def _history_counts(agent: AgentClient, workflow_id: str, run_ids: list[str]) -> tuple[dict[str, int], dict[str, int]]:
    """The runs' history as bench.history breaks it down (serialized bytes by source: an activity's
    events under ``activity <type>``, workflow task events, ``other``), and its events by kind."""
    by_source: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    for run_id in run_ids:
        activity_types: dict[int, str] = {}
        async for event in agent.temporal.get_workflow_handle(workflow_id, run_id=run_id).fetch_history_events():
            kind = event.WhichOneof("attributes") or ""
            if kind == "activity_task_scheduled_event_attributes":
                source = activity_types[event.event_id] = f"activity {event.activity_task_scheduled_event_attributes.activity_type.name}"
            elif kind.startswith("activity_task_"):
                source = activity_types.get(getattr(event, kind).scheduled_event_id, "activity ?")
            else:
                source = "workflow tasks" if kind.startswith("workflow_task_") else "other"
            by_source[source] += event.ByteSize()
            by_kind[kind.removesuffix("_event_attributes")] += 1
    return dict(by_source.most_common()), dict(by_kind)


class _Run:
    """One run on a started ``Stack``: the two sessions, the followers and the samples (``run``)."""

    def __init__(self, settings: Settings, stack: Stack, agent: AgentClient, store: Store, progress: Callable[[str], None]) -> None:
        self.settings = settings
        self.stack = stack
        self.agent = agent
        self.store = store
        self.say = progress
        self.report = Report(settings, run_dir=str(stack.run_dir))
        suffix = uuid.uuid4().hex[:8]
        self.followed = f"ls-followed-{suffix}"
        self.control = f"ls-control--{suffix}"
        self.turn_queues: list[asyncio.Queue[str | None]] = []
        self.began = 0.0

    def config(self, session_id: str) -> SessionConfig:
        workspace = self.stack.workspace_root / session_id
        workspace.mkdir(parents=True, exist_ok=True)
        return self.agent.sessions.new_config(str(workspace), session_id=session_id, profile=PROFILE, tools=[])

    def sample(self, when: str) -> None:
        self.report.rss.append((when, rss_mb(self.stack.gateway_pid)))

    async def sample_over_window(self, seconds: float) -> None:
        step = seconds / 10
        for i in range(1, 10):
            await asyncio.sleep(self.began + i * step - time.monotonic())
            self.sample(f"{i * step / 60:.1f}m")

    def followers(self, rng: random.Random) -> list[tuple[Tally, asyncio.Task[None]]]:
        out: list[tuple[Tally, asyncio.Task[None]]] = []
        s = self.settings
        for i in range(s.clients):
            if i < s.sse_clients:
                tally = Tally(f"sse-{i + 1:02d}", "sse")
                http = httpx.AsyncClient(base_url=self.stack.gateway_url, timeout=httpx.Timeout(60.0, connect=10.0))
                own = random.Random(rng.random())

                async def sse(tally: Tally = tally, http: httpx.AsyncClient = http, own: random.Random = own) -> None:
                    try:
                        await follow_sse(http, self.followed, self.stack.token, tally, own, s.drop_seconds)
                    finally:
                        await http.aclose()

                run = sse
            else:
                tally = Tally(f"py-{i - s.sse_clients + 1:02d}", "python")
                queue: asyncio.Queue[str | None] = asyncio.Queue()
                self.turn_queues.append(queue)
                run = lambda tally=tally, queue=queue: follow_python(self.agent, self.followed, queue, tally)  # noqa: E731
            out.append((tally, asyncio.create_task(guarded(tally, run))))
        return out

    def announce(self, turn_id: str | None) -> None:
        for queue in self.turn_queues:
            queue.put_nowait(turn_id)

    async def start(self) -> list[str]:
        """Both sessions started with their first message; their turn ids."""
        started = await asyncio.gather(
            self.agent.sessions.start(self.config(self.followed), "turn 1"),
            self.agent.sessions.start(self.config(self.control), "turn 1"),
        )
        return [s.turn_id for s in started]

    async def turns(self, turn_ids: list[str]) -> int:
        """Turn after turn in both sessions (the first two ``turn_ids`` running) until the window
        has passed; returns the number of turns."""
        agent, window = self.agent, self.settings.minutes * 60
        number = 1
        while True:
            self.announce(turn_ids[0])
            t0 = time.monotonic()
            outcomes = await asyncio.gather(*(agent.sessions.wait(sid, tid) for sid, tid in zip((self.followed, self.control), turn_ids)))
            if any(o.status != "completed" for o in outcomes):
                raise RuntimeError(f"turn {number} did not complete: {[(o.status, o.error) for o in outcomes]}")
            self.report.turn_seconds.append(time.monotonic() - t0)
            if number % 10 == 0:
                self.say(f"[{time.monotonic() - self.began:5.0f}s] {number} turns")
            if time.monotonic() - self.began >= window:
                return number
            number += 1
            sent = await asyncio.gather(*(agent.sessions.send(sid, f"turn {number}") for sid in (self.followed, self.control)))
            turn_ids = [r.turn_id for r in sent]

    async def run(self) -> Report:
        report, s = self.report, self.settings
        self.sample("idle")
        report.load = (load_average(), "")
        hub_start = (await self.stack.hub_counters())["store_reads"]
        self.began = time.monotonic()
        turn_ids = await self.start()
        followers = self.followers(random.Random(s.seed))
        report.tallies = [t for t, _ in followers]
        sampling = asyncio.create_task(self.sample_over_window(s.minutes * 60))
        await asyncio.sleep(0.5)
        self.sample("0.0m")
        turns = await self.turns(turn_ids)
        report.window_seconds = time.monotonic() - self.began
        sampling.cancel()
        self.sample(f"{report.window_seconds / 60:.1f}m")
        report.hub_reads = (hub_start, (await self.stack.hub_counters())["store_reads"])
        self.announce(None)
        await asyncio.gather(*(self.agent.sessions.archive(sid) for sid in (self.followed, self.control)))
        self.say(f"{turns} turns in {report.window_seconds:.0f} s; sessions archived, waiting for the followers")
        _, pending = await asyncio.wait([task for _, task in followers], timeout=FOLLOWERS_TIMEOUT)
        for task in pending:
            task.cancel()
        self.sample("streams over")
        report.gateway_peak_mb = rss_mb(self.stack.gateway_pid, "VmHWM")
        report.load = (report.load[0], load_average())
        report.reference = await asyncio.to_thread(reference, self.store, self.followed)
        report.followed = await _session_facts(self.agent, self.store, "followed", self.followed, turns)
        report.control = await _session_facts(self.agent, self.store, "control", self.control, turns)
        return report


async def run_benchmark(settings: Settings, progress: Callable[[str], None] = print_progress) -> Report:
    own_dir = not settings.workdir
    run_dir = Path(tempfile.mkdtemp(prefix="agentrt-long-stream-")) if own_dir else Path(settings.workdir)
    run_dir.mkdir(parents=True, exist_ok=True)
    stack = Stack(
        run_dir, settings.chunks, settings.chunk_ms, max_streams_per_principal=settings.sse_clients + 4,
        suggest_continue_as_new=settings.suggest_continue_as_new, database_url=settings.database_url,
    )
    try:
        await stack.start()
        progress(f"server {stack.server.address if stack.server else '?'}, gateway {stack.gateway_url}, files in {run_dir}")
        config = AgentrtConfig.load(stack.config_path)
        with Store.open(stack.store_url) as store:
            agent = await AgentClient.connect(config, principal=PRINCIPAL, store=store)
            while not await agent.has_worker():
                await asyncio.sleep(0.1)
            return await _Run(settings, stack, agent, store, progress).run()
    finally:
        stack.stop()
        if own_dir:
            shutil.rmtree(run_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.long_stream", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20, help="followers of the session (default 20)")
    parser.add_argument("--python-clients", type=int, default=2, help="of them on AgentClient.sessions.deltas (default 2)")
    parser.add_argument("--minutes", type=float, default=10.0, help="minutes of turns (default 10)")
    parser.add_argument("--chunks", type=int, default=300, help="chunks of each answer (default 300)")
    parser.add_argument("--chunk-ms", type=float, default=20.0, help="ms between two chunks (default 20)")
    parser.add_argument("--drop-seconds", type=float, default=120.0, help="mean seconds before an SSE follower drops its connection (0: never)")
    parser.add_argument("--suggest-continue-as-new", type=int, default=0, help="history events after which the server suggests continue-as-new (0: its default)")
    parser.add_argument("--database-url", default="", help="agentrt's store (default SQLite in the run directory)")
    parser.add_argument("--workdir", default="", help="keep the run's files (logs, store, server database) here")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if args.clients < 1 or not 0 <= args.python_clients <= args.clients or args.minutes <= 0 or args.chunks < 1 or args.chunk_ms < 0 or args.drop_seconds < 0:
        parser.error("need --clients >= 1, 0 <= --python-clients <= --clients, --minutes > 0, --chunks >= 1, --chunk-ms >= 0, --drop-seconds >= 0")
    settings = Settings(
        clients=args.clients, python_clients=args.python_clients, minutes=args.minutes, chunks=args.chunks, chunk_ms=args.chunk_ms,
        drop_seconds=args.drop_seconds, suggest_continue_as_new=args.suggest_continue_as_new, database_url=args.database_url,
        workdir=args.workdir, seed=args.seed,
    )
    run_and_exit(lambda: run_benchmark(settings), lambda report: report.ok, settings=True)


if __name__ == "__main__":
    main()
