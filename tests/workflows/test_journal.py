"""The event journal (workflows/_journal.py): numbering, staging for the store, pages, unanswered calls."""

from __future__ import annotations

from datetime import datetime, timezone

from agentrt.schemas import (
    AssistantMessageCompleted,
    AutonomousTaskNudged,
    GraphState,
    Message,
    ModelToolCallRequested,
    SessionState,
    TaskCancelled,
    TaskState,
    ToolCall,
    ToolInvocationCompleted,
    ToolInvocationFailed,
    TurnStarted,
    Usage,
)
from agentrt.workflows._journal import EventJournal, Journal

NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def _carried(state: SessionState) -> SessionState:
    return SessionState.model_validate_json(state.model_dump_json())


def _started(turn_id: str = "turn-1") -> TurnStarted:
    return TurnStarted(turn_id=turn_id)


def _call(call_id: str) -> ToolCall:
    return ToolCall(id=call_id, name="fs.read", arguments={"path": "a.md"})


def _assistant(turn_id: str, calls: int) -> AssistantMessageCompleted:
    """Emitted before the message's ``ModelToolCallRequested`` events, as the workflow does."""
    return AssistantMessageCompleted(turn_id=turn_id, round=1, text="", tool_calls=calls, usage=Usage(), position=0)


def _requested(turn_id: str, call_id: str) -> ModelToolCallRequested:
    return ModelToolCallRequested(turn_id=turn_id, round=1, call=_call(call_id))


def _completed(turn_id: str, call_id: str) -> ToolInvocationCompleted:
    return ToolInvocationCompleted(turn_id=turn_id, call_id=call_id, tool="fs.read", preview="", size_bytes=0, position=3)


# ---------------------------------------------------------------- numbering


def test_events_are_numbered_from_one_and_stamped_with_now() -> None:
    journal = EventJournal(SessionState())
    first, second = journal.emit(_started(), NOW), journal.emit(_started(), NOW)
    assert (first.seq, second.seq) == (1, 2)
    assert first.at == NOW
    assert journal.last_seq == 2


def test_numbering_continues_from_the_state() -> None:
    journal = EventJournal(SessionState(seq=10))
    assert journal.emit(_started(), NOW).seq == 11


def test_first_seq_of_a_fresh_state_is_the_next_event() -> None:
    assert EventJournal(SessionState(seq=10)).first_seq == 11


def test_first_seq_of_a_carried_state_with_unflushed_events_is_the_oldest_unflushed() -> None:
    state = SessionState()
    journal = EventJournal(state)
    for _ in range(5):
        journal.emit(_started(), NOW)
    journal.flushed(3, 0)
    carried = EventJournal(_carried(state))
    assert carried.first_seq == 4
    assert [e.seq for e in carried.events] == [4, 5]
    assert carried.emit(_started(), NOW).seq == 6


def test_first_seq_of_a_carried_state_with_everything_flushed_is_the_next_event() -> None:
    state = SessionState()
    journal = EventJournal(state)
    journal.emit(_started(), NOW)
    journal.flushed(1, 0)
    carried = EventJournal(_carried(state))
    assert carried.first_seq == 2 and carried.events == []


def test_positions_are_taken_in_order_and_continue_from_the_state() -> None:
    journal = EventJournal(SessionState(next_position=7))
    assert [journal.take_position(), journal.take_position()] == [7, 8]


# ---------------------------------------------------------------- staging and flushing


def test_emitted_events_and_staged_messages_are_unflushed_oldest_first() -> None:
    journal = EventJournal(SessionState())
    journal.emit(_started(), NOW)
    journal.emit(_started(), NOW)
    journal.stage_message(0, "turn-1", Message(role="user", text="hi"))
    events, messages = journal.unflushed()
    assert [e.seq for e in events] == [1, 2]
    assert [(m.position, m.turn_id, m.message.text) for m in messages] == [(0, "turn-1", "hi")]


def test_unflushed_returns_copies_the_caller_cannot_change_the_journal_through() -> None:
    journal = EventJournal(SessionState())
    journal.emit(_started(), NOW)
    events, messages = journal.unflushed()
    events.clear()
    messages.append(None)  # type: ignore[arg-type]
    assert [len(part) for part in journal.unflushed()] == [1, 0]


def test_flushed_drops_only_what_was_written() -> None:
    state = SessionState()
    journal = EventJournal(state)
    journal.emit(_started(), NOW)
    journal.stage_message(0, "turn-1", Message(role="user", text="a"))
    written_events, written_messages = journal.unflushed()
    # More arrives while the store write runs.
    journal.emit(_started(), NOW)
    journal.stage_message(1, "turn-1", Message(role="assistant", text="b"))
    journal.flushed(len(written_events), len(written_messages))
    events, messages = journal.unflushed()
    assert [e.seq for e in events] == [2]
    assert [m.position for m in messages] == [1]


def test_flushed_keeps_events_for_the_events_query() -> None:
    journal = EventJournal(SessionState())
    journal.emit(_started(), NOW)
    journal.flushed(1, 0)
    assert [e.seq for e in journal.page(0, 10).events] == [1]


def test_stage_message_counts_text_bytes_and_tool_calls() -> None:
    journal = EventJournal(SessionState())
    raw = ToolCall(id="c1", name="fs.read", arguments={"path": "x"}, arguments_raw='{"path":"x"}')
    parsed = ToolCall(id="c2", name="ls", arguments={"a": 1})
    size = journal.stage_message(0, "turn-1", Message(role="assistant", text="héllo", tool_calls=[raw, parsed]))
    assert size == len("héllo".encode()) + len("fs.read") + len('{"path":"x"}') + len("ls") + len('{"a": 1}')


# ---------------------------------------------------------------- page


def test_page_returns_events_after_since_seq_up_to_limit() -> None:
    journal = EventJournal(SessionState())
    for _ in range(5):
        journal.emit(_started(), NOW)
    page = journal.page(1, 2)
    assert [e.seq for e in page.events] == [2, 3]
    assert (page.last_seq, page.first_seq) == (5, 1)


def test_page_past_the_last_event_is_empty_and_says_the_last_seq() -> None:
    journal = EventJournal(SessionState())
    journal.emit(_started(), NOW)
    page = journal.page(1, 10)
    assert page.events == [] and page.last_seq == 1


def test_page_of_a_carried_run_says_where_its_events_begin() -> None:
    state = SessionState(seq=40)
    journal = EventJournal(state)
    journal.emit(_started(), NOW)
    page = journal.page(0, 10)
    assert [e.seq for e in page.events] == [41]
    assert page.first_seq == 41


# ---------------------------------------------------------------- unanswered_calls


def test_calls_of_the_latest_assistant_message_without_results_are_unanswered() -> None:
    journal = EventJournal(SessionState())
    journal.emit(_assistant("turn-1", 2), NOW)
    journal.emit(_requested("turn-1", "c1"), NOW)
    journal.emit(_requested("turn-1", "c2"), NOW)
    journal.emit(_completed("turn-1", "c1"), NOW)
    assert [c.id for c in journal.unanswered_calls("turn-1")] == ["c2"]


def test_calls_of_an_earlier_assistant_message_are_not_unanswered() -> None:
    journal = EventJournal(SessionState())
    journal.emit(_assistant("turn-1", 1), NOW)
    journal.emit(_requested("turn-1", "old"), NOW)
    journal.emit(_assistant("turn-1", 1), NOW)
    journal.emit(_requested("turn-1", "new"), NOW)
    assert [c.id for c in journal.unanswered_calls("turn-1")] == ["new"]


def test_a_failure_with_a_result_message_answers_a_call() -> None:
    journal = EventJournal(SessionState())
    journal.emit(_assistant("turn-1", 1), NOW)
    journal.emit(_requested("turn-1", "c1"), NOW)
    journal.emit(
        ToolInvocationFailed(turn_id="turn-1", call_id="c1", tool="fs.read", reason="denied", error="no", position=2), NOW
    )
    assert journal.unanswered_calls("turn-1") == []


def test_a_failure_without_a_result_message_leaves_the_call_unanswered() -> None:
    journal = EventJournal(SessionState())
    journal.emit(_assistant("turn-1", 1), NOW)
    journal.emit(_requested("turn-1", "c1"), NOW)
    journal.emit(ToolInvocationFailed(turn_id="turn-1", call_id="c1", tool="fs.read", reason="tool_error", error="x"), NOW)
    assert [c.id for c in journal.unanswered_calls("turn-1")] == ["c1"]


def test_unanswered_calls_look_only_at_the_named_turn() -> None:
    journal = EventJournal(SessionState())
    journal.emit(_assistant("turn-1", 1), NOW)
    journal.emit(_requested("turn-1", "c1"), NOW)
    journal.emit(_assistant("turn-2", 1), NOW)
    journal.emit(_requested("turn-2", "c2"), NOW)
    journal.emit(_completed("turn-1", "c2"), NOW)  # same call id, another turn: answers nothing in turn-2
    assert [c.id for c in journal.unanswered_calls("turn-2")] == ["c2"]
    assert [c.id for c in journal.unanswered_calls("turn-1")] == ["c1"]


def test_a_turn_without_tool_calls_has_none_unanswered() -> None:
    journal = EventJournal(SessionState())
    journal.emit(_started(), NOW)
    journal.emit(_assistant("turn-1", 0), NOW)
    assert journal.unanswered_calls("turn-1") == []


# ---------------------------------------------------------------- one journal type for tasks and graphs


def test_a_task_journal_numbers_events_and_pages_them_from_the_current_run() -> None:
    state = TaskState()
    journal = Journal(state)
    for _ in range(3):
        journal.emit(AutonomousTaskNudged(principal="alice"), NOW)
    assert [e.seq for e in journal.page(1, 10).events] == [2, 3]
    staged = journal.take()
    journal.written(staged[:2])
    assert [e.seq for e in state.unflushed_events] == [3]
    carried = Journal(TaskState.model_validate_json(state.model_dump_json()))  # a continued run: the carried, unwritten events
    assert carried.first_seq == 3


def test_a_graph_journal_answers_from_every_event_it_kept_and_stages_them_for_the_store() -> None:
    state = GraphState()
    journal = Journal(state, state.events)
    journal.emit(TaskCancelled(principal="alice"), NOW)
    journal.emit(TaskCancelled(principal="bob"), NOW)
    journal.written(journal.take())
    assert not state.unflushed_events
    page = journal.page(0, 10)
    assert ([e.seq for e in page.events], page.first_seq, page.last_seq) == ([1, 2], 1, 2)
    assert [e.seq for e in state.events] == [1, 2]
