"""The effect ledger and usage receipts on SQLite and PostgreSQL: claims, records,
reconciliation, concurrency, usage upserts and the 0002 migration."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

import pytest
from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, insert, select, text

import agentrt.store._engine as engine_module
from agentrt.store import EffectRecord, Store, UsageReceipt, head_revision
from agentrt.store._models import metadata
from agentrt.store._models import sessions as sessions_table

T = TypeVar("T")
THREADS = 8


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """The conftest ``store``, plus emptying this module's tables on the shared PostgreSQL database."""
    with Store.open(db_url) as s:
        yield s
        if s.engine.dialect.name == "postgresql":
            with s.engine.begin() as conn:
                conn.execute(text("TRUNCATE effects, usage_receipts"))


def _race(n: int, fn: Callable[[], T]) -> list[T]:
    """Run ``fn`` in ``n`` threads released together; return the results, re-raising any error."""
    barrier = threading.Barrier(n)
    results: list[T] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run() -> None:
        try:
            barrier.wait(timeout=10)
            value = fn()
        except BaseException as e:  # noqa: BLE001 - reported below
            with lock:
                errors.append(e)
            return
        with lock:
            results.append(value)

    threads = [threading.Thread(target=run) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    if errors:
        raise errors[0]
    assert len(results) == n
    return results


# -- claims -------------------------------------------------------------------------------


def test_first_claim_wins_and_the_second_gets_the_record(store: Store) -> None:
    won, first = store.claim_effect("k1", "s1", "send_email")
    assert won is True
    assert first.idempotency_key == "k1"
    assert (first.session_id, first.tool, first.state) == ("s1", "send_email", "claimed")
    assert first.result_text is None and first.note is None
    assert first.claimed_at.tzinfo is not None and first.updated_at.tzinfo is not None

    won, second = store.claim_effect("k1", "s1", "send_email")
    assert won is False
    assert second == first


def test_claims_of_different_keys_are_independent(store: Store) -> None:
    assert store.claim_effect("a", "s1", "t")[0] is True
    assert store.claim_effect("b", "s1", "t")[0] is True


def test_losing_claim_reports_the_first_claimers_session_and_tool(store: Store) -> None:
    store.claim_effect("k1", "s1", "send_email")
    won, record = store.claim_effect("k1", "s2", "other_tool")
    assert won is False
    assert (record.session_id, record.tool) == ("s1", "send_email")


def test_concurrent_claims_of_one_key_have_exactly_one_winner(store: Store) -> None:
    for i in range(5):
        key = f"race-{i}"
        results = _race(THREADS, lambda: store.claim_effect(key, "s1", "t"))
        assert sorted(won for won, _ in results) == [False] * (THREADS - 1) + [True]
        assert {record.state for _, record in results} == {"claimed"}
        assert len({record.claimed_at for _, record in results}) == 1


def test_concurrent_claims_from_separate_stores_have_exactly_one_winner(db_url: str) -> None:
    stores = [Store.open(db_url) for _ in range(THREADS)]
    try:
        it = iter(stores)
        lock = threading.Lock()

        def claim() -> bool:
            with lock:
                s = next(it)
            return s.claim_effect("multi", "s1", "t")[0]

        assert sorted(_race(THREADS, claim)) == [False] * (THREADS - 1) + [True]
    finally:
        with stores[0].engine.begin() as conn:
            conn.execute(text("DELETE FROM effects"))
        for s in stores:
            s.close()


def test_record_then_reclaim_returns_the_applied_result(store: Store) -> None:
    store.claim_effect("k1", "s1", "t")
    recorded = store.record_effect("k1", "applied", '{"ok": true}')
    assert recorded.state == "applied" and recorded.result_text == '{"ok": true}'
    assert recorded.updated_at >= recorded.claimed_at

    won, record = store.claim_effect("k1", "s1", "t")
    assert won is False
    assert record == recorded


def test_reclaiming_a_failed_effect_returns_the_failure(store: Store) -> None:
    store.claim_effect("k1", "s1", "t")
    store.record_effect("k1", "failed", "boom")
    won, record = store.claim_effect("k1", "s1", "t")
    assert (won, record.state, record.result_text) == (False, "failed", "boom")


# -- record_effect --------------------------------------------------------------------------


def test_recording_the_same_final_state_again_is_a_no_op(store: Store) -> None:
    store.claim_effect("k1", "s1", "t")
    first = store.record_effect("k1", "applied", "r1")
    again = store.record_effect("k1", "applied", "r2")
    assert again == first
    assert store.effect("k1").result_text == "r1"


@pytest.mark.parametrize(("first", "then"), [("applied", "failed"), ("failed", "applied")])
def test_changing_a_recorded_outcome_raises(store: Store, first: str, then: str) -> None:
    store.claim_effect("k1", "s1", "t")
    store.record_effect("k1", first, "r")
    with pytest.raises(ValueError, match=f"'{first}'.*'claimed'"):
        store.record_effect("k1", then, "r")
    assert store.effect("k1").state == first


def test_recording_an_unknown_key_raises_key_error(store: Store) -> None:
    with pytest.raises(KeyError):
        store.record_effect("nope", "applied", "r")


def test_recording_an_invalid_state_raises(store: Store) -> None:
    store.claim_effect("k1", "s1", "t")
    with pytest.raises(ValueError, match="'applied' or 'failed'"):
        store.record_effect("k1", "claimed", "r")  # type: ignore[arg-type]
    assert store.effect("k1").state == "claimed"


def test_recording_a_released_effect_raises(store: Store) -> None:
    store.claim_effect("k1", "s1", "t")
    store.reconcile_effect("k1", "not_applied")
    with pytest.raises(ValueError, match="'not_applied'"):
        store.record_effect("k1", "applied", "r")


# -- reconcile_effect -----------------------------------------------------------------------


def test_reconcile_as_applied_marks_it_applied_with_the_note(store: Store) -> None:
    store.claim_effect("k1", "s1", "t")
    record = store.reconcile_effect("k1", "applied", note="checked the mailbox: sent")
    assert (record.state, record.result_text, record.note) == ("applied", None, "checked the mailbox: sent")
    won, seen = store.claim_effect("k1", "s1", "t")
    assert won is False and seen == record


def test_reconcile_as_not_applied_makes_the_key_claimable_again(store: Store) -> None:
    _, first = store.claim_effect("k1", "s1", "t")
    released = store.reconcile_effect("k1", "not_applied", note="never sent")
    assert (released.state, released.note) == ("not_applied", "never sent")

    won, again = store.claim_effect("k1", "s1", "t")
    assert won is True
    assert again.state == "claimed"
    assert again.note == "never sent"
    assert again.claimed_at >= first.claimed_at
    assert store.claim_effect("k1", "s1", "t")[0] is False

    assert store.record_effect("k1", "applied", "sent now").state == "applied"


@pytest.mark.parametrize("outcome", ["applied", "not_applied"])
def test_reconcile_is_idempotent_for_the_same_outcome(store: Store, outcome: str) -> None:
    store.claim_effect("k1", "s1", "t")
    first = store.reconcile_effect("k1", outcome, note="n1")
    again = store.reconcile_effect("k1", outcome, note="n2")
    assert again == first


@pytest.mark.parametrize(
    ("setup", "outcome"),
    [
        (lambda s: s.record_effect("k1", "applied", "r"), "not_applied"),
        (lambda s: s.record_effect("k1", "failed", "r"), "applied"),
        (lambda s: s.record_effect("k1", "failed", "r"), "not_applied"),
        (lambda s: s.reconcile_effect("k1", "not_applied"), "applied"),
        (lambda s: s.reconcile_effect("k1", "applied"), "not_applied"),
    ],
)
def test_reconcile_of_a_settled_effect_raises(store: Store, setup, outcome: str) -> None:
    store.claim_effect("k1", "s1", "t")
    setup(store)
    before = store.effect("k1")
    with pytest.raises(ValueError, match="only a 'claimed' effect"):
        store.reconcile_effect("k1", outcome)
    assert store.effect("k1") == before


def test_reconcile_of_an_unknown_key_raises_key_error(store: Store) -> None:
    with pytest.raises(KeyError):
        store.reconcile_effect("nope", "applied")


def test_reconcile_with_an_invalid_outcome_raises(store: Store) -> None:
    store.claim_effect("k1", "s1", "t")
    with pytest.raises(ValueError, match="'applied' or 'not_applied'"):
        store.reconcile_effect("k1", "failed")  # type: ignore[arg-type]


def test_concurrent_reclaims_of_a_released_effect_have_exactly_one_winner(store: Store) -> None:
    for i in range(5):
        key = f"release-{i}"
        store.claim_effect(key, "s1", "t")
        store.reconcile_effect(key, "not_applied")
        results = _race(THREADS, lambda: store.claim_effect(key, "s1", "t"))
        assert sorted(won for won, _ in results) == [False] * (THREADS - 1) + [True]
        assert {record.state for _, record in results} == {"claimed"}
        assert store.effect(key).state == "claimed"


# -- reads --------------------------------------------------------------------------------


def test_effect_of_an_unknown_key_is_none(store: Store) -> None:
    assert store.effect("nope") is None


def test_effects_are_per_session_in_claim_order(store: Store) -> None:
    store.claim_effect("z", "s1", "t")
    store.claim_effect("a", "s1", "t")
    store.claim_effect("other", "s2", "t")
    store.claim_effect("m", "s1", "t")
    listed = store.effects("s1")
    assert all(isinstance(r, EffectRecord) for r in listed)
    assert [r.idempotency_key for r in listed] == ["z", "a", "m"]
    assert store.effects("nobody") == []


def test_effects_with_equal_claim_times_are_ordered_by_key(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    at = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)
    monkeypatch.setattr(store, "_now", lambda: at)
    for key in ("c", "a", "b"):
        store.claim_effect(key, "s1", "t")
    assert [r.idempotency_key for r in store.effects("s1")] == ["a", "b", "c"]
    assert store.effect("a").claimed_at == at


def test_claim_stores_long_keys_and_results(store: Store) -> None:
    key = "k" * 1000
    result = "r" * 100_000
    store.claim_effect(key, "s1", "t")
    assert store.record_effect(key, "applied", result).result_text == result


# -- usage receipts -----------------------------------------------------------------------


def test_usage_receipt_is_inserted_then_updated(store: Store) -> None:
    store.record_usage("s1", "t1", 0, 1, "started")
    [started] = store.usage_receipts("s1")
    assert isinstance(started, UsageReceipt)
    assert (started.status, started.input_tokens, started.output_tokens) == ("started", 0, 0)
    assert started.created_at.tzinfo is not None

    store.record_usage("s1", "t1", 0, 1, "completed", input_tokens=120, output_tokens=45)
    [done] = store.usage_receipts("s1")
    assert (done.session_id, done.turn_id, done.round, done.attempt) == ("s1", "t1", 0, 1)
    assert (done.status, done.input_tokens, done.output_tokens) == ("completed", 120, 45)
    assert done.created_at == started.created_at
    assert done.updated_at >= started.updated_at


@pytest.mark.parametrize("late", ["started", "interrupted", "completed"])
def test_completed_usage_receipt_is_never_downgraded(store: Store, late: str) -> None:
    store.record_usage("s1", "t1", 0, 1, "completed", 100, 10)
    before = store.usage_receipts("s1")
    store.record_usage("s1", "t1", 0, 1, late, 7, 7)
    assert store.usage_receipts("s1") == before


def test_interrupted_receipt_may_later_complete(store: Store) -> None:
    store.record_usage("s1", "t1", 0, 1, "started")
    store.record_usage("s1", "t1", 0, 1, "interrupted", 50, 3)
    assert store.usage_receipts("s1")[0].status == "interrupted"
    store.record_usage("s1", "t1", 0, 1, "completed", 50, 9)
    assert (store.usage_receipts("s1")[0].status, store.usage_receipts("s1")[0].output_tokens) == ("completed", 9)


def test_usage_receipts_are_per_session_and_ordered(store: Store) -> None:
    store.record_usage("s1", "t2", 0, 1, "started")
    store.record_usage("s1", "t1", 1, 2, "completed", 1, 1)
    store.record_usage("s1", "t1", 1, 1, "interrupted", 1, 0)
    store.record_usage("s1", "t1", 0, 1, "completed", 1, 1)
    store.record_usage("s2", "t1", 0, 1, "completed", 1, 1)
    keys = [(r.turn_id, r.round, r.attempt) for r in store.usage_receipts("s1")]
    assert keys == [("t1", 0, 1), ("t1", 1, 1), ("t1", 1, 2), ("t2", 0, 1)]
    assert store.usage_receipts("nobody") == []


def test_record_usage_rejects_an_unknown_status(store: Store) -> None:
    with pytest.raises(ValueError, match="status"):
        store.record_usage("s1", "t1", 0, 1, "done")  # type: ignore[arg-type]
    assert store.usage_receipts("s1") == []


def test_concurrent_usage_writes_end_completed(store: Store) -> None:
    statuses = ["started", "completed", "interrupted", "started"] * 2
    it = iter(statuses)
    lock = threading.Lock()

    def write() -> None:
        with lock:
            status = next(it)
        store.record_usage("s1", "t1", 0, 1, status, 10, 1 if status != "completed" else 99)

    _race(len(statuses), write)
    [receipt] = store.usage_receipts("s1")
    assert (receipt.status, receipt.output_tokens) == ("completed", 99)


# -- migration 0002 -----------------------------------------------------------------------


def _alembic_config(conn) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(engine_module.MIGRATIONS_DIR))
    cfg.attributes["connection"] = conn
    return cfg


def _upgrade_to(url: str, revision: str) -> None:
    engine = engine_module.make_engine(engine_module.database_url(url))
    try:
        with engine_module.ALEMBIC_LOCK, engine.connect() as conn, conn.begin():
            command.upgrade(_alembic_config(conn), revision)
    finally:
        engine.dispose()


def _check_upgrade_from_0001(url: str) -> None:
    _upgrade_to(url, "0001")
    engine = engine_module.make_engine(engine_module.database_url(url))
    try:
        tables = set(inspect(engine).get_table_names())
        assert "sessions" in tables and "effects" not in tables and "usage_receipts" not in tables
        now = datetime.now(timezone.utc)
        with engine.begin() as conn:
            conn.execute(
                insert(sessions_table).values(
                    session_id="old", owner="alice", workspace="/ws", profile="default", title=None,
                    config_json='{"session_id": "old", "owner": "alice", "workspace": "/ws"}',
                    created_at=now, updated_at=now,
                )
            )
    finally:
        engine.dispose()

    with Store.open(url) as store:
        with store.engine.connect() as conn:
            assert MigrationContext.configure(conn).get_current_revision() == head_revision()
            assert conn.execute(select(sessions_table.c.session_id)).scalars().all() == ["old"]
        insp = inspect(store.engine)
        assert {"effects", "usage_receipts", "context_summaries", "payloads", "tasks", "task_events", "task_checkpoints"} <= set(insp.get_table_names())
        assert "ix_effects_session_id" in {ix["name"] for ix in insp.get_indexes("effects")}
        assert store.claim_effect("k1", "old", "t")[0] is True
        store.record_usage("old", "t1", 0, 1, "completed", 1, 2)
        assert store.usage_receipts("old")[0].status == "completed"

    with Store.open(url) as again:  # re-opening at head is a no-op
        assert again.effect("k1").state == "claimed"


def test_sqlite_database_at_0001_upgrades_to_head(tmp_path: Path) -> None:
    _check_upgrade_from_0001(f"sqlite:///{tmp_path / 'old.db'}")


@pytest.mark.postgres
def test_postgres_database_at_0001_upgrades_to_head(fresh_pg_url: str) -> None:
    _check_upgrade_from_0001(fresh_pg_url)


def test_0002_downgrades_to_0001(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'down.db'}"
    Store.open(url).close()
    engine = engine_module.make_engine(url)
    try:
        with engine_module.ALEMBIC_LOCK, engine.connect() as conn, conn.begin():
            command.downgrade(_alembic_config(conn), "0001")
        tables = set(inspect(engine).get_table_names())
        assert "effects" not in tables and "usage_receipts" not in tables and "sessions" in tables
    finally:
        engine.dispose()


def test_models_match_the_migrated_schema(store: Store) -> None:
    from alembic.autogenerate import compare_metadata

    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), metadata)
    assert diff == []


def test_invalid_states_are_rejected_by_the_database(store: Store) -> None:
    store.claim_effect("k1", "s1", "t")
    with pytest.raises(Exception, match="(?i)check"), store.engine.begin() as conn:
        conn.execute(text("UPDATE effects SET state = 'bogus' WHERE idempotency_key = 'k1'"))
    assert store.effect("k1").state == "claimed"


def test_a_key_another_session_holds_is_never_claimed_nor_reclaimed(tmp_path: Path) -> None:
    # "session-s/turn-1/3/" + call id "X/turn-1/7/y" spells what session "s/turn-1/3/X" would use
    # for its call "y" at position 7: the ledger must not hand the second session the first's row.
    store = Store.open(f"sqlite:///{tmp_path / 'e.db'}")
    applied, released = "session-s/turn-1/3/X/turn-1/7/y", "session-s/turn-1/4/X/turn-1/8/y"
    assert store.claim_effect(applied, "s", "fs.write")[0]
    store.record_effect(applied, "applied", "wrote a")
    assert store.claim_effect(released, "s", "fs.write")[0]
    store.reconcile_effect(released, "not_applied")

    assert store.claim_effect(applied, "s/turn-1/3/X", "fs.write") == (False, store.effect(applied))
    won, record = store.claim_effect(released, "s/turn-1/4/X", "fs.write")

    assert not won and (record.session_id, record.state) == ("s", "not_applied")
    assert store.claim_effect(released, "s", "fs.write")[0]  # its own session still re-claims it


def test_a_call_whose_key_another_session_holds_fails_without_running_or_taking_its_result(tmp_path: Path) -> None:
    from temporalio.testing import ActivityEnvironment

    from agentrt.activities import ToolActivities
    from agentrt.activities.tools import default_registry
    from agentrt.schemas import ToolCall, ToolExecuteInput

    store = Store.open(f"sqlite:///{tmp_path / 'e.db'}")
    key = "session-s/turn-1/3/X/turn-1/7/y"
    store.claim_effect(key, "s", "fs.write")
    store.record_effect(key, "applied", "wrote secret.txt for session s")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    call = ToolCall(id="y", name="fs.write", arguments={"path": "a.txt", "content": "a"})
    input = ToolExecuteInput(
        session_id="s/turn-1/3/X", turn_id="turn-1", call=call, workspace=str(workspace),
        idempotency_key=key, result_position=7,
    )

    result = ActivityEnvironment().run(ToolActivities(default_registry(), store).execute, input)

    assert not result.ok and "belongs to another session" in (result.error or "")
    assert "session s" not in result.preview and not (workspace / "a.txt").exists()
    assert store.effect(key).state == "applied"


def test_a_result_with_a_nul_character_is_recorded_on_every_backend(store: Store) -> None:
    # Binary command output used to make PostgreSQL refuse the record: the effect stayed `claimed`.
    store.claim_effect("nul/1", "s-nul", "shell.run")

    record = store.record_effect("nul/1", "applied", "exit code 0\n--- stdout ---\na\x00b")

    assert record.state == "applied"
    assert store.effect("nul/1").result_text == "exit code 0\n--- stdout ---\na\ufffdb"


def test_a_streamed_delta_with_a_nul_character_is_stored(store: Store) -> None:
    store.append_deltas("s-nul-delta", "turn-1", 1, 1, ["a\x00b"], 0)

    assert [d.text for d in store.deltas("s-nul-delta")] == ["a\ufffdb"]
