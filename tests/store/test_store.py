"""The store on SQLite and PostgreSQL: migrations, idempotent appends, reads and token deltas."""

from __future__ import annotations

import multiprocessing
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import func, inspect, select

from agentrt.schemas import (
    AssistantMessageCompleted,
    Message,
    PositionedMessage,
    SessionConfig,
    StoreAppendInput,
    ToolCall,
    ToolInvocationStarted,
    TurnStarted,
    Usage,
    UserMessageAdded,
)
from agentrt.store import Store, agentrt_home, database_url
from agentrt.store._models import events as events_table
from agentrt.store._models import messages as messages_table

AT = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)


def config(session_id: str = "s1", **overrides) -> SessionConfig:
    return SessionConfig(session_id=session_id, owner="alice", workspace="/srv/ws", **overrides)


def msg(position: int, text: str, role: str = "user") -> PositionedMessage:
    return PositionedMessage(position=position, turn_id="t1", message=Message(role=role, text=text))


def test_open_creates_the_tables(store: Store) -> None:
    tables = set(inspect(store.engine).get_table_names())
    assert {"sessions", "messages", "events", "token_deltas", "alembic_version"} <= tables


def test_reopening_a_migrated_database_is_a_no_op(db_url: str) -> None:
    Store.open(db_url).close()
    with Store.open(db_url) as again:
        assert again.messages("nobody") == []


def test_default_url_is_a_sqlite_file_in_agentrt_home_whatever_the_working_directory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("AGENTRT_DATABASE_URL", raising=False)
    monkeypatch.setenv("AGENTRT_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    assert database_url() == f"sqlite:///{tmp_path}/home/agentrt.db"


def test_agentrt_home_defaults_to_dot_agentrt_in_the_user_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AGENTRT_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert agentrt_home() == tmp_path / ".agentrt"


def test_environment_url_overrides_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTRT_DATABASE_URL", "postgresql+psycopg://u@h/db")
    assert database_url() == "postgresql+psycopg://u@h/db"


def test_explicit_url_overrides_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTRT_DATABASE_URL", "postgresql+psycopg://u@h/db")
    assert database_url("sqlite:///x.db") == "sqlite:///x.db"


def test_open_with_default_url_creates_the_agentrt_home_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AGENTRT_DATABASE_URL", raising=False)
    monkeypatch.setenv("AGENTRT_HOME", str(tmp_path / "home"))
    Store.open().close()
    assert (tmp_path / "home" / "agentrt.db").is_file()


def test_sqlite_database_uses_wal_journal(tmp_path: Path) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'a.db'}") as store, store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_append_twice_stores_messages_and_events_once(store: Store) -> None:
    batch = StoreAppendInput(
        session_id="s1",
        config=config(),
        messages=[msg(0, "hi")],
        events=[TurnStarted(seq=1, turn_id="t1", at=AT)],
    )
    store.append(batch)
    store.append(batch)
    with store.engine.connect() as conn:
        counts = (
            conn.execute(select(func.count()).select_from(messages_table)).scalar(),
            conn.execute(select(func.count()).select_from(events_table)).scalar(),
        )
    assert counts == (1, 1)


def test_append_keeps_the_first_message_written_at_a_position(store: Store) -> None:
    store.append(StoreAppendInput(session_id="s1", messages=[msg(0, "first")]))
    store.append(StoreAppendInput(session_id="s1", messages=[msg(0, "second"), msg(1, "next")]))
    assert [(p, m.text) for p, m in store.messages("s1")] == [(0, "first"), (1, "next")]


def test_messages_are_ordered_by_position(store: Store) -> None:
    store.append(StoreAppendInput(session_id="s1", messages=[msg(2, "c"), msg(0, "a"), msg(1, "b")]))
    assert [(p, m.text) for p, m in store.messages("s1")] == [(0, "a"), (1, "b"), (2, "c")]


def test_messages_upto_position_excludes_that_position(store: Store) -> None:
    store.append(StoreAppendInput(session_id="s1", messages=[msg(0, "a"), msg(1, "b"), msg(2, "c")]))
    assert [p for p, _ in store.messages("s1", upto_position=2)] == [0, 1]


def test_messages_round_trip_tool_calls(store: Store) -> None:
    reply = Message(role="assistant", text="", tool_calls=[ToolCall(id="c1", name="fs.read", arguments={"path": "a"})])
    store.append(StoreAppendInput(session_id="s1", messages=[PositionedMessage(position=0, message=reply)]))
    assert store.messages("s1") == [(0, reply)]


def test_messages_of_other_sessions_are_not_returned(store: Store) -> None:
    store.append(StoreAppendInput(session_id="s1", messages=[msg(0, "mine")]))
    store.append(StoreAppendInput(session_id="s2", messages=[msg(0, "theirs")]))
    assert [m.text for _, m in store.messages("s1")] == ["mine"]


def test_events_round_trip_through_the_event_union(store: Store) -> None:
    written = [
        UserMessageAdded(seq=1, at=AT, turn_id="t1", principal="alice", text="hi", position=0),
        ToolInvocationStarted(seq=2, at=AT, turn_id="t1", call_id="c1", tool="fs.read", arguments={"path": "a"}),
        AssistantMessageCompleted(seq=3, at=AT, turn_id="t1", round=1, text="done", tool_calls=0,
                                  usage=Usage(input_tokens=3, output_tokens=4), position=1),
    ]
    store.append(StoreAppendInput(session_id="s1", events=written))
    assert store.events("s1") == written


def test_events_since_seq_returns_later_events_only(store: Store) -> None:
    store.append(StoreAppendInput(session_id="s1", events=[TurnStarted(seq=n, at=AT) for n in range(1, 6)]))
    assert [e.seq for e in store.events("s1", since_seq=3)] == [4, 5]


def test_events_limit_caps_the_batch(store: Store) -> None:
    store.append(StoreAppendInput(session_id="s1", events=[TurnStarted(seq=n, at=AT) for n in range(1, 6)]))
    assert [e.seq for e in store.events("s1", since_seq=1, limit=2)] == [2, 3]


def test_session_config_is_stored_with_the_first_append(store: Store) -> None:
    store.append(StoreAppendInput(session_id="s1", config=config(title="Fix the build")))
    assert store.session_config("s1") == config(title="Fix the build")


def test_session_config_of_unknown_session_is_none(store: Store) -> None:
    assert store.session_config("nope") is None


def test_appending_a_new_config_updates_the_session_and_keeps_created_at(store: Store) -> None:
    store.append(StoreAppendInput(session_id="s1", config=config(profile="fast")))
    created = store.list_sessions()[0].created_at
    store.append(StoreAppendInput(session_id="s1", config=config(profile="smart", title="renamed")))
    [summary] = store.list_sessions()
    assert (summary.profile, summary.title, summary.created_at) == ("smart", "renamed", created)
    assert summary.updated_at >= created


def test_session_titles_answers_the_titled_sessions_asked_for(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agentrt.store._transcript.TITLE_BATCH", 2)  # more ids than one query reads
    for sid, title in (("a", "first"), ("b", None), ("c", "third"), ("d", "fourth")):
        store.append(StoreAppendInput(session_id=sid, config=config(sid, title=title)))
    assert store.session_titles(["a", "b", "c", "missing", "a"]) == {"a": "first", "c": "third"}
    assert store.session_titles([]) == {}


def test_list_sessions_is_newest_first(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter(AT + timedelta(seconds=n) for n in range(100))
    monkeypatch.setattr(store, "_now", lambda: next(ticks))
    for sid in ("old", "middle", "new"):
        store.append(StoreAppendInput(session_id=sid, config=config(sid)))
    assert [s.session_id for s in store.list_sessions()] == ["new", "middle", "old"]


def test_list_sessions_respects_limit_and_returns_aware_times(store: Store) -> None:
    for sid in ("a", "b", "c"):
        store.append(StoreAppendInput(session_id=sid, config=config(sid)))
    summaries = store.list_sessions(limit=2)
    assert len(summaries) == 2 and all(s.created_at.tzinfo is not None for s in summaries)


def test_deltas_come_back_in_write_order_with_their_index(store: Store) -> None:
    store.append_deltas("s1", "t1", round=1, attempt=1, texts=["Hel", "lo"], start_idx=0)
    store.append_deltas("s1", "t1", round=1, attempt=1, texts=[" world"], start_idx=2)
    assert [(d.idx, d.text) for d in store.deltas("s1")] == [(0, "Hel"), (1, "lo"), (2, " world")]


def test_deltas_after_id_returns_only_newer_ones(store: Store) -> None:
    store.append_deltas("s1", "t1", round=1, attempt=1, texts=["a", "b", "c"], start_idx=0)
    first = store.deltas("s1", limit=1)
    assert [d.text for d in store.deltas("s1", after_id=first[-1].id)] == ["b", "c"]


def test_deltas_of_one_turn_skip_the_earlier_turns_rows_and_page_by_id(store: Store) -> None:
    store.append_deltas("s1", "t1", round=1, attempt=1, texts=[f"old{i}" for i in range(50)], start_idx=0)
    store.append_deltas("s1", "t2", round=1, attempt=1, texts=["a", "b"], start_idx=0)
    store.append_deltas("s2", "t2", round=1, attempt=1, texts=["other session"], start_idx=0)
    store.append_deltas("s1", "t2", round=2, attempt=1, texts=["c"], start_idx=0)
    first = store.deltas("s1", limit=2, turn_id="t2")
    assert [d.text for d in first] == ["a", "b"]
    assert [(d.turn_id, d.round, d.text) for d in store.deltas("s1", after_id=first[-1].id, turn_id="t2")] == [("t2", 2, "c")]
    assert store.deltas("s1", turn_id="t3") == []


def test_deltas_keep_turn_round_and_attempt(store: Store) -> None:
    store.append_deltas("s1", "t9", round=3, attempt=2, texts=["x"], start_idx=5)
    [delta] = store.deltas("s1")
    assert (delta.turn_id, delta.round, delta.attempt, delta.idx) == ("t9", 3, 2, 5)


def test_deltas_of_other_sessions_are_not_returned(store: Store) -> None:
    store.append_deltas("s1", "t1", 1, 1, ["mine"], 0)
    store.append_deltas("s2", "t1", 1, 1, ["theirs"], 0)
    assert [d.text for d in store.deltas("s1")] == ["mine"]


def _open_concurrently(url: str, n: int = 2) -> list[BaseException]:
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def opener() -> None:
        try:
            barrier.wait()
            Store.open(url).close()
        except BaseException as e:  # collected and asserted on below
            errors.append(e)

    threads = [threading.Thread(target=opener) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_two_stores_opening_a_new_sqlite_file_at_once_both_succeed(tmp_path: Path) -> None:
    assert _open_concurrently(f"sqlite:///{tmp_path / 'race.db'}", n=4) == []


@pytest.mark.postgres
def test_two_stores_opening_a_new_postgres_database_at_once_both_succeed(fresh_pg_url: str) -> None:
    assert _open_concurrently(fresh_pg_url, n=4) == []


def _open_and_close(url: str) -> None:
    Store.open(url).close()


def _open_in_processes(url: str, n: int = 3) -> list[int]:
    """Exit codes of ``n`` fresh interpreters that each open ``url`` at about the same time."""
    spawn = multiprocessing.get_context("spawn")
    procs = [spawn.Process(target=_open_and_close, args=(url,)) for _ in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return [p.exitcode for p in procs]


def test_several_processes_opening_a_new_sqlite_file_at_once_all_succeed(tmp_path: Path) -> None:
    assert _open_in_processes(f"sqlite:///{tmp_path / 'race.db'}") == [0, 0, 0]


@pytest.mark.postgres
def test_several_processes_opening_a_new_postgres_database_at_once_all_succeed(fresh_pg_url: str) -> None:
    assert _open_in_processes(fresh_pg_url) == [0, 0, 0]


def test_an_append_with_new_content_moves_the_session_updated_at_on_both_dialects(store: Store) -> None:
    # Regression: PostgreSQL reports -1 rows for INSERT .. ON CONFLICT, which once hid every update.
    store.append(StoreAppendInput(session_id="s1", config=config("s1")))
    before = store.list_sessions()[0].updated_at
    store.append(StoreAppendInput(session_id="s1", messages=[msg(0, "hello")]))
    assert store.list_sessions()[0].updated_at > before


def test_last_delta_id_is_where_a_live_stream_starts(store: Store) -> None:
    assert store.last_delta_id("s1") == 0
    store.append_deltas("s1", "turn-1", 1, 1, ["a", "b"], 0)
    store.append_deltas("s2", "turn-1", 1, 1, ["c"], 0)
    last = store.last_delta_id("s1")
    assert [d.text for d in store.deltas("s1")][-1] == "b"
    assert store.deltas("s1", last) == []


def test_writes_in_one_transaction_land_together(store: Store) -> None:
    batch = StoreAppendInput(session_id="s1", config=config(), messages=[msg(0, "hi")], events=[TurnStarted(seq=1, turn_id="t1", at=AT)])
    with store.transaction() as conn:
        store.append(batch, conn=conn)
        store.record_usage("s1", "t1", 1, 1, "started", conn=conn)
        store.put_message("s1", 1, "t1", Message(role="tool", text="result"), conn=conn)
        store.append_deltas("s1", "t1", 1, 1, ["a", "b"], 0, conn=conn)
    assert [m.text for _, m in store.messages("s1")] == ["hi", "result"]
    assert [r.status for r in store.usage_receipts("s1")] == ["started"]
    assert [d.text for d in store.deltas("s1")] == ["a", "b"]


def test_a_transaction_that_raises_writes_nothing_of_it(store: Store) -> None:
    store.append(StoreAppendInput(session_id="s1", config=config(), messages=[msg(0, "hi")]))
    with pytest.raises(RuntimeError, match="worker lost"):
        with store.transaction() as conn:
            store.append(StoreAppendInput(session_id="s1", messages=[msg(1, "second")]), conn=conn)
            store.record_usage("s1", "t1", 1, 1, "started", conn=conn)
            raise RuntimeError("worker lost")
    assert [m.text for _, m in store.messages("s1")] == ["hi"]
    assert store.usage_receipts("s1") == []


def test_upserts_built_once_still_take_each_call_s_values(store: Store) -> None:
    # The statements are built once per store; every call's values must still be its own.
    store.record_usage("s1", "t1", 1, 1, "started")
    store.record_usage("s1", "t1", 1, 1, "completed", 10, 5)
    store.record_usage("s1", "t1", 2, 1, "started", 3, 0)
    store.record_usage("s1", "t1", 1, 1, "interrupted", 0, 0)  # a completed receipt never changes
    assert [(r.round, r.status, r.input_tokens, r.output_tokens) for r in store.usage_receipts("s1")] == [
        (1, "completed", 10, 5),
        (2, "started", 3, 0),
    ]
    store.put_message("s1", 0, "t1", Message(role="tool", text="first"))
    store.put_message("s1", 0, "t1", Message(role="tool", text="retried"))
    store.put_message("s1", 1, "t2", Message(role="tool", text="other"))
    assert [(p, m.text) for p, m in store.messages("s1")] == [(0, "retried"), (1, "other")]


def test_an_upsert_with_a_condition_is_cached_under_its_condition_s_name(store: Store) -> None:
    from agentrt.store._models import usage_receipts

    keys, columns = ["session_id", "turn_id", "round", "attempt"], ["status"]
    guarded = store._upsert(usage_receipts, keys, columns, where=usage_receipts.c.status != "completed", where_name="not completed")
    plain = store._upsert(usage_receipts, keys, columns)
    assert plain is not guarded and "WHERE" not in str(plain)
    with pytest.raises(ValueError, match="where_name"):
        store._upsert(usage_receipts, keys, columns, where=usage_receipts.c.status != "completed")


def test_reasoning_blocks_are_stored_by_position_and_the_last_attempt_wins(tmp_path: Path) -> None:
    from agentrt.schemas import ReasoningBlock

    store = Store.open(f"sqlite:///{tmp_path / 'r.db'}")
    first = [ReasoningBlock(type="thinking", provider="anthropic", text="plan A", signature="sig-a")]
    second = [
        ReasoningBlock(type="thinking", provider="anthropic", text="plan B", signature="sig-b"),
        ReasoningBlock(type="redacted_thinking", provider="anthropic", data="opaque"),
    ]

    store.put_reasoning("s1", 3, first, turn_id="t1", round=1, attempt=1)
    store.put_reasoning("s1", 3, second, turn_id="t1", round=1, attempt=2)
    store.put_reasoning("s1", 5, [], turn_id="t1", round=2)

    assert store.reasoning_at("s1", [3, 5, 9]) == {3: second}
    assert store.reasoning_at("other", [3]) == {} and store.reasoning_at("s1", []) == {}


def test_usage_receipts_keep_cache_and_reasoning_tokens(tmp_path: Path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'u.db'}")

    store.record_usage("s1", "t1", 1, 1, "started")
    store.record_usage(
        "s1", "t1", 1, 1, "completed", 1200, 80, cache_read_tokens=1000, cache_write_tokens=150, reasoning_tokens=40
    )

    [receipt] = store.usage_receipts("s1")
    assert (receipt.input_tokens, receipt.output_tokens) == (1200, 80)
    assert (receipt.cache_read_tokens, receipt.cache_write_tokens, receipt.reasoning_tokens) == (1000, 150, 40)
