"""Webhook watches and the delivery log on SQLite and PostgreSQL: one watch per target, a cursor
that moves with the notifications it made (all or nothing), claims that hand each due delivery to
one caller, retries, final failures, and the 0009 migration."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from sqlalchemy import MetaData, inspect, text

import agentrt.store._engine as engine_module
from agentrt.store import NewWebhookDelivery, Store, WebhookDelivery, WebhookWatch, webhook_watch_id
from agentrt.store._models import webhook_deliveries, webhook_watches

URL = "https://hooks.example.com/agentrt"
OTHER_URL = "https://other.example.com/hook"


@pytest.fixture(autouse=True)
def empty_webhook_tables(store: Store) -> Iterator[None]:
    """The PostgreSQL database is shared by the test session: leave no webhook rows behind."""
    yield
    if store.engine.dialect.name == "postgresql":
        with store.engine.begin() as conn:
            conn.execute(text("TRUNCATE webhook_watches, webhook_deliveries RESTART IDENTITY"))


def delivery(webhook_id: str, url: str = URL, type_: str = "turn.ended") -> NewWebhookDelivery:
    return NewWebhookDelivery(webhook_id=webhook_id, target_url=url, type=type_, body=f'{{"id":"{webhook_id}"}}')


def watched(store: Store, target_id: str = "s1", kind: str = "session") -> WebhookWatch:
    return store.add_webhook_watch(kind, target_id, "alice")[1]


def queued(store: Store, *webhook_ids: str, url: str = URL) -> WebhookWatch:
    """A session watch that has queued ``webhook_ids`` for ``url`` (cursor 0 -> 1)."""
    watch = watched(store)
    assert store.advance_webhook_watch(watch.watch_id, 0, 1, deliveries=[delivery(i, url) for i in webhook_ids])
    return watch


def test_the_webhook_tables_match_their_migration(store: Store) -> None:
    ours = MetaData()
    for table in (webhook_watches, webhook_deliveries):
        table.to_metadata(ours)
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), ours)
    assert [d for d in diff if "webhook" in str(d)] == []


def test_a_new_watch_starts_active_at_its_cursor(store: Store) -> None:
    created, watch = store.add_webhook_watch("session", "s1", "alice", cursor=7)

    assert created is True
    assert (watch.kind, watch.target_id, watch.principal, watch.cursor) == ("session", "s1", "alice", 7)
    assert watch.state == "active"
    assert watch.watch_id == webhook_watch_id("session", "s1") and watch.last_status is None and watch.ended_at is None
    assert watch.created_at.tzinfo is not None


def test_watching_a_target_twice_keeps_the_first_watch_and_its_cursor(store: Store) -> None:
    first = watched(store)
    store.advance_webhook_watch(first.watch_id, 0, 5)

    created, again = store.add_webhook_watch("session", "s1", "bob", cursor=0)

    assert created is False
    assert (again.principal, again.cursor) == ("alice", 5)
    assert store.webhook_watches() == [again]


def test_the_same_id_of_another_kind_is_another_watch(store: Store) -> None:
    session, run = watched(store, "x1", "session"), watched(store, "x1", "run")

    assert session.watch_id != run.watch_id
    assert {w.kind for w in store.webhook_watches()} == {"session", "run"}


@pytest.mark.parametrize(("kind", "cursor", "problem"), [("graph", 0, "kind"), ("session", -1, "cursor")])
def test_a_watch_of_an_unknown_kind_or_a_negative_cursor_is_refused(
    store: Store, kind: str, cursor: int, problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        store.add_webhook_watch(kind, "s1", "alice", cursor=cursor)
    assert store.webhook_watches(state=None) == []


def test_advancing_a_watch_moves_its_cursor_and_queues_its_deliveries_together(store: Store) -> None:
    watch = watched(store)

    moved = store.advance_webhook_watch(
        watch.watch_id, 0, 9, deliveries=[delivery("wh_a"), delivery("wh_a", OTHER_URL), delivery("wh_b")]
    )

    assert moved is True
    assert store.webhook_watch(watch.watch_id).cursor == 9  # type: ignore[union-attr]
    rows = store.webhook_deliveries(watch_id=watch.watch_id)
    assert [(r.webhook_id, r.target_url, r.state, r.attempts) for r in rows] == [
        ("wh_a", URL, "pending", 0), ("wh_a", OTHER_URL, "pending", 0), ("wh_b", URL, "pending", 0),
    ]
    assert rows[0].body == '{"id":"wh_a"}' and rows[0].type == "turn.ended"


def test_advancing_from_a_cursor_another_caller_moved_changes_nothing(store: Store) -> None:
    watch = watched(store)
    assert store.advance_webhook_watch(watch.watch_id, 0, 3, deliveries=[delivery("wh_first")])

    moved = store.advance_webhook_watch(watch.watch_id, 0, 4, deliveries=[delivery("wh_second")])

    assert moved is False
    assert store.webhook_watch(watch.watch_id).cursor == 3  # type: ignore[union-attr]
    assert [r.webhook_id for r in store.webhook_deliveries()] == ["wh_first"]


def test_a_notification_queued_again_keeps_its_first_row(store: Store) -> None:
    watch = queued(store, "wh_a")
    store.finish_webhook_delivery(store.webhook_deliveries()[0].id, delivered=True, status_code=200)

    store.advance_webhook_watch(watch.watch_id, 1, 2, deliveries=[delivery("wh_a")])

    (row,) = store.webhook_deliveries()
    assert (row.webhook_id, row.state) == ("wh_a", "delivered")


def test_an_ended_watch_is_no_longer_active_and_does_not_move(store: Store) -> None:
    watch = watched(store, "g1", "run")
    assert store.advance_webhook_watch(watch.watch_id, 0, 1, last_status="completed", ended=True)

    ended = store.webhook_watch(watch.watch_id)
    assert ended is not None and (ended.state, ended.last_status) == ("ended", "completed") and ended.ended_at is not None
    assert store.webhook_watches() == [] and store.webhook_watches(state="ended") == [ended]
    assert store.advance_webhook_watch(watch.watch_id, 1, 2) is False


def test_a_claim_takes_due_deliveries_of_its_target_oldest_first_and_counts_the_attempt(store: Store) -> None:
    queued(store, "wh_1", "wh_2")
    store.advance_webhook_watch(watched(store, "s2").watch_id, 0, 1, deliveries=[delivery("wh_3", OTHER_URL)])

    claimed = store.claim_webhook_deliveries(URL, lease_seconds=60)

    assert [(d.webhook_id, d.attempts) for d in claimed] == [("wh_1", 1), ("wh_2", 1)]
    assert all(d.next_attempt_at > datetime.now(timezone.utc) + timedelta(seconds=30) for d in claimed)


def test_a_claimed_delivery_is_not_claimed_again_while_its_lease_holds(store: Store) -> None:
    queued(store, "wh_1")
    store.claim_webhook_deliveries(URL, lease_seconds=60)

    assert store.claim_webhook_deliveries(URL, lease_seconds=60) == []


def test_claims_racing_from_many_threads_hand_each_delivery_to_one_of_them(store: Store) -> None:
    ids = [f"wh_{i}" for i in range(20)]
    queued(store, *ids)
    barrier = threading.Barrier(6)
    got: list[WebhookDelivery] = []
    lock = threading.Lock()

    def claim() -> None:
        barrier.wait(timeout=10)
        mine = store.claim_webhook_deliveries(URL, lease_seconds=60, limit=5)
        with lock:
            got.extend(mine)

    threads = [threading.Thread(target=claim) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)

    assert sorted(d.webhook_id for d in got) == sorted(ids)
    assert {d.attempts for d in got} == {1}


def test_a_failed_attempt_is_due_again_at_its_retry_time(store: Store) -> None:
    queued(store, "wh_1")
    (claimed,) = store.claim_webhook_deliveries(URL, lease_seconds=60)
    soon = datetime.now(timezone.utc) - timedelta(seconds=1)

    row = store.finish_webhook_delivery(claimed.id, delivered=False, status_code=503, error="HTTP 503: busy", retry_at=soon)

    assert row is not None and (row.state, row.last_status_code, row.last_error) == ("pending", 503, "HTTP 503: busy")
    assert store.next_webhook_due(URL) == soon
    (again,) = store.claim_webhook_deliveries(URL, lease_seconds=60)
    assert (again.webhook_id, again.attempts) == ("wh_1", 2)


def test_a_failed_attempt_without_a_retry_time_fails_the_delivery_for_good(store: Store) -> None:
    queued(store, "wh_1")
    (claimed,) = store.claim_webhook_deliveries(URL, lease_seconds=0)

    row = store.finish_webhook_delivery(claimed.id, delivered=False, error="x" * 5000)

    assert row is not None and row.state == "failed" and len(row.last_error or "") == 2000
    assert store.claim_webhook_deliveries(URL, lease_seconds=0) == [] and store.next_webhook_due(URL) is None


def test_a_delivered_row_is_not_changed_by_a_late_report_of_failure(store: Store) -> None:
    queued(store, "wh_1")
    (claimed,) = store.claim_webhook_deliveries(URL, lease_seconds=60)
    store.finish_webhook_delivery(claimed.id, delivered=True, status_code=204)

    row = store.finish_webhook_delivery(claimed.id, delivered=False, error="timed out")

    assert row is not None and (row.state, row.last_status_code, row.last_error) == ("delivered", 204, None)
    assert row.delivered_at is not None


def test_a_released_delivery_is_due_at_once(store: Store) -> None:
    queued(store, "wh_1")
    (claimed,) = store.claim_webhook_deliveries(URL, lease_seconds=3600)

    store.release_webhook_delivery(claimed.id)

    assert [d.webhook_id for d in store.claim_webhook_deliveries(URL, lease_seconds=60)] == ["wh_1"]


def test_finishing_an_unknown_delivery_reads_as_none(store: Store) -> None:
    assert store.finish_webhook_delivery(12345, delivered=True, status_code=200) is None


def test_an_invalid_delivery_state_is_refused_by_the_database(store: Store) -> None:
    queued(store, "wh_1")
    with pytest.raises(Exception, match="(?i)check"), store.engine.begin() as conn:
        conn.execute(text("UPDATE webhook_deliveries SET state = 'lost'"))
    assert store.webhook_deliveries()[0].state == "pending"


def _alembic(conn: object) -> Config:
    config = Config()
    config.set_main_option("script_location", str(engine_module.MIGRATIONS_DIR))
    config.attributes["connection"] = conn
    return config


def test_0009_downgrades_to_0008_and_upgrades_again(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'down.db'}"
    Store.open(url).close()
    engine = engine_module.make_engine(url)
    try:
        with engine_module.ALEMBIC_LOCK, engine.connect() as conn, conn.begin():
            command.downgrade(_alembic(conn), "0008")
        tables = set(inspect(engine).get_table_names())
        assert "webhook_watches" not in tables and "webhook_deliveries" not in tables and "tasks" in tables
    finally:
        engine.dispose()

    with Store.open(url) as store:
        assert store.add_webhook_watch("task", "t1", "alice")[0] is True
