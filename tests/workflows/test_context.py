"""Context planning (workflows/context.py): pure functions, so tested directly and by property."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentrt.schemas import ContextState
from agentrt.workflows import context


def _conversation(turns: int, result_bytes: int = 5_000, keys: bool = False) -> ContextState:
    """``turns`` turns of: user, assistant with a tool call, tool result, final assistant."""
    state = ContextState()
    position = 0
    for turn in range(turns):
        for role, size, state_keys in (
            ("user", 400, []),
            ("assistant", 100, []),
            ("tool", result_bytes, ["file:notes.md"] if keys else []),
            ("assistant", 200, []),
        ):
            context.add_entry(state, position, role, size, state_keys)
            position += 1
    return state


def _included(plan) -> set[int]:
    return {p for start, end in plan.ranges for p in range(start, end)}


def test_estimate_is_a_quarter_of_the_bytes_plus_message_overhead() -> None:
    assert context.estimate_tokens(0) == 4
    assert context.estimate_tokens(4) == 5
    assert context.estimate_tokens(5) == 6


def test_a_short_conversation_is_planned_whole_in_one_range() -> None:
    state = _conversation(3)
    plan = context.plan_context(state, context_window=200_000, max_output_tokens=4_000, fixed_tokens=300)
    assert plan.ranges == [(0, 12)]
    assert plan.omitted == 0 and plan.messages == 12 and not plan.truncate


def test_a_long_conversation_keeps_the_newest_groups_within_the_budget() -> None:
    state = _conversation(50)
    plan = context.plan_context(state, context_window=8_000, max_output_tokens=1_000, fixed_tokens=300)
    assert plan.estimated_tokens <= 7_000
    assert plan.omitted > 0
    assert plan.ranges[-1][1] == 200  # the newest message is always in
    first = plan.ranges[0][0]
    assert state.entries[first].role != "tool"  # never a tool result without its call


def test_the_latest_user_message_stays_pinned_when_its_own_turn_overflows() -> None:
    state = ContextState()
    context.add_entry(state, 0, "user", 200)
    for position in range(1, 301, 2):
        context.add_entry(state, position, "assistant", 100)
        context.add_entry(state, position + 1, "tool", 5_000)
    plan = context.plan_context(state, context_window=16_000, max_output_tokens=2_000, fixed_tokens=200)
    assert plan.ranges[0] == (0, 1)
    assert len(plan.ranges) == 2 and plan.ranges[1][1] == 301
    assert plan.estimated_tokens <= 14_000


def test_a_pending_tool_result_bigger_than_the_window_is_truncated_not_dropped() -> None:
    state = ContextState()
    context.add_entry(state, 0, "user", 100)
    context.add_entry(state, 1, "assistant", 100)
    context.add_entry(state, 2, "tool", 5 * 1024 * 1024)
    plan = context.plan_context(state, context_window=8_000, max_output_tokens=1_000, fixed_tokens=100)
    assert _included(plan) == {0, 1, 2}
    assert [t.position for t in plan.truncate] == [2]
    assert plan.estimated_tokens <= 7_000


def test_calibration_scales_the_plan_by_the_reported_usage() -> None:
    state = _conversation(2)
    plan = context.plan_context(state, context_window=200_000, max_output_tokens=4_000, fixed_tokens=0)
    context.observe(state, plan.raw_tokens, plan.raw_tokens * 2)
    assert state.calibration == 1.5
    again = context.plan_context(state, context_window=200_000, max_output_tokens=4_000, fixed_tokens=0)
    assert again.estimated_tokens == -(-again.raw_tokens * 3 // 2)


def test_observe_ignores_calls_without_reported_usage() -> None:
    state = ContextState()
    context.observe(state, 100, 0)
    assert state.calibration == 1.0


def test_a_result_whose_state_was_updated_later_counts_as_superseded() -> None:
    state = _conversation(10, keys=True)
    superseded = context.superseded_positions((e.position, e.state_keys) for e in state.entries)
    tool_positions = [e.position for e in state.entries if e.role == "tool"]
    assert sorted(superseded) == tool_positions[:-1]
    plain = context.context_tokens(_conversation(10), 0)
    assert context.context_tokens(state, 0) < plain / 3


def test_results_with_other_or_no_keys_are_never_superseded() -> None:
    assert context.superseded_positions([(1, ["a"]), (2, ["b"]), (3, [])]) == {}
    assert context.superseded_positions([(1, ["a", "b"]), (2, ["a"])]) == {}
    assert context.superseded_positions([(1, ["a", "b"]), (2, ["a"]), (3, ["b"])]) == {1: ["a", "b"]}


def test_truncate_middle_keeps_head_and_tail_and_says_what_went() -> None:
    text = "A" * 1000 + "Z" * 1000
    cut = context.truncate_middle(text, 300)
    assert cut.startswith("A" * 100) and cut.endswith("Z" * 50)
    assert "1700 bytes omitted" in cut
    assert context.truncate_middle("short", 300) == "short"


def test_compaction_split_keeps_the_newest_quarter_and_summarises_the_rest() -> None:
    state = _conversation(40)
    upto = context.compaction_split(state, context_window=200_000, max_output_tokens=4_000, fixed_tokens=0)
    assert upto is not None and 0 < upto < 160
    assert next(e for e in state.entries if e.position == upto).role != "tool"
    tail = [e for e in state.entries if e.position >= upto]
    assert sum(e.tokens for e in tail) <= 0.25 * 196_000


def test_compaction_split_has_nothing_to_do_for_a_single_group() -> None:
    state = ContextState()
    context.add_entry(state, 0, "user", 100)
    assert context.compaction_split(state, context_window=8_000, max_output_tokens=1_000, fixed_tokens=0) is None


def test_compaction_chunks_cover_the_summarised_part_in_order_within_the_chunk_budget() -> None:
    state = _conversation(40)
    chunks = context.compaction_chunks(state, 120, chunk_tokens=10_000, message_cap_tokens=2_000)
    assert chunks[0][0] == 0 and chunks[-1][1] == 120
    assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))
    for start, end in chunks:
        cost = sum(min(e.tokens, 2_000) for e in state.entries if start <= e.position < end)
        assert cost <= 10_000


def test_apply_compaction_drops_summarised_entries_and_points_at_the_summary() -> None:
    state = _conversation(10)
    context.apply_compaction(state, summary_id=3, upto_position=20, summary_tokens=500)
    assert state.entries[0].position == 20
    assert (state.summary_id, state.summary_upto, state.summary_tokens, state.next_summary_id) == (3, 20, 500, 4)
    plan = context.plan_context(state, context_window=200_000, max_output_tokens=4_000, fixed_tokens=0)
    assert plan.summary_id == 3 and plan.ranges == [(20, 40)]


roles = st.sampled_from(["user", "assistant", "tool"])


@settings(max_examples=200, deadline=None)
@given(
    messages=st.lists(st.tuples(roles, st.integers(0, 200_000)), min_size=1, max_size=80),
    window=st.integers(4_000, 200_000),
)
def test_any_plan_fits_the_window_keeps_the_newest_message_and_never_orphans_a_tool_result(messages, window) -> None:
    state = ContextState()
    for position, (role, size) in enumerate(messages):
        if position == 0:
            role = "user"
        context.add_entry(state, position, role, size)
    max_output = window // 8
    plan = context.plan_context(state, context_window=window, max_output_tokens=max_output, fixed_tokens=100)
    included = _included(plan)
    assert len(messages) - 1 in included
    for start, _ in plan.ranges:
        assert state.entries[start].role != "tool"
    # every included tool result has its assistant (or the group start) included too
    for position in included:
        if state.entries[position].role == "tool":
            start = position
            while state.entries[start].role == "tool" and start > 0:
                start -= 1
            assert start in included
    assert plan.estimated_tokens <= window - max_output


def test_a_requested_compaction_summarises_everything_before_the_latest_turn() -> None:
    state = _conversation(2, result_bytes=500)
    assert context.compaction_split(state, context_window=200_000, max_output_tokens=4_000, fixed_tokens=0) is None
    upto = context.compaction_split(
        state, context_window=200_000, max_output_tokens=4_000, fixed_tokens=0, latest_turn_only=True
    )
    assert upto == 4  # the second turn's user message
    context.apply_compaction(state, 1, upto, 100)
    again = context.compaction_split(
        state, context_window=200_000, max_output_tokens=4_000, fixed_tokens=0, latest_turn_only=True
    )
    assert again is None


def test_many_small_messages_compact_by_count_and_keep_at_most_half_the_limit_verbatim() -> None:
    state = ContextState()
    for position in range(context.MAX_LIVE_ENTRIES + 2):
        context.add_entry(state, position, "user" if position % 2 == 0 else "assistant", 20)
    assert context.context_tokens(state, 0) < 0.1 * 196_000
    assert context.needs_compaction(state, 0, 200_000, 4_000)
    upto = context.compaction_split(state, context_window=200_000, max_output_tokens=4_000, fixed_tokens=0)
    assert upto is not None
    assert len(state.entries) - upto <= context.MAX_LIVE_ENTRIES // 2
