"""unreachable_reason: which store errors mean "the store does not answer now" (waited out by
clients and activities) and which are a store that answers wrongly (raised as they are)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError

from agentrt.store import unreachable_reason
from agentrt.worker import free_port


def error_of(url: str, sql: str = "SELECT 1", **connect_args: object) -> DBAPIError:
    engine = sa.create_engine(url, connect_args=connect_args)
    with pytest.raises(DBAPIError) as err:
        with engine.connect() as conn:
            conn.execute(sa.text(sql))
    return err.value


def test_a_postgresql_server_that_refuses_is_unreachable() -> None:
    err = error_of(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/x", connect_timeout=5)
    reason = unreachable_reason(err)
    assert reason is not None and "Connection refused" in reason and len(reason) <= 300


def test_a_sqlite_file_that_cannot_be_opened_is_unreachable(tmp_path: Path) -> None:
    reason = unreachable_reason(error_of(f"sqlite:///{tmp_path}"))  # a directory
    assert reason == "unable to open database file"


def test_a_sqlite_file_without_the_tables_and_bad_sql_are_not_waited_out(tmp_path: Path) -> None:
    assert unreachable_reason(error_of(f"sqlite:///{tmp_path / 'empty.db'}", "SELECT * FROM sessions")) is None
    assert unreachable_reason(error_of(f"sqlite:///{tmp_path / 'empty.db'}", "SELEC 1")) is None
    assert unreachable_reason(ValueError("not a store error")) is None


def test_a_connection_the_pool_lost_is_unreachable() -> None:
    from sqlalchemy.exc import InvalidatePoolError

    assert unreachable_reason(InvalidatePoolError()) == "the store's connection was lost"


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_sqlite_file_deleted_or_replaced_under_a_store_is_a_clear_error_and_never_a_shorter_transcript(
    tmp_path: Path, how: str
) -> None:
    from agentrt.schemas import StoreFileChanged
    from agentrt.store import Store

    path = tmp_path / "agentrt.db"
    other = tmp_path / "other.db"
    with Store.open(f"sqlite:///{other}"):
        pass  # an agentrt store of its own: the same tables, none of the sessions
    with Store.open(f"sqlite:///{path}") as store:
        store.append_deltas("s1", "t1", 1, 1, ["written"], 0)
        assert [d.text for d in store.deltas("s1")] == ["written"]
        path.unlink()
        if how == "replaced":
            other.rename(path)
        with pytest.raises(StoreFileChanged) as err:
            store.deltas("s1")
        assert str(err.value).startswith(f"the store's SQLite file {path} was {how} while this process used it")
        assert unreachable_reason(err.value) is None  # not waited out: nothing will bring it back
        with pytest.raises(StoreFileChanged):
            store.append_deltas("s1", "t1", 1, 1, ["lost"], 1)


def test_the_file_guard_keeps_no_descriptor_of_its_own_on_the_database(tmp_path: Path) -> None:
    """Closing a second descriptor on a SQLite file drops every POSIX lock the process holds on it
    (sqlite.org/howtocorrupt.html, 2.2): only SQLite's own connection may have the file open."""
    import os

    from agentrt.store import Store

    path = tmp_path / "agentrt.db"
    with Store.open(f"sqlite:///{path}") as store:
        store.deltas("s1")
        with store.engine.connect():
            open_on_file = [fd for fd in os.listdir("/proc/self/fd") if os.path.realpath(f"/proc/self/fd/{fd}") == str(path)]
            pool = store.engine.pool
            assert len(open_on_file) == pool.checkedin() + pool.checkedout(), open_on_file  # type: ignore[attr-defined]


def test_only_a_store_engine_s_errors_are_marked_as_the_store_s(tmp_path: Path) -> None:
    """A user's tool that reads its own unreachable database raises the same OperationalError as an
    unreachable store: only the store's engines (``make_engine``) mark theirs as their own."""
    from agentrt.store import raising_engine
    from agentrt.store._engine import make_engine

    store_engine = make_engine(f"sqlite:///{tmp_path}")  # a directory: "unable to open database file"
    with pytest.raises(DBAPIError) as of_store:
        with store_engine.connect():
            pass
    of_tool = error_of(f"sqlite:///{tmp_path}")
    assert unreachable_reason(of_store.value) == unreachable_reason(of_tool) == "unable to open database file"
    assert raising_engine(of_store.value) is store_engine
    assert raising_engine(of_tool) is None
