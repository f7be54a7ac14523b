"""Where the store lives and how its schema gets there: the database URL, the SQLAlchemy
engine (SQLite tuned for concurrent writers) and ``alembic upgrade head`` under a lock.

Kept apart from the tables' queries so that opening and migrating a database is one
concern, shared by ``Store.open`` and the Alembic environment.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Mapping

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import StaticPool

from agentrt.schemas import StoreFileChanged
from agentrt.store._reachability import mark_engine_errors

DATABASE_URL_ENV = "AGENTRT_DATABASE_URL"
HOME_ENV = "AGENTRT_HOME"
SQLITE_BUSY_TIMEOUT_MS = 30_000
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# Arbitrary constant key for pg_advisory_xact_lock: serializes concurrent migrations.
PG_MIGRATION_LOCK = 0x6167656E7472  # "agentr"
# Alembic's ``context``/``op`` are process-global proxies: one migration run per process at a time.
ALEMBIC_LOCK = threading.Lock()


def agentrt_home(env: Mapping[str, str] | None = None) -> Path:
    """The directory that holds one machine's agentrt configuration and state: ``$AGENTRT_HOME``,
    else ``~/.agentrt`` (made absolute; not created here).

    It holds ``agentrt.toml``, the SQLite store ``agentrt.db``, the ``payloads/`` directory and
    the embedded dev server's ``temporal.db`` and logs, so the CLI, the Python client and a
    worker on one machine find the same files whatever their working directory. ``env``
    defaults to ``os.environ``.
    """
    env = os.environ if env is None else env
    return Path(env.get(HOME_ENV) or Path.home() / ".agentrt").expanduser().absolute()


def database_url(url: str | None = None) -> str:
    """The store's SQLAlchemy URL: ``url`` if given, else ``AGENTRT_DATABASE_URL``, else
    ``sqlite:///<agentrt_home()>/agentrt.db``.

    ``postgresql://`` and ``postgres://`` URLs are rewritten to use the installed psycopg 3
    driver (``postgresql+psycopg://``).
    """
    url = url or os.environ.get(DATABASE_URL_ENV) or f"sqlite:///{agentrt_home() / 'agentrt.db'}"
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


PG_CONNECT_TIMEOUT_SECONDS = 10


def make_engine(url: str) -> Engine:
    """An engine for the SQLAlchemy ``url`` (taken as given; see ``database_url``).

    SQLite: creates the file's directory, waits up to ``SQLITE_BUSY_TIMEOUT_MS`` for locks,
    uses WAL for files, and begins transactions of connections with the execution option
    ``agentrt_write`` as ``BEGIN IMMEDIATE``; a file deleted or replaced under the engine raises
    ``StoreFileChanged`` at the next checkout. Its database errors are marked as its own
    (``raising_engine``). Other backends: a pre-pinged pool (PostgreSQL: a
    connect fails after ``PG_CONNECT_TIMEOUT_SECONDS``).
    """
    sa_url = make_url(url)
    if sa_url.get_backend_name() != "sqlite":
        # A connect that gets no answer (a host gone) fails after PG_CONNECT_TIMEOUT_SECONDS instead of hanging.
        connect_args = {"connect_timeout": PG_CONNECT_TIMEOUT_SECONDS} if sa_url.get_backend_name() == "postgresql" else {}
        engine = create_engine(url, pool_pre_ping=True, connect_args=connect_args)
        mark_engine_errors(engine)
        return engine

    database = sa_url.database or ":memory:"
    memory = database == ":memory:"
    if not memory:
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
        **({"poolclass": StaticPool} if memory else {}),
    )

    # pysqlite's own transaction handling defers BEGIN and never wraps DDL; take it over
    # (SQLAlchemy docs, "Serializable isolation / Savepoints / Transactional DDL").
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        if not memory:
            cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.close()

    mark_engine_errors(engine)
    if not memory:
        _guard_file(engine, Path(database).expanduser())

    # Writers take the write lock up front (BEGIN IMMEDIATE) so busy_timeout applies,
    # instead of failing with SQLITE_BUSY when a read transaction is upgraded.
    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get("agentrt_write"):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")

    return engine


def _guard_file(engine: Engine, path: Path) -> None:
    """Raise ``StoreFileChanged`` at every checkout of a connection once the file the engine's
    first connection opened is gone or another file has its name (another inode): a pooled
    connection would go on with the unlinked file, and a new one would open the other file or
    create an empty one, so readers would see a shorter transcript, or another store's. Once
    raised, it is raised at every later checkout (a new file could be given the old inode).

    The engine keeps no descriptor of its own on the file: closing one would drop every POSIX
    lock the process's SQLite connections hold on it (sqlite.org/howtocorrupt.html, 2.2)."""
    opened: list[tuple[int, int]] = []  # (device, inode) of the file the first connection opened
    changed: list[str] = []  # how it changed, once seen

    @event.listens_for(engine, "connect")
    def _remember(_dbapi_conn: Any, _record: Any) -> None:
        if not opened:
            found = os.stat(path)
            opened.append((found.st_dev, found.st_ino))

    @event.listens_for(engine, "checkout")
    def _check(_dbapi_conn: Any, _record: Any, _proxy: Any) -> None:
        if not opened:
            return
        if not changed:
            try:
                found = os.stat(path)
            except FileNotFoundError:
                changed.append("deleted")
            else:
                if (found.st_dev, found.st_ino) != opened[0]:
                    changed.append("replaced")
        if changed:
            raise StoreFileChanged(str(path), changed[0])


def upgrade(engine: Engine) -> None:
    """``alembic upgrade head`` on ``engine``, holding locks so concurrent openers take turns.

    The database lock (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: a transaction-scoped advisory
    lock) orders processes; ``ALEMBIC_LOCK`` orders threads, because Alembic's ``context``
    and ``op`` proxies are module globals.
    """
    from alembic import command  # here, not at import: a client that imports the store need not load Alembic
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with ALEMBIC_LOCK, engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn = conn.execution_options(agentrt_write=True)
        with conn.begin():
            if engine.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_MIGRATION_LOCK})
            config.attributes["connection"] = conn
            command.upgrade(config, "head")


def schema_revision(url: str | None = None) -> str | None:
    """The Alembic revision the store at ``database_url(url)`` is at (``"0016"``), without
    migrating it; None for a database no migration has touched yet."""
    engine = make_engine(database_url(url))
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("alembic_version"):
                return None
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        engine.dispose()


def head_revision() -> str:
    """The latest migration this code has (what ``Store.open`` brings a store to)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    head = ScriptDirectory.from_config(config).get_current_head()
    assert head is not None
    return head
