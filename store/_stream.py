"""A session's events and token deltas as one ordered stream with resumable positions, read
from the store, so a subscriber that reconnects gets exactly the rest.

Order and ids (every item's id is also the position to resume after it):

- event ``seq`` N has id ``"N"`` and key (N, 0, 0);
- a token delta of the model call that ``ModelRequestStarted`` seq N started (same ``turn_id``
  and ``round``) has id ``"N.<attempt>.<idx>"`` and key (N, attempt, idx);
- items go by key: an event, then the deltas of the call it started, attempt by attempt.

Why this order is safe to resume from: the model activity writes a round's staged events
(its ``ModelRequestStarted`` among them) before it streams, and every delta of a call is in
the store before any later event is (``lean-rounds-v1``). Events are read only while their
seqs are contiguous, and deltas only once their ``ModelRequestStarted`` was read, so nothing
with a smaller key can show up after a larger one was handed out, except the late deltas of
an attempt a retry already replaced: those are dropped, by one rule whether a reader follows
the call live or reads it after the fact (``SessionStream.read``): a delta written after a
delta of a newer attempt of the same call (a larger row id) is never handed out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlalchemy import Connection, and_, func, or_, select

from agentrt.schemas import EVENT_ADAPTER, Event, InvalidStreamCursor, ModelRequestStarted, SessionArchived
from agentrt.store._base import StoreBase
from agentrt.store._models import events, token_deltas

# The longest position a caller may send (characters): "N.<attempt>.<idx>" with 10 digits each.
MAX_STREAM_ID_CHARS = 32
# Every number of a position fits the store's integer columns (seq, attempt, idx).
MAX_STREAM_NUMBER = 2**31 - 1
# N, or N.attempt.idx, in decimal without leading zeros, signs or spaces, so every position has
# exactly one spelling.
_STREAM_ID = re.compile(r"(0|[1-9][0-9]{0,9})(?:\.([1-9][0-9]{0,9})\.(0|[1-9][0-9]{0,9}))?")
MODEL_REQUEST_STARTED = "ModelRequestStarted"
ARCHIVED = "SessionArchived"
_CLOSING_TYPES = ("AssistantMessageCompleted", "TurnEnded")


@dataclass(frozen=True, order=True)
class StreamKey:
    """A position in a session's stream: event ``seq`` is (seq, 0, 0), a delta (seq, attempt, idx)
    with attempt >= 1. ``idx`` -1 marks the position just before (seq, attempt, 0)."""

    seq: int
    attempt: int = 0
    idx: int = 0

    @property
    def is_event(self) -> bool:
        return self.attempt == 0 and self.idx == 0

    def before(self) -> StreamKey:
        """The position just before this one (the next item read after it is this one)."""
        return StreamKey(self.seq, self.attempt, self.idx - 1)


START = StreamKey(0)


def stream_id(key: StreamKey) -> str:
    """The id of the item at ``key``: ``"N"`` or ``"N.<attempt>.<idx>"``."""
    return str(key.seq) if key.is_event else f"{key.seq}.{key.attempt}.{key.idx}"


def parse_stream_id(session_id: str, text: str) -> StreamKey:
    """The key of an item id (``"N"``, ``"N.<attempt>.<idx>"``; ``"0"`` is the start).

    Raises ``InvalidStreamCursor`` for anything else: longer than ``MAX_STREAM_ID_CHARS``,
    signs, spaces, leading zeros, attempt 0, a number past ``MAX_STREAM_NUMBER`` (the store's
    integer columns). Whether the item
    exists is checked by ``SessionStream.resume``.
    """
    if len(text) > MAX_STREAM_ID_CHARS:
        raise InvalidStreamCursor(session_id, text, f"longer than {MAX_STREAM_ID_CHARS} characters")
    match = _STREAM_ID.fullmatch(text)
    if match is None or not text.isascii():
        raise InvalidStreamCursor(session_id, text, 'not a stream id ("N" or "N.<attempt>.<idx>")')
    seq, attempt, idx = match.groups()
    numbers = [int(n) for n in (seq, attempt, idx) if n is not None]
    if max(numbers) > MAX_STREAM_NUMBER:
        raise InvalidStreamCursor(session_id, text, f"a number past {MAX_STREAM_NUMBER}")
    if attempt is None:
        return StreamKey(numbers[0])
    if seq == "0":
        raise InvalidStreamCursor(session_id, text, "no model call has seq 0")
    return StreamKey(*numbers)


@dataclass(frozen=True)
class StreamDelta:
    """One streamed chunk of a model call: the call started by ``ModelRequestStarted`` seq
    ``call_seq`` (``turn_id``, ``round``), attempt ``attempt`` (from 1; a retried call streams
    anew under the next attempt), chunk ``idx`` (from 0) of that attempt."""

    call_seq: int
    turn_id: str
    round: int
    attempt: int
    idx: int
    text: str

    @property
    def supersedes(self) -> list[int]:
        """Attempts of the same call whose text this one replaces (all earlier ones)."""
        return list(range(1, self.attempt))


@dataclass(frozen=True)
class StreamEntry:
    """One item of the stream: ``event`` or ``delta`` (exactly one), at ``key``; ``id`` is its id."""

    key: StreamKey
    event: Event | None = None
    delta: StreamDelta | None = None

    @property
    def id(self) -> str:
        return stream_id(self.key)


@dataclass(frozen=True)
class StreamCall:
    """The model call ``ModelRequestStarted`` seq ``seq`` started."""

    seq: int
    turn_id: str
    round: int


@dataclass(frozen=True)
class StreamOpenText:
    """The streamed text still open at a position: attempt ``attempt`` of ``call`` has streamed
    and the call's ``AssistantMessageCompleted`` (or its turn's end) has not come yet."""

    call: StreamCall
    attempt: int


@dataclass
class _Call:
    call: StreamCall
    # Deltas of the call have ids above this (0: not known, read them all).
    floor: int = 0
    # The newest attempt among the call's deltas with ids at or below ``floor`` (0: none).
    newest: int = 0


@dataclass
class _Fresh:
    """What a read that saw every event then visible learnt: the newest delta id before it read
    them, and the last seq it saw. A call whose event shows up later has only deltas above it:
    they are written (so numbered) after their event, which came after that read."""

    top_delta_id: int
    last_seq: int


class SessionStream:
    """Reads one session's stream from ``position`` on; not thread-safe (one reader per thread).

    ``read`` hands out the items after ``position`` in order and advances it; ``ended`` is set
    once ``SessionArchived`` is at or before ``position`` (nothing follows it); ``caught_up`` says
    the last read saw every event the store then held.
    """

    def __init__(self, base: StoreBase, session_id: str, position: StreamKey, call: StreamCall | None) -> None:
        self._base = base
        self.session_id = session_id
        self.position = position
        self.ended = False
        # The last read saw every event then in the store (it read fewer than it could).
        self.caught_up = False
        # The call whose deltas may still come right after ``position``.
        self._call: _Call | None = _Call(call) if call is not None else None
        self._fresh: _Fresh | None = None

    @property
    def in_model_call(self) -> bool:
        """Whether the last event read started a model call (``ModelRequestStarted``): its token
        deltas may come next."""
        return self._call is not None

    # ---------------------------------------------------------------- opening

    @classmethod
    def resume(cls, base: StoreBase, session_id: str, last_id: str | None, *, before: bool = False) -> SessionStream:
        """A reader after the item with id ``last_id`` (None or ``""``: from the start), or, with
        ``before``, just before it (its first item is that one).

        Raises ``InvalidStreamCursor`` when ``last_id`` is not an id (``parse_stream_id``) or names
        no item of this session: no event with that seq, or no such delta of the call that
        ``ModelRequestStarted`` seq N started.
        """
        if not last_id:
            return cls(base, session_id, START, None)
        key = parse_stream_id(session_id, last_id)
        if key == START:
            if before:
                raise InvalidStreamCursor(session_id, last_id, "the start is no item")
            return cls(base, session_id, START, None)
        with base.engine.connect() as conn:
            row = conn.execute(
                select(events.c.type, events.c.body_json).where(events.c.session_id == session_id, events.c.seq == key.seq)
            ).first()
            if row is None:
                raise InvalidStreamCursor(session_id, last_id, f"the session has no event {key.seq} (yet)")
            call = _call_of(key.seq, row.type, base._open(row.body_json, f"events/{session_id}"))
            if not key.is_event:
                if call is None:
                    raise InvalidStreamCursor(session_id, last_id, f"event {key.seq} started no model call")
                if not _delta_exists(conn, session_id, call, key):
                    raise InvalidStreamCursor(session_id, last_id, f"the model call of event {key.seq} has no such delta")
        position = key.before() if before else key
        # The call's deltas follow when its event is at or before the position.
        stream = cls(base, session_id, position, call if position >= StreamKey(key.seq) else None)
        stream.ended = position == key and row.type == ARCHIVED
        return stream

    @classmethod
    def at(cls, base: StoreBase, session_id: str, position: StreamKey) -> SessionStream:
        """A reader at ``position``, a position a reader of this session reached before (not checked)."""
        call, row = None, None
        if position.seq > 0 and position >= StreamKey(position.seq):
            with base.engine.connect() as conn:
                row = conn.execute(
                    select(events.c.type, events.c.body_json).where(
                        events.c.session_id == session_id, events.c.seq == position.seq
                    )
                ).first()
            if row is not None:
                call = _call_of(position.seq, row.type, base._open(row.body_json, f"events/{session_id}"))
        stream = cls(base, session_id, position, call)
        stream.ended = row is not None and position.is_event and row.type == ARCHIVED
        return stream

    def copy(self) -> SessionStream:
        """An independent reader in the same state (to hand over a position)."""
        twin = SessionStream(self._base, self.session_id, self.position, None)
        twin.ended = self.ended
        twin.caught_up = self.caught_up
        twin._call = _Call(self._call.call, self._call.floor, self._call.newest) if self._call is not None else None
        twin._fresh = self._fresh
        return twin

    # ---------------------------------------------------------------- reading

    def read(self, max_events: int = 200) -> list[StreamEntry]:
        """The items after ``position`` now in the store, in order: at most ``max_events`` events,
        each with the deltas of the call it started (and first the deltas still due of the call
        at ``position``); advances ``position`` past them.

        Events are taken while their seqs follow on from ``position`` (a gap waits for the
        missing one). Deltas at or before ``position`` are never handed out again. A delta
        written after a delta of a newer attempt of the same call (an abandoned attempt still
        writing after its retry streamed; row ids say which came first) is dropped, in a live
        read and in a read of a finished call alike, so every reader hands out the same items.
        """
        if self.ended:
            return []
        after_seq = self._last_event()
        with self._base.engine.connect() as conn:
            top = conn.execute(
                select(func.max(token_deltas.c.id)).where(token_deltas.c.session_id == self.session_id)
            ).scalar() or 0
            rows = conn.execute(
                select(events.c.seq, events.c.body_json)
                .where(events.c.session_id == self.session_id, events.c.seq > after_seq)
                .order_by(events.c.seq)
                .limit(max_events)
            ).all()
            read: list[Event] = []
            for row in rows:
                if row.seq != after_seq + 1 + len(read):
                    break  # not yet written: wait for it
                read.append(EVENT_ADAPTER.validate_json(self._base._open(row.body_json, f"events/{self.session_id}")))
            calls: list[_Call] = []
            if self._call is not None:
                calls.append(self._call)
            new_calls: dict[int, _Call] = {}
            for event in read:
                if isinstance(event, ModelRequestStarted) and event.turn_id is not None:
                    fresh = self._fresh
                    floor = fresh.top_delta_id if fresh is not None and event.seq > fresh.last_seq else 0
                    new_calls[event.seq] = _Call(StreamCall(event.seq, event.turn_id, event.round), floor)
            calls.extend(new_calls.values())
            deltas, newest = self._deltas(conn, calls)
        self.caught_up = len(rows) < max_events
        self._fresh = _Fresh(top, rows[-1].seq if rows else after_seq) if self.caught_up else None
        if self._base.engine.dialect.name == "sqlite":
            # One snapshot for the whole read, and one writer at a time that numbers its rows
            # above every committed one: whatever this read did not see is numbered above ``top``.
            for item in calls:
                item.floor = max(item.floor, top)
                item.newest = newest.get(item.call.seq, item.newest)

        out: list[StreamEntry] = []
        if self._call is not None:
            out.extend(deltas.get(self._call.call.seq, []))
        for event in read:
            out.append(StreamEntry(StreamKey(event.seq), event=event))
            self._call = new_calls.get(event.seq)
            out.extend(deltas.get(event.seq, []))
            if isinstance(event, SessionArchived):
                self.ended = True
                break
        if out:
            self.position = out[-1].key
        return out

    def _deltas(self, conn: Connection, calls: list[_Call]) -> tuple[dict[int, list[StreamEntry]], dict[int, int]]:
        """The deltas of ``calls`` after ``position``, in key order, by call seq, without those
        written after a delta of a newer attempt of their call; and, by call seq, the newest
        attempt among the deltas read. One query.

        Taken in id order, a delta is dropped when its attempt is older than the newest one
        before it: the rows below the call's floor (``_Call.newest``) or those read. Deltas at
        or before ``position`` are not read; their attempts are at most the position's, so
        they can make no delta after the position older than a newer attempt.
        """
        if not calls:
            return {}, {}
        c = token_deltas.c
        wanted = []
        for item in calls:
            call = item.call
            same = and_(c.turn_id == call.turn_id, c.round == call.round)
            if self.position.seq == call.seq and not self.position < StreamKey(call.seq):
                pos = self.position
                same = and_(same, or_(c.attempt > pos.attempt, and_(c.attempt == pos.attempt, c.idx > pos.idx)))
            wanted.append(same)
        floor = min(item.floor for item in calls)
        rows = conn.execute(
            select(c.id, c.turn_id, c.round, c.attempt, c.idx, c.text)
            .where(c.session_id == self.session_id, c.id > floor, or_(*wanted))
            .order_by(c.id)
        ).all()
        by_call = {(item.call.turn_id, item.call.round): item for item in calls}
        newest = {item.call.seq: item.newest for item in calls}
        found: dict[int, list[StreamEntry]] = {}
        for r in rows:
            item = by_call[(r.turn_id, r.round)]
            call = item.call
            if r.id <= item.floor:
                continue  # below this call's floor (the query's is the least of all calls')
            if r.attempt < newest[call.seq]:
                continue  # written after a newer attempt's delta: that attempt was abandoned
            newest[call.seq] = r.attempt
            text = self._base._open(r.text, f"token_deltas/{self.session_id}")
            delta = StreamDelta(call.seq, call.turn_id, call.round, r.attempt, r.idx, text)
            found.setdefault(call.seq, []).append(StreamEntry(StreamKey(call.seq, r.attempt, r.idx), delta=delta))
        for entries in found.values():
            entries.sort(key=lambda e: e.key)
        return found, newest

    # ---------------------------------------------------------------- context

    def open_turn(self) -> str | None:
        """The turn in progress at ``position``: the turn id of the last ``TurnStarted`` before it
        when that turn's ``TurnEnded`` is not before it too; else None."""
        last_event = self._last_event()
        if last_event <= 0:
            return None
        with self._base.engine.connect() as conn:
            row = conn.execute(
                select(events.c.type, events.c.turn_id)
                .where(
                    events.c.session_id == self.session_id,
                    events.c.type.in_(("TurnStarted", "TurnEnded")),
                    events.c.seq <= last_event,
                )
                .order_by(events.c.seq.desc())
                .limit(1)
            ).first()
        return row.turn_id if row is not None and row.type == "TurnStarted" else None

    def _last_event(self) -> int:
        """The seq of the last event at or before ``position``."""
        pos = self.position
        return pos.seq if pos >= StreamKey(pos.seq) else pos.seq - 1

    def open_text(self) -> StreamOpenText | None:
        """The model call whose streamed text is open at ``position`` (for encodings that frame a
        message's text with a start and an end), or None.

        It is the last call started at or before ``position`` when one of its attempts streamed
        before ``position`` and neither its ``AssistantMessageCompleted`` nor its turn's
        ``TurnEnded`` comes before ``position``; the attempt is the newest that streamed.
        """
        pos = self.position
        last_event = self._last_event()
        if last_event <= 0:
            return None
        with self._base.engine.connect() as conn:
            row = conn.execute(
                select(events.c.seq, events.c.body_json)
                .where(
                    events.c.session_id == self.session_id,
                    events.c.type == MODEL_REQUEST_STARTED,
                    events.c.seq <= last_event,
                )
                .order_by(events.c.seq.desc())
                .limit(1)
            ).first()
            if row is None:
                return None
            call = _call_of(row.seq, MODEL_REQUEST_STARTED, self._base._open(row.body_json, f"events/{self.session_id}"))
            if call is None:
                return None
            closing = conn.execute(
                select(events.c.body_json).where(
                    events.c.session_id == self.session_id,
                    events.c.turn_id == call.turn_id,
                    events.c.seq > call.seq,
                    events.c.seq <= last_event,
                    events.c.type.in_(_CLOSING_TYPES),
                )
            ).scalars().all()
            for body in closing:
                event = EVENT_ADAPTER.validate_json(self._base._open(body, f"events/{self.session_id}"))
                if event.type == "TurnEnded" or getattr(event, "round", None) == call.round:
                    return None
            if pos == StreamKey(call.seq):
                return None  # its event is the last item: nothing streamed yet
            c = token_deltas.c
            q = select(func.max(c.attempt)).where(
                c.session_id == self.session_id, c.turn_id == call.turn_id, c.round == call.round
            )
            if pos.seq == call.seq:
                q = q.where(or_(c.attempt < pos.attempt, and_(c.attempt == pos.attempt, c.idx <= pos.idx)))
            attempt = conn.execute(q).scalar()
        return StreamOpenText(call, int(attempt)) if attempt is not None else None


def _call_of(seq: int, type_: str, body_json: str) -> StreamCall | None:
    """The model call event ``seq`` started, when it is a ``ModelRequestStarted``."""
    if type_ != MODEL_REQUEST_STARTED:
        return None
    event = EVENT_ADAPTER.validate_json(body_json)
    if not isinstance(event, ModelRequestStarted) or event.turn_id is None:
        return None
    return StreamCall(seq, event.turn_id, event.round)


def _delta_exists(conn: Connection, session_id: str, call: StreamCall, key: StreamKey) -> bool:
    c = token_deltas.c
    found = conn.execute(
        select(c.id)
        .where(
            c.session_id == session_id, c.turn_id == call.turn_id, c.round == call.round,
            c.attempt == key.attempt, c.idx == key.idx,
        )
        .limit(1)
    ).first()
    return found is not None

