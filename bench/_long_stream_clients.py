"""The followers of ``bench.long_stream`` and what they are checked against.

- ``follow_sse``: a client of the gateway's ``GET /v1/sessions/{id}/stream`` (native encoding)
  read with httpx-sse; it drops its connection now and then on purpose and resumes with
  ``Last-Event-ID`` (and so it does when a connection breaks), until ``SessionArchived``.
- ``follow_python``: ``AgentClient.sessions.deltas(session_id, turn_id)`` turn after turn (the
  turn ids come from whoever sends the messages), the Python client's own way of following a
  turn's text, straight from the store.
- ``reference``: the session's stream as a reader that starts after the fact reads it from the
  store (``SessionStream``), and every delta row written: what each follower must have got.

``Tally`` counts what one follower got: duplicates (an item twice), out-of-order items, and,
against the reference, gaps (an item never received) and extras (one it should not have got).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx
from httpx_sse import SSEError, aconnect_sse

from agentrt.client import AgentClient
from agentrt.store import SessionStream, Store

DELTA = "ModelTokenDelta"
ARCHIVED = "SessionArchived"
DeltaKey = tuple[str, int, int, int]  # (turn_id, round, attempt, idx)


def stream_key(item_id: str) -> tuple[int, int, int]:
    """The order of an item id: ``"N"`` is (N, 0, 0), ``"N.A.I"`` is (N, A, I)."""
    parts = [int(p) for p in item_id.split(".")]
    return (parts[0], 0, 0) if len(parts) == 1 else (parts[0], parts[1], parts[2])


@dataclass
class Tally:
    """What one follower received. ``kind``: ``sse`` (items by their stream ids, events and deltas)
    or ``python`` (deltas by (turn, round, attempt, idx))."""

    name: str
    kind: str
    deltas: int = 0  # delta items received, repeats included
    events: int = 0  # event items received, repeats included
    duplicates: int = 0  # items received more than once (each repeat counts)
    out_of_order: int = 0  # items whose key is not past the one before it
    mismatched: int = 0  # deltas whose id does not name their own seq, attempt and idx, or a retry's
    # delta without "retry": true and "supersedes": [1, ..., attempt - 1]
    drops: int = 0  # connections this follower closed on purpose and resumed
    breaks: int = 0  # connections that broke or were refused and were resumed
    refused: dict[int, int] = field(default_factory=dict)  # answers other than 200 and 204, by status
    ended: bool = False  # SessionArchived received (sse), every turn followed to its end (python)
    error: str = ""
    delta_keys: set[DeltaKey] = field(default_factory=set)
    event_seqs: set[int] = field(default_factory=set)
    last_key: tuple[int, int, int] | None = None
    last_idx: dict[tuple[str, int, int], int] = field(default_factory=dict)

    def take_item(self, item_id: str, event: str, data: dict[str, object]) -> None:
        """One item of the gateway's stream (its SSE ``id``, ``event`` and parsed ``data``)."""
        key = stream_key(item_id)
        if self.last_key is not None and key <= self.last_key:
            self.out_of_order += 1
        self.last_key = key if self.last_key is None else max(key, self.last_key)
        if event == DELTA:
            self.deltas += 1
            attempt = key[1]
            retry = (data.get("retry"), data.get("supersedes")) == (True, list(range(1, attempt))) if attempt > 1 else True
            if (data.get("seq"), data.get("attempt"), data.get("idx")) != key or not retry:
                self.mismatched += 1
            self._delta((str(data["turn_id"]), int(data["round"]), int(data["attempt"]), int(data["idx"])))  # type: ignore[arg-type]
        else:
            self.events += 1
            if key[0] in self.event_seqs:
                self.duplicates += 1
            self.event_seqs.add(key[0])

    def take_delta(self, turn_id: str, round: int, attempt: int, idx: int) -> None:
        """One delta of ``AgentClient.sessions.deltas``."""
        self.deltas += 1
        call = (turn_id, round, attempt)
        if idx <= self.last_idx.get(call, -1):
            self.out_of_order += 1
        self.last_idx[call] = max(idx, self.last_idx.get(call, -1))
        self._delta((turn_id, round, attempt, idx))

    def _delta(self, key: DeltaKey) -> None:
        if key in self.delta_keys:
            self.duplicates += 1
        self.delta_keys.add(key)

    def gaps(self, reference: Reference) -> int:
        """Items of the reference this follower never received (events only for ``sse``)."""
        expected = reference.handed_out if self.kind == "sse" else reference.written
        missing = len(expected - self.delta_keys)
        return missing + (len(reference.event_seqs - self.event_seqs) if self.kind == "sse" else 0)

    def extras(self, reference: Reference) -> int:
        """Distinct items received that the reference does not have."""
        expected = reference.handed_out if self.kind == "sse" else reference.written
        extra = len(self.delta_keys - expected)
        return extra + (len(self.event_seqs - reference.event_seqs) if self.kind == "sse" else 0)


@dataclass
class Reference:
    """The session's stream read from the store after it ended: ``event_seqs`` and the deltas a
    reader hands out (``handed_out``), and every delta row written (``written``: the same set
    unless a retried model call's abandoned attempt wrote after its retry)."""

    event_seqs: set[int]
    handed_out: set[DeltaKey]
    written: set[DeltaKey]
    rows: int  # delta rows in the store (repeats of a key included)


def reference(store: Store, session_id: str) -> Reference:
    """Read ``session_id``'s whole stream and delta rows from ``store`` (blocking)."""
    events: set[int] = set()
    handed: set[DeltaKey] = set()
    reader = SessionStream.resume(store, session_id, None)
    while True:
        entries = reader.read(max_events=500)
        for entry in entries:
            if entry.delta is not None:
                d = entry.delta
                handed.add((d.turn_id, d.round, d.attempt, d.idx))
            else:
                events.add(entry.key.seq)
        if reader.ended or (not entries and reader.caught_up):
            break
    written: set[DeltaKey] = set()
    rows, after = 0, 0
    while page := store.deltas(session_id, after, limit=5000):
        rows += len(page)
        written.update((d.turn_id, d.round, d.attempt, d.idx) for d in page)
        after = page[-1].id
    return Reference(events, handed, written, rows)


async def follow_sse(
    http: httpx.AsyncClient, session_id: str, token: str, tally: Tally, rng: random.Random, drop_seconds: float
) -> None:
    """Follow the session's stream until ``SessionArchived``: from its first event, resuming with
    ``Last-Event-ID`` after a connection this follower dropped (after a time drawn from an
    exponential distribution of mean ``drop_seconds``; 0: never) or one that broke (a refusal
    waits its ``Retry-After``)."""
    path = f"/v1/sessions/{session_id}/stream"
    last_id: str | None = None
    while not tally.ended:
        drop_at = time.monotonic() + rng.expovariate(1 / drop_seconds) if drop_seconds > 0 else math.inf
        headers = {"Authorization": f"Bearer {token}", **({"Last-Event-ID": last_id} if last_id else {})}
        dropped = False
        try:
            async with aconnect_sse(http, "GET", path, headers=headers) as source:
                status = source.response.status_code
                if status == 204:
                    tally.ended = True
                    return
                if status != 200:
                    body = (await source.response.aread()).decode(errors="replace")[:200]
                    tally.breaks += 1
                    tally.refused[status] = tally.refused.get(status, 0) + 1
                    tally.error = f"HTTP {status}: {body}"
                    await asyncio.sleep(float(source.response.headers.get("retry-after", "1")))
                    continue
                async for sse in source.aiter_sse():
                    if not sse.data:
                        continue
                    tally.take_item(sse.id, sse.event, json.loads(sse.data))
                    last_id = sse.id
                    if sse.event == ARCHIVED:
                        tally.ended = True
                        return
                    if time.monotonic() >= drop_at:
                        dropped = True
                        break
        except (httpx.TransportError, SSEError) as err:
            tally.error = f"{type(err).__name__}: {err}"
        if dropped:
            tally.drops += 1
        else:
            tally.breaks += 1
            await asyncio.sleep(0.5)


async def follow_python(agent: AgentClient, session_id: str, turns: asyncio.Queue[str | None], tally: Tally) -> None:
    """``agent.sessions.deltas`` for each turn id put in ``turns``, in order, until None."""
    while (turn_id := await turns.get()) is not None:
        async for delta in agent.sessions.deltas(session_id, turn_id):
            tally.take_delta(delta.turn_id, delta.round, delta.attempt, delta.idx)
    tally.ended = True


async def guarded(tally: Tally, follow: Callable[[], Awaitable[None]]) -> None:
    """Run a follower, keeping an exception it ends with in its tally."""
    try:
        await follow()
    except Exception as err:  # noqa: BLE001 - reported per follower
        tally.error = f"{type(err).__name__}: {err}"
