"""Who is told when a session's stream grows: a write of its events or token deltas commits.

Readers that follow a session (the gateway's ``StreamHub``, ``AgentClient.sessions.deltas``,
``agentrt run``) wait on this instead of a poll schedule, so a first token reaches them as soon
as the model activity writes it.

- In one process, every ``Store`` on the same database shares one ``StreamChanges``: a commit
  tells its listeners at once, on the writer's thread.
- On PostgreSQL, each write transaction also sends ``NOTIFY agentrt_stream, '<session id>'``
  (delivered at commit; PostgreSQL folds repeats within a transaction), and a listener thread
  per process (``LISTEN agentrt_stream``, started by the first listener) hands them on, so a
  gateway hears a worker in another process (PostgreSQL docs, "NOTIFY": payloads under 8,000
  bytes; notifications are delivered between transactions, in commit order).
- SQLite has no way to tell another process: readers there still poll (``crosses_processes``
  is False).

A listener gets a session id, or None when notifications may have been missed (the PostgreSQL
listener has just connected, or reconnected): it should look at every session it follows.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import Engine, text

log = logging.getLogger(__name__)

CHANNEL = "agentrt_stream"
NOTIFY = text(f"SELECT pg_notify('{CHANNEL}', :session_id)")

Listener = Callable[[str | None], None]

# Seconds the PostgreSQL listener waits for a notification before it looks at its listeners,
# and the most it waits before reconnecting after an error (doubling from 0.1 s).
LISTEN_TICK_SECONDS = 0.5
MAX_RECONNECT_SECONDS = 5.0
CONNECT_TIMEOUT_SECONDS = 10
# Every PING_SECONDS the listener sends itself a notification (payload "") on another
# connection; one that has not come back within PING_SECONDS more means its connection is dead
# (a link that drops silently looks like a quiet channel): it reconnects.
PING_SECONDS = 15.0
# A listener thread with no listener left keeps its connection this long (seconds), for the next
# follower of this process.
LINGER_SECONDS = 10.0
# libpq's keepalives on the listening connection (seconds, count) and its unacknowledged-send bound (ms).
KEEPALIVES: dict[str, Any] = {
    "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3, "tcp_user_timeout": 20_000,
}


class StreamChanges:
    """The listeners of one database's stream changes in this process (see the module)."""

    def __init__(self, engine: Engine) -> None:
        self._postgres = engine.dialect.name == "postgresql"
        self._conninfo = (
            engine.url.set(drivername="postgresql").render_as_string(hide_password=False) if self._postgres else ""
        )
        self._lock = threading.Lock()
        self._listeners: set[Listener] = set()
        self._thread: threading.Thread | None = None
        self._idle_since: float | None = None  # when the last listener left

    @property
    def crosses_processes(self) -> bool:
        """Whether writes of other processes are heard too (PostgreSQL), not only this one's."""
        return self._postgres

    def publish(self, session_ids: Iterable[str]) -> None:
        """Tell every listener that the streams of ``session_ids`` grew (this process's commits).
        A listener that raises is logged and skipped."""
        with self._lock:
            listeners = list(self._listeners)
        for session_id in session_ids:
            for listener in listeners:
                _call(listener, session_id)

    def listen(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener`` on every change from now on (on a writer's or the listener thread:
        it must be quick and thread-safe); returns the function that stops it. On PostgreSQL the
        first listener starts the process's ``LISTEN`` thread (one connection), which ends
        ``LINGER_SECONDS`` after the last listener left."""
        with self._lock:
            self._listeners.add(listener)
            self._idle_since = None
            if self._postgres and self._thread is None:
                self._thread = threading.Thread(target=self._listen_postgres, name="agentrt-stream-listen", daemon=True)
                self._thread.start()

        def stop() -> None:
            with self._lock:
                self._listeners.discard(listener)
                if not self._listeners:
                    self._idle_since = time.monotonic()

        return stop

    def _ended(self, *, linger: bool = True) -> bool:
        """Whether the listener thread should end now (no listener for ``LINGER_SECONDS``, or at
        all when not ``linger``); if so, the next ``listen`` starts another."""
        with self._lock:
            if self._listeners or self._idle_since is None:
                return False
            if linger and time.monotonic() - self._idle_since < LINGER_SECONDS:
                return False
            self._thread = None
            return True

    def _listen_postgres(self) -> None:
        import psycopg  # only a process that listens on PostgreSQL needs the driver

        delay = 0.1
        while not self._ended():
            try:
                with psycopg.connect(self._conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS, **KEEPALIVES) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._tell(None)  # what was sent while no one listened (before, or while reconnecting)
                    delay = 0.1
                    self._follow(psycopg, conn)
            except psycopg.Error as err:
                if self._ended(linger=False):  # no one to tell: no reason to keep trying
                    return
                log.warning("listening for stream changes on PostgreSQL failed (%s); again in %.1f s", err, delay)
                time.sleep(delay)
                delay = min(delay * 2, MAX_RECONNECT_SECONDS)

    def _follow(self, psycopg: Any, conn: Any) -> None:
        """Hand ``conn``'s notifications on until the thread ends, or until a ping of its own has
        not come back in time (returns: the caller reconnects)."""
        sent = time.monotonic()
        self._ping(psycopg)
        answered = True
        while not self._ended():
            for notification in conn.notifies(timeout=LISTEN_TICK_SECONDS):
                if notification.payload:
                    self._tell(notification.payload)
                else:
                    answered = True
            if time.monotonic() - sent >= PING_SECONDS:
                if not answered:
                    log.warning("the PostgreSQL connection listening for stream changes went silent; reconnecting")
                    return
                sent, answered = time.monotonic(), False
                self._ping(psycopg)

    def _ping(self, psycopg: Any) -> None:
        """``NOTIFY agentrt_stream, ''`` on a connection of its own (the listening one may be dead);
        a failure is the listener's to notice."""
        try:
            with psycopg.connect(self._conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS) as conn:
                conn.execute(f"NOTIFY {CHANNEL}, ''")
        except psycopg.Error as err:
            log.debug("could not ping the stream-change listener: %s", err)

    def _tell(self, session_id: str | None) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            _call(listener, session_id)


def _call(listener: Listener, session_id: str | None) -> None:
    try:
        listener(session_id)
    except Exception:  # noqa: BLE001 - one broken listener must not stop a write or the others
        log.exception("a stream change listener failed")


_by_url: dict[str, StreamChanges] = {}
_by_engine: weakref.WeakKeyDictionary[Engine, StreamChanges] = weakref.WeakKeyDictionary()
_changes_lock = threading.Lock()


def stream_changes(engine: Engine) -> StreamChanges:
    """The ``StreamChanges`` of ``engine``'s database in this process: one per database URL (an
    in-memory SQLite database is its engine's own, forgotten with the engine)."""
    url = engine.url
    with _changes_lock:
        if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
            changes = _by_engine.get(engine)
            if changes is None:
                changes = _by_engine[engine] = StreamChanges(engine)
            return changes
        key = url.render_as_string(hide_password=False)
        changes = _by_url.get(key)
        if changes is None:
            changes = _by_url[key] = StreamChanges(engine)
        return changes


def on_loop(
    loop: asyncio.AbstractEventLoop, callback: Listener, follows: Callable[[str], bool]
) -> Listener:
    """A ``Listener`` that hands a change to ``callback`` on ``loop`` (from a writer's or the
    listener's thread), for sessions ``follows`` says are followed and for "look at everything"
    (None) only: a change of any other session costs the loop nothing. Dropped once the loop has
    closed."""

    def heard(session_id: str | None) -> None:
        if session_id is not None and not follows(session_id):
            return
        try:
            loop.call_soon_threadsafe(callback, session_id)
        except RuntimeError:  # the loop closed
            pass

    return heard


class StreamWakeups:
    """Wakes coroutines of one event loop that wait for a session's stream to grow.

    ``wait(session_id, timeout)`` returns True when a change of that session (or a "look at
    everything", None) was heard since the last wait of that session returned, False after
    ``timeout`` seconds; a wait woken by a change returns no sooner than ``min_interval`` seconds
    after the session's previous woken wait returned (a storm of writes wakes its reader at most
    that often). Call ``close`` when done (stops listening). Build it inside the loop.
    """

    def __init__(self, changes: StreamChanges, min_interval: float = 0.0) -> None:
        self._loop = asyncio.get_running_loop()
        self._events: dict[str, asyncio.Event] = {}
        self._woken: dict[str, float] = {}  # when a wait of the session last returned woken
        self._min_interval = min_interval
        self._stop = changes.listen(on_loop(self._loop, self._set, self._events.__contains__))

    def _set(self, session_id: str | None) -> None:
        if session_id is None:
            for event in self._events.values():
                event.set()
        elif (event := self._events.get(session_id)) is not None:
            event.set()

    def watch(self, session_id: str) -> None:
        """Hear ``session_id``'s changes from now on (before the first read: a change between that
        read and the first ``wait`` is then not missed)."""
        self._events.setdefault(session_id, asyncio.Event())

    async def wait(self, session_id: str, timeout: float) -> bool:
        """Until ``session_id``'s stream grows or ``timeout`` (seconds) passes: True if it grew
        (also when it grew since the last wait returned, once ``watch`` or a wait began hearing it)."""
        event = self._events.setdefault(session_id, asyncio.Event())
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
            gap = self._woken.get(session_id, 0.0) + self._min_interval - self._loop.time()
            if gap > 0:
                await asyncio.sleep(gap)
        except TimeoutError:
            return False
        finally:
            event.clear()
        self._woken[session_id] = self._loop.time()
        return True

    def close(self) -> None:
        """Stop listening; waits in progress end at their timeouts."""
        self._stop()
