"""``Store.changes``: who hears that a session's stream grew. A commit of events or token deltas is
heard in this process at once (a rolled-back one never); on PostgreSQL a write by another process
is heard too (``LISTEN``/``NOTIFY``)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import psycopg
import pytest
from sqlalchemy.engine import make_url

from agentrt.schemas import StoreAppendInput, TurnStarted
from agentrt.store import Store, StreamWakeups


class Heard:
    """The session ids a listener was told of, in order (None: look at everything)."""

    def __init__(self) -> None:
        self.ids: list[str | None] = []
        self._new = threading.Condition()

    def __call__(self, session_id: str | None) -> None:
        with self._new:
            self.ids.append(session_id)
            self._new.notify_all()

    def wait_for(self, session_id: str, timeout: float = 10.0) -> None:
        with self._new:
            assert self._new.wait_for(lambda: session_id in self.ids, timeout), (session_id, self.ids)


def started(session_id: str) -> StoreAppendInput:
    return StoreAppendInput(session_id=session_id, events=[TurnStarted(seq=1, turn_id="t1")])


def test_a_commit_of_events_or_deltas_is_heard_and_a_rolled_back_one_never(store: Store) -> None:
    heard = Heard()
    stop = store.changes.listen(heard)
    try:
        with pytest.raises(RuntimeError):
            with store.transaction() as conn:
                store.append_deltas("rolled-back", "t1", 1, 1, ["x"], 0, conn=conn)
                raise RuntimeError("the transaction fails")
        store.append(started("with-events"))
        store.append_deltas("with-deltas", "t1", 1, 1, ["a", "b"], 0)
        heard.wait_for("with-deltas")  # PostgreSQL delivers in commit order: anything before it came first
        assert "with-events" in heard.ids
        assert "rolled-back" not in heard.ids
        # A write that adds nothing to a stream (no events, no deltas) tells no one.
        store.append(StoreAppendInput(session_id="quiet"))
        store.append_deltas("after-quiet", "t1", 1, 1, ["c"], 0)
        heard.wait_for("after-quiet")
        assert "quiet" not in heard.ids
    finally:
        stop()
    store.append_deltas("after-stop", "t1", 1, 1, ["d"], 0)
    assert "after-stop" not in heard.ids


def test_only_postgresql_tells_of_other_processes_writes(store: Store) -> None:
    assert store.changes.crosses_processes is (store.engine.dialect.name == "postgresql")


@pytest.mark.postgres
def test_a_write_by_another_process_is_heard_on_postgresql(pg_url: str) -> None:
    with Store.open(pg_url) as store:
        heard = Heard()
        stop = store.changes.listen(heard)
        try:
            writer = (
                "import sys; from agentrt.store import Store\n"
                "with Store.open(sys.argv[1]) as s: s.append_deltas('from-elsewhere', 't1', 1, 1, ['hi'], 0)\n"
            )
            # The listener thread LISTENs once a NOTIFY sent on another connection reaches it.
            with psycopg.connect(make_url(pg_url).set(drivername="postgresql").render_as_string(hide_password=False), autocommit=True) as probe:
                for _ in range(100):
                    probe.execute("SELECT pg_notify('agentrt_stream', 'probe')")
                    with heard._new:
                        if heard._new.wait_for(lambda: "probe" in heard.ids, 0.1):
                            break
            heard.wait_for("probe", timeout=0)
            subprocess.run([sys.executable, "-c", writer, pg_url], check=True, timeout=60)
            heard.wait_for("from-elsewhere")
        finally:
            stop()


async def test_a_wait_ends_when_the_session_s_stream_grows_and_not_for_another(store: Store) -> None:
    wakeups = StreamWakeups(store.changes)
    wakeups.watch("s1")
    try:
        for _ in range(20):  # PostgreSQL's listener, once connected, says "look at everything" once
            if not await wakeups.wait("s1", 0.2):
                break
        await asyncio.to_thread(store.append_deltas, "other", "t1", 1, 1, ["x"], 0)
        assert await wakeups.wait("s1", 0.2) is False
        await asyncio.to_thread(store.append_deltas, "s1", "t1", 1, 1, ["a"], 0)  # before the wait: not missed
        assert await wakeups.wait("s1", 30) is True
    finally:
        wakeups.close()



def test_an_in_memory_database_s_listeners_go_with_its_engine() -> None:
    import gc

    from agentrt.store._changes import _by_engine

    before = len(_by_engine)
    for _ in range(5):
        with Store.open("sqlite://") as store:
            store.append_deltas("s", "t1", 1, 1, ["x"], 0)
        del store
    gc.collect()
    assert len(_by_engine) <= before


def test_a_write_on_a_connection_of_its_own_still_tells_later_transactions_writes(store: Store) -> None:
    # A caller's own transaction (not Store.transaction) leaves no mark behind on the pooled connection.
    heard = Heard()
    stop = store.changes.listen(heard)
    try:
        with store.engine.begin() as conn:
            store.append_deltas("own-connection", "t1", 1, 1, ["x"], 0, conn=conn)
        store.append_deltas("own-connection", "t1", 1, 1, ["y"], 1)
        heard.wait_for("own-connection")
    finally:
        stop()
