"""Live, resumable streams of sessions' events and token deltas for many subscribers, read from
the store: one poller per session however many follow it, and every item's id a position to
resume after (SSE ``Last-Event-ID``), so a reconnecting client loses nothing and gets nothing twice.

``StreamHub.subscribe`` gives the items; ``stream_response`` serves them as server-sent events
(``GET /v1/sessions/{id}/stream`` of the gateway). The order and ids are the store's
(``agentrt.store.SessionStream``); docs/streaming.md describes both encodings.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ag_ui.core import BaseEvent
from ag_ui.encoder import EventEncoder
from sse_starlette import EventSourceResponse, JSONServerSentEvent, ServerSentEvent
from starlette.background import BackgroundTask
from starlette.responses import Response

from agentrt.client import StoreWait
from agentrt.gateway._agui import AguiEncoder
from agentrt.schemas import InvalidStreamCursor
from agentrt.store import SessionStream, Store, StreamEntry, StreamKey, on_loop

log = logging.getLogger(__name__)

Encoding = Literal["native", "ag-ui"]
ENCODINGS: tuple[str, ...] = ("native", "ag-ui")
DELTA = "ModelTokenDelta"
# An AG-UI event id: the item's id, or "<item id>:<part>" for an event before the item's last.
_PART = re.compile(r"(.{1,40}):([0-9])")


@dataclass(frozen=True)
class StreamItem:
    """One server-sent event: ``id`` (the position to resume after it), ``event`` (the SSE event
    name: the agentrt event type, ``ModelTokenDelta`` for a delta, the AG-UI event type in the
    ag-ui encoding) and ``data`` (JSON-ready). ``agui_event`` is the ``ag_ui.core`` event itself
    (ag-ui encoding only)."""

    id: str
    event: str
    data: dict[str, Any]
    agui_event: BaseEvent | None = field(default=None, repr=False, compare=False)


def native_item(entry: StreamEntry) -> StreamItem:
    """The native encoding: an event as its JSON; a delta as ``{"type": "ModelTokenDelta", "seq",
    "turn_id", "round", "attempt", "idx", "text"}``, with ``"retry": true`` and ``"supersedes"``
    (the earlier attempts of the same call, whose text it replaces) when ``attempt`` > 1."""
    if entry.event is not None:
        return StreamItem(entry.id, entry.event.type, entry.event.model_dump(mode="json"))
    delta = entry.delta
    assert delta is not None
    data: dict[str, Any] = {
        "type": DELTA, "seq": delta.call_seq, "turn_id": delta.turn_id, "round": delta.round,
        "attempt": delta.attempt, "idx": delta.idx, "text": delta.text,
    }
    if delta.attempt > 1:
        data["retry"] = True
        data["supersedes"] = delta.supersedes
    return StreamItem(entry.id, DELTA, data)


def agui_items(entry: StreamEntry, encoder: AguiEncoder) -> list[StreamItem]:
    """The ag-ui encoding of ``entry``: its AG-UI events, the last with the item's id and each
    one before it ``"<id>:<part>"`` (part 0, 1, ...), so a stream cut between them resumes
    after exactly that part."""
    events = encoder.encode(entry)
    last = len(events) - 1
    return [
        StreamItem(entry.id if i == last else f"{entry.id}:{i}", ev.type.value, ev.model_dump(mode="json", by_alias=True), ev)
        for i, ev in enumerate(events)
    ]


class StreamSubscription:
    """The items of one subscriber, in order (``async for``); ``aclose()`` when done. ``at_end``:
    the position it resumed after is the session's last item (``SessionArchived``): no item
    will come."""

    def __init__(self, items: AsyncIterator[StreamItem], at_end: bool) -> None:
        self._items = items
        self.at_end = at_end

    def __aiter__(self) -> StreamSubscription:
        return self

    async def __anext__(self) -> StreamItem:
        return await self._items.__anext__()

    async def aclose(self) -> None:
        await self._items.aclose()  # type: ignore[attr-defined]


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


# The most a poller waits on SQLite while a model call is open (seconds): a first token written
# by a worker in another process, which SQLite cannot announce, reaches readers this late at most.
SQLITE_CALL_POLL_SECONDS = 0.05
# The same on PostgreSQL, whose NOTIFY announces every write: a backstop for a listening
# connection that went silent (until its ping finds out, ``agentrt.store._changes.PING_SECONDS``).
POSTGRES_CALL_POLL_SECONDS = 0.5
# The least time between the starts of two reads of one poller woken by writes (seconds): a model
# streaming many small chunks (or a storm of writes) costs at most one read per this.
MIN_READ_GAP_SECONDS = 0.02

_END = object()
_LAGGED = object()


@dataclass(eq=False)
class _Subscriber:
    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    pending: int = 0  # items in the queue


@dataclass(eq=False)
class _Feed:
    session_id: str
    reader: SessionStream  # touched only by the poller's reads
    position: StreamKey  # where the poller is, as the event loop knows it
    interval: float  # seconds the poller waits after its read (the wait in progress, or the next)
    subscribers: set[_Subscriber] = field(default_factory=set)
    task: asyncio.Task[None] | None = None
    closed: bool = False
    quiet: int = 0  # reads in a row that found nothing new
    woken: asyncio.Event = field(default_factory=asyncio.Event)
    grew: bool = False  # the store said the stream grew since the poller's last read began
    read_at: float = 0.0  # when the poller's last read began (the event loop's clock)


class StreamHub:
    """Streams sessions' items from ``store`` to any number of subscribers.

    Per session one poller reads the store while the session has subscribers, and hands each
    read to all of them. It reads at once when the store says the session's stream grew
    (``Store.changes``: a write in this process, or any process on PostgreSQL), and besides
    every ``poll_seconds`` (seconds) while reads bring something new (at once again after a
    read that filled its page of ``page_events`` events); each read that brings nothing doubles
    its wait, up to ``max_poll_seconds``, so an idle session costs one read per
    ``max_poll_seconds``. While a model call is open the wait stays at most ``call_poll_seconds``
    (default: ``SQLITE_CALL_POLL_SECONDS`` on SQLite, whose writers in other processes are not
    heard, so a first token waits for no back-off; ``POSTGRES_CALL_POLL_SECONDS`` on PostgreSQL,
    which tells of every process's writes: a backstop). Reads woken by writes start at least
    ``MIN_READ_GAP_SECONDS`` apart. New rows, a subscriber joining (a new or a resumed stream) and
    ``wake`` put it back to ``poll_seconds``. A subscriber first reads its own
    backlog from the store (from its position up to the poller's), then takes the poller's
    reads; one that falls ``max_queue`` items behind goes back to reading the store itself, so
    a slow client holds no more than that in memory. Store reads run in threads
    (``asyncio.to_thread``), never on the event loop. The poller stops when its last
    subscriber leaves or the session's ``SessionArchived`` was read.
    """

    def __init__(
        self,
        store: Store,
        poll_seconds: float = 0.1,
        *,
        max_poll_seconds: float = 2.0,
        call_poll_seconds: float | None | Literal["default"] = "default",
        page_events: int = 200,
        max_queue: int = 10_000,
    ) -> None:
        self._store = store
        self._poll_seconds = poll_seconds
        self._max_poll_seconds = max(poll_seconds, max_poll_seconds)
        if call_poll_seconds == "default":
            call_poll_seconds = POSTGRES_CALL_POLL_SECONDS if store.changes.crosses_processes else min(poll_seconds, SQLITE_CALL_POLL_SECONDS)
        self._call_poll_seconds = call_poll_seconds
        self._page_events = page_events
        self._max_queue = max_queue
        self._feeds: dict[str, _Feed] = {}
        self.store_reads = 0  # reads of the store by pollers and by subscribers' backlogs
        self._unlisten: Callable[[], None] | None = None

    @property
    def pollers(self) -> int:
        """Pollers running now (one per session with subscribers)."""
        return sum(1 for feed in self._feeds.values() if feed.task is not None and not feed.task.done())

    def followers(self, session_id: str) -> int:
        """Subscribers of ``session_id`` taking its poller's reads now (not those still reading
        their backlog)."""
        feed = self._feeds.get(session_id)
        return len(feed.subscribers) if feed is not None else 0

    def poll_interval(self, session_id: str) -> float | None:
        """Seconds the poller of ``session_id`` waits between its reads now (from
        ``poll_seconds`` up to ``max_poll_seconds``); None without a poller."""
        feed = self._feeds.get(session_id)
        return feed.interval if feed is not None and not feed.closed else None

    def wake(self, session_id: str) -> None:
        """Put the poller of ``session_id`` (if it has one) back to reading every ``poll_seconds``,
        the wait in progress cut to that: something is about to be written (a message was
        sent, a decision given)."""
        feed = self._feeds.get(session_id)
        if feed is not None and not feed.closed:
            self._hasten(feed)

    async def subscribe(
        self, session_id: str, last_event_id: str | None = None, encoding: Encoding = "native"
    ) -> StreamSubscription:
        """The session's items after ``last_event_id`` (None or ``""``: from its first event),
        ending after ``SessionArchived``.

        ``encoding``: ``native`` (one item per event or delta, ``native_item``) or ``ag-ui``
        (``agui_items``; ``last_event_id`` may then also be a part id ``"<id>:<part>"``).
        Raises ``InvalidStreamCursor`` (before any item) when ``last_event_id`` names no item of
        the session's stream, and ``ValueError`` for an unknown ``encoding``. Who may read the
        session is the caller's to check.
        """
        if encoding not in ENCODINGS:
            raise ValueError(f"unknown stream encoding {encoding!r}; use one of {', '.join(ENCODINGS)}")
        cursor, skip = last_event_id, 0
        if encoding == "ag-ui" and last_event_id:
            match = _PART.fullmatch(last_event_id)
            if match is not None:
                cursor, skip = match.group(1), int(match.group(2)) + 1
        self.store_reads += 1
        reader = await asyncio.to_thread(SessionStream.resume, self._store, session_id, cursor, before=skip > 0)
        encoder = None
        first: list[StreamItem] = []
        entries: list[StreamEntry] = []
        if encoding == "ag-ui":
            turn_id, text = await asyncio.to_thread(lambda: (reader.open_turn(), reader.open_text()))
            encoder = AguiEncoder(session_id, turn_id, text)
        if skip:
            # A part id: the item it is part of comes first; the part must be one before its last.
            assert encoder is not None
            self.store_reads += 1
            entries = await asyncio.to_thread(reader.read, self._page_events)
            first = agui_items(entries[0], encoder) if entries else []
            if skip >= len(first):
                raise InvalidStreamCursor(session_id, last_event_id or "", f"its item has no part {skip - 1}")
            first, entries = first[skip:], entries[1:]
        return StreamSubscription(self._items(reader, encoder, first, entries), at_end=reader.ended and not first)

    async def _items(
        self, reader: SessionStream, encoder: AguiEncoder | None, first: list[StreamItem], entries: list[StreamEntry]
    ) -> AsyncIterator[StreamItem]:
        """``first``, the items of ``entries`` (read already), then the rest of the stream."""
        session_id = reader.session_id
        last = reader.position
        feed: _Feed | None = None
        sub: _Subscriber | None = None
        try:
            for item in first:
                yield item
            for entry in entries:
                for item in self._encode(entry, encoder):
                    yield item
            while not reader.ended:
                if sub is None:
                    self.store_reads += 1
                    entries = await asyncio.to_thread(reader.read, self._page_events)
                    for entry in entries:
                        for item in self._encode(entry, encoder):
                            yield item
                    if entries:
                        last = entries[-1].key
                    if reader.ended:
                        return
                    feed = self._feeds.get(session_id)
                    if feed is None or feed.closed:
                        if not reader.caught_up:
                            continue  # more backlog
                        feed = self._start(session_id, reader.copy())
                    elif feed.position > last:
                        if not entries:
                            await asyncio.sleep(self._poll_seconds)
                        continue  # the poller is ahead: read up to it
                    sub = _Subscriber()
                    feed.subscribers.add(sub)
                    self._hasten(feed)
                    continue
                message = await sub.queue.get()
                if message is _END:
                    return
                if isinstance(message, _Failed):
                    raise message.error
                if message is _LAGGED:
                    sub = None
                    self.store_reads += 1
                    reader = await asyncio.to_thread(SessionStream.at, self._store, session_id, last)
                    continue
                sub.pending -= len(message)
                for entry in message:
                    if entry.key <= last:
                        continue
                    for item in self._encode(entry, encoder):
                        yield item
                    last = entry.key
        finally:
            if sub is not None and feed is not None:
                self._leave(feed, sub)

    @staticmethod
    def _encode(entry: StreamEntry, encoder: AguiEncoder | None) -> list[StreamItem]:
        return [native_item(entry)] if encoder is None else agui_items(entry, encoder)

    def _start(self, session_id: str, reader: SessionStream) -> _Feed:
        if self._unlisten is None:
            self._unlisten = self._store.changes.listen(on_loop(asyncio.get_running_loop(), self._heard, self._feeds.__contains__))
        feed = _Feed(session_id, reader, reader.position, self._poll_seconds)
        self._feeds[session_id] = feed
        feed.task = asyncio.create_task(self._poll(feed), name=f"agentrt-stream-{session_id}")
        return feed

    def _heard(self, session_id: str | None) -> None:
        """The store says ``session_id``'s stream grew (None: any session's may have)."""
        feeds = list(self._feeds.values()) if session_id is None else [self._feeds.get(session_id)]
        for feed in feeds:
            if feed is not None and not feed.closed:
                feed.grew = True
                self._hasten(feed)

    def _leave(self, feed: _Feed, sub: _Subscriber) -> None:
        feed.subscribers.discard(sub)
        if not feed.subscribers:
            self._stop(feed)

    def _stop(self, feed: _Feed) -> None:
        feed.closed = True
        if self._feeds.get(feed.session_id) is feed:
            del self._feeds[feed.session_id]
        if feed.task is not None and feed.task is not asyncio.current_task():
            feed.task.cancel()

    async def _poll(self, feed: _Feed) -> None:
        """Read the session's store rows for ``feed``'s subscribers until none is left or it ended."""
        # A store that does not answer (PostgreSQL stopped) is waited out, said in the log; the
        # subscribers keep their streams and get what was written once it answers again.
        store_wait = StoreWait(self._store, lambda line: log.warning("stream of session %s: %s", feed.session_id, line))
        try:
            while feed.subscribers:
                self.store_reads += 1
                feed.grew = False
                feed.read_at = asyncio.get_running_loop().time()
                entries = await store_wait.read(feed.reader.read, self._page_events)
                feed.quiet = 0 if entries or feed.woken.is_set() else feed.quiet + 1  # (woken during the read)
                feed.woken.clear()
                feed.interval = min(self._poll_seconds * 2 ** min(feed.quiet, 30), self._max_poll_seconds)
                if feed.reader.in_model_call and self._call_poll_seconds is not None:
                    feed.interval = min(feed.interval, self._call_poll_seconds)
                if entries:
                    feed.position = entries[-1].key
                    for sub in list(feed.subscribers):
                        if sub.pending + len(entries) > self._max_queue:
                            feed.subscribers.discard(sub)
                            sub.queue.put_nowait(_LAGGED)
                        else:
                            sub.pending += len(entries)
                            sub.queue.put_nowait(entries)
                if feed.reader.ended:
                    for sub in feed.subscribers:
                        sub.queue.put_nowait(_END)
                    return
                if feed.reader.caught_up:
                    await self._wait(feed)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # noqa: BLE001 - the subscribers get it; a reconnect resumes after their last item
            log.warning("stream of session %s: store read failed: %s", feed.session_id, err)
            for sub in feed.subscribers:
                sub.queue.put_nowait(_Failed(err))
        finally:
            self._stop(feed)

    @staticmethod
    async def _wait(feed: _Feed) -> None:
        """Wait ``feed.interval`` seconds; when woken meanwhile (``_hasten``), wait the new
        interval from then instead; once the store said the stream grew, only until
        ``MIN_READ_GAP_SECONDS`` after the last read began."""
        while not feed.grew:
            try:
                async with asyncio.timeout(feed.interval):
                    await feed.woken.wait()
            except TimeoutError:
                return
            feed.woken.clear()
        gap = feed.read_at + MIN_READ_GAP_SECONDS - asyncio.get_running_loop().time()
        if gap > 0:
            await asyncio.sleep(gap)

    def _hasten(self, feed: _Feed) -> None:
        """Back to reading every ``poll_seconds``, from now."""
        feed.quiet = 0
        feed.interval = self._poll_seconds
        feed.woken.set()

    async def aclose(self) -> None:
        """Stop every poller (and listening to the store); their subscribers' streams end."""
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        for feed in list(self._feeds.values()):
            for sub in feed.subscribers:
                sub.queue.put_nowait(_END)
            self._stop(feed)


async def stream_response(
    hub: StreamHub,
    session_id: str,
    last_event_id: str | None = None,
    encoding: Encoding = "native",
    *,
    ping_seconds: float = 15.0,
    retry_ms: int = 2000,
    on_close: Callable[[], None] | None = None,
) -> Response:
    """A server-sent events response of the session's stream after ``last_event_id``
    (``StreamHub.subscribe``), for a Starlette or FastAPI route.

    Each item is one SSE event with an ``id:`` line (the position to resume after it); native:
    ``event:`` the item's type and ``data:`` its JSON; ag-ui: ``data:`` as
    ``ag_ui.encoder.EventEncoder`` writes it, without ``event:`` (AG-UI clients read the
    default event). The stream opens with ``retry: retry_ms`` (milliseconds a client waits
    before it reconnects) and carries a keep-alive comment every ``ping_seconds`` (seconds)
    with nothing to send. It ends after ``SessionArchived``; resuming after that answers
    204 No Content, which tells an EventSource to stop reconnecting.

    ``on_close`` is called once when the response is over (the stream ended, the client left,
    the 204 was answered); not when this raises.

    Raises ``InvalidStreamCursor`` (answer 400) before anything is sent when
    ``last_event_id`` names no item of the stream.
    """
    items = await hub.subscribe(session_id, last_event_id, encoding)
    done = _Once(on_close)
    if items.at_end:
        await items.aclose()
        return Response(status_code=204, background=BackgroundTask(done))
    return EventSourceResponse(
        _frames(items, encoding, retry_ms, done),
        ping=ping_seconds,
        sep="\n",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        background=BackgroundTask(done),  # also when its body is never iterated
    )


class _Once:
    """Calls ``callback`` (if any) the first time it is called, never again."""

    def __init__(self, callback: Callable[[], None] | None) -> None:
        self._callback = callback

    def __call__(self) -> None:
        callback, self._callback = self._callback, None
        if callback is not None:
            callback()


async def _frames(items: StreamSubscription, encoding: Encoding, retry_ms: int, done: _Once) -> AsyncIterator[Any]:
    try:
        yield ServerSentEvent(comment="agentrt stream", retry=retry_ms, sep="\n")
        encoder = EventEncoder() if encoding == "ag-ui" else None
        async for item in items:
            if encoder is not None and item.agui_event is not None:
                yield f"id: {item.id}\n{encoder.encode(item.agui_event)}".encode()
            else:
                yield JSONServerSentEvent(item.data, id=item.id, event=item.event, sep="\n")
    finally:
        done()
        await items.aclose()

