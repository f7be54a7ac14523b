"""The inbox and outcome memory (workflows/_inbox.py): the queue, operation results, and how turns ended."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrt.schemas import CompactOutcome, SessionState, SwitchModelResult, TurnOutcome
from agentrt.workflows import _inbox
from agentrt.workflows._inbox import FORGOTTEN_TURN, RECENT_OUTCOMES, Inbox

SESSION = "s-1"


def _inbox_over(state: SessionState | None = None) -> Inbox:
    return Inbox(state if state is not None else SessionState(), SESSION)


def _carried(state: SessionState) -> Inbox:
    """The inbox of the next run, after continue-as-new carried ``state`` through JSON."""
    return Inbox(SessionState.model_validate_json(state.model_dump_json()), SESSION)


def _ended(turn_id: str, status: str = "completed") -> TurnOutcome:
    return TurnOutcome(turn_id=turn_id, status=status)  # type: ignore[arg-type]


def _run_turns(inbox: Inbox, count: int) -> list[str]:
    """Queue, start and end ``count`` turns one after another; returns their ids."""
    turn_ids = []
    for _ in range(count):
        turn_id = inbox.add_message("alice", "hi")
        assert inbox.pop().op_id == turn_id
        inbox.record(_ended(turn_id))
        turn_ids.append(turn_id)
    return turn_ids


# ---------------------------------------------------------------- the queue


def test_messages_become_turns_numbered_turn_n() -> None:
    inbox = _inbox_over()
    assert [inbox.add_message("alice", "one"), inbox.add_message("alice", "two")] == ["turn-1", "turn-2"]
    assert len(inbox) == 2
    assert inbox.queued_turn_ids() == ["turn-1", "turn-2"]


def test_turn_numbering_continues_from_the_state() -> None:
    assert _inbox_over(SessionState(turn_counter=41)).add_message("alice", "hi") == "turn-42"


def test_operations_are_numbered_op_n_apart_from_turns() -> None:
    inbox = _inbox_over()
    inbox.add_message("alice", "hi")
    assert inbox.add_operation("switch_model", "alice", "small") == "op-1"
    assert inbox.add_operation("compact", "alice") == "op-2"
    assert inbox.add_message("alice", "again") == "turn-2"


def test_a_compaction_joins_one_already_queued() -> None:
    inbox = _inbox_over()
    first = inbox.add_operation("compact", "alice")
    inbox.add_message("alice", "hi")
    assert inbox.add_operation("compact", "bob") == first
    assert len(inbox) == 2


def test_a_compaction_after_the_queued_one_started_is_a_new_operation() -> None:
    inbox = _inbox_over()
    first = inbox.add_operation("compact", "alice")
    inbox.pop()
    assert inbox.add_operation("compact", "alice") != first


def test_model_switches_never_join() -> None:
    inbox = _inbox_over()
    assert inbox.add_operation("switch_model", "alice", "a") != inbox.add_operation("switch_model", "alice", "a")
    assert len(inbox) == 2


def test_pop_takes_the_oldest_entry() -> None:
    inbox = _inbox_over()
    inbox.add_message("alice", "first")
    inbox.add_operation("compact", "alice")
    queued = inbox.pop()
    assert (queued.kind, queued.op_id, queued.text) == ("message", "turn-1", "first")


def test_pop_leading_operation_takes_an_operation_at_the_head_of_the_queue() -> None:
    inbox = _inbox_over()
    switch = inbox.add_operation("switch_model", "alice", "big")
    inbox.add_message("alice", "one")
    inbox.add_operation("compact", "alice")
    taken = inbox.pop_leading_operation()
    assert taken is not None and (taken.op_id, taken.profile) == (switch, "big")
    assert [q.op_id for q in inbox.drain()] == ["turn-1", "op-2"]


def test_pop_leading_operation_leaves_an_operation_behind_a_message_in_its_place() -> None:
    inbox = _inbox_over()
    inbox.add_message("alice", "one")
    inbox.add_operation("switch_model", "alice", "big")
    assert inbox.pop_leading_operation() is None
    assert inbox.has_operation()
    assert [q.op_id for q in inbox.drain()] == ["turn-1", "op-1"]


def test_pop_leading_operation_with_only_messages_queued_takes_nothing() -> None:
    inbox = _inbox_over()
    inbox.add_message("alice", "one")
    assert inbox.pop_leading_operation() is None
    assert not inbox.has_operation()
    assert len(inbox) == 1


def test_has_operation_sees_an_operation_behind_messages() -> None:
    inbox = _inbox_over()
    inbox.add_message("alice", "one")
    inbox.add_operation("compact", "alice")
    assert inbox.has_operation()


def test_remove_turn_takes_a_queued_turn_out() -> None:
    inbox = _inbox_over()
    inbox.add_message("alice", "one")
    inbox.add_message("alice", "two")
    removed = inbox.remove_turn("turn-2")
    assert removed is not None and removed.text == "two"
    assert inbox.queued_turn_ids() == ["turn-1"]


def test_remove_turn_of_a_turn_not_queued_takes_nothing() -> None:
    inbox = _inbox_over()
    inbox.add_message("alice", "one")
    inbox.pop()
    op_id = inbox.add_operation("compact", "alice")
    assert inbox.remove_turn("turn-1") is None  # started already
    assert inbox.remove_turn("turn-7") is None  # never queued
    assert inbox.remove_turn(op_id) is None  # an operation, not a turn
    assert len(inbox) == 1


def test_remove_turns_takes_every_queued_turn_and_leaves_operations() -> None:
    inbox = _inbox_over()
    inbox.add_message("alice", "one")
    inbox.add_operation("switch_model", "alice", "big")
    inbox.add_message("alice", "two")
    inbox.add_operation("compact", "alice")
    assert [q.op_id for q in inbox.remove_turns()] == ["turn-1", "turn-2"]
    assert [q.op_id for q in inbox.drain()] == ["op-1", "op-2"]


def test_drain_empties_the_queue_and_returns_it_in_order() -> None:
    state = SessionState()
    inbox = _inbox_over(state)
    inbox.add_message("alice", "one")
    inbox.add_operation("compact", "alice")
    assert [q.op_id for q in inbox.drain()] == ["turn-1", "op-1"]
    assert len(inbox) == 0 and state.inbox == []


# ---------------------------------------------------------------- operation results


def test_an_operation_has_no_result_before_it_finishes() -> None:
    inbox = _inbox_over()
    op_id = inbox.add_operation("compact", "alice")
    inbox.expect(op_id)
    assert not inbox.has_result(op_id)


def test_a_result_collected_by_its_only_waiter_is_forgotten() -> None:
    inbox = _inbox_over()
    op_id = inbox.add_operation("compact", "alice")
    inbox.expect(op_id)
    result = CompactOutcome(compacted=True, summary_id=1)
    inbox.finish(op_id, result)
    assert inbox.collect(op_id) == result
    assert not inbox.has_result(op_id)


def test_a_joined_compaction_result_stays_until_every_waiter_collected_it() -> None:
    inbox = _inbox_over()
    op_id = inbox.add_operation("compact", "alice")
    inbox.expect(op_id)
    assert inbox.add_operation("compact", "bob") == op_id
    inbox.expect(op_id)
    result = CompactOutcome(compacted=False, reason="nothing to compact")
    inbox.finish(op_id, result)
    assert inbox.collect(op_id) == result
    assert inbox.has_result(op_id)
    assert inbox.collect(op_id) == result
    assert not inbox.has_result(op_id)


def test_results_of_different_operations_are_kept_apart() -> None:
    inbox = _inbox_over()
    switch = inbox.add_operation("switch_model", "alice", "big")
    compact = inbox.add_operation("compact", "alice")
    inbox.expect(switch)
    inbox.expect(compact)
    switched = SwitchModelResult(from_profile="a", profile="big", context_window=100, max_output_tokens=10)
    inbox.finish(switch, switched)
    inbox.finish(compact, "the session was archived first")
    assert inbox.collect(compact) == "the session was archived first"
    assert inbox.collect(switch) == switched


def test_collecting_a_result_nobody_published_raises() -> None:
    inbox = _inbox_over()
    inbox.expect("op-1")
    with pytest.raises(KeyError):
        inbox.collect("op-1")


# ---------------------------------------------------------------- outcomes


def test_a_recorded_outcome_is_answered() -> None:
    inbox = _inbox_over()
    turn_id = _run_turns(inbox, 1)[0]
    assert inbox.outcome(turn_id) == _ended(turn_id)
    assert inbox.unknown_or_forgotten(turn_id) is None


def test_a_queued_turn_is_known_and_has_no_outcome_yet() -> None:
    inbox = _inbox_over()
    turn_id = inbox.add_message("alice", "hi")
    assert inbox.unknown_or_forgotten(turn_id) is None
    assert inbox.outcome(turn_id) is None


def test_a_running_turn_is_known_and_has_no_outcome_yet() -> None:
    inbox = _inbox_over()
    turn_id = inbox.add_message("alice", "hi")
    inbox.pop()
    assert inbox.unknown_or_forgotten(turn_id) is None
    assert inbox.outcome(turn_id) is None


@pytest.mark.parametrize("turn_id", ["turn-3", "turn-0", "turn-x", "turn-", "op-1", "3", "turn-²", "turn-٢"])
def test_a_turn_the_session_never_numbered_is_unknown(turn_id: str) -> None:
    # "turn-²" passes str.isdigit() but int() rejects it: it raised ValueError in the wait_turn
    # validator and the turn query instead of saying the turn is unknown.
    inbox = _inbox_over()
    _run_turns(inbox, 2)
    assert inbox.unknown_or_forgotten(turn_id) == f"unknown turn {turn_id!r} in session {SESSION}"


def test_outcome_memory_holds_at_most_recent_outcomes() -> None:
    state = SessionState()
    inbox = _inbox_over(state)
    _run_turns(inbox, RECENT_OUTCOMES + 5)
    assert len(state.recent_outcomes) == RECENT_OUTCOMES
    assert state.recent_outcomes[0].turn_id == "turn-6"


def test_the_oldest_outcome_beyond_the_bound_is_reported_ended_in_an_earlier_run() -> None:
    inbox = _inbox_over()
    turn_ids = _run_turns(inbox, RECENT_OUTCOMES + 1)
    why = inbox.unknown_or_forgotten(turn_ids[0])
    assert why is not None and FORGOTTEN_TURN in why and "'turn-1'" in why and SESSION in why
    assert inbox.outcome(turn_ids[0]) is None
    assert inbox.unknown_or_forgotten(turn_ids[1]) is None


def test_recording_a_turn_again_replaces_its_outcome() -> None:
    state = SessionState()
    inbox = _inbox_over(state)
    inbox.add_message("alice", "hi")
    inbox.record(_ended("turn-1", "failed"))
    inbox.record(_ended("turn-1", "completed"))
    assert inbox.outcome("turn-1").status == "completed"  # type: ignore[union-attr]
    assert len(state.recent_outcomes) == 1


def test_a_running_turn_is_not_reported_forgotten_when_cancelled_queued_turns_push_outcomes_out() -> None:
    # turn-1 runs while more than RECENT_OUTCOMES queued turns are cancelled (cancel_turn with
    # include_queued): their outcomes evict each other, and turn-1 once read "ended in an earlier run".
    inbox = _inbox_over()
    running = inbox.add_message("alice", "long job")
    queued = [inbox.add_message("alice", f"m{i}") for i in range(RECENT_OUTCOMES + 1)]
    assert inbox.pop().op_id == running
    for turn in inbox.remove_turns():
        inbox.record(_ended(turn.op_id, "cancelled"))
    assert inbox.unknown_or_forgotten(running) is None
    assert FORGOTTEN_TURN in (inbox.unknown_or_forgotten(queued[0]) or "")


# ---------------------------------------------------------------- continue-as-new


def test_the_queue_survives_continue_as_new_in_order() -> None:
    state = SessionState()
    inbox = _inbox_over(state)
    inbox.add_message("alice", "one")
    inbox.add_operation("switch_model", "alice", "big")
    inbox.add_message("bob", "two")
    carried = _carried(state)
    assert [(q.op_id, q.principal) for q in carried.drain()] == [("turn-1", "alice"), ("op-1", "alice"), ("turn-2", "bob")]


def test_numbering_continues_after_continue_as_new() -> None:
    state = SessionState()
    inbox = _inbox_over(state)
    inbox.add_message("alice", "one")
    inbox.add_operation("switch_model", "alice", "big")
    carried = _carried(state)
    assert carried.add_message("alice", "two") == "turn-2"
    assert carried.add_operation("switch_model", "alice", "small") == "op-2"


def test_a_compaction_joins_one_queued_in_the_earlier_run() -> None:
    state = SessionState()
    op_id = _inbox_over(state).add_operation("compact", "alice")
    assert _carried(state).add_operation("compact", "alice") == op_id


def test_carried_outcomes_are_still_answered() -> None:
    state = SessionState()
    turn_ids = _run_turns(_inbox_over(state), 3)
    carried = _carried(state)
    assert [carried.outcome(t) for t in turn_ids] == [_ended(t) for t in turn_ids]
    assert all(carried.unknown_or_forgotten(t) is None for t in turn_ids)


def test_a_turn_older_than_the_carried_outcomes_is_reported_ended_in_an_earlier_run() -> None:
    state = SessionState()
    _run_turns(_inbox_over(state), RECENT_OUTCOMES + 2)
    carried = _carried(state)
    assert FORGOTTEN_TURN in (carried.unknown_or_forgotten("turn-2") or "")
    assert carried.unknown_or_forgotten("turn-3") is None


def test_a_carried_queued_turn_is_known_and_has_no_outcome() -> None:
    state = SessionState()
    inbox = _inbox_over(state)
    _run_turns(inbox, RECENT_OUTCOMES + 2)
    queued = inbox.add_message("alice", "still waiting")
    carried = _carried(state)
    assert carried.unknown_or_forgotten(queued) is None
    assert carried.outcome(queued) is None


def test_a_turn_forgotten_out_of_order_is_still_forgotten_after_continue_as_new() -> None:
    # turn-2 was cancelled while queued, before turn-1 ended, so it is evicted first and the
    # carried outcomes are turn-1, turn-3 ... : the next run once answered turn-2 as "not ended yet".
    state = SessionState()
    inbox = _inbox_over(state)
    first = inbox.add_message("alice", "one")
    second = inbox.add_message("alice", "two")
    inbox.pop()
    assert inbox.remove_turn(second) is not None
    inbox.record(_ended(second, "cancelled"))
    inbox.record(_ended(first))
    _run_turns(inbox, RECENT_OUTCOMES - 1)
    assert FORGOTTEN_TURN in (inbox.unknown_or_forgotten(second) or "")
    carried = _carried(state)
    assert FORGOTTEN_TURN in (carried.unknown_or_forgotten(second) or "")
    assert carried.unknown_or_forgotten(first) is None


def test_operation_results_do_not_travel_through_continue_as_new() -> None:
    state = SessionState()
    inbox = _inbox_over(state)
    op_id = inbox.add_operation("compact", "alice")
    inbox.pop()
    inbox.expect(op_id)
    inbox.finish(op_id, CompactOutcome(compacted=True))
    assert not _carried(state).has_result(op_id)


# ---------------------------------------------------------------- property

Step = tuple[str, int]
steps = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.just(0)),
        st.tuples(st.just("run"), st.just(0)),  # start the oldest queued turn (ending one that runs)
        st.tuples(st.just("end"), st.just(0)),  # end the running turn
        st.tuples(st.just("cancel_queued"), st.integers(0, 20)),  # cancel one queued turn by index
        st.tuples(st.just("cancel_all_queued"), st.just(0)),
        st.tuples(st.just("continue_as_new"), st.just(0)),  # only between turns, as the workflow does
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(bound=st.integers(1, 6), script=steps)
def test_every_turn_is_queued_running_answered_or_reported_forgotten(bound: int, script: list[Step]) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_inbox, "RECENT_OUTCOMES", bound)
        state = SessionState()
        inbox = _inbox_over(state)
        running: str | None = None
        recorded: set[str] = set()
        for action, index in script:
            if action == "send":
                inbox.add_message("alice", "hi")
            elif action in ("run", "end") and running is not None:
                inbox.record(_ended(running))
                recorded.add(running)
                running = None
            elif action == "run" and inbox.queued_turn_ids():
                running = inbox.pop().op_id
            elif action == "cancel_queued" and inbox.queued_turn_ids():
                turn_ids = inbox.queued_turn_ids()
                removed = inbox.remove_turn(turn_ids[index % len(turn_ids)])
                assert removed is not None
                inbox.record(_ended(removed.op_id, "cancelled"))
                recorded.add(removed.op_id)
            elif action == "cancel_all_queued":
                for removed in inbox.remove_turns():
                    inbox.record(_ended(removed.op_id, "cancelled"))
                    recorded.add(removed.op_id)
            elif action == "continue_as_new" and running is None:
                state = SessionState.model_validate_json(state.model_dump_json())
                inbox = _inbox_over(state)

            assert len(state.recent_outcomes) <= bound
            for number in range(1, state.turn_counter + 1):
                turn_id = f"turn-{number}"
                why = inbox.unknown_or_forgotten(turn_id)
                if turn_id in recorded:
                    answered = inbox.outcome(turn_id) is not None and why is None
                    forgotten = inbox.outcome(turn_id) is None and why is not None and FORGOTTEN_TURN in why
                    assert answered or forgotten, turn_id
                else:  # queued or running
                    assert why is None and inbox.outcome(turn_id) is None, turn_id
            assert inbox.unknown_or_forgotten(f"turn-{state.turn_counter + 1}") is not None
