"""The audit log in the store on SQLite and PostgreSQL: acts derived from the events a session,
task or graph records (each once, however often the write is retried), acts on the store itself
(memories), the bounds on what a row keeps, and the listing's filters."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData, text

from agentrt.schemas import (
    AutonomousTaskBudgetRaised,
    AutonomousTaskPaused,
    AutonomousTaskResumed,
    Budget,
    CancelRequested,
    CapabilityToken,
    EffectReconciled,
    ElicitationAnswered,
    GraphRecordInput,
    MemoryRecord,
    OperatorActed,
    PermissionDenied,
    PermissionGranted,
    SessionArchived,
    SessionCancelled,
    SessionConfig,
    SessionPaused,
    SessionResumed,
    Spend,
    StoreAppendInput,
    TaskCancelled,
    TaskGraphPaused,
    TaskGraphResumed,
    TaskPlanApproved,
    TaskPlanRejected,
    TaskRetried,
    TaskRecordInput,
    ToolCallEdited,
)
from agentrt.store import Store
from agentrt.store._audit_acts import ENDED_AFTER_TURN, MAX_AUDIT_DETAIL_CHARS, MAX_AUDIT_REASON_CHARS
from agentrt.store._models import audit_log

AT = datetime(2026, 12, 6, 9, 0, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def empty_audit_log(store: Store) -> Iterator[None]:
    """The PostgreSQL database is shared by the test session: start and leave the audit log empty."""
    if store.engine.dialect.name == "postgresql":
        with store.engine.begin() as conn:
            conn.execute(text("TRUNCATE audit_log, tasks, task_events, graphs, graph_events"))
    yield
    if store.engine.dialect.name == "postgresql":
        with store.engine.begin() as conn:
            conn.execute(text("TRUNCATE audit_log, tasks, task_events, graphs, graph_events"))


def append(store: Store, *events: object, owner: str = "alice") -> None:
    config = SessionConfig(session_id="s1", owner=owner, workspace="/srv/ws", operators=["ops"])
    store.append(StoreAppendInput(session_id="s1", config=config, events=list(events)))  # type: ignore[arg-type]


def test_the_audit_table_matches_its_migration(store: Store) -> None:
    ours = MetaData()
    audit_log.to_metadata(ours)
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), ours)
    assert [d for d in diff if d[0] != "remove_table" and "audit_log" in str(d)] == []


def test_an_approval_is_recorded_with_who_what_on_what_when_and_why(store: Store) -> None:
    append(store, PermissionGranted(seq=7, at=AT, turn_id="turn-1", request_id="req-1", call_id="c1", principal="alice", reason="looks fine"))
    [entry] = store.audit()
    assert (entry.principal, entry.action, entry.target_kind, entry.target_id, entry.owner) == ("alice", "approve", "session", "s1", "alice")
    assert entry.at == AT and entry.reason == "looks fine"
    assert entry.detail == {"event": "PermissionGranted", "seq": 7, "turn_id": "turn-1", "request_id": "req-1", "call_id": "c1", "as": "owner"}


def test_a_retried_append_adds_no_second_row(store: Store) -> None:
    denied = PermissionDenied(seq=3, at=AT, turn_id="turn-1", request_id="req-1", call_id="c1", principal="alice", reason="no")
    append(store, denied)
    append(store, denied)
    store.append(StoreAppendInput(session_id="s1", events=[denied]))
    assert [e.action for e in store.audit()] == ["deny"]


def test_a_grant_for_the_session_used_again_is_not_a_second_act(store: Store) -> None:
    append(
        store,
        PermissionGranted(seq=3, at=AT, turn_id="turn-1", request_id="req-1", call_id="c1", principal="alice", scope="session"),
        PermissionGranted(
            seq=9, at=AT, turn_id="turn-2", request_id="req-1", call_id="c7", principal="alice",
            reason="granted for this session on req-1 (write_file)", scope="session",
        ),
    )
    [entry] = store.audit()
    assert entry.detail["call_id"] == "c1" and entry.detail["scope"] == "session"


def test_a_call_the_policy_allowed_without_asking_is_not_an_act(store: Store) -> None:
    append(
        store,
        PermissionGranted(
            seq=3, at=AT, turn_id="turn-1", call_id="c1", scope="policy", rule="approval.read_only = allow",
            reason="policy rule for read_only calls: allow",
        ),
    )
    assert store.audit() == []


def test_a_denial_by_timeout_and_the_end_of_a_one_turn_session_are_not_acts(store: Store) -> None:
    append(
        store,
        PermissionDenied(seq=3, at=AT, request_id="req-1", call_id="c1", principal="system", reason="no decision within 60 s"),
        SessionArchived(seq=4, at=AT, principal="alice", reason=ENDED_AFTER_TURN),
    )
    assert store.audit() == []


def test_ended_after_turn_is_the_session_workflows_reason() -> None:
    from agentrt.workflows.session import ENDED_AFTER_TURN as WORKFLOW_REASON

    assert ENDED_AFTER_TURN == WORKFLOW_REASON


def test_a_cancel_is_one_act_however_many_events_record_it(store: Store) -> None:
    append(
        store,
        OperatorActed(seq=2, at=AT, principal="ops", action="cancel", target=None, reason="runaway"),
        CancelRequested(seq=3, at=AT, turn_id="turn-1", principal="ops", reason="runaway"),
        SessionCancelled(seq=6, at=AT + timedelta(seconds=1), turn_id="turn-1", principal="ops", reason="runaway"),
    )
    [entry] = store.audit()
    assert (entry.principal, entry.action, entry.reason, entry.at, entry.detail["as"]) == ("ops", "cancel", "runaway", AT, "operator")


def test_an_archive_is_one_act_and_the_cancels_it_causes_are_not(store: Store) -> None:
    append(
        store,
        CancelRequested(seq=3, at=AT, turn_id="turn-1", principal="alice", reason="session archived"),
        SessionCancelled(seq=4, at=AT, turn_id="turn-1", principal="alice", reason="session archived"),
        SessionArchived(seq=5, at=AT, principal="alice", reason="done with it"),
    )
    assert [(e.action, e.reason) for e in store.audit()] == [("archive", "done with it")]


def test_a_workflow_cancelled_from_temporal_is_an_archive_by_temporal(store: Store) -> None:
    append(
        store,
        CancelRequested(seq=3, at=AT, turn_id="turn-1", principal="temporal", reason="workflow cancelled"),
        SessionArchived(seq=5, at=AT, principal="temporal", reason="workflow cancelled"),
    )
    [entry] = store.audit()
    assert (entry.principal, entry.action, entry.detail["as"]) == ("temporal", "archive", "temporal")


def test_an_operators_reason_fills_an_answer_that_has_none(store: Store) -> None:
    append(
        store,
        ElicitationAnswered(seq=3, at=AT, turn_id="turn-1", request_id="req-2", call_id="c1", principal="ops", action="decline"),
        OperatorActed(seq=4, at=AT, principal="ops", action="answer", target="req-2", reason="the owner is away"),
    )
    [entry] = store.audit()
    assert (entry.action, entry.reason, entry.detail["answer"]) == ("answer", "the owner is away", "decline")


def test_edit_reconcile_and_raise_budget_are_acts(store: Store) -> None:
    from agentrt.schemas import BudgetRaised

    append(
        store,
        ToolCallEdited(seq=3, at=AT, request_id="req-1", call_id="c1", principal="alice", arguments={"path": "b.txt"}, arguments_sha256="ab"),
        EffectReconciled(seq=4, at=AT, request_id="req-2", call_id="c2", outcome="applied", principal="alice", note="saw it"),
        BudgetRaised(seq=5, at=AT, principal="alice", budget=Budget(max_tokens=500), reason="more"),
    )
    by_action = {e.action: e for e in store.audit()}
    assert (by_action["edit"].detail["fields"], by_action["edit"].detail["arguments_sha256"]) == (["path"], "ab")
    assert "b.txt" not in str(by_action["edit"].detail)
    assert (by_action["reconcile"].reason, by_action["reconcile"].detail["outcome"]) == ("saw it", "applied")
    assert by_action["raise_budget"].detail["budget"] == {"max_tokens": 500}


def test_a_long_reason_and_a_big_detail_are_cut_to_their_bounds(store: Store) -> None:
    from agentrt.schemas import AutonomousTaskGoalAmended

    append(
        store,
        ToolCallEdited(
            seq=3, at=AT, request_id="req-1", call_id="c1", principal="alice",
            arguments={f"key{i}": "x" for i in range(1_000)}, arguments_sha256="ab",
        ),
        PermissionDenied(seq=4, at=AT, request_id="req-2", call_id="c2", principal="alice", reason="r" * 50_000),
    )
    amended = AutonomousTaskGoalAmended(seq=2, at=AT, principal="alice", goal="g" * 10_000, criteria=["c" * 1_000] * 50)
    store.record_task(TaskRecordInput(task_id="t1", owner="alice", goal="g", status="waiting", workspace="/w", spend=Spend(), events=[amended]))
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT action, reason, detail_json FROM audit_log")).all()
    assert {action for action, _, _ in rows} == {"edit", "deny", "amend_goal"}
    for action, reason, detail_json in rows:
        assert len(detail_json) <= MAX_AUDIT_DETAIL_CHARS
        if action == "deny":
            assert len(reason) == MAX_AUDIT_REASON_CHARS
    by_action = {e.action: e for e in store.audit()}
    assert by_action["edit"].detail["cut"] is True and by_action["edit"].detail["arguments_sha256"] == "ab"
    goal = by_action["amend_goal"].detail["goal"]
    assert by_action["amend_goal"].detail["cut"] is True and goal.startswith("ggg") and goal.endswith("…") and len(goal) == 300


def test_task_controls_are_acts_and_an_automatic_pause_is_not(store: Store) -> None:
    events = [
        AutonomousTaskPaused(seq=2, at=AT, principal=None),
        AutonomousTaskPaused(seq=3, at=AT, principal="alice", reason="lunch"),
        AutonomousTaskResumed(seq=4, at=AT, principal="alice"),
        AutonomousTaskBudgetRaised(seq=5, at=AT, principal="ops", budget=Budget(max_cost_usd=2.0), max_sessions=4, reason="needed"),
    ]
    record = TaskRecordInput(task_id="t1", owner="alice", goal="g", status="running", workspace="/w", spend=Spend(), events=events)
    store.record_task(record)
    store.record_task(record)  # a retried task.record
    entries = store.audit(target="t1")
    assert [(e.action, e.principal, e.target_kind) for e in entries] == [
        ("raise_budget", "ops", "task"), ("resume", "alice", "task"), ("pause", "alice", "task"),
    ]
    assert entries[0].detail["as"] == "operator" and entries[0].detail["max_sessions"] == 4


def test_graph_plan_decisions_and_cancel_are_acts_and_automatic_ones_are_not(store: Store) -> None:
    def token(automatic: bool) -> CapabilityToken:
        return CapabilityToken(
            token_id="tk", graph_id="g1", plan_digest="d", approved_by="alice", approved_at=AT, automatic=automatic,
            risk_level="low", grants={},
        )

    events = [
        TaskPlanApproved(seq=2, at=AT, principal="agentrt", token=token(True)),
        TaskPlanApproved(seq=3, at=AT, principal="alice", reason="ok", token=token(False)),
        TaskPlanRejected(seq=4, at=AT, principal="alice", reason="no"),
        TaskCancelled(seq=5, at=AT, node_id="n1", principal="alice", reason="stop"),
        TaskCancelled(seq=6, at=AT, principal="alice", reason="stop"),
    ]
    store.record_graph(GraphRecordInput(graph_id="g1", owner="alice", goal="g", status="cancelled", workspace="/w", events=events))
    assert [e.action for e in store.audit(target="g1")] == ["cancel", "reject_plan", "approve_plan"]


def test_a_node_retried_by_hand_is_an_act_and_a_retry_the_graph_made_itself_is_not(store: Store) -> None:
    events = [
        TaskRetried(seq=2, at=AT, node_id="a", attempt=2, feedback="findings"),
        TaskRetried(seq=3, at=AT, node_id="a", attempt=3, feedback="error", principal="alice", reason="try again", unblocked=["b"]),
    ]
    record = GraphRecordInput(graph_id="g1", owner="alice", goal="g", status="executing", workspace="/w", events=events)
    store.record_graph(record)
    store.record_graph(record)  # a retried graph.record
    [entry] = store.audit(target="g1")
    assert (entry.principal, entry.action, entry.target_kind, entry.reason) == ("alice", "retry_node", "graph", "try again")
    assert (entry.detail["node_id"], entry.detail["attempt"], entry.detail["unblocked"]) == ("a", 3, ["b"])


def test_a_pause_and_a_resume_of_a_session_and_of_a_graph_are_acts(store: Store) -> None:
    append(
        store,
        SessionPaused(seq=4, at=AT, principal="ops", reason="incident 42"),
        SessionResumed(seq=5, at=AT, principal="alice", paused_seconds=61.25),
    )
    store.record_graph(GraphRecordInput(graph_id="g1", owner="alice", goal="g", status="executing", workspace="/w", events=[
        TaskGraphPaused(seq=2, at=AT, principal="alice", reason="hold"), TaskGraphResumed(seq=3, at=AT, principal="alice"),
    ]))
    session = store.audit(target="s1")
    assert [(e.action, e.principal, e.reason) for e in session] == [("resume", "alice", None), ("pause", "ops", "incident 42")]
    assert session[0].detail["paused_seconds"] == 61.25 and session[1].detail["as"] == "operator"
    assert [(e.action, e.target_kind) for e in store.audit(target="g1")] == [("resume", "graph"), ("pause", "graph")]


def test_a_memory_decision_and_forget_on_the_store_are_recorded(store: Store) -> None:
    store.write_memory(MemoryRecord(
        memory_id="m1", owner="alice", scope="user", key="k", text="secret text", status="proposed",
        session_id="s1", workspace="/w", created_at=AT,
    ))
    store.decide_memory("m1", "reject", "alice", "wrong")
    store.decide_memory("m1", "reject", "alice", "wrong")  # a retried activity: unchanged
    entries = store.audit(target="m1")
    assert [(e.action, e.reason, e.target_kind) for e in entries] == [("reject_memory", "wrong", "memory")]
    assert "secret text" not in str(entries[0].detail)


def test_the_listing_filters_by_principal_action_target_owner_and_time(store: Store) -> None:
    append(
        store,
        PermissionGranted(seq=1, at=AT, request_id="req-1", call_id="c1", principal="alice"),
        PermissionDenied(seq=2, at=AT + timedelta(hours=1), request_id="req-2", call_id="c2", principal="ops", reason="no"),
    )
    store.record_act("bob", "forget_memory", "memory", "m9", owner="bob", at=AT + timedelta(hours=2))
    assert [e.action for e in store.audit()] == ["forget_memory", "deny", "approve"]
    assert [e.action for e in store.audit(principal="ops")] == ["deny"]
    assert [e.action for e in store.audit(action="approve")] == ["approve"]
    assert [e.action for e in store.audit(target="m9")] == ["forget_memory"]
    assert [e.action for e in store.audit(owner="alice")] == ["deny", "approve"]
    assert [e.action for e in store.audit(since=AT + timedelta(minutes=30))] == ["forget_memory", "deny"]
    assert [e.action for e in store.audit(limit=1)] == ["forget_memory"]
    with pytest.raises(ValueError):
        store.audit(limit=0)


def test_an_act_recorded_twice_under_its_key_is_one_row(store: Store) -> None:
    store.record_act("ops", "raise_quota", "tenant", "acme", reason="launch", key="tenant:acme:quota:1")
    store.record_act("ops", "raise_quota", "tenant", "acme", reason="launch", key="tenant:acme:quota:1")
    assert len(store.audit(target="acme")) == 1


def test_a_child_session_cancelled_by_temporal_names_its_parent(store: Store) -> None:
    from agentrt.schemas import SessionParent

    config = SessionConfig(session_id="c1", owner="alice", workspace="/srv/ws", parent=SessionParent(kind="task", id="t9", number=2))
    store.append(StoreAppendInput(session_id="c1", config=config))
    store.append(StoreAppendInput(session_id="c1", events=[SessionArchived(seq=4, at=AT, principal="temporal", reason="workflow cancelled")]))
    [entry] = store.audit(target="c1")
    assert (entry.principal, entry.action, entry.detail["parent"]) == ("temporal", "archive", "task:t9")
