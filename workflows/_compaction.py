"""Compaction and model-switch decisions: what to summarise, in which chunks, and what a switch needs.

Pure functions over ``ContextState`` (token units); the session workflow runs the
``context.compact`` activities these plans describe and applies their results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentrt.schemas import CompactInput, CompactOutcome, ContextState, ProfileInfo
from agentrt.workflows import context

# Turns without automatic compaction after one failed (a provider that cannot summarise now).
AUTO_COMPACTION_PAUSE_TURNS = 5

CompactionReason = Literal["threshold", "requested", "switch"]


@dataclass(frozen=True)
class CompactionPlan:
    """Summarise positions [``from_position``, ``upto``) in ``chunks`` (ranges of positions).

    ``max_summary_tokens`` bounds the summary (from the target's window);
    ``message_cap_tokens`` bounds one message inside a chunk; ``tokens_before`` is the
    conversation's estimate now.
    """

    reason: CompactionReason
    summarizer: str
    from_position: int
    upto: int
    chunks: list[tuple[int, int]]
    max_summary_tokens: int
    message_cap_tokens: int
    tokens_before: int

    def chunk_input(
        self, index: int, *, session_id: str, script: str | None, previous_summary_id: int | None, summary_id: int
    ) -> CompactInput:
        """The activity input for chunk ``index``: it folds ``previous_summary_id`` and the chunk into ``summary_id``."""
        start, end = self.chunks[index]
        return CompactInput(
            session_id=session_id,
            profile=self.summarizer,
            script=script,
            previous_summary_id=previous_summary_id,
            ranges=[(start, end)],
            summary_id=summary_id,
            upto_position=end if index < len(self.chunks) - 1 else self.upto,
            max_summary_tokens=self.max_summary_tokens,
            max_message_bytes=self.message_cap_tokens * context.BYTES_PER_TOKEN,
        )


def plan_compaction(
    ctx: ContextState,
    *,
    fixed_tokens: int,
    target: ProfileInfo,
    summarizer: ProfileInfo,
    reason: CompactionReason,
) -> CompactionPlan | CompactOutcome:
    """Plan a compaction so the rest fits ``target``'s window, written by ``summarizer``.

    The newest groups that fit a quarter of the target's input budget stay verbatim; a
    ``requested`` compaction summarises everything before the latest turn. Returns a
    ``CompactOutcome`` (``compacted=False``) when there is nothing old enough to summarise.
    """
    before = context.context_tokens(ctx, fixed_tokens)
    upto = context.compaction_split(
        ctx,
        context_window=target.context_window,
        max_output_tokens=target.max_output_tokens,
        fixed_tokens=fixed_tokens,
        latest_turn_only=reason == "requested",
    )
    if upto is None:
        return CompactOutcome(
            compacted=False,
            reason="nothing to compact: the conversation since the last summary is its newest part",
            tokens_before=before,
            tokens_after=before,
        )
    max_summary = context.max_summary_tokens(target.context_window)
    budget = int(context.input_budget(summarizer.context_window, summarizer.max_output_tokens) / ctx.calibration)
    chunk_tokens = max(budget - fixed_tokens - 2 * max_summary - context.SUMMARY_PROMPT_TOKENS, 512)
    message_cap = max(chunk_tokens // 4, context.MIN_MESSAGE_TOKENS)
    chunks = context.compaction_chunks(ctx, upto, chunk_tokens=chunk_tokens, message_cap_tokens=message_cap)
    return CompactionPlan(
        reason=reason,
        summarizer=summarizer.name,
        from_position=ctx.summary_upto,
        upto=upto,
        chunks=chunks,
        max_summary_tokens=max_summary,
        message_cap_tokens=message_cap,
        tokens_before=before,
    )


def take_summary_id(ctx: ContextState) -> int:
    """The id the next summary gets (ids are never reused, even when a compaction fails)."""
    new_id = ctx.next_summary_id
    ctx.next_summary_id += 1
    return new_id


def compact_threshold(session_threshold: float | None, profile: ProfileInfo) -> float:
    """The fraction of the input budget past which a turn's end compacts: the session's
    (``SessionConfig.compact_threshold``), else the profile's, else ``COMPACT_THRESHOLD`` (0.8);
    1.0 turns automatic compaction by tokens off."""
    if session_threshold is not None:
        return session_threshold
    if profile.compact_threshold is not None:
        return profile.compact_threshold
    return context.COMPACT_THRESHOLD


def needs_auto_compaction(
    ctx: ContextState, pause_turns: int, *, fixed_tokens: int, profile: ProfileInfo, threshold: float | None = None
) -> tuple[bool, int]:
    """Whether to compact at the end of a turn, and the pause left after this turn.

    ``threshold``: the session's own (``compact_threshold`` picks between it and the profile's).
    After a failed automatic compaction the session waits ``AUTO_COMPACTION_PAUSE_TURNS``
    turns before trying again (the plan still fits the window by omission meanwhile).
    """
    if pause_turns > 0:
        return False, pause_turns - 1
    limit = compact_threshold(threshold, profile)
    return context.needs_compaction(ctx, fixed_tokens, profile.context_window, profile.max_output_tokens, limit), 0


def switch_needs_compaction(ctx: ContextState, *, fixed_tokens: int, target: ProfileInfo) -> bool:
    """Whether the conversation must be summarised before it fits ``target``'s window."""
    return context.needs_compaction(ctx, fixed_tokens, target.context_window, target.max_output_tokens)


def planned_tokens(ctx: ContextState, *, fixed_tokens: int, profile: ProfileInfo) -> int:
    """The estimated input (tokens) of a model call made now with ``profile``."""
    plan = context.plan_context(
        ctx, context_window=profile.context_window, max_output_tokens=profile.max_output_tokens, fixed_tokens=fixed_tokens
    )
    return plan.estimated_tokens
