"""Task graphs in the store on SQLite and PostgreSQL: the graph row and its events, written
idempotently (a retried ``graph.record`` changes nothing) and read back."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData, text

from agentrt.schemas import GraphRecordInput, Spend, TaskCancelled, TaskGraphCreated, Usage
from agentrt.store import Store
from agentrt.store._models import graph_events, graphs

AT = datetime(2026, 12, 6, 9, 0, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def empty_graph_tables(store: Store) -> Iterator[None]:
    """The PostgreSQL database is shared by the test session: leave no graph rows behind."""
    yield
    if store.engine.dialect.name == "postgresql":
        with store.engine.begin() as conn:
            conn.execute(text("TRUNCATE graphs, graph_events"))


def record(status: str = "planning", events: tuple[int, ...] = (), **fields: object) -> GraphRecordInput:
    made = [TaskGraphCreated(seq=1, at=AT, graph_id="g1", owner="alice", goal="ship it", approve_plan="auto")]
    made += [TaskCancelled(seq=seq, at=AT, principal="alice") for seq in events if seq > 1]
    values: dict[str, object] = dict(graph_id="g1", owner="alice", goal="ship it", status=status, workspace="/srv/ws")
    values.update(fields)
    return GraphRecordInput(events=[e for e in made if e.seq in events], **values)  # type: ignore[arg-type]


def test_the_graph_tables_match_their_migration(store: Store) -> None:
    ours = MetaData()
    for table in (graphs, graph_events):
        table.to_metadata(ours)
    with store.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(context, ours)
    assert [d for d in diff if d[0] != "remove_table" and "graph" in str(d)] == []


def test_a_graph_the_store_has_no_row_for_has_no_progress(store: Store) -> None:
    assert store.graph_progress("nowhere") is None
    assert store.graph_events("nowhere") == []


def test_recorded_events_read_back_in_order_and_a_repeat_changes_nothing(store: Store) -> None:
    store.record_graph(record(events=(1,)))
    assert store.graph_progress("g1") == ("planning", 1)
    spend = Spend(usage=Usage(input_tokens=10), cost_usd=0.5)
    store.record_graph(record("cancelled", events=(1, 2), spend=spend))
    store.record_graph(record("cancelled", events=(2,), spend=spend))  # a retried write
    assert [e.seq for e in store.graph_events("g1")] == [1, 2]
    assert [e.seq for e in store.graph_events("g1", since_seq=1)] == [2]
    assert store.graph_progress("g1") == ("cancelled", 2)
