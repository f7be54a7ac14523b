"""How fast a session's streamed text reaches its subscribers, and how clean it stays after a
retried model call: agentrt's store-backed stream (``agentrt.client.StreamHub``) beside the SDK's
experimental ``temporalio.contrib.workflow_streams``, measured in the same run.

    python -m bench.streams [--chunks 60] [--interval-ms 50] [--subscribers 2] [--repeats 3]
        [--poll-seconds 0.1] [--database-url URL]

Starts its own Temporal dev server (free ports, database in a temporary directory) and a
SQLite store (or ``--database-url``). Each repeat runs the same model call through both
systems, one after the other (the order alternates per repeat), with ``--subscribers``
subscribers following it from before its first item:

1. two events: the turn starts, the model call starts;
2. attempt 1 streams ``chunks / 2`` chunks, one every ``--interval-ms``, and is abandoned
   (a retried call: its worker was lost, or its stream cut);
3. attempt 2 streams all ``--chunks`` chunks of the answer at the same pace; once every
   subscriber has its first chunk, the abandoned attempt 1, still running, writes
   ``chunks / 6`` more (late) chunks beside it;
4. three events: the reply is complete, the turn ends, the session is archived (the
   subscribers stop there).

agentrt: events go to the store as ``store.append`` writes them, chunks as the model activity
writes them (``Store.append_deltas``, attempt by attempt), read by one ``StreamHub`` (one
poller every ``--poll-seconds`` shared by the subscribers, native encoding). workflow_streams:
a workflow hosting a ``WorkflowStream`` (``bench._stream_host``); every item is published with
``TopicHandle.publish(..., force_flush=True)`` (one signal each, as soon as possible) by a
``WorkflowStreamClient`` per attempt (a retried activity's new client), and each subscriber
runs ``WorkflowStreamClient.subscribe`` (long-poll updates, its default 100 ms cool-down).

What is measured, per system over all repeats and subscribers:

- **p50 / p95 / max ms**: delivery latency of each item, from just before its publish (the
  store write, or ``publish()``) to its subscriber receiving it, in one process;
- **abandoned**: chunks of the abandoned attempt delivered; **late**: those of them written
  after the retry had streamed;
- **duplicates**: chunks a client shows beyond one copy of the answer when it applies what the
  stream tells it (agentrt's ``retry``/``supersedes`` marks; workflow_streams carries none);
- **order**: items received out of publish order.

The last line is exactly

    streams p50_ms=A p95_ms=B baseline_p50_ms=C baseline_p95_ms=D p50_ratio=E p95_ratio=F duplicates=G baseline_duplicates=H

with the ratios agentrt over the workflow_streams baseline of the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.worker import Worker

from agentrt.gateway import StreamHub
from agentrt.schemas import (
    AssistantMessageCompleted,
    Event,
    ModelRequestStarted,
    SessionArchived,
    StoreAppendInput,
    TurnEnded,
    TurnStarted,
    Usage,
)
from agentrt.store import Store
from agentrt.worker import DevServer
from bench._cli import print_progress, run_and_exit
from bench._stream_host import StreamHostWorkflow

TURN = "turn-1"
TOPIC = "session"
AGENTRT = "agentrt stream"
BASELINE = "workflow_streams"


@dataclass
class Settings:
    chunks: int = 60
    interval_ms: float = 50.0
    subscribers: int = 2
    repeats: int = 3
    poll_seconds: float = 0.1

    @property
    def abandoned_after(self) -> int:
        return self.chunks // 2

    @property
    def late_chunks(self) -> int:
        return max(1, self.chunks // 6)


@dataclass
class Received:
    """What one subscriber got, in order: (attempt or 0 for an event, idx, published at, received
    at), times in seconds (``time.perf_counter``)."""

    items: list[tuple[int, int, float, float]] = field(default_factory=list)
    shown_chunks: int = 0


@dataclass
class Measures:
    name: str
    runs: list[list[Received]] = field(default_factory=list)

    def _all(self) -> list[tuple[int, int, float, float]]:
        return [item for run in self.runs for sub in run for item in sub.items]

    def latencies(self) -> list[float]:
        """Milliseconds from publish to receipt, every item, sorted."""
        return sorted((received - published) * 1000 for _, _, published, received in self._all())

    def percentile(self, q: float) -> float:
        values = self.latencies()
        return values[min(len(values) - 1, int(round(q * (len(values) - 1))))] if values else float("nan")

    def abandoned(self, settings: Settings) -> int:
        return sum(1 for attempt, _, _, _ in self._all() if attempt == 1)

    def late(self, settings: Settings) -> int:
        return sum(1 for attempt, idx, _, _ in self._all() if attempt == 1 and idx >= settings.abandoned_after)

    def duplicates(self, settings: Settings) -> int:
        return sum(sub.shown_chunks - settings.chunks for run in self.runs for sub in run)

    def out_of_order(self) -> int:
        count = 0
        for run in self.runs:
            for sub in run:
                times = [item[2] for item in sub.items]
                count += sum(1 for a, b in zip(times, times[1:]) if b < a)
        return count


@dataclass
class Report:
    settings: Settings
    agentrt: Measures
    baseline: Measures
    store_reads: int = 0

    def settings_text(self) -> str:
        s = self.settings
        return (
            f"chunks={s.chunks} (attempt 1 abandoned after {s.abandoned_after}, then {s.late_chunks} late chunks) "
            f"interval={s.interval_ms:g} ms subscribers={s.subscribers} repeats={s.repeats} "
            f"agentrt poll={s.poll_seconds:g} s, workflow_streams poll cool-down=100 ms (its default)"
        )

    def table(self) -> str:
        s = self.settings
        rows = [f"{'system':<18}{'items':>7}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}{'abandoned':>11}{'late':>6}{'duplicates':>12}{'order':>7}"]
        for m in (self.agentrt, self.baseline):
            lat = m.latencies()
            rows.append(
                f"{m.name:<18}{len(lat):>7}{m.percentile(0.5):>9.1f}{m.percentile(0.95):>9.1f}{(lat[-1] if lat else 0):>9.1f}"
                f"{m.abandoned(s):>11}{m.late(s):>6}{m.duplicates(s):>12}{m.out_of_order():>7}"
            )
        rows.append(
            f"ratios (agentrt / workflow_streams, same run): p50 {self._ratio(0.5)}, p95 {self._ratio(0.95)}; "
            f"duplicates {self.agentrt.duplicates(s)} vs {self.baseline.duplicates(s)}"
        )
        rows.append(
            f"agentrt store reads: {self.store_reads} over {s.repeats} runs "
            f"(one poller per session shared by its {s.subscribers} subscribers, and their own reads before they join it)"
        )
        return "\n".join(rows)

    def _ratio(self, q: float) -> str:
        base = self.baseline.percentile(q)
        return f"{self.agentrt.percentile(q) / base:.2f}" if base and base == base else "n/a"

    def line(self) -> str:
        s = self.settings
        return (
            f"streams p50_ms={self.agentrt.percentile(0.5):.1f} p95_ms={self.agentrt.percentile(0.95):.1f} "
            f"baseline_p50_ms={self.baseline.percentile(0.5):.1f} baseline_p95_ms={self.baseline.percentile(0.95):.1f} "
            f"p50_ratio={self._ratio(0.5)} p95_ratio={self._ratio(0.95)} "
            f"duplicates={self.agentrt.duplicates(s)} baseline_duplicates={self.baseline.duplicates(s)}"
        )

    @property
    def ok(self) -> bool:
        expected = self.settings.subscribers * self.settings.repeats
        return (
            len([sub for run in self.agentrt.runs for sub in run]) == expected
            and self.agentrt.duplicates(self.settings) == 0
            and self.agentrt.out_of_order() == 0
        )


# ---------------------------------------------------------------- the model call, as both systems publish it


Publish = Callable[[str, int, int, str], Awaitable[None]]  # (kind, attempt or event number, idx, text)


async def model_call(
    settings: Settings, publish: Publish, retry_seen: Callable[[], Awaitable[None]], settle: Callable[[], Awaitable[None]]
) -> None:
    """The scenario of the module's docstring, through ``publish``; ``retry_seen`` returns once
    every subscriber has the retry's first chunk; ``settle`` returns once the attempts' chunks
    are published (as a model activity's are before it returns)."""
    pause = settings.interval_ms / 1000
    for number in (1, 2):
        await publish("event", number, 0, "")
    for idx in range(settings.abandoned_after):
        await publish("delta", 1, idx, f"w{idx} ")
        await asyncio.sleep(pause)

    async def retry() -> None:
        for idx in range(settings.chunks):
            await publish("delta", 2, idx, f"w{idx} ")
            await asyncio.sleep(pause)

    async def late() -> None:
        await retry_seen()
        for idx in range(settings.abandoned_after, settings.abandoned_after + settings.late_chunks):
            await publish("delta", 1, idx, f"late{idx} ")
            await asyncio.sleep(pause)

    await asyncio.gather(retry(), late())
    await settle()
    for number in (3, 4, 5):
        await publish("event", number, 0, "")


async def _wait_all(events: list[asyncio.Event]) -> None:
    await asyncio.gather(*(e.wait() for e in events))


# ---------------------------------------------------------------- agentrt


async def run_agentrt(settings: Settings, store: Store, hub: StreamHub) -> list[Received]:
    sid = f"bench-{uuid.uuid4().hex[:10]}"
    published: dict[tuple[int, int, int], float] = {}
    subs = [await hub.subscribe(sid) for _ in range(settings.subscribers)]
    seen = [asyncio.Event() for _ in subs]
    received = [Received() for _ in subs]
    call_seq = 2

    async def consume(i: int) -> None:
        shown: list[tuple[int, str]] = []
        async for item in subs[i]:
            now = time.perf_counter()
            data = item.data
            if item.event == "ModelTokenDelta":
                attempt, idx = data["attempt"], data["idx"]
                key = (data["seq"], attempt, idx)
                shown = [(a, t) for a, t in shown if a not in data.get("supersedes", [])] + [(attempt, data["text"])]
                if attempt == 2:
                    seen[i].set()
            else:
                key, attempt, idx = (data["seq"], 0, 0), 0, 0
            received[i].items.append((attempt, idx, published[key], now))
        received[i].shown_chunks = len(shown)

    events: dict[int, Callable[[], Event]] = {
        1: lambda: TurnStarted(turn_id=TURN),
        2: lambda: ModelRequestStarted(turn_id=TURN, round=1, profile="bench"),
        3: lambda: AssistantMessageCompleted(turn_id=TURN, round=1, text="...", tool_calls=0, usage=Usage(), position=1),
        4: lambda: TurnEnded(turn_id=TURN, status="completed", rounds=1, usage=Usage()),
        5: lambda: SessionArchived(principal="bench"),
    }

    async def publish(kind: str, number: int, idx: int, text: str) -> None:
        if kind == "event":
            event = events[number]()
            event.seq = number
            published[(number, 0, 0)] = time.perf_counter()
            await asyncio.to_thread(store.append, StoreAppendInput(session_id=sid, events=[event]))
        else:
            published[(call_seq, number, idx)] = time.perf_counter()
            await asyncio.to_thread(store.append_deltas, sid, TURN, 1, number, [text], idx)

    consumers = [asyncio.ensure_future(consume(i)) for i in range(len(subs))]
    await model_call(settings, publish, lambda: _wait_all(seen), _written)
    await asyncio.wait_for(asyncio.gather(*consumers), 60)
    return received


async def _written() -> None:
    """Store writes are done when ``publish`` returns."""


# ---------------------------------------------------------------- workflow_streams


async def run_baseline(settings: Settings, temporal: Client, task_queue: str) -> list[Received]:
    workflow_id = f"bench-stream-{uuid.uuid4().hex[:10]}"
    handle = await temporal.start_workflow(StreamHostWorkflow.run, id=workflow_id, task_queue=task_queue)
    published: dict[str, float] = {}
    seen = [asyncio.Event() for _ in range(settings.subscribers)]
    received = [Received() for _ in range(settings.subscribers)]

    async def consume(i: int) -> None:
        shown = 0
        stream = WorkflowStreamClient.create(temporal, workflow_id)
        async for item in stream.subscribe([TOPIC], poll_cooldown=timedelta(milliseconds=100)):
            now = time.perf_counter()
            data: dict[str, Any] = item.data
            attempt, idx = data["attempt"], data["idx"]
            if data["kind"] == "delta":
                shown += 1  # the stream says nothing of attempts: a client shows every chunk
                if attempt == 2:
                    seen[i].set()
            else:
                attempt, idx = 0, 0
            received[i].items.append((attempt, idx, published[data["id"]], now))
            if data["kind"] == "event" and data["number"] == 5:
                break
        received[i].shown_chunks = shown

    publishers = {n: WorkflowStreamClient.create(temporal, workflow_id) for n in (0, 1, 2)}  # events; attempts 1, 2
    for client in publishers.values():
        await client.__aenter__()

    async def publish(kind: str, number: int, idx: int, text: str) -> None:
        item_id = f"{kind}-{number}-{idx}"
        value = {"id": item_id, "kind": kind, "number": number, "attempt": number if kind == "delta" else 0, "idx": idx, "text": text}
        published[item_id] = time.perf_counter()
        publishers[number if kind == "delta" else 0].topic(TOPIC).publish(value, force_flush=True)

    async def settle() -> None:
        await asyncio.gather(publishers[1].flush(), publishers[2].flush())

    consumers = [asyncio.ensure_future(consume(i)) for i in range(settings.subscribers)]
    try:
        await model_call(settings, publish, lambda: _wait_all(seen), settle)
        await asyncio.wait_for(asyncio.gather(*consumers), 60)
    finally:
        for client in publishers.values():
            await client.__aexit__(None, None, None)
        await handle.signal(StreamHostWorkflow.finish)
        await handle.result()
    return received


# ---------------------------------------------------------------- the run


async def measure(
    address: str, store: Store, settings: Settings, progress: Callable[[str], None] = lambda _: None
) -> Report:
    """Both systems ``settings.repeats`` times against the server at ``address`` and ``store``."""
    temporal = await Client.connect(address)
    task_queue = f"bench-streams-{uuid.uuid4().hex[:8]}"
    hub = StreamHub(store, poll_seconds=settings.poll_seconds)
    report = Report(settings, Measures(AGENTRT), Measures(BASELINE))
    async with Worker(temporal, task_queue=task_queue, workflows=[StreamHostWorkflow]):
        await run_baseline(Settings(chunks=6, interval_ms=10, subscribers=1), temporal, task_queue)  # warm-up
        await run_agentrt(Settings(chunks=6, interval_ms=10, subscribers=1), store, hub)
        hub.store_reads = 0
        for repeat in range(settings.repeats):
            order = [AGENTRT, BASELINE] if repeat % 2 == 0 else [BASELINE, AGENTRT]
            for name in order:
                if name == AGENTRT:
                    report.agentrt.runs.append(await run_agentrt(settings, store, hub))
                else:
                    report.baseline.runs.append(await run_baseline(settings, temporal, task_queue))
                progress(f"repeat {repeat + 1}/{settings.repeats}: {name} done")
    report.store_reads = hub.store_reads
    await hub.aclose()
    return report


async def run_benchmark(settings: Settings, database_url: str = "", progress: Callable[[str], None] = print_progress) -> Report:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server = DevServer.on_free_ports(root / "server", [])
        await server.start()
        try:
            with Store.open(database_url or f"sqlite:///{root / 'agentrt.db'}") as store:
                return await measure(server.address, store, settings, progress)
        finally:
            server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.streams", description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=60, help="chunks of the answer (default 60)")
    parser.add_argument("--interval-ms", type=float, default=50.0, help="ms between two chunks of an attempt (default 50)")
    parser.add_argument("--subscribers", type=int, default=2, help="subscribers per stream (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per system (default 3)")
    parser.add_argument("--poll-seconds", type=float, default=0.1, help="StreamHub poll interval in seconds (default 0.1)")
    parser.add_argument("--database-url", default="", help="agentrt store (default SQLite in a temporary directory)")
    args = parser.parse_args(argv)
    if args.chunks < 6 or args.subscribers < 1 or args.repeats < 1 or args.interval_ms < 0 or args.poll_seconds <= 0:
        parser.error("need --chunks >= 6, --subscribers >= 1, --repeats >= 1, --interval-ms >= 0, --poll-seconds > 0")
    settings = Settings(args.chunks, args.interval_ms, args.subscribers, args.repeats, args.poll_seconds)
    run_and_exit(lambda: run_benchmark(settings, args.database_url), lambda report: report.ok, settings=True)


if __name__ == "__main__":
    main()
