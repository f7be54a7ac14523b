"""Memories through the activities: ``memory.decide`` (the owner's decision and its event, in one
transaction) and ``tool.execute`` carrying a ``memory.write``'s note to the workflow, retries
included. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from agentrt.activities import MemoryActivities, ToolActivities, build_activities
from agentrt.activities.tools import default_registry
from agentrt.schemas import (
    MEMORY_DECIDE,
    MemoryAccepted,
    MemoryDecideInput,
    MemoryRejected,
    SessionConfig,
    StoreAppendInput,
    ToolCall,
    ToolExecuteInput,
)
from agentrt.store import Store


@pytest.fixture
def store(db_store: Store) -> Store:
    db_store.append(StoreAppendInput(session_id="s1", config=SessionConfig(session_id="s1", owner="alice", workspace="/srv/ws")))
    return db_store


def execute(store: Store, call: ToolCall, key: str = "session-s1/turn-1/1/c1", position: int = 1):
    input = ToolExecuteInput(
        session_id="s1", turn_id="turn-1", call=call, workspace="/srv/ws", idempotency_key=key, result_position=position
    )
    return ActivityEnvironment().run(ToolActivities(default_registry(), store).execute, input)


def propose(store: Store, key: str = "editor") -> str:
    result = execute(store, ToolCall(id="c1", name="memory.write", arguments={"key": key, "text": "prefers vim", "scope": "user"}))
    assert result.memory is not None
    return result.memory.memory_id


def decide(store: Store, memory_id: str, decision: str = "accept", principal: str = "alice", events: list | None = None):
    input = MemoryDecideInput(
        session_id="s1", memory_id=memory_id, decision=decision, principal=principal, events=events or []  # type: ignore[arg-type]
    )
    return asyncio.run(ActivityEnvironment().run(MemoryActivities(store).decide, input))


def accepted_event(memory_id: str, seq: int = 7) -> MemoryAccepted:
    return MemoryAccepted(seq=seq, memory_id=memory_id, scope="user", key="editor", principal="alice")


# -- tool.execute -----------------------------------------------------------------------------


def test_a_memory_write_result_carries_its_memory_note_to_the_workflow(store: Store) -> None:
    result = execute(store, ToolCall(id="c1", name="memory.write", arguments={"key": "k", "text": "remember"}))

    assert result.ok and result.memory is not None
    assert (result.memory.status, result.memory.key, result.memory.preview) == ("accepted", "k", "remember")
    assert store.messages("s1")[0][1].text == "stored session memory k"


def test_a_retried_attempt_of_a_recorded_write_returns_the_same_note_without_writing_again(store: Store) -> None:
    call = ToolCall(id="c1", name="memory.write", arguments={"key": "k", "text": "remember", "scope": "workspace"})
    first = execute(store, call)

    again = execute(store, call)

    assert again.memory == first.memory and again.memory.status == "proposed"
    assert store.effect("session-s1/turn-1/1/c1").state == "applied"
    assert len(store.memories("alice")) == 1


def test_a_worker_key_in_a_memory_s_preview_does_not_reach_workflow_history(store: Store) -> None:
    key = "sk-live-0123456789abcdef"
    input = ToolExecuteInput(
        session_id="s1", turn_id="turn-1", idempotency_key="session-s1/turn-1/1/c1", result_position=1, workspace="/srv/ws",
        call=ToolCall(id="c1", name="memory.write", arguments={"key": "k", "text": f"the key is {key}"}),
    )

    result = ActivityEnvironment().run(ToolActivities(default_registry(), store, secrets=lambda: [key]).execute, input)

    assert result.memory is not None and key not in result.memory.preview


def test_a_failed_memory_write_carries_no_note(store: Store) -> None:
    result = execute(store, ToolCall(id="c1", name="memory.write", arguments={"key": "bad key", "text": "x"}))

    assert not result.ok and result.memory is None and result.error_type == "ToolArgumentsError"


def test_memory_recall_runs_through_tool_execute_with_the_worker_s_store(store: Store) -> None:
    execute(store, ToolCall(id="c1", name="memory.write", arguments={"key": "k", "text": "remember"}))

    result = execute(store, ToolCall(id="c2", name="memory.recall", arguments={}), key="session-s1/turn-1/3/c2", position=3)

    assert result.ok and '"remember"' in result.preview and result.memory is None


# -- memory.decide ----------------------------------------------------------------------------


def test_decide_accepts_the_proposal_and_writes_its_event_in_the_same_transaction(store: Store) -> None:
    memory_id = propose(store)

    record = decide(store, memory_id, events=[accepted_event(memory_id)])

    assert (record.status, record.decided_by) == ("accepted", "alice")
    assert [e.type for e in store.events("s1")] == ["MemoryAccepted"]


def test_a_retried_decision_returns_the_same_record_and_writes_the_event_once(store: Store) -> None:
    memory_id = propose(store)
    first = decide(store, memory_id, events=[accepted_event(memory_id)])

    again = decide(store, memory_id, events=[accepted_event(memory_id)])

    assert again == first
    assert len(store.events("s1")) == 1


def test_the_other_decision_fails_without_retry_and_writes_no_event(store: Store) -> None:
    memory_id = propose(store)
    decide(store, memory_id)
    rejected = MemoryRejected(seq=8, memory_id=memory_id, scope="user", key="editor", principal="alice")

    with pytest.raises(ApplicationError) as caught:
        decide(store, memory_id, "reject", events=[rejected])

    assert caught.value.type == "MemoryAlreadyDecided" and caught.value.non_retryable
    assert store.events("s1") == [] and store.memory(memory_id).status == "accepted"


def test_an_unknown_memory_fails_without_retry(store: Store) -> None:
    with pytest.raises(ApplicationError) as caught:
        decide(store, "mem-0000000000000000")

    assert caught.value.type == "MemoryNotFound" and caught.value.non_retryable


def test_another_principal_cannot_decide_the_owner_s_proposal(store: Store) -> None:
    memory_id = propose(store)

    with pytest.raises(ApplicationError) as caught:
        decide(store, memory_id, principal="mallory")

    assert caught.value.type == "MemoryNotFound"
    assert store.memory(memory_id).status == "proposed"


@pytest.mark.parametrize(("role", "registered"), [("all", True), ("models", True), ("tools", False)])
def test_memory_decide_runs_on_the_session_side_only(tmp_path: Path, role: str, registered: bool) -> None:
    from tests.activities.test_model_context import Profiles

    with Store.open(f"sqlite:///{tmp_path / 'a.db'}") as store:
        names = {getattr(fn, "__temporal_activity_definition").name for fn in build_activities(Profiles(), store, default_registry(), role)}  # type: ignore[arg-type]

    assert (MEMORY_DECIDE in names) is registered
