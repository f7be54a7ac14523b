"""Memories in the store on SQLite and PostgreSQL: idempotent writes, supersession, visibility
per owner and scope, the owner's decisions, and the bounds a writing loop meets."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import insert, inspect

import agentrt.store._engine as engine_module
from agentrt.schemas import (
    MAX_MEMORIES_PER_OWNER,
    MAX_PENDING_PROPOSALS_PER_SESSION,
    MemoryAlreadyDecided,
    MemoryLimitExceeded,
    MemoryNotFound,
    MemoryRecord,
    ToolError,
)
from agentrt.store import Store
from agentrt.store._models import memories as memories_table

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def mem(memory_id: str, **fields: object) -> MemoryRecord:
    values: dict[str, object] = dict(
        memory_id=memory_id, owner="alice", scope="session", key="k", text=f"text of {memory_id}",
        status="accepted", session_id="s1", workspace="/srv/ws", created_at=T0,
    )
    values.update(fields)
    return MemoryRecord(**values)  # type: ignore[arg-type]


def fill(store: Store, count: int, **fields: object) -> None:
    """``count`` accepted user memories of alice with distinct keys, in one statement."""
    rows = [
        mem(f"fill-{i}", scope="user", key=f"fill-{i}", **fields).model_dump() for i in range(count)
    ]
    with store.transaction() as conn:
        conn.execute(insert(memories_table), rows)


def test_a_written_memory_reads_back_as_written(store: Store) -> None:
    written = store.write_memory(mem("m1"))

    assert written == mem("m1")
    assert store.memory("m1") == written
    assert written.created_at.tzinfo is not None


def test_an_unknown_memory_id_reads_as_none(store: Store) -> None:
    assert store.memory("nope") is None


def test_writing_the_same_id_again_returns_the_stored_record_unchanged(store: Store) -> None:
    first = store.write_memory(mem("m1", text="first"))

    again = store.write_memory(mem("m1", text="second", key="other", created_at=T0 + timedelta(days=1)))

    assert again == first
    assert [m.text for m in store.memories("alice")] == ["first"]


def test_an_accepted_write_supersedes_the_owner_s_earlier_memory_of_the_same_scope_target_and_key(store: Store) -> None:
    store.write_memory(mem("old", text="old"))

    store.write_memory(mem("new", text="new", created_at=T0 + timedelta(seconds=1)))

    assert store.memory("old").status == "superseded"
    assert [m.memory_id for m in store.visible_memories("alice", "s1", "/srv/ws")] == ["new"]


def test_a_write_supersedes_nothing_of_another_session_key_or_owner(store: Store) -> None:
    store.write_memory(mem("other-session", session_id="s2"))
    store.write_memory(mem("other-key", key="k2"))
    store.write_memory(mem("other-owner", owner="mallory"))
    store.write_memory(mem("other-workspace", scope="workspace", workspace="/srv/other"))

    store.write_memory(mem("new", created_at=T0 + timedelta(seconds=1)))
    store.write_memory(mem("new-ws", scope="workspace", created_at=T0 + timedelta(seconds=1)))

    for memory_id in ("other-session", "other-key", "other-owner", "other-workspace"):
        assert store.memory(memory_id).status == "accepted", memory_id


def test_a_proposal_supersedes_nothing_until_it_is_accepted(store: Store) -> None:
    store.write_memory(mem("old", scope="user"))
    store.write_memory(mem("proposal", scope="user", status="proposed", created_at=T0 + timedelta(seconds=1)))

    assert store.memory("old").status == "accepted"
    store.decide_memory("proposal", "accept", "alice")
    assert store.memory("old").status == "superseded"
    assert store.memory("proposal").status == "accepted"


def test_visible_memories_are_the_owner_s_accepted_ones_of_this_session_workspace_and_user(store: Store) -> None:
    store.write_memory(mem("user", scope="user", key="u", session_id="elsewhere", workspace="/elsewhere"))
    store.write_memory(mem("this-ws", scope="workspace", key="w", session_id="s9"))
    store.write_memory(mem("other-ws", scope="workspace", key="w", workspace="/srv/other"))
    store.write_memory(mem("this-session", key="s"))
    store.write_memory(mem("other-session", key="s", session_id="s2"))
    store.write_memory(mem("proposed", scope="user", key="p", status="proposed"))
    store.write_memory(mem("mallory", scope="user", key="u", owner="mallory"))

    visible = {m.memory_id for m in store.visible_memories("alice", "s1", "/srv/ws")}

    assert visible == {"user", "this-ws", "this-session"}


def test_visible_memories_are_newest_first_and_limited(store: Store) -> None:
    for i in range(5):
        store.write_memory(mem(f"m{i}", key=f"k{i}", created_at=T0 + timedelta(minutes=i)))

    assert [m.memory_id for m in store.visible_memories("alice", "s1", "/srv/ws", limit=3)] == ["m4", "m3", "m2"]


def test_memories_filter_by_status_scope_and_session(store: Store) -> None:
    store.write_memory(mem("a"))
    store.write_memory(mem("b", scope="user", status="proposed"))
    store.write_memory(mem("c", session_id="s2", key="c"))

    assert [m.memory_id for m in store.memories("alice", status="proposed")] == ["b"]
    assert [m.memory_id for m in store.memories("alice", scope="session", session_id="s2")] == ["c"]
    assert store.memories("mallory") == []


def test_nul_and_lone_surrogates_are_stored_as_replacement_characters(store: Store) -> None:
    written = store.write_memory(mem("m1", text="a\x00b\udc80c"))

    assert written.text == "a\ufffdb\ufffdc"


def test_a_memory_written_in_a_transaction_that_raises_is_not_stored(store: Store) -> None:
    with pytest.raises(RuntimeError), store.transaction() as conn:
        store.write_memory(mem("m1"), conn=conn)
        raise RuntimeError("boom")

    assert store.memory("m1") is None


def test_a_new_memory_must_be_proposed_or_accepted(store: Store) -> None:
    with pytest.raises(ValueError, match="'proposed' or 'accepted'"):
        store.write_memory(mem("m1", status="rejected"))


# -- bounds ---------------------------------------------------------------------------------


def test_an_owner_at_the_live_memory_limit_gets_a_tool_error_and_nothing_is_stored(store: Store) -> None:
    fill(store, MAX_MEMORIES_PER_OWNER)

    with pytest.raises(MemoryLimitExceeded, match="already has 1000 live memories") as caught:
        store.write_memory(mem("one-more", key="new"))

    assert isinstance(caught.value, ToolError) and caught.value.limit == MAX_MEMORIES_PER_OWNER
    assert store.memory("one-more") is None


def test_at_the_limit_a_write_that_replaces_an_accepted_memory_of_its_key_is_stored(store: Store) -> None:
    fill(store, MAX_MEMORIES_PER_OWNER)

    store.write_memory(mem("replacement", scope="user", key="fill-7"))

    assert store.memory("fill-7").status == "superseded"
    assert store.memory("replacement").status == "accepted"


def test_rejected_and_superseded_memories_do_not_count_against_the_limit(store: Store) -> None:
    fill(store, MAX_MEMORIES_PER_OWNER)
    with store.transaction() as conn:
        conn.execute(memories_table.update().where(memories_table.c.key == "fill-3").values(status="rejected"))

    assert store.write_memory(mem("fits", key="new")).status == "accepted"


def test_another_owner_s_memories_do_not_count_against_an_owner_s_limit(store: Store) -> None:
    fill(store, MAX_MEMORIES_PER_OWNER, owner="mallory")

    assert store.write_memory(mem("alice-1")).owner == "alice"


def test_a_session_with_the_most_pending_proposals_cannot_propose_another(store: Store) -> None:
    for i in range(MAX_PENDING_PROPOSALS_PER_SESSION):
        store.write_memory(mem(f"p{i}", scope="user", key=f"p{i}", status="proposed"))

    with pytest.raises(MemoryLimitExceeded, match="pending proposals"):
        store.write_memory(mem("p-extra", scope="user", key="extra", status="proposed"))

    # A session-scope write (accepted at once) and another session's proposal still go in.
    store.write_memory(mem("session-write"))
    store.write_memory(mem("elsewhere", scope="user", key="x", status="proposed", session_id="s2"))


def test_concurrent_proposals_never_exceed_the_session_s_bound(store: Store) -> None:
    for i in range(MAX_PENDING_PROPOSALS_PER_SESSION - 1):
        store.write_memory(mem(f"p{i}", scope="user", key=f"p{i}", status="proposed"))
    barrier = threading.Barrier(6)
    outcomes: list[str] = []
    lock = threading.Lock()

    def propose(i: int) -> None:
        barrier.wait(timeout=10)
        try:
            store.write_memory(mem(f"race-{i}", scope="user", key=f"race-{i}", status="proposed"))
            outcome = "stored"
        except MemoryLimitExceeded:
            outcome = "refused"
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=propose, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)

    assert sorted(outcomes) == ["refused"] * 5 + ["stored"]
    assert len(store.memories("alice", status="proposed")) == MAX_PENDING_PROPOSALS_PER_SESSION


def test_concurrent_accepted_writes_of_one_key_leave_one_accepted(store: Store) -> None:
    barrier = threading.Barrier(6)

    def write(i: int) -> None:
        barrier.wait(timeout=10)
        store.write_memory(mem(f"w{i}", scope="user", created_at=T0 + timedelta(seconds=i)))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)

    assert len(store.memories("alice", status="accepted")) == 1
    assert len(store.memories("alice", status="superseded")) == 5


# -- decisions ------------------------------------------------------------------------------


def test_accepting_a_proposal_records_who_decided_when_and_why(store: Store) -> None:
    store.write_memory(mem("p", scope="user", status="proposed"))

    decided = store.decide_memory("p", "accept", "alice", "useful")

    assert (decided.status, decided.decided_by, decided.reason) == ("accepted", "alice", "useful")
    assert decided.decided_at is not None and decided.decided_at.tzinfo is not None
    assert [m.memory_id for m in store.visible_memories("alice", "s-any", "/any")] == ["p"]


def test_a_rejected_proposal_is_never_visible(store: Store) -> None:
    store.write_memory(mem("p", scope="user", status="proposed"))

    assert store.decide_memory("p", "reject", "alice", "wrong").status == "rejected"
    assert store.visible_memories("alice", "s1", "/srv/ws") == []


def test_the_same_decision_again_returns_the_record_unchanged(store: Store) -> None:
    store.write_memory(mem("p", scope="workspace", status="proposed"))
    first = store.decide_memory("p", "reject", "alice", "no")

    assert store.decide_memory("p", "reject", "alice", "changed my mind about why") == first


def test_accepting_again_after_a_later_memory_superseded_it_returns_the_record_unchanged(store: Store) -> None:
    store.write_memory(mem("p", scope="user", status="proposed"))
    store.decide_memory("p", "accept", "alice")
    store.write_memory(mem("later", scope="user", status="proposed", created_at=T0 + timedelta(seconds=1)))
    store.decide_memory("later", "accept", "alice")

    again = store.decide_memory("p", "accept", "alice")

    assert again.status == "superseded" and again.decided_by == "alice"


def test_the_other_decision_on_a_decided_proposal_is_refused(store: Store) -> None:
    store.write_memory(mem("p", scope="user", status="proposed"))
    store.decide_memory("p", "accept", "alice")

    with pytest.raises(MemoryAlreadyDecided, match="it is accepted by alice") as caught:
        store.decide_memory("p", "reject", "alice")

    assert caught.value.status == "accepted"
    assert store.memory("p").status == "accepted"


def test_a_session_scope_memory_was_never_a_proposal_and_cannot_be_decided(store: Store) -> None:
    store.write_memory(mem("s"))

    with pytest.raises(MemoryAlreadyDecided):
        store.decide_memory("s", "accept", "alice")
    with pytest.raises(MemoryAlreadyDecided):
        store.decide_memory("s", "reject", "alice")


def test_deciding_an_unknown_memory_raises_memory_not_found(store: Store) -> None:
    with pytest.raises(MemoryNotFound, match="no memory 'nope'"):
        store.decide_memory("nope", "accept", "alice")


def test_another_principal_cannot_decide_an_owner_s_proposal_and_learns_nothing(store: Store) -> None:
    store.write_memory(mem("p", scope="user", status="proposed"))

    with pytest.raises(MemoryNotFound, match="no memory 'p'"):
        store.decide_memory("p", "accept", "mallory")

    assert store.memory("p").status == "proposed"


def test_accepting_a_proposal_supersedes_only_its_own_workspace_s_memory(store: Store) -> None:
    store.write_memory(mem("here", scope="workspace"))
    store.write_memory(mem("there", scope="workspace", workspace="/srv/other"))
    store.write_memory(mem("p", scope="workspace", status="proposed", created_at=T0 + timedelta(seconds=1)))

    store.decide_memory("p", "accept", "alice")

    assert (store.memory("here").status, store.memory("there").status) == ("superseded", "accepted")


# -- migration ------------------------------------------------------------------------------


def test_migration_0006_creates_the_memories_table_and_downgrades_to_0005(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    Store.open(url).close()
    engine = engine_module.make_engine(url)
    try:
        indexes = {ix["name"] for ix in inspect(engine).get_indexes("memories")}
        assert {"ix_memories_owner_status", "ix_memories_session_id"} <= indexes
        with engine_module.ALEMBIC_LOCK, engine.connect() as conn, conn.begin():
            config = Config()
            config.set_main_option("script_location", str(engine_module.MIGRATIONS_DIR))
            config.attributes["connection"] = conn
            command.downgrade(config, "0005")
        assert "memories" not in set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_rewriting_one_key_again_and_again_keeps_the_dead_rows_bounded(store: Store) -> None:
    """Regression: 3,000 writes of one session memory left 2,999 superseded rows behind."""
    from agentrt.schemas import MAX_DEAD_MEMORIES_PER_OWNER

    fill(store, MAX_DEAD_MEMORIES_PER_OWNER, status="superseded")

    for i in range(5):
        store.write_memory(mem(f"again-{i}", key="same"))

    statuses = [m.status for m in store.memories("alice", limit=10_000)]
    assert statuses.count("superseded") == MAX_DEAD_MEMORIES_PER_OWNER - 1
    assert [m.memory_id for m in store.memories("alice", status="accepted")] == ["again-4"]


def test_one_session_cannot_hold_more_session_memories_than_its_bound(store: Store) -> None:
    from agentrt.schemas import MAX_SESSION_MEMORIES_PER_SESSION

    rows = [mem(f"s-{i}", key=f"k-{i}").model_dump() for i in range(MAX_SESSION_MEMORIES_PER_SESSION)]
    with store.transaction() as conn:
        conn.execute(insert(memories_table), rows)

    with pytest.raises(MemoryLimitExceeded, match="session memories"):
        store.write_memory(mem("one-more", key="new"))
    store.write_memory(mem("rewrite", key="k-3"))  # a key it holds is rewritten
    store.write_memory(mem("other-session", key="new", session_id="s2"))

    assert store.memory("one-more") is None and store.memory("rewrite").status == "accepted"


def test_the_owner_forgets_a_memory_and_a_stranger_cannot(store: Store) -> None:
    store.write_memory(mem("m1"))

    with pytest.raises(MemoryNotFound):
        store.forget_memory("m1", "mallory")
    forgotten = store.forget_memory("m1", "alice")

    assert forgotten.memory_id == "m1" and store.memory("m1") is None
    with pytest.raises(MemoryNotFound):
        store.forget_memory("m1", "alice")


def test_memories_filter_by_several_statuses(store: Store) -> None:
    store.write_memory(mem("a1", key="a"))
    store.write_memory(mem("p1", key="p", scope="user", status="proposed"))
    store.write_memory(mem("a2", key="a"))

    assert sorted(m.memory_id for m in store.memories("alice", status=("proposed", "accepted"))) == ["a2", "p1"]
