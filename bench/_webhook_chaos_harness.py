"""The harness of ``bench.webhook_chaos``: watched sessions, tasks and graphs, a receiver that goes
down and comes back, a dispatcher process SIGKILLed and started again, and the count at the end.

What runs (``bench.local.local_stack``: a dev server, a SQLite store, an in-process worker with the
scripted model): ``sessions`` sessions (a write the harness approves, its answer, a second turn,
then archived: ``approval.requested``, ``turn.ended`` twice), ``tasks`` autonomous tasks (two
sessions 2 s apart on a durable timer, the reviewer failing the first: ``waiting``, ``running``,
``waiting``, ``running``, ``completed``) and ``graphs`` task graphs of two nodes (half of them
approved by the harness: ``planning``, ``pending_approval``, ``approved``, ``executing``,
``completed``; the others automatically). Each is watched as soon as it starts, and starts are
spread over the chaos. The dispatcher is ``bench._webhook_dispatcher`` in its own process. Every
other receiver outage begins as a crash: the receiver takes the next request and goes down before
answering it.

The count (``WebhookChaosReport``): what the store says was owed is read from the event logs
themselves, not from the dispatcher's delivery log: for each watch, every ``TurnEnded`` and
``PermissionRequested`` of a session, every status event of a task or graph, each under the id
the notification must carry (``webhook_id(watch, key)``). Against it, the ids the receiver took.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import os
import random
import signal
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agentrt.client import AgentClient
from agentrt.gateway import WebhookDispatcher
from agentrt.schemas import (
    AutonomousTaskStatusChanged,
    GraphSpec,
    PermissionRequested,
    TaskGraphStatusChanged,
    TurnEnded,
)
from agentrt.store import Store
from bench._webhook_receiver import FlakyReceiver
from bench.local import LocalStack, local_stack

OWNER = "alice"
SECRET = "webhook-chaos-secret"
REPO_ROOT = Path(__file__).resolve().parents[1]
PASS = {"verdict": "pass", "summary": "the goal is met"}
FAIL = {"verdict": "fail", "findings": ["not finished yet"], "summary": "more to do"}
OUTAGE_SECONDS = (0.5, 2.5)  # how long the receiver stays down
RESTART_AFTER_SECONDS = (0.2, 1.0)  # how long the dispatcher stays dead before it is started again
CRASH_WAIT_SECONDS = 5.0  # how long an outage that crashes on a request waits for one, then goes down anyway


def webhook_id(watch_id: str, key: str) -> str:
    """The id a notification must carry: derived from its watch and what it is about (``seq:<seq>``,
    ``status:<change>:<status>``), as ``gateway/_webhook_notes.py`` derives it, computed here anew."""
    return "wh_" + hashlib.sha256(f"{watch_id}\x00{key}".encode()).hexdigest()[:32]


@dataclass
class WebhookChaosReport:
    """The counts. ``notifications``: owed by the store's event logs; ``missing``: owed ids never
    received; ``duplicated``: one owed notification (a session's event seq, a status change's
    number) received under more than one id; ``unexpected``: ids received that nothing owes;
    ``unanswered``: requests the receiver took but went down before answering;
    ``failed``: deliveries the dispatcher gave up on; ``unended``: work or watches still open at
    the end. ``repeats``: receiver-side repeats of one id (at least once, documented), split by
    cause: ``repeats_unanswered`` (the receiver went down before answering the earlier one) and
    ``repeats_answered`` (answered, but the dispatcher was killed before it recorded the answer)."""

    sessions: int
    tasks: int
    graphs: int
    watches: int = 0
    notifications: int = 0
    received: int = 0
    receiver_outages: int = 0
    dispatcher_kills: int = 0
    missing: int = 0
    duplicated: int = 0
    unexpected: int = 0
    failed: int = 0
    unended: int = 0
    rejected: int = 0
    unanswered: int = 0
    repeats: int = 0
    repeats_unanswered: int = 0
    repeats_answered: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        bad = (self.missing, self.duplicated, self.unexpected, self.failed, self.unended, self.rejected)
        return not any(bad) and not self.problems and self.notifications > 0

    def line(self) -> str:
        return (
            f"webhook_chaos watches={self.watches} notifications={self.notifications} "
            f"receiver_outages={self.receiver_outages} dispatcher_kills={self.dispatcher_kills} missing={self.missing} "
            f"duplicated={self.duplicated} unexpected={self.unexpected} failed={self.failed} unended={self.unended} "
            f"repeats={self.repeats} repeats_unanswered={self.repeats_unanswered} repeats_answered={self.repeats_answered}"
        )


class DispatcherProcess:
    """``bench._webhook_dispatcher`` in a process group of its own: ``start``, ``kill`` (SIGKILL), ``stop``."""

    def __init__(self, stack: LocalStack, target: str) -> None:
        self.stack = stack
        self.target = target
        self.process: asyncio.subprocess.Process | None = None
        self.generation = 0

    async def start(self) -> None:
        self.generation += 1
        ready = self.stack.root / f"dispatcher-{self.generation}.ready"
        log = (self.stack.root / f"dispatcher-{self.generation}.log").open("wb")
        config = self.stack.config
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench._webhook_dispatcher", "--address", config.temporal_address,
            "--database-url", config.database_url, "--task-queue", config.task_queue, "--target", self.target,
            "--secret", SECRET, "--ready-file", str(ready),
            cwd=REPO_ROOT, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
        )
        log.close()
        limit = time.monotonic() + 60
        while not ready.exists():
            if self.process.returncode is not None or time.monotonic() > limit:
                raise RuntimeError(f"dispatcher {self.generation} did not start (see {log.name})")
            await asyncio.sleep(0.05)

    async def kill(self) -> None:
        if self.process is None:
            return
        process, self.process = self.process, None
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        await process.wait()

    async def stop(self) -> None:
        if self.process is None:
            return
        process, self.process = self.process, None
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 20)
        except TimeoutError:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()


class _Run:
    def __init__(
        self, stack: LocalStack, receiver: FlakyReceiver, dispatcher: DispatcherProcess, report: WebhookChaosReport,
        rng: random.Random, say: Callable[[str], None],
    ) -> None:
        self.stack, self.receiver, self.dispatcher, self.report, self.rng = stack, receiver, dispatcher, report, rng
        self.client: AgentClient = stack.client
        self.store: Store = stack.store
        self.watcher = WebhookDispatcher(stack.store, stack.client, [])  # only ``watch``: the process delivers
        self.started = time.monotonic()
        self.say = say
        self.chaos_done = asyncio.Event()

    def log(self, text: str) -> None:
        self.say(f"[webhook_chaos {time.monotonic() - self.started:6.1f}s] {text}")

    def workspace(self, name: str) -> Path:
        path = self.stack.root / name
        path.mkdir()
        return path

    def script(self, name: str, body: dict[str, object]) -> str:
        path = self.stack.root / f"{name}.json"
        path.write_text(json.dumps(body))
        return str(path)

    # ------------------------------------------------------------ the work

    async def session(self, index: int) -> None:
        name = f"s{index}-{uuid.uuid4().hex[:6]}"
        write = {"tool_calls": [{"name": "fs.write", "arguments": {"path": "notes.md", "content": f"session {index}\n"}}]}
        script = self.script(name, {"turns": [write, {"text": "wrote notes.md"}, {"text": "nothing more"}]})
        config = self.client.new_config(str(self.workspace(name)), profile="scripted", script=script)
        started = await self.client.start(config, "write notes.md")
        sid = started.session_id
        await self.watcher.watch("session", sid, OWNER)
        outcome = await self.client.wait(sid, started.turn_id, timeout_seconds=2)
        while outcome.status == "pending":
            for request in (await self.client.state(sid)).pending_approvals:
                await self.client.approve(sid, request.request_id)
            outcome = await self.client.wait(sid, started.turn_id, timeout_seconds=2)
        sent = await self.client.send(sid, "anything more?")
        while (await self.client.wait(sid, sent.turn_id, timeout_seconds=2)).status == "pending":
            pass
        await self.client.archive(sid)
        self.log(f"session {sid} archived")

    async def task(self, index: int) -> None:
        name = f"t{index}-{uuid.uuid4().hex[:6]}"
        sessions = [{"turns": [{"text": "half done"}]}, {"turns": [{"text": "all done"}]}]
        script = self.script(name, {"sessions": sessions, "reviews": [FAIL, PASS]})
        task_id = await self.client.start_task(
            f"finish task {index}", workspace=str(self.workspace(name)), script=script, every_seconds=2, max_sessions=4
        )
        await self.watcher.watch("task", task_id, OWNER)
        result = await self.client.wait_task(task_id)
        self.log(f"task {task_id} {result.status}")

    async def graph(self, index: int) -> None:
        name = f"g{index}-{uuid.uuid4().hex[:6]}"
        spec = GraphSpec.model_validate({"nodes": [
            {"id": "a", "prompt": "do a"}, {"id": "b", "prompt": "then b", "depends_on": ["a"]},
        ]})
        nodes = {n: [{"turns": [{"text": f"{n} done"}]}] for n in ("a", "b")}
        script = self.script(name, {"nodes": nodes})
        ask = index % 2 == 0
        graph_id = await self.client.start_graph(
            graph=spec, workspace=str(self.workspace(name)), script=script, approve_plan="ask" if ask else "auto"
        )
        await self.watcher.watch("run", graph_id, OWNER)
        if ask:
            while (await self.client.graph_status(graph_id)).status != "pending_approval":
                await asyncio.sleep(0.2)
            await self.client.approve_graph(graph_id)
        result = await self.client.wait_graph(graph_id)
        self.log(f"graph {graph_id} {result.status}")

    async def work(self, spread_seconds: float) -> None:
        """Every session, task and graph, started in a shuffled order spread over ``spread_seconds``."""
        starts: list[Callable[[int], object]] = (
            [self.session] * self.report.sessions + [self.task] * self.report.tasks + [self.graph] * self.report.graphs
        )
        self.rng.shuffle(starts)
        counters: collections.Counter[str] = collections.Counter()
        running = []
        gap = spread_seconds / max(len(starts), 1)
        for start in starts:
            kind = getattr(start, "__name__", "work")
            counters[kind] += 1
            running.append(asyncio.ensure_future(start(counters[kind])))  # type: ignore[arg-type]
            await asyncio.sleep(gap * self.rng.uniform(0.5, 1.5))
        for outcome in await asyncio.gather(*running, return_exceptions=True):
            if isinstance(outcome, BaseException):
                self.report.problems.append(f"work failed: {type(outcome).__name__}: {outcome}")

    # ------------------------------------------------------------ the chaos

    async def outages(self, count: int, seconds: float) -> None:
        gap = seconds / max(count, 1)
        for number in range(count):
            await asyncio.sleep(gap * self.rng.uniform(0.2, 0.8))
            down = self.rng.uniform(*OUTAGE_SECONDS)
            if number % 2 == 0:  # every other outage: the receiver crashes holding a request
                self.receiver.crash_on_next()
                limit = time.monotonic() + CRASH_WAIT_SECONDS
                while self.receiver.is_up and time.monotonic() < limit:
                    await asyncio.sleep(0.01)
            self.receiver.down()
            self.log(f"receiver down for {down:.1f} s")
            await asyncio.sleep(down)
            self.receiver.up()

    async def kills(self, count: int, seconds: float) -> None:
        gap = seconds / max(count, 1)
        for _ in range(count):
            await asyncio.sleep(gap * self.rng.uniform(0.3, 0.9))
            await self.dispatcher.kill()
            self.report.dispatcher_kills += 1
            after = self.rng.uniform(*RESTART_AFTER_SECONDS)
            self.log(f"dispatcher SIGKILLed; started again in {after:.1f} s")
            await asyncio.sleep(after)
            await self.dispatcher.start()

    # ------------------------------------------------------------ the count

    def owed(self) -> dict[str, tuple[str, str, int]]:
        """Webhook id -> (kind, target id, seq or change number), from the event logs of every watch."""
        owed: dict[str, tuple[str, str, int]] = {}
        for watch in self.store.webhook_watches(state=None):
            if watch.kind == "session":
                for event in self.store.events(watch.target_id, 0, 100_000):
                    if isinstance(event, TurnEnded | PermissionRequested):
                        owed[webhook_id(watch.watch_id, f"seq:{event.seq}")] = ("session", watch.target_id, event.seq)
                continue
            read = self.store.task_events if watch.kind == "task" else self.store.graph_events
            for event in read(watch.target_id, 0, 100_000):
                if isinstance(event, AutonomousTaskStatusChanged | TaskGraphStatusChanged):
                    key = f"status:{event.change}:{event.status}"
                    owed[webhook_id(watch.watch_id, key)] = (watch.kind, watch.target_id, event.change)
        return owed

    async def settle(self, seconds: float) -> None:
        """Wait until every watch has ended and no delivery is pending (or ``seconds`` pass)."""
        limit = time.monotonic() + seconds
        while time.monotonic() < limit:
            active = await asyncio.to_thread(self.store.webhook_watches, "active")
            pending = await asyncio.to_thread(self.store.webhook_deliveries, state="pending", limit=1)
            if not active and not pending:
                return
            await asyncio.sleep(0.25)

    def count(self) -> None:
        report = self.report
        owed = self.owed()
        receipts = list(self.receiver.receipts)
        watches = self.store.webhook_watches(state=None)
        report.watches = len(watches)
        report.unended = sum(w.state != "ended" for w in watches)
        report.notifications = len(owed)
        report.receiver_outages = self.receiver.outages
        report.rejected = self.receiver.rejected
        report.unanswered = sum(not r.answered for r in receipts)
        by_id: dict[str, list[bool]] = collections.defaultdict(list)
        for receipt in receipts:
            by_id[receipt.id].append(receipt.answered)
        report.received = len(by_id)
        report.missing = len(set(owed) - set(by_id))
        report.unexpected = len(set(by_id) - set(owed))
        subjects: dict[tuple[str, str, int], set[str]] = collections.defaultdict(set)
        for receipt in receipts:
            data = receipt.data
            number = data.get("change") if receipt.type == "run.status" else data.get("seq")
            subjects[(str(data.get("kind")), str(data.get("target_id")), int(number or 0))].add(receipt.id)
        report.duplicated = sum(len(ids) - 1 for ids in subjects.values())
        for answers in by_id.values():
            for earlier in answers[:-1]:
                report.repeats += 1
                if earlier:
                    report.repeats_answered += 1
                else:
                    report.repeats_unanswered += 1
        report.failed = len(self.store.webhook_deliveries(state="failed"))
        for missing in sorted(set(owed) - set(by_id))[:10]:
            report.problems.append(f"missing {missing}: {owed[missing]}")


async def run_webhook_chaos(
    *, sessions: int, tasks: int, graphs: int, receiver_outages: int, dispatcher_kills: int, seed: int,
    chaos_seconds: float, deadline_seconds: float, progress: Callable[[str], None] = print,
) -> WebhookChaosReport:
    """Run the benchmark (see the module docstring) and return its report."""
    report = WebhookChaosReport(sessions=sessions, tasks=tasks, graphs=graphs)
    async with local_stack(OWNER) as stack:
        receiver = FlakyReceiver(SECRET)
        dispatcher = DispatcherProcess(stack, receiver.url)
        run = _Run(stack, receiver, dispatcher, report, random.Random(seed), progress)
        try:
            await dispatcher.start()
            chaos = asyncio.gather(run.outages(receiver_outages, chaos_seconds), run.kills(dispatcher_kills, chaos_seconds))
            try:
                await asyncio.wait_for(asyncio.gather(run.work(chaos_seconds * 0.7), chaos), deadline_seconds)
            except TimeoutError:
                report.problems.append(f"the work or the chaos did not end within {deadline_seconds:.0f} s")
            receiver.up()
            if dispatcher.process is None:
                await dispatcher.start()
            run.log("chaos over; waiting for every watch to end and every delivery to be made")
            await run.settle(max(30.0, deadline_seconds - (time.monotonic() - run.started)))
            run.log("settled: no watch active, no delivery pending (or the bound passed)")
            await dispatcher.stop()
            run.count()
        finally:
            await dispatcher.kill()
            receiver.close()
    return report
