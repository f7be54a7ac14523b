"""Whether a store error means the store does not answer (a PostgreSQL server stopped or
restarting, a connection cut, a SQLite file that cannot be opened or is locked): what a client
that follows a turn waits out, instead of failing with a driver traceback."""

from __future__ import annotations

import weakref
from collections.abc import Iterator

from sqlalchemy import Engine, event, text
from sqlalchemy.engine import ExceptionContext
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError

__all__ = ["error_chain", "mark_engine_errors", "raising_engine", "takes_writes", "unreachable_reason"]

# SQLite's own words for a file it cannot use now; its other OperationalErrors (``no such table``:
# a deleted or replaced file) are not waited out.
_SQLITE_UNREACHABLE = ("unable to open database file", "database is locked", "disk i/o error", "readonly database")
MAX_REASON_CHARS = 300
_ENGINE_MARK = "agentrt_engine"  # on each error an engine of ``mark_engine_errors`` raises: a weak reference to it


def mark_engine_errors(engine: Engine) -> None:
    """Mark every database error ``engine`` raises (connects included) as its own (``raising_engine``)."""

    @event.listens_for(engine, "handle_error")
    def _mark(context: ExceptionContext) -> None:
        setattr(context.sqlalchemy_exception, _ENGINE_MARK, weakref.ref(engine))


def raising_engine(err: BaseException) -> Engine | None:
    """The store engine (``make_engine``'s, marked by ``mark_engine_errors``) that raised ``err``;
    None for any other error, a database error of another engine in the same process included (a
    user's tool that reads its own database, say)."""
    ref = getattr(err, _ENGINE_MARK, None)
    return ref() if isinstance(ref, weakref.ref) else None


def unreachable_reason(err: BaseException) -> str | None:
    """The driver's first line (at most 300 characters) when ``err`` says the store does not answer
    now, else None: any error of PostgreSQL's driver at the connection level (refused, reset,
    timed out, the server shutting down) or a SQLite file that cannot be opened, is locked or
    read-only; or SQLAlchemy's own word that a connection was lost (``DisconnectionError``, as
    its pool's pre-ping may raise while the server stops)."""
    if isinstance(err, DisconnectionError):
        said = str(err).strip()
        return said.splitlines()[0][:MAX_REASON_CHARS] if said and said != "()" else "the store's connection was lost"
    if not isinstance(err, DBAPIError):
        return None
    reason = (str(err.orig or err).strip().splitlines() or [type(err).__name__])[0][:MAX_REASON_CHARS]
    if "sqlite" in type(err.orig).__module__:
        return reason if any(words in reason.lower() for words in _SQLITE_UNREACHABLE) else None
    if isinstance(err, (OperationalError, InterfaceError)) or err.connection_invalidated:
        return reason
    return None


def takes_writes(engine: Engine) -> None:
    """Commit a write that changes nothing (the schema's version row set to itself): returns when the
    store answers and takes writes; raises the driver's error otherwise. A store that still answers
    reads can refuse writes (a SQLite file made read-only or immutable, its disk failing), so a
    probe that only reads would call it back too soon."""
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = version_num"))


def error_chain(err: BaseException) -> Iterator[BaseException]:
    """``err``, then each exception in its chain (``__cause__``, else ``__context__``), each once."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__
