"""Autonomous tasks in the store on SQLite and PostgreSQL: the task row, its events and checkpoints,
written idempotently (a retried ``task.record`` changes nothing) and read back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData, text

from agentrt.schemas import (
    AutonomousTaskCheckpointed,
    AutonomousTaskCreated,
    AutonomousTaskSessionStarted,
    AutonomyDecision,
    Budget,
    Spend,
    TaskCheckpoint,
    TaskRecordInput,
    Usage,
)
from agentrt.store import Store, TaskSummary
from agentrt.store._models import metadata, task_checkpoints, task_events, tasks

AT = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def empty_task_tables(store: Store) -> Iterator[None]:
    """The PostgreSQL database is shared by the test session: leave no task rows behind."""
    yield
    if store.engine.dialect.name == "postgresql":
        with store.engine.begin() as conn:
            conn.execute(text("TRUNCATE tasks, task_events, task_checkpoints"))


def created(seq: int = 1, task_id: str = "t1") -> AutonomousTaskCreated:
    return AutonomousTaskCreated(
        seq=seq, at=AT, task_id=task_id, owner="alice", goal="ship it", max_sessions=3, budget=Budget(), schedule="back to back"
    )


def checkpoint(number: int, done: str = "did things") -> TaskCheckpoint:
    return TaskCheckpoint(
        number=number, session_id=f"t1-s{number}", at=AT + timedelta(hours=number), session_status="completed", done=done
    )


def record(task_id: str = "t1", **fields: object) -> TaskRecordInput:
    values: dict[str, object] = dict(task_id=task_id, owner="alice", goal="ship it", status="running", workspace="/srv/ws")
    values.update(fields)
    return TaskRecordInput(**values)  # type: ignore[arg-type]


def test_the_task_tables_match_their_migration(store: Store) -> None:
    ours = MetaData()
    for table in (tasks, task_events, task_checkpoints):
        table.to_metadata(ours)
    with store.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(context, ours)
    assert [d for d in diff if d[0] != "remove_table" and "task" in str(d)] == []
    assert {"tasks", "task_events", "task_checkpoints"} <= set(metadata.tables)


def test_a_recorded_task_reads_back_with_its_spend(store: Store) -> None:
    spend = Spend(usage=Usage(input_tokens=1200, output_tokens=300), cost_usd=0.0123, tool_calls=4, wall_seconds=61.5)

    store.record_task(record(spend=spend))

    task = store.get_task("t1")
    assert isinstance(task, TaskSummary)
    assert (task.task_id, task.owner, task.goal, task.status, task.workspace) == ("t1", "alice", "ship it", "running", "/srv/ws")
    assert task.spend == spend
    assert task.created_at.tzinfo is not None and task.updated_at >= task.created_at


def test_an_unknown_task_reads_as_none(store: Store) -> None:
    assert store.get_task("nope") is None


def test_a_later_record_updates_the_row_and_keeps_created_at(store: Store) -> None:
    store.record_task(record())
    first = store.get_task("t1")

    store.record_task(record(status="completed", goal="ship it twice", spend=Spend(tool_calls=9)))

    task = store.get_task("t1")
    assert task is not None and first is not None
    assert (task.status, task.goal, task.spend.tool_calls) == ("completed", "ship it twice", 9)
    assert task.created_at == first.created_at and task.updated_at >= first.updated_at


def test_a_record_without_a_workspace_keeps_the_stored_one(store: Store) -> None:
    store.record_task(record())
    store.record_task(record(workspace="", status="paused"))

    task = store.get_task("t1")
    assert task is not None and (task.workspace, task.status) == ("/srv/ws", "paused")


def test_events_round_trip_through_the_event_union_in_seq_order(store: Store) -> None:
    events = [
        created(1),
        AutonomyDecision(seq=2, at=AT, decision="defer", source="trigger", seconds=30.0, reason="busy"),
        AutonomousTaskSessionStarted(seq=3, session_id="t1-s1", number=1),
    ]
    store.record_task(record(events=list(reversed(events))))

    assert store.task_events("t1") == events


def test_a_retried_record_stores_each_event_and_checkpoint_once(store: Store) -> None:
    write = record(events=[created(1), AutonomousTaskCheckpointed(seq=2, checkpoint=checkpoint(1))], checkpoint=checkpoint(1))

    store.record_task(write)
    store.record_task(write)

    assert [e.seq for e in store.task_events("t1")] == [1, 2]
    assert store.task_checkpoints("t1") == [checkpoint(1)]


def test_a_second_write_of_a_seq_or_number_changes_nothing(store: Store) -> None:
    store.record_task(record(events=[created(1)], checkpoint=checkpoint(1, done="first")))

    other = AutonomyDecision(seq=1, decision="ignore", source="schedule")
    store.record_task(record(events=[other], checkpoint=checkpoint(1, done="second")))

    assert store.task_events("t1") == [created(1)]
    assert [c.done for c in store.task_checkpoints("t1")] == ["first"]


def test_task_events_since_seq_and_limit(store: Store) -> None:
    store.record_task(record(events=[AutonomyDecision(seq=s, decision="execute", source="schedule") for s in range(1, 8)]))

    assert [e.seq for e in store.task_events("t1", since_seq=3)] == [4, 5, 6, 7]
    assert [e.seq for e in store.task_events("t1", since_seq=3, limit=2)] == [4, 5]


def test_events_and_checkpoints_of_other_tasks_are_not_returned(store: Store) -> None:
    store.record_task(record("t1", events=[created(1, "t1")], checkpoint=checkpoint(1)))
    store.record_task(record("t2", events=[created(1, "t2")]))

    assert [e.task_id for e in store.task_events("t2")] == ["t2"]  # type: ignore[union-attr]
    assert store.task_checkpoints("t2") == []


def test_checkpoints_come_back_by_number(store: Store) -> None:
    for number in (3, 1, 2):
        store.record_task(record(checkpoint=checkpoint(number)))

    assert [c.number for c in store.task_checkpoints("t1")] == [1, 2, 3]
    assert store.task_checkpoints("t1")[0].at == AT + timedelta(hours=1)


def test_list_tasks_is_newest_first_and_filters_by_owner(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([AT + timedelta(minutes=m) for m in range(3)])
    monkeypatch.setattr(Store, "_now", staticmethod(lambda: next(clock)))
    store.record_task(record("a1"))
    store.record_task(record("b1", owner="bob"))
    store.record_task(record("a2"))

    assert [t.task_id for t in store.list_tasks()] == ["a2", "b1", "a1"]
    assert [t.task_id for t in store.list_tasks(owner="alice")] == ["a2", "a1"]
    assert [t.task_id for t in store.list_tasks(limit=1)] == ["a2"]
    assert store.list_tasks(owner="carol") == []


def test_a_record_and_other_writes_commit_together(store: Store) -> None:
    with pytest.raises(RuntimeError), store.transaction() as conn:
        store.record_task(record(events=[created(1)]), conn=conn)
        raise RuntimeError("abort")

    assert store.get_task("t1") is None and store.task_events("t1") == []


def test_text_a_database_refuses_is_stored_readably(store: Store) -> None:
    store.record_task(record(goal="nul \x00 here"))

    task = store.get_task("t1")
    assert task is not None and task.goal == "nul \ufffd here"
