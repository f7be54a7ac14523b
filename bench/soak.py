"""Soak: sessions at a steady load for a long while, the worker SIGKILLed every few minutes, and
the processes' footprints sampled every minute.

    python -m bench.soak                     # one hour (make soak)
    python -m bench.soak --minutes 10        # the short form, for CI-like checks
    python -m bench.soak --help

Runs a dev server, an agentrt worker (``agentrt worker``, the command) and the gateway
(``bench._long_stream_stack.Stack``), and ``--sessions`` sessions that each send a turn, wait for
it and pause ``--think`` seconds, over and over, until ``--minutes`` have passed. Each turn asks
the scripted model for one ``shell.run`` (sandboxed: a ``bwrap`` child of the worker) and one
``fs.write`` of the turn's line (effectful: the effect ledger), then an answer. Every
``--kill-every`` seconds the worker's process group gets SIGKILL and a new worker starts. A kill
between an ``fs.write``'s effect-ledger claim and its record leaves the call's outcome unknown:
the session asks for a reconcile, and the soak answers as an operator would, from the file in
the session's workspace (``bench/_reconciles.py``: ``applied`` when it holds the call's content).

Sampled every ``--sample-every`` seconds: the worker's and the gateway's resident set size (MiB)
and open file descriptors, the worker's descendant processes (sandboxes, MCP servers), the
store's bytes (the SQLite file with its WAL) and the server's, turns done. The table shows every
sample; the last line is exactly

    soak minutes=M turns=T failed=F lost=L duplicated=D kills=K reconciles=R worker_rss_mb=A->B gateway_rss_mb=A->B worker_fds=A->B gateway_fds=A->B children_max=C leaked_processes=P store_mb=A->B

(``A->B``: the second sample, after warm-up, and the last), then
``stream_duplicates=… stream_out_of_order=… followers_ended=N/M task_timeouts=W``: each session has a client of the
gateway following its stream (``GET /v1/sessions/{id}/stream``) from its first turn until it is
archived at the end, dropping its connection every ``--drop-seconds`` on average and resuming
with ``Last-Event-ID``. ``reconciles``: reconcile requests answered; ``lost``: a completed turn whose line
is not in its session's file; ``duplicated``: a line written twice; ``leaked_processes``: the
worker's sandbox processes still alive once every session is idle and the worker stopped;
``task_timeouts``: workflow tasks a worker finished after their timeout (a replay too long for
it: the task ran again, from the start). Exit
status 0 when failed, lost, duplicated, leaked and the streams' duplicates and disorder are 0
and every follower ended.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any
from dataclasses import dataclass, field
from pathlib import Path

from agentrt.client import AgentClient
from agentrt.schemas import ApprovalPolicy, SessionConfig, TurnOutcome
from agentrt.store import Store
from agentrt.worker import AgentrtConfig
import httpx

from bench._long_stream_clients import Tally, follow_sse, guarded
from bench._long_stream_stack import PRINCIPAL, Stack, load_average, rss_mb
from bench._reconciles import Reconciler, file_written

ALLOW = ApprovalPolicy(read_only="allow", idempotent="allow", effectful="allow")
SCRIPT_TURNS = 5000  # scripted replies per session: more turns than any soak sends
TURN_TIMEOUT = 300.0  # seconds a turn may take across kills before it counts as failed
RECONCILE_AFTER = 5.0  # seconds a turn waits before its session's reconcile requests are looked for, and between looks


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def descendants(pid: int) -> list[int]:
    """The pids of every process below ``pid``, from /proc (parent pid, field 4 of stat)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def sandbox_processes() -> list[int]:
    """Pids of ``bwrap`` processes on the machine."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/comm") as f:
                    if f.read().strip() == "bwrap":
                        pids.append(int(entry))
            except OSError:
                continue
    return pids


def task_timeouts(worker_log: Path) -> int:
    """Workflow tasks that a worker finished after their timeout (the server had given them to
    another attempt): the SDK's ``Task not found when completing`` lines in ``worker_log``."""
    try:
        with open(worker_log, errors="replace") as f:
            return sum("Task not found when completing" in line for line in f)
    except FileNotFoundError:
        return 0


def file_mb(*paths: Path) -> float:
    return sum(p.stat().st_size for p in paths if p.exists()) / 2**20


def dir_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20 if path.exists() else 0.0


@dataclass
class Sample:
    minute: float
    turns: int
    worker_rss: float
    gateway_rss: float
    worker_fds: int
    gateway_fds: int
    children: int
    store_mb: float
    server_mb: float


@dataclass
class Report:
    minutes: float
    sessions: int
    samples: list[Sample] = field(default_factory=list)
    turns: int = 0
    failed: int = 0
    lost: int = 0
    duplicated: int = 0
    kills: int = 0
    reconciles: int = 0
    leaked: int = 0
    task_timeouts: int = 0
    failures: list[str] = field(default_factory=list)
    tallies: list[Tally] = field(default_factory=list)

    def table(self) -> str:
        rows = ["minute  turns  worker MiB  gateway MiB  worker fds  gateway fds  children  store MiB  server MiB"]
        for s in self.samples:
            rows.append(
                f"{s.minute:6.1f} {s.turns:6d} {s.worker_rss:11.1f} {s.gateway_rss:12.1f} {s.worker_fds:11d} "
                f"{s.gateway_fds:12d} {s.children:9d} {s.store_mb:10.2f} {s.server_mb:11.2f}"
            )
        return "\n".join(rows)

    def line(self) -> str:
        first = self.samples[1] if len(self.samples) > 1 else self.samples[0]
        last = self.samples[-1]
        return (
            f"soak minutes={self.minutes:g} turns={self.turns} failed={self.failed} lost={self.lost} duplicated={self.duplicated} "
            f"kills={self.kills} reconciles={self.reconciles} worker_rss_mb={first.worker_rss:.0f}->{last.worker_rss:.0f} "
            f"gateway_rss_mb={first.gateway_rss:.0f}->{last.gateway_rss:.0f} worker_fds={first.worker_fds}->{last.worker_fds} "
            f"gateway_fds={first.gateway_fds}->{last.gateway_fds} children_max={max(s.children for s in self.samples)} "
            f"leaked_processes={self.leaked} store_mb={first.store_mb:.1f}->{last.store_mb:.1f} "
            f"stream_duplicates={self.stream_duplicates} stream_out_of_order={self.stream_out_of_order} "
            f"followers_ended={sum(t.ended for t in self.tallies)}/{len(self.tallies)} task_timeouts={self.task_timeouts}"
        )

    @property
    def stream_duplicates(self) -> int:
        return sum(t.duplicates for t in self.tallies)

    @property
    def stream_out_of_order(self) -> int:
        return sum(t.out_of_order + t.mismatched for t in self.tallies)

    @property
    def ok(self) -> bool:
        followers_ok = all(t.ended and not t.error for t in self.tallies)
        return not (self.failed or self.lost or self.duplicated or self.leaked or self.stream_duplicates or self.stream_out_of_order) and followers_ok


def write_script(path: Path, session: str) -> str:
    turns = []
    for n in range(1, SCRIPT_TURNS + 1):
        turns.append({"tool_calls": [
            {"name": "shell.run", "arguments": {"command": f"echo {session} turn {n}"}},
            {"name": "fs.write", "arguments": {"path": f"turn-{n}.txt", "content": f"{session} turn {n}\n"}},
        ]})
        turns.append({"text": f"turn {n} done"})
    path.write_text(json.dumps({"turns": turns}))
    return str(path)


class Soak:
    def __init__(self, args: argparse.Namespace, stack: Stack, agent: AgentClient) -> None:
        self.args = args
        self.stack = stack
        self.agent = agent
        self.report = Report(minutes=args.minutes, sessions=args.sessions)
        self.began = time.monotonic()
        self.completed: dict[str, int] = {}  # session -> turns completed
        self.ids: list[str] = []  # the sessions, once run has named them
        self.turn_ends: list[float] = []  # seconds since the start at which each turn completed
        self.followers: list[asyncio.Task[None]] = []
        self.reconciler = Reconciler(agent, "soak", self.say)
        self.worker_ready = asyncio.Event()  # cleared while a killed worker's successor starts
        self.worker_ready.set()

    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def say(self, text: str) -> None:
        print(f"[soak {self.elapsed():7.1f}s] {text}", flush=True)

    def config(self, session_id: str) -> SessionConfig:
        workspace = self.stack.workspace_root / session_id
        workspace.mkdir(parents=True, exist_ok=True)
        script = write_script(self.stack.run_dir / f"{session_id}.json", session_id)
        return self.agent.sessions.new_config(
            str(workspace), session_id=session_id, profile="scripted", script=script,
            tools=["shell.run", "fs.write"], approval=ALLOW,
        )

    async def session(self, session_id: str, rng: random.Random) -> None:
        await asyncio.sleep(rng.uniform(0, self.args.think))
        deadline = self.began + self.args.minutes * 60
        number = 0
        while time.monotonic() < deadline:
            number += 1
            key = f"{session_id}-turn-{number}"
            try:
                outcome = await self.turn(session_id, number, key)
            except Exception as err:  # noqa: BLE001 - counted and shown: the soak goes on
                self.report.failed += 1
                self.report.failures.append(f"{session_id} turn {number}: {type(err).__name__}: {err}"[:300])
                continue
            if outcome.status != "completed":
                self.report.failed += 1
                self.report.failures.append(f"{session_id} turn {number}: {outcome.status}: {outcome.error}"[:300])
            else:
                self.completed[session_id] = number
                self.report.turns += 1
                self.turn_ends.append(self.elapsed())
                if number == 1:
                    self.follow(session_id, rng)
            await asyncio.sleep(rng.uniform(0.5, 1.5) * self.args.think)

    async def turn(self, session_id: str, number: int, key: str) -> TurnOutcome:
        """Send turn ``number`` and wait for its outcome, at most ``TURN_TIMEOUT`` seconds; while it
        takes longer than ``RECONCILE_AFTER`` seconds, answer the reconcile requests the session
        holds from its workspace's files (a kill between an ``fs.write``'s claim and its record)."""
        if number == 1:
            send = self.agent.sessions.start_and_wait(self.config(session_id), f"turn {number}", idempotency_key=key)
            waiting: asyncio.Task[Any] = asyncio.ensure_future(send)
        else:
            waiting = asyncio.ensure_future(self.agent.sessions.send_and_wait(session_id, f"turn {number}", idempotency_key=key))
        until = time.monotonic() + TURN_TIMEOUT
        applied = file_written(self.stack.workspace_root / session_id)
        try:
            while not (await asyncio.wait({waiting}, timeout=min(RECONCILE_AFTER, max(0.0, until - time.monotonic()))))[0]:
                if time.monotonic() >= until:
                    raise TimeoutError(f"no outcome in {TURN_TIMEOUT:g} s")
                self.report.reconciles += await self.reconciler.answer_pending(session_id, applied)
        finally:
            waiting.cancel()
        result = waiting.result()
        return result[1] if number == 1 else result

    async def disrupt(self) -> None:
        """What goes wrong while the sessions run (cancelled when they stop): here, ``kills``."""
        await self.kills()

    async def kills(self) -> None:
        while True:
            await asyncio.sleep(self.args.kill_every)
            worker = self.stack.children["worker"]
            self.worker_ready.clear()
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
            self.report.kills += 1
            self.say(f"worker {worker.pid} killed ({self.report.kills}); starting another")
            await self.stack.restart_worker()
            self.worker_ready.set()

    async def sampling(self) -> None:
        while True:
            await self.worker_ready.wait()  # not the moments a new worker is starting
            self.sample()
            await asyncio.sleep(self.args.sample_every)

    def follow(self, session_id: str, rng: random.Random) -> None:
        """A client of the gateway following the session's stream until it is archived, dropping its
        connection now and then (every ``--drop-seconds`` on average) and resuming with ``Last-Event-ID``."""
        tally = Tally(f"sse-{session_id}", "sse")
        self.report.tallies.append(tally)
        own = random.Random(rng.random())

        async def run() -> None:
            async with httpx.AsyncClient(base_url=self.stack.gateway_url, timeout=httpx.Timeout(60.0, connect=10.0)) as http:
                await follow_sse(http, session_id, self.stack.token, tally, own, self.args.drop_seconds)

        self.followers.append(asyncio.create_task(guarded(tally, run)))

    def sample(self) -> None:
        worker, gateway = self.stack.children["worker"].pid, self.stack.gateway_pid
        run_dir = self.stack.run_dir
        store = run_dir / "agentrt.db"
        sample = Sample(
            minute=self.elapsed() / 60, turns=self.report.turns,
            worker_rss=rss_mb(worker), gateway_rss=rss_mb(gateway),
            worker_fds=open_fds(worker), gateway_fds=open_fds(gateway), children=len(descendants(worker)),
            store_mb=file_mb(store, Path(f"{store}-wal")), server_mb=dir_mb(run_dir / "server"),
        )
        self.report.samples.append(sample)
        self.say(
            f"{sample.turns} turns; worker {sample.worker_rss:.0f} MiB {sample.worker_fds} fds {sample.children} children; "
            f"gateway {sample.gateway_rss:.0f} MiB {sample.gateway_fds} fds; store {sample.store_mb:.1f} MiB; load {load_average()}"
        )

    def check_files(self) -> None:
        for session_id, turns in self.completed.items():
            workspace = self.stack.workspace_root / session_id
            for n in range(1, turns + 1):
                path = workspace / f"turn-{n}.txt"
                text = path.read_text() if path.exists() else ""
                expected = f"{session_id} turn {n}\n"
                if text.count(expected) == 0:
                    self.report.lost += 1
                elif text != expected:
                    self.report.duplicated += 1

    async def run(self) -> Report:
        rng = random.Random(self.args.seed)
        ids = [f"soak-{i:03d}-{uuid.uuid4().hex[:6]}" for i in range(self.args.sessions)]
        self.ids = ids
        background = [asyncio.create_task(self.sampling()), asyncio.create_task(self.disrupt())]
        try:
            await asyncio.gather(*(self.session(sid, random.Random(rng.random())) for sid in ids))
        finally:
            for task in background:
                task.cancel()
        await self.worker_ready.wait()
        self.sample()
        self.check_files()
        archived = await asyncio.gather(*(self.agent.sessions.archive(sid) for sid in self.completed), return_exceptions=True)
        for sid, result in zip(self.completed, archived):
            if isinstance(result, BaseException):
                self.report.failures.append(f"{sid} archive: {type(result).__name__}: {result}"[:300])
        _, pending = await asyncio.wait(self.followers, timeout=120) if self.followers else (set(), set())
        for task in pending:
            task.cancel()
        worker = self.stack.children["worker"]
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=60)
        await asyncio.sleep(1)
        self.report.leaked = len(sandbox_processes())
        self.report.task_timeouts = task_timeouts(self.stack.run_dir / "worker.log")
        return self.report


async def run_soak(args: argparse.Namespace, make: Callable[[argparse.Namespace, Stack, AgentClient], Soak] = Soak) -> Report:
    """Start the stack, run ``make(args, stack, client)`` (a ``Soak``, or one that goes wrong another
    way) and return its report; the stack is stopped and its temporary directory removed after."""
    own_dir = not args.workdir
    run_dir = Path(tempfile.mkdtemp(prefix="agentrt-soak-")) if own_dir else Path(args.workdir)
    run_dir.mkdir(parents=True, exist_ok=True)
    stack = Stack(run_dir, chunks=4, chunk_ms=5, max_streams_per_principal=args.sessions + 4, database_url=args.database_url or "")
    try:
        await stack.start()
        print(f"[soak] server {stack.server.address if stack.server else '?'}, gateway {stack.gateway_url}, files in {run_dir}", flush=True)
        config = AgentrtConfig.load(stack.config_path)
        with Store.open(stack.store_url) as store:
            agent = await AgentClient.connect(config, principal=PRINCIPAL, store=store)
            while not await agent.has_worker():
                await asyncio.sleep(0.1)
            return await make(args, stack, agent).run()
    finally:
        stack.stop()
        if own_dir and not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="how long sessions send turns (minutes)")
    parser.add_argument("--sessions", type=int, default=10, help="sessions sending turns at once")
    parser.add_argument("--think", type=float, default=2.0, help="mean pause between a session's turns (seconds)")
    parser.add_argument("--kill-every", type=float, default=240.0, help="seconds between worker SIGKILLs")
    parser.add_argument("--sample-every", type=float, default=60.0, help="seconds between samples")
    parser.add_argument("--drop-seconds", type=float, default=120.0, help="mean seconds before a stream follower drops and resumes (0: never)")
    parser.add_argument("--database-url", default="", help="the store (default: SQLite in the run directory)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", default="", help="run directory (default: a new temporary one, removed after)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary run directory")
    args = parser.parse_args(argv)
    if args.minutes <= 0 or args.sessions < 1 or args.think < 0 or args.kill_every <= 0 or args.sample_every <= 0:
        parser.error("--minutes, --kill-every and --sample-every must be > 0, --sessions >= 1 and --think >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    report = asyncio.run(run_soak(args))
    print(report.table())
    for failure in report.failures[:20]:
        print(f"failed: {failure}")
    print(report.line())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
