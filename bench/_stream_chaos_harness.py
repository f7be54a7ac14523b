"""The stream chaos harness: SSE clients of the gateway follow sessions while the gateway, the
worker and the Temporal server are killed and restarted; each client must end with exactly its
session's stream.

The processes are ``bench/_chaos_harness.py``'s (``_Chaos``: its own dev server on free ports,
``bench._chaos_worker`` subprocesses, the chaos loop that SIGKILLs the worker's process group and
stops the server, by SIGKILL or SIGTERM, to start it again on the same ports and file), plus
``bench/_long_stream_stack.py``'s paced model (``bench._paced_provider``: every answer streamed as
``chunks`` chunks, one per ``chunk_ms``) and gateway (``bench._gateway_process``, on one port for
the whole run). Beside the chaos loop, the gateway loop SIGKILLs the gateway's process group
``gateway_kills`` times at random moments spread over the chaos and starts it again on the same
port. Every kill aims at a random moment: whatever is in flight then (a model call streaming,
whose retry streams again under the next attempt; a store write; a workflow task; nothing). With
``worker_freezes``, a freeze loop also stops the worker's process group (SIGSTOP) past its calls'
heartbeat timeout and continues it (SIGCONT): an abandoned attempt streams on beside its retry.

What runs under it: ``sessions`` sessions of the ``paced`` profile (no tool: one model call per
turn, its answer streamed), each sending its next message as soon as its turn ended, at least
``turns`` turns each and until the chaos is over; then each session is archived.

``clients`` SSE clients (client ``i`` follows session ``i mod sessions``) read
``GET /v1/sessions/{id}/stream`` from the session's first event, once its first message was
accepted (``follow_sse`` of
``bench/_long_stream_clients.py``): a connection that breaks (the gateway killed, or refusing
while it starts, an error answer while the server is down) is opened again after 0.5 s with
``Last-Event-ID``, the id of the last item received; besides, each client drops its connection on
purpose now and then (after a time of mean ``drop_seconds``; 0: never) and resumes the same way.
A client ends at ``SessionArchived``.

Checks, once every client has ended or its bound has passed: the base harness's (every turn's
outcome, the durable record, the replay of every history), then each client's items against its
session's stream as a reader that starts after the fact reads it from the store (``reference``),
turn by turn: items never received (gaps), items received twice (duplicates), items that reader
does not hand out (extras), items out of order, deltas whose payload names another item.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Awaitable, Callable

import httpx

from agentrt.client import AgentClient
from agentrt.schemas import SessionConfig
from agentrt.worker import free_port
from bench._chaos_harness import HEARTBEAT_TIMEOUT_SECONDS, RPC_TIMEOUT, _Chaos, _Session, _Turn
from bench._long_stream_clients import ARCHIVED, Reference, Tally, follow_sse, guarded, reference
from bench._long_stream_stack import PRINCIPAL, PROFILE, Stack

SECONDS_PER_KILL = 4.0  # a worker kill's wall time: a wait of 0.3-3 s and a worker start
SECONDS_PER_RESTART = 10.0  # a server restart's: down 0.2-1.5 s, a start, the reconnects
GATEWAY_GAP = (0.0, 1.0)  # seconds between a gateway's kill and its successor's start
FREEZE_SECONDS = (2.5, 5.0)  # a worker frozen (SIGSTOP) this long: past its calls' 2 s heartbeat timeout
FOLLOWERS_BOUND = 90.0  # seconds the clients get to reach SessionArchived once the sessions are archived


@dataclass
class StreamChaosReport:
    """What a stream chaos run did and what its clients got.

    - ``gateway_kills``, ``worker_kills``: process groups SIGKILLed (and started again);
      ``server_restarts``: times the Temporal server was stopped (SIGKILL or SIGTERM) and started;
      ``worker_freezes``: times the worker was stopped (SIGSTOP) and continued.
    - ``turns``: turns sent; ``failed_turns``: those that did not complete (an outcome other than
      ``completed``, or none by the deadline).
    - ``gaps``: items of a client's session (events, and deltas a reader hands out) the client never
      received, summed over clients; ``duplicates``: items received more than once (each repeat);
      ``extras``: distinct items received that the reader does not hand out; ``out_of_order``:
      items whose id is not past the one before; ``mismatched``: deltas whose payload names another
      item than their id. ``unfinished``: clients that did not reach ``SessionArchived``.
    - ``items``: items received by all clients (repeats included); ``resumes``: connections opened
      again after one broke or was refused; ``drops``: connections a client closed on purpose and
      resumed; ``retried_calls``: model calls with deltas of more than one attempt in the store;
      ``refused``: answers other than 200 and 204 the clients got, by status (503 while the server
      does not answer; a 404 would be a session the gateway lost sight of, a 429 a gone client's
      stream still counted).
    - ``lost``, ``replay_failures``, ``reconnect_failures``, ``worker_exits``: the base harness's
      (``ChaosReport``).
    """

    clients: int = 0
    sessions: int = 0
    turns: int = 0
    gateway_kills: int = 0
    worker_kills: int = 0
    server_restarts: int = 0
    worker_freezes: int = 0
    gaps: int = 0
    duplicates: int = 0
    extras: int = 0
    out_of_order: int = 0
    mismatched: int = 0
    unfinished: int = 0
    failed_turns: int = 0
    items: int = 0
    resumes: int = 0
    drops: int = 0
    retried_calls: int = 0
    refused: dict[int, int] = field(default_factory=dict)
    lost: int = 0
    replay_failures: int = 0
    reconnect_failures: int = 0
    worker_exits: int = 0
    elapsed_seconds: float = 0.0
    run_dir: str = ""
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (
            f"stream_chaos clients={self.clients} turns={self.turns} gateway_kills={self.gateway_kills} "
            f"worker_kills={self.worker_kills} server_restarts={self.server_restarts} gaps={self.gaps} "
            f"duplicates={self.duplicates} unfinished={self.unfinished} failed_turns={self.failed_turns}"
        )

    def details(self) -> str:
        return (
            f"sessions={self.sessions} worker_freezes={self.worker_freezes} items={self.items} resumes={self.resumes} drops={self.drops} "
            f"retried_calls={self.retried_calls} refused[{' '.join(f'{k}={v}' for k, v in sorted(self.refused.items()))}] extras={self.extras} out_of_order={self.out_of_order} "
            f"mismatched={self.mismatched} lost={self.lost} replay_failures={self.replay_failures} "
            f"reconnect_failures={self.reconnect_failures} worker_exits={self.worker_exits} "
            f"elapsed={self.elapsed_seconds:.1f}s run_dir={self.run_dir}"
        )

    @property
    def ok(self) -> bool:
        """Nothing missed, doubled, added, reordered or unfinished; every turn completed; the
        durable record whole and every history replayed."""
        return not (
            self.gaps or self.duplicates or self.extras or self.out_of_order or self.mismatched or self.unfinished
            or self.failed_turns or self.lost or self.replay_failures
        )


def by_turn(tally: Tally, ref: Reference, turn_of: dict[int, str]) -> tuple[Counter[str], Counter[str]]:
    """What one SSE client got wrong, by turn id: items of ``ref`` it never received, and distinct
    items it received that ``ref`` does not hand out. ``turn_of`` maps an event's seq to its turn
    id (``"-"``: an event outside any turn); a delta's turn is its own."""
    missing: Counter[str] = Counter()
    extra: Counter[str] = Counter()
    for seq in ref.event_seqs - tally.event_seqs:
        missing[turn_of.get(seq, "-")] += 1
    for seq in tally.event_seqs - ref.event_seqs:
        extra[turn_of.get(seq, "?")] += 1
    for key in ref.handed_out - tally.delta_keys:
        missing[key[0]] += 1
    for key in tally.delta_keys - ref.handed_out:
        extra[key[0]] += 1
    return missing, extra


@dataclass
class _Follower:
    tally: Tally
    session: _Session
    task: asyncio.Task[None] | None = None


class _StreamChaos(_Chaos):
    kill_modes = ("random",)
    restart_modes = ("random",)

    def __init__(
        self, clients: int, sessions: int, turns: int, gateway_kills: int, worker_kills: int, server_restarts: int,
        seed: int, workdir: Path, deadline_seconds: float, progress: Callable[[str], None], *,
        chunks: int, chunk_ms: float, drop_seconds: float, fork_workers: bool, database_url: str,
        worker_freezes: int = 0,
    ) -> None:
        super().__init__(
            sessions, turns, worker_kills, server_restarts, seed, workdir, deadline_seconds, progress,
            fork_workers=fork_workers,
        )
        self.stack = Stack(
            self.run_dir, chunks=chunks, chunk_ms=chunk_ms, max_streams_per_principal=2 * clients + 4,
            database_url=database_url,
        )
        self.store_url = self.stack.store_url
        self.task_queue = self.stack.task_queue
        self.n_clients = clients
        self.target_gateway_kills = gateway_kills
        self.drop_seconds = drop_seconds
        self.gateway_rng = random.Random(f"{seed}-gateway")
        self.gateway_port = 0
        self.gateway_done = False
        self.target_freezes = worker_freezes
        self.freezes_done = False
        self.http: httpx.AsyncClient | None = None
        self.followers: list[_Follower] = []
        self.session_started: dict[str, asyncio.Event] = {}
        self.streams = StreamChaosReport(clients=clients, sessions=sessions, run_dir=str(self.run_dir))

    @property
    def chaos_over(self) -> bool:
        return self.chaos_done and self.gateway_done and self.freezes_done

    # ------------------------------------------------------------ plans and processes

    def plan(self) -> None:
        for i in range(1, self.n_sessions + 1):
            workspace = self.run_dir / "ws" / f"s{i}"
            workspace.mkdir(parents=True)
            self.session_started[f"streamchaos{self.seed}-s{i}"] = asyncio.Event()
            self.sessions.append(_Session(
                index=i, session_id=f"streamchaos{self.seed}-s{i}", workspace=workspace,
                script=workspace / "unused", ask=False, turns=[],
            ))

    def describe(self) -> str:
        return (
            f"{self.n_clients} clients on {self.n_sessions} sessions (at least {self.turns_per_session} turns each), "
            f"{self.target_gateway_kills} gateway kills"
        )

    def make_client(self) -> AgentClient:
        # The gateway's token stands for PRINCIPAL: the sessions are its, so its clients may read them.
        return AgentClient(self.temporal, task_queue=self.task_queue, principal=PRINCIPAL)

    def worker_env(self) -> dict[str, str]:
        # The paced profile is in the stack's agentrt.toml; the variables the base sets win over it.
        env = super().worker_env()
        if self.stack.config_path is not None:
            env["AGENTRT_CONFIG"] = str(self.stack.config_path)
        return env

    def _config(self, session: _Session) -> SessionConfig:
        assert self.client is not None
        return self.client.new_config(
            str(session.workspace), session_id=session.session_id, profile=PROFILE,
            heartbeat_timeout_seconds=HEARTBEAT_TIMEOUT_SECONDS,
        )

    async def start_services(self) -> None:
        provider_port = await self.stack.start_provider()
        self.stack.write_config(provider_port, self.server.address)
        self.gateway_port = free_port()
        await self.start_gateway()
        self.log(f"paced model on port {provider_port}, gateway at {self.stack.gateway_url}")
        self.http = httpx.AsyncClient(base_url=self.stack.gateway_url, timeout=httpx.Timeout(30.0, connect=5.0))
        for i in range(self.n_clients):
            session = self.sessions[i % len(self.sessions)]
            follower = _Follower(Tally(f"client{i + 1}", "sse"), session)
            follow = functools.partial(
                follow_sse, self.http, session.session_id, self.stack.token, follower.tally,
                random.Random(f"{self.seed}-client{i + 1}"), self.drop_seconds,
            )
            follower.task = asyncio.create_task(guarded(follower.tally, functools.partial(self._follow, session, follow)))
            self.followers.append(follower)

    async def _follow(self, session: _Session, follow: Callable[[], Awaitable[None]]) -> None:
        """Follow the session once its first message was accepted (before, the gateway answers 404)."""
        await self.session_started[session.session_id].wait()
        await follow()

    async def stop_services(self) -> None:
        tasks = [f.task for f in self.followers if f.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.http is not None:
            await self.http.aclose()
        await asyncio.to_thread(self.stack.stop)

    async def start_gateway(self) -> None:
        """Start a gateway on the run's port and wait until it listens; one that exits first is
        started again (at most 5 times)."""
        for attempt in range(5):
            try:
                await self.stack.start_gateway(self.gateway_port)
                return
            except RuntimeError as err:
                self.problem(f"gateway start {attempt + 1} failed: {err}")
                await asyncio.sleep(1.0)
        raise RuntimeError("could not start a gateway")

    # ------------------------------------------------------------ chaos

    async def chaos_loop(self) -> None:
        await asyncio.gather(super().chaos_loop(), self.gateway_loop(), self.freeze_loop())

    async def freeze_loop(self) -> None:
        """SIGSTOP the worker's process group ``target_freezes`` times for longer than a heartbeat
        timeout, then SIGCONT it: its model call's attempt is retried while the frozen one, once
        thawed, goes on streaming (the abandoned attempt of docs/streaming.md)."""
        rng = random.Random(f"{self.seed}-freeze")
        span = SECONDS_PER_KILL * self.target_kills + SECONDS_PER_RESTART * self.target_restarts
        mean = max(3.0, span / (self.target_freezes + 1))
        try:
            for f in range(self.target_freezes):
                await asyncio.sleep(rng.uniform(0.5, 1.5) * mean)
                if time.monotonic() >= self.turn_deadline:
                    self.problem(f"worker freezes stopped at the deadline after {f}")
                    return
                async with self.ops:
                    process = self.worker
                    if process is None or process.returncode is not None:
                        continue
                    seconds = rng.uniform(*FREEZE_SECONDS)
                    os.killpg(process.pid, signal.SIGSTOP)
                    await asyncio.sleep(seconds)
                    os.killpg(process.pid, signal.SIGCONT)
                self.streams.worker_freezes += 1
                self.log(f"worker freeze {f + 1}/{self.target_freezes}: {seconds:.1f} s")
        finally:
            self.freezes_done = True

    async def gateway_loop(self) -> None:
        """SIGKILL the gateway ``target_gateway_kills`` times, spread over the time the worker kills
        and server restarts take, each followed by a new gateway on the same port."""
        rng = self.gateway_rng
        span = SECONDS_PER_KILL * self.target_kills + SECONDS_PER_RESTART * self.target_restarts
        mean = max(3.0, span / (self.target_gateway_kills + 1))
        try:
            for g in range(self.target_gateway_kills):
                await asyncio.sleep(rng.uniform(0.5, 1.5) * mean)
                if time.monotonic() >= self.turn_deadline:
                    self.problem(f"gateway kills stopped at the deadline after {g}")
                    return
                await asyncio.to_thread(self.stack.kill_gateway)
                self.streams.gateway_kills += 1
                gap = rng.uniform(*GATEWAY_GAP)
                self.log(f"gateway kill {g + 1}/{self.target_gateway_kills}; new gateway in {gap:.1f} s")
                await asyncio.sleep(gap)
                began = time.monotonic()
                await self.start_gateway()
                self.log(f"gateway back after {time.monotonic() - began:.1f} s")
        finally:
            self.gateway_done = True

    # ------------------------------------------------------------ sessions

    async def drive(self, session: _Session) -> None:
        """Turn after turn (at least ``turns``, and until the chaos is over), then archive."""
        try:
            number = 0
            while time.monotonic() < self.turn_deadline and (number < self.turns_per_session or not self.chaos_over):
                number += 1
                turn = _Turn(number=number, text=f"{session.session_id} turn {number}", lines=[])
                session.turns.append(turn)
                if not await self._send(session, turn):
                    break
                self.session_started[session.session_id].set()
                self.report.turns_sent += 1
                if not await self._wait(session, turn):
                    break
            if self.session_started[session.session_id].is_set():
                await self._archive(session)
        finally:
            self.session_started[session.session_id].set()  # a client of a session never started: 404s, unfinished
            session.done = True

    async def _archive(self, session: _Session) -> None:
        """Archive the session (its stream's end), asking again while the server or worker is away."""
        assert self.client is not None
        while time.monotonic() < self.deadline - 20:
            try:
                await asyncio.wait_for(self.client.archive(session.session_id, "stream chaos over"), RPC_TIMEOUT)
                return
            except Exception as err:  # noqa: BLE001 - server or worker gone, or archived already
                if await self._archived(session.session_id):
                    return
                self.log(f"{session.session_id}: archive failed ({type(err).__name__}: {err}); again")
                await asyncio.sleep(0.5)
        self.problem(f"{session.session_id}: not archived by the deadline")

    async def _archived(self, session_id: str) -> bool:
        assert self.store is not None
        stored = await asyncio.to_thread(self.store.events, session_id, 0, 100_000)
        return any(e.type == ARCHIVED for e in stored)

    async def operate(self, session: _Session) -> None:
        """Nothing to approve or reconcile: the sessions call no tool."""

    # ------------------------------------------------------------ checks

    async def check(self) -> None:
        await self._await_followers()
        await super().check()
        assert self.store is not None
        for session in self.sessions:
            ref = await asyncio.to_thread(reference, self.store, session.session_id)
            stored = await asyncio.to_thread(self.store.events, session.session_id, 0, 100_000)
            turn_of = {e.seq: e.turn_id or "-" for e in stored}
            self.streams.retried_calls += len({(t, r) for t, r, a, _ in ref.written if a > 1})
            for follower in self.followers:
                if follower.session is session:
                    self._check_follower(follower.tally, session.session_id, ref, turn_of)

    async def _await_followers(self) -> None:
        limit = min(self.deadline - 15, time.monotonic() + FOLLOWERS_BOUND)
        while time.monotonic() < limit and not all(f.tally.ended for f in self.followers):
            await asyncio.sleep(0.2)
        for follower in self.followers:
            if not follower.tally.ended:
                self.problem(f"{follower.tally.name} ({follower.session.session_id}) did not reach {ARCHIVED}: {follower.tally.error}")

    def _check_follower(self, tally: Tally, session_id: str, ref: Reference, turn_of: dict[int, str]) -> None:
        report = self.streams
        missing, extra = by_turn(tally, ref, turn_of)
        report.gaps += sum(missing.values())
        report.extras += sum(extra.values())
        report.duplicates += tally.duplicates
        report.out_of_order += tally.out_of_order
        report.mismatched += tally.mismatched
        report.unfinished += 0 if tally.ended else 1
        report.items += tally.events + tally.deltas
        report.resumes += tally.breaks
        report.drops += tally.drops
        for status, n in tally.refused.items():
            report.refused[status] = report.refused.get(status, 0) + n
        for turn, n in sorted(missing.items()):
            self.problem(f"{tally.name} ({session_id}) {turn}: {n} items never received")
        for turn, n in sorted(extra.items()):
            self.problem(f"{tally.name} ({session_id}) {turn}: {n} items the store's reader does not hand out")
        if tally.duplicates or tally.out_of_order or tally.mismatched:
            self.problem(
                f"{tally.name} ({session_id}): duplicates={tally.duplicates} out_of_order={tally.out_of_order} "
                f"mismatched={tally.mismatched}"
            )

    def finish(self) -> None:
        super().finish()
        base, report = self.report, self.streams
        report.turns = base.turns_sent
        report.worker_kills = base.kills
        report.server_restarts = base.server_restarts
        report.failed_turns = base.turns_failed + base.stuck + base.awaiting_reconcile
        report.lost = base.lost
        report.replay_failures = base.replay_failures
        report.reconnect_failures = base.reconnect_failures
        report.worker_exits = base.worker_exits
        report.elapsed_seconds = base.elapsed_seconds
        report.problems = base.problems

    async def run_streams(self) -> StreamChaosReport:
        await self.run()
        return self.streams


async def run_stream_chaos(
    clients: int,
    sessions: int,
    turns: int,
    gateway_kills: int,
    worker_kills: int,
    server_restarts: int,
    seed: int,
    workdir: Path,
    *,
    chunks: int = 40,
    chunk_ms: float = 25.0,
    drop_seconds: float = 8.0,
    database_url: str = "",
    worker_freezes: int = 0,
    deadline_seconds: float | None = None,
    progress: Callable[[str], None] | None = None,
    fork_workers: bool = False,
) -> StreamChaosReport:
    """Run the stream chaos scenario (see the module docstring) and return what it found.

    ``chunks`` chunks of ``chunk_ms`` milliseconds make each model answer (default 40 of 25 ms: a
    second of streaming per turn). Everything is bounded by ``deadline_seconds`` (default: a budget
    from the sizes); turns end 1/4 of it (at most 30 s) before it. ``fork_workers``: as
    ``bench.chaos``'s. ``database_url``: the store (default: SQLite in the run directory; a
    PostgreSQL database must be empty or this run's). Every process started here is stopped before returning.
    """
    if deadline_seconds is None:
        deadline_seconds = (
            180 + 2 * SECONDS_PER_KILL * (worker_kills + gateway_kills) + 2 * SECONDS_PER_RESTART * server_restarts
            + 3.0 * turns
        )
    chaos = _StreamChaos(
        clients, sessions, turns, gateway_kills, worker_kills, server_restarts, seed, Path(workdir),
        deadline_seconds, progress or (lambda _text: None),
        chunks=chunks, chunk_ms=chunk_ms, drop_seconds=drop_seconds, fork_workers=fork_workers,
        database_url=database_url, worker_freezes=worker_freezes,
    )
    return await chaos.run_streams()

