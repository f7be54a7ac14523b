"""Compaction and model-switch decisions (workflows/_compaction.py): plans, summary ids, when to compact."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentrt.schemas import CompactOutcome, ContextState, ProfileInfo
from agentrt.workflows import context
from agentrt.workflows._compaction import (
    AUTO_COMPACTION_PAUSE_TURNS,
    CompactionPlan,
    compact_threshold,
    needs_auto_compaction,
    plan_compaction,
    planned_tokens,
    switch_needs_compaction,
    take_summary_id,
)

FIXED = 300
BIG = ProfileInfo(name="big", provider="scripted", context_window=200_000, max_output_tokens=4_000)
SMALL = ProfileInfo(name="small", provider="scripted", context_window=16_000, max_output_tokens=2_000)
TINY = ProfileInfo(name="tiny", provider="scripted", context_window=4_000, max_output_tokens=1_000)


def _conversation(turns: int, result_bytes: int = 5_000, start: int = 0) -> ContextState:
    """``turns`` turns of: user, assistant with a tool call, tool result, final assistant."""
    ctx = ContextState()
    position = start
    for _ in range(turns):
        for role, size in (("user", 400), ("assistant", 100), ("tool", result_bytes), ("assistant", 200)):
            context.add_entry(ctx, position, role, size)
            position += 1
    return ctx


def _plan(ctx: ContextState, **kwargs: object) -> CompactionPlan:
    arguments: dict[str, object] = {"fixed_tokens": FIXED, "target": SMALL, "summarizer": SMALL, "reason": "threshold"}
    plan = plan_compaction(ctx, **{**arguments, **kwargs})  # type: ignore[arg-type]
    assert isinstance(plan, CompactionPlan)
    return plan


# ---------------------------------------------------------------- plan_compaction


def test_a_conversation_of_one_group_has_nothing_to_compact() -> None:
    ctx = ContextState()
    context.add_entry(ctx, 0, "user", 100_000)
    outcome = plan_compaction(ctx, fixed_tokens=FIXED, target=SMALL, summarizer=SMALL, reason="threshold")
    assert isinstance(outcome, CompactOutcome) and outcome.compacted is False
    assert outcome.reason is not None and "nothing to compact" in outcome.reason


def test_nothing_to_compact_reports_the_same_tokens_before_and_after() -> None:
    ctx = _conversation(2)
    outcome = plan_compaction(ctx, fixed_tokens=FIXED, target=BIG, summarizer=BIG, reason="threshold")
    assert isinstance(outcome, CompactOutcome)
    assert outcome.tokens_before == outcome.tokens_after == context.context_tokens(ctx, FIXED)


def test_a_conversation_too_big_for_the_target_is_planned_from_the_summary_upto_the_split() -> None:
    ctx = _conversation(30)
    plan = _plan(ctx)
    assert plan.from_position == 0
    assert 0 < plan.upto < 120
    assert plan.tokens_before == context.context_tokens(ctx, FIXED)
    assert (plan.reason, plan.summarizer) == ("threshold", "small")


def test_the_chunks_cover_from_position_to_upto_without_gaps() -> None:
    plan = _plan(_conversation(30))
    assert len(plan.chunks) > 1
    assert plan.chunks[0][0] == plan.from_position
    assert plan.chunks[-1][1] == plan.upto
    assert all(end == next_start for (_, end), (next_start, _) in zip(plan.chunks, plan.chunks[1:]))


def test_a_plan_after_an_earlier_compaction_starts_at_its_summary() -> None:
    ctx = _conversation(30)
    first = _plan(ctx)
    context.apply_compaction(ctx, take_summary_id(ctx), first.upto, summary_tokens=500)
    ctx.entries.extend(_conversation(30, start=120).entries)
    second = _plan(ctx)
    assert second.from_position == first.upto == second.chunks[0][0]


def test_a_smaller_summarizer_window_cuts_more_chunks() -> None:
    ctx = _conversation(30)
    assert len(_plan(ctx, summarizer=TINY).chunks) > len(_plan(ctx, summarizer=SMALL).chunks)
    assert len(_plan(ctx, summarizer=BIG).chunks) == 1


def test_a_requested_compaction_summarises_everything_before_the_latest_turn() -> None:
    ctx = _conversation(30)
    plan = _plan(ctx, target=BIG, summarizer=BIG, reason="requested")
    assert plan.upto == 116  # the latest user message
    assert plan.reason == "requested"


def test_a_threshold_compaction_of_a_conversation_that_fits_has_nothing_to_compact() -> None:
    outcome = plan_compaction(_conversation(30), fixed_tokens=FIXED, target=BIG, summarizer=BIG, reason="threshold")
    assert isinstance(outcome, CompactOutcome) and not outcome.compacted


def test_the_summary_bound_comes_from_the_target_window() -> None:
    ctx = _conversation(30)
    plan = _plan(ctx, target=SMALL, summarizer=BIG)
    assert plan.max_summary_tokens == context.max_summary_tokens(SMALL.context_window)


# ---------------------------------------------------------------- chunk_input


def _hand_plan() -> CompactionPlan:
    return CompactionPlan(
        reason="switch",
        summarizer="small",
        from_position=0,
        upto=12,
        chunks=[(0, 5), (5, 9)],
        max_summary_tokens=400,
        message_cap_tokens=100,
        tokens_before=9_000,
    )


def test_a_chunk_before_the_last_stands_for_positions_upto_its_end() -> None:
    compact = _hand_plan().chunk_input(0, session_id="s-1", script=None, previous_summary_id=None, summary_id=1)
    assert (compact.ranges, compact.upto_position) == ([(0, 5)], 5)


def test_the_last_chunk_stands_for_positions_upto_the_plans_upto() -> None:
    compact = _hand_plan().chunk_input(1, session_id="s-1", script="x.yaml", previous_summary_id=1, summary_id=2)
    assert (compact.ranges, compact.upto_position) == ([(5, 9)], 12)


def test_a_chunk_input_folds_the_previous_summary_into_the_new_one() -> None:
    compact = _hand_plan().chunk_input(1, session_id="s-1", script="x.yaml", previous_summary_id=3, summary_id=4)
    assert (compact.session_id, compact.profile, compact.script) == ("s-1", "small", "x.yaml")
    assert (compact.previous_summary_id, compact.summary_id) == (3, 4)
    assert compact.max_summary_tokens == 400
    assert compact.max_message_bytes == 100 * context.BYTES_PER_TOKEN


def test_the_last_chunk_input_of_a_real_plan_reaches_its_upto() -> None:
    plan = _plan(_conversation(30))
    last = len(plan.chunks) - 1
    compact = plan.chunk_input(last, session_id="s-1", script=None, previous_summary_id=None, summary_id=1)
    assert compact.upto_position == plan.upto


# ---------------------------------------------------------------- take_summary_id


def test_summary_ids_are_taken_in_order_and_never_reused() -> None:
    ctx = ContextState(next_summary_id=3)
    assert [take_summary_id(ctx), take_summary_id(ctx)] == [3, 4]
    assert ctx.next_summary_id == 5


def test_a_summary_id_taken_by_a_failed_compaction_is_not_given_again() -> None:
    ctx = _conversation(30)
    failed = take_summary_id(ctx)  # the compaction failed: nothing applied
    assert take_summary_id(ctx) == failed + 1


# ---------------------------------------------------------------- needs_auto_compaction


def test_a_conversation_past_the_threshold_needs_compaction_when_not_paused() -> None:
    assert needs_auto_compaction(_conversation(30), 0, fixed_tokens=FIXED, profile=SMALL) == (True, 0)


def test_a_conversation_below_the_threshold_needs_no_compaction() -> None:
    assert needs_auto_compaction(_conversation(2), 0, fixed_tokens=FIXED, profile=BIG) == (False, 0)


def test_a_paused_session_does_not_compact_and_counts_the_pause_down() -> None:
    assert needs_auto_compaction(_conversation(30), 3, fixed_tokens=FIXED, profile=SMALL) == (False, 2)


def test_after_a_failed_compaction_the_session_waits_the_pause_turns_then_compacts_again() -> None:
    ctx = _conversation(30)
    pause = AUTO_COMPACTION_PAUSE_TURNS
    verdicts = []
    for _ in range(AUTO_COMPACTION_PAUSE_TURNS + 1):
        compact, pause = needs_auto_compaction(ctx, pause, fixed_tokens=FIXED, profile=SMALL)
        verdicts.append(compact)
    assert verdicts == [False] * AUTO_COMPACTION_PAUSE_TURNS + [True]


def test_the_session_s_threshold_wins_over_the_profile_s_and_the_profile_s_over_the_default() -> None:
    tuned = SMALL.model_copy(update={"compact_threshold": 0.5})
    assert compact_threshold(0.9, tuned) == 0.9
    assert compact_threshold(None, tuned) == 0.5
    assert compact_threshold(None, SMALL) == context.COMPACT_THRESHOLD


def test_a_threshold_of_1_never_compacts_by_tokens() -> None:
    overflowing = _conversation(30)
    assert needs_auto_compaction(overflowing, 0, fixed_tokens=FIXED, profile=SMALL, threshold=1.0) == (False, 0)
    off = SMALL.model_copy(update={"compact_threshold": 1.0})
    assert needs_auto_compaction(overflowing, 0, fixed_tokens=FIXED, profile=off) == (False, 0)


def test_a_threshold_of_1_still_compacts_past_the_live_message_bound() -> None:
    ctx = ContextState()
    for position in range(context.MAX_LIVE_ENTRIES + 1):
        context.add_entry(ctx, position, "user" if position % 2 == 0 else "assistant", 4)
    assert needs_auto_compaction(ctx, 0, fixed_tokens=FIXED, profile=BIG, threshold=1.0) == (True, 0)


def test_a_lower_threshold_compacts_a_conversation_the_default_keeps() -> None:
    ctx = _conversation(2)
    assert needs_auto_compaction(ctx, 0, fixed_tokens=FIXED, profile=SMALL) == (False, 0)
    assert needs_auto_compaction(ctx, 0, fixed_tokens=FIXED, profile=SMALL, threshold=0.1) == (True, 0)


# ---------------------------------------------------------------- switch and planned tokens


def test_a_switch_to_a_window_the_conversation_fits_needs_no_compaction() -> None:
    assert not switch_needs_compaction(_conversation(30), fixed_tokens=FIXED, target=BIG)


def test_a_switch_to_a_window_the_conversation_overflows_needs_compaction() -> None:
    assert switch_needs_compaction(_conversation(30), fixed_tokens=FIXED, target=SMALL)


def test_planned_tokens_are_the_estimate_of_the_context_plan() -> None:
    ctx = _conversation(30)
    plan = context.plan_context(ctx, context_window=SMALL.context_window, max_output_tokens=2_000, fixed_tokens=FIXED)
    assert planned_tokens(ctx, fixed_tokens=FIXED, profile=SMALL) == plan.estimated_tokens


def test_planned_tokens_of_an_overflowing_conversation_fit_the_profiles_input_budget() -> None:
    ctx = _conversation(30)
    assert planned_tokens(ctx, fixed_tokens=FIXED, profile=SMALL) <= SMALL.context_window - SMALL.max_output_tokens
    assert planned_tokens(ctx, fixed_tokens=FIXED, profile=BIG) == context.context_tokens(ctx, FIXED)


# ---------------------------------------------------------------- property

roles = st.sampled_from(["user", "assistant", "tool"])
entries = st.lists(st.tuples(roles, st.integers(0, 40_000)), min_size=1, max_size=80)
profiles = st.sampled_from([BIG, SMALL, TINY])


@settings(max_examples=200, deadline=None)
@given(
    messages=entries,
    start=st.integers(0, 50),
    target=profiles,
    summarizer=profiles,
    reason=st.sampled_from(["threshold", "requested", "switch"]),
)
def test_a_plan_summarises_exactly_the_live_messages_before_its_upto_in_contiguous_chunks(
    messages: list[tuple[str, int]], start: int, target: ProfileInfo, summarizer: ProfileInfo, reason: str
) -> None:
    ctx = ContextState(summary_upto=start, summary_id=1 if start else None, next_summary_id=2 if start else 1)
    for offset, (role, size) in enumerate(messages):
        context.add_entry(ctx, start + offset, role, size)
    plan = plan_compaction(ctx, fixed_tokens=FIXED, target=target, summarizer=summarizer, reason=reason)  # type: ignore[arg-type]
    if isinstance(plan, CompactOutcome):
        assert not plan.compacted
        return
    assert plan.from_position == start < plan.upto <= start + len(messages) - 1  # the newest message stays
    assert plan.chunks[0][0] == start and plan.chunks[-1][1] == plan.upto
    covered = [p for first, end in plan.chunks for p in range(first, end)]
    assert covered == list(range(start, plan.upto))
    assert all(first < end for first, end in plan.chunks)
