"""Context planning: which transcript ranges, pinned items and summary fit a model's window.

Pure and deterministic: it runs inside the session workflow (no I/O, clock or randomness),
and the model activity shares ``superseded_positions`` and ``truncate_middle`` with it so
both sides agree on what a plan means. Sizes are tokens, estimated as
``ceil(bytes / 4) + 4`` per message and calibrated by the input tokens the provider
reports (``observe``). A plan:

- reserves ``max_output_tokens`` of the window for the reply;
- pins the system prompt and tool specs, the latest compaction summary, the latest user
  message and the last group (the newest assistant message with its tool results, i.e.
  the pending results the model must see);
- adds whole groups (a user or assistant message with the tool results after it), newest
  first, while they fit; older messages are omitted (they are in the summary and the store);
- truncates a tool result or assistant message larger than a quarter of the budget (head
  and tail of the text are kept; oversized tool-call arguments become a short placeholder);
- counts a tool result whose state keys were all updated by a later result as a short
  "superseded" note (state projection).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence

from agentrt.schemas import ContextEntry, ContextPlan, ContextState, ToolSpec, TruncatedMessage

BYTES_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4
SUPERSEDED_TOKENS = 32
MIN_MESSAGE_TOKENS = 64
COMPACT_THRESHOLD = 0.8  # of the input budget: compact at turn end above this
KEEP_TAIL_FRACTION = 0.25  # of the input budget kept verbatim by a compaction
SUMMARY_FRACTION = 0.1  # of the window: the summary's bound ...
MAX_SUMMARY_TOKENS = 4_000  # ... capped here
MIN_SUMMARY_TOKENS = 200
SUMMARY_PROMPT_TOKENS = 300  # the summariser's instructions
CALIBRATION_BOUNDS = (0.25, 4.0)
# The live segment's bookkeeping travels through continue-as-new and is walked on every
# round: past this many messages a session compacts even below the token threshold, and a
# compaction keeps at most half of them verbatim.
MAX_LIVE_ENTRIES = 2_000

__all__ = [
    "COMPACT_THRESHOLD",
    "Group",
    "add_entry",
    "apply_compaction",
    "compaction_chunks",
    "compaction_split",
    "context_tokens",
    "estimate_tokens",
    "input_budget",
    "max_summary_tokens",
    "needs_compaction",
    "observe",
    "plan_context",
    "specs_bytes",
    "superseded_positions",
    "truncate_middle",
]


def estimate_tokens(size_bytes: int) -> int:
    """Tokens of one message of ``size_bytes`` UTF-8 bytes: ceil(bytes / 4) plus 4 of overhead."""
    return -(-max(size_bytes, 0) // BYTES_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS


def specs_bytes(specs: Iterable[ToolSpec]) -> int:
    """UTF-8 bytes of ``specs`` as JSON (sorted keys, ``local_activity`` left out, as no model sees
    it): what every model call carries for them besides its messages."""
    dumped = [spec.model_dump(mode="json", exclude={"local_activity"}) for spec in specs]
    return len(json.dumps(dumped, sort_keys=True).encode())


def input_budget(context_window: int, max_output_tokens: int) -> int:
    """Tokens left for the input once the reply's ``max_output_tokens`` are reserved (at least 1)."""
    return max(context_window - max_output_tokens, 1)


def max_summary_tokens(context_window: int) -> int:
    """The bound on a compaction summary for a window of ``context_window`` tokens."""
    return max(MIN_SUMMARY_TOKENS, min(MAX_SUMMARY_TOKENS, int(context_window * SUMMARY_FRACTION)))


def observe(state: ContextState, estimated_tokens: int, reported_input_tokens: int) -> None:
    """Calibrate estimates by a provider's reported usage: ``estimated_tokens`` (uncalibrated)
    were sent and the provider counted ``reported_input_tokens``. Smoothed, bounded to [0.25, 4]."""
    if estimated_tokens <= 0 or reported_input_tokens <= 0:
        return
    low, high = CALIBRATION_BOUNDS
    ratio = min(high, max(low, reported_input_tokens / estimated_tokens))
    state.calibration = round(0.5 * state.calibration + 0.5 * ratio, 4)


def add_entry(state: ContextState, position: int, role: str, size_bytes: int, state_keys: Sequence[str] = ()) -> None:
    """Record a transcript message in the live segment, kept in position order."""
    entry = ContextEntry(position=position, role=role, tokens=estimate_tokens(size_bytes), state_keys=list(state_keys))  # type: ignore[arg-type]
    index = len(state.entries)
    while index > 0 and state.entries[index - 1].position > position:
        index -= 1
    state.entries.insert(index, entry)


def superseded_positions(items: Iterable[tuple[int, Sequence[str]]]) -> dict[int, list[str]]:
    """Positions whose every state key is updated again at a later position, with their keys.

    ``items`` are ``(position, state_keys)`` pairs; positions without keys are never superseded.
    """
    listed = [(position, list(keys)) for position, keys in items]
    latest: dict[str, int] = {}
    for position, keys in listed:
        for key in keys:
            latest[key] = max(latest.get(key, -1), position)
    return {position: keys for position, keys in listed if keys and all(latest[k] > position for k in keys)}


def truncate_middle(text: str, max_bytes: int) -> str:
    """``text`` cut to about ``max_bytes`` UTF-8 bytes (at least 64), keeping its head (2/3) and
    tail (1/3) and saying how many bytes went. Bytes, not characters: estimates count bytes."""
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    keep = max(max_bytes, 64)
    head = data[: keep * 2 // 3].decode(errors="ignore")
    tail = data[len(data) - (keep - keep * 2 // 3) :].decode(errors="ignore")
    omitted = len(data) - len(head.encode()) - len(tail.encode())
    return f"{head}\n[… {omitted} bytes omitted to fit the context window …]\n{tail}"


class Group:
    """A user or assistant message with the tool results that follow it (indexes into entries)."""

    __slots__ = ("start", "end")

    def __init__(self, start: int, end: int) -> None:
        self.start = start
        self.end = end


def _groups(entries: Sequence[ContextEntry]) -> list[Group]:
    groups: list[Group] = []
    for index, entry in enumerate(entries):
        if entry.role == "tool" and groups:
            groups[-1].end = index + 1
        else:
            groups.append(Group(index, index + 1))
    return groups


def _live(state: ContextState, upto_position: int | None) -> list[ContextEntry]:
    if upto_position is None:
        return list(state.entries)
    return [e for e in state.entries if e.position < upto_position]


def _effective_tokens(entries: Sequence[ContextEntry], superseded: Mapping[int, object] | None = None) -> list[int]:
    """Each entry's tokens, a superseded one counting as its short note."""
    if superseded is None:
        superseded = superseded_positions((e.position, e.state_keys) for e in entries)
    return [SUPERSEDED_TOKENS if e.position in superseded else e.tokens for e in entries]


def context_tokens(state: ContextState, fixed_tokens: int) -> int:
    """Calibrated tokens of the whole live context: ``fixed_tokens`` (system prompt and tool
    specs, uncalibrated), the summary and every message since it, nothing omitted."""
    raw = fixed_tokens + state.summary_tokens + sum(_effective_tokens(state.entries))
    return math.ceil(raw * state.calibration)


def needs_compaction(
    state: ContextState, fixed_tokens: int, context_window: int, max_output_tokens: int, threshold: float = COMPACT_THRESHOLD
) -> bool:
    """True when the live context passes ``threshold`` of the input budget (never for a
    threshold of 1.0 or more: automatic compaction by tokens is off), or holds more than
    ``MAX_LIVE_ENTRIES`` messages."""
    if len(state.entries) > MAX_LIVE_ENTRIES:
        return True
    if threshold >= 1.0:
        return False
    budget = input_budget(context_window, max_output_tokens)
    return context_tokens(state, fixed_tokens) > threshold * budget


def plan_context(
    state: ContextState,
    *,
    context_window: int,
    max_output_tokens: int,
    fixed_tokens: int,
    upto_position: int | None = None,
) -> ContextPlan:
    """The plan for a model call that sees the transcript at positions < ``upto_position``.

    ``fixed_tokens`` is the uncalibrated estimate of the system prompt and tool specs.
    Returns ranges of positions ``[start, end)``, the summary id, the truncations, and the
    calibrated ``estimated_tokens`` (``raw_tokens`` before calibration).
    """
    entries = _live(state, upto_position)
    calibration = state.calibration
    budget = math.floor(input_budget(context_window, max_output_tokens) / calibration)
    summary_tokens = state.summary_tokens if state.summary_id is not None else 0
    available = max(budget - fixed_tokens - summary_tokens, MIN_MESSAGE_TOKENS)
    superseded = superseded_positions((e.position, e.state_keys) for e in entries)
    costs = _effective_tokens(entries, superseded)
    caps: dict[int, int] = {}
    message_cap = max(MIN_MESSAGE_TOKENS, available // 4)
    for index, entry in enumerate(entries):
        if entry.role in ("tool", "assistant") and entry.position not in superseded and costs[index] > message_cap:
            caps[index] = message_cap

    groups = _groups(entries)
    pinned: set[int] = set()
    if groups:
        pinned.add(len(groups) - 1)
    last_user = next((g for g in range(len(groups) - 1, -1, -1) if entries[groups[g].start].role == "user"), None)
    if last_user is not None:
        pinned.add(last_user)

    def cost(index: int) -> int:
        return caps.get(index, costs[index])

    def group_cost(group: Group) -> int:
        return sum(cost(i) for i in range(group.start, group.end))

    pinned_cost = sum(group_cost(groups[g]) for g in pinned)
    if pinned_cost > available:
        # Even the pinned messages overflow: share what is left among them.
        shrinkable = [i for g in pinned for i in range(groups[g].start, groups[g].end)]
        share = max(MIN_MESSAGE_TOKENS, available // max(len(shrinkable), 1))
        for i in shrinkable:
            if cost(i) > share:
                caps[i] = share
        pinned_cost = sum(group_cost(groups[g]) for g in pinned)

    included = set(pinned)
    used = pinned_cost
    for g in range(len(groups) - 1, -1, -1):
        if g in pinned:
            continue
        needed = group_cost(groups[g])
        if used + needed > available:
            break
        included.add(g)
        used += needed

    keep = [False] * len(entries)
    for g in included:
        for i in range(groups[g].start, groups[g].end):
            keep[i] = True
    ranges: list[tuple[int, int]] = []
    start: int | None = None
    last = 0
    for index, entry in enumerate(entries):
        if keep[index]:
            if start is None:
                start = entry.position
            last = entry.position
        elif start is not None:
            ranges.append((start, last + 1))
            start = None
    if start is not None:
        ranges.append((start, last + 1))
    truncate = [
        TruncatedMessage(position=entries[i].position, max_bytes=max(cap - MESSAGE_OVERHEAD_TOKENS, 16) * BYTES_PER_TOKEN)
        for i, cap in sorted(caps.items())
        if keep[i]
    ]
    raw = fixed_tokens + summary_tokens + used
    return ContextPlan(
        ranges=ranges,
        summary_id=state.summary_id,
        truncate=truncate,
        estimated_tokens=math.ceil(raw * calibration),
        raw_tokens=raw,
        messages=sum(keep),
        omitted=len(entries) - sum(keep),
    )


def compaction_split(
    state: ContextState,
    *,
    context_window: int,
    max_output_tokens: int,
    fixed_tokens: int,
    latest_turn_only: bool = False,
) -> int | None:
    """The position before which a compaction summarises, or None when nothing can be.

    The newest groups that fit in ``KEEP_TAIL_FRACTION`` of the input budget, and in half of
    ``MAX_LIVE_ENTRIES`` messages, stay verbatim (the newest group always does); the split is
    at the start of the oldest group kept.
    ``latest_turn_only`` (an explicit request) keeps no more than the latest turn: the
    split is at least at the latest user message.
    """
    entries = state.entries
    if latest_turn_only:
        last_user = next((e.position for e in reversed(entries) if e.role == "user"), None)
        if last_user is not None and last_user > entries[0].position:
            by_budget = compaction_split(
                state, context_window=context_window, max_output_tokens=max_output_tokens, fixed_tokens=fixed_tokens
            )
            return max(last_user, by_budget or 0)
    groups = _groups(entries)
    if len(groups) < 2:
        return None
    costs = _effective_tokens(entries)
    budget = math.floor(input_budget(context_window, max_output_tokens) / state.calibration)
    tail_budget = max(int((budget - fixed_tokens) * KEEP_TAIL_FRACTION), 0)
    kept = len(groups) - 1
    used = sum(costs[groups[kept].start : groups[kept].end])
    while kept > 0:
        needed = sum(costs[groups[kept - 1].start : groups[kept - 1].end])
        if used + needed > tail_budget or len(entries) - groups[kept - 1].start > MAX_LIVE_ENTRIES // 2:
            break
        kept -= 1
        used += needed
    if kept == 0:
        return None
    return entries[groups[kept].start].position


def compaction_chunks(
    state: ContextState, upto_position: int, *, chunk_tokens: int, message_cap_tokens: int
) -> list[tuple[int, int]]:
    """The live messages before ``upto_position`` cut into position ranges ``[start, end)`` of
    at most ``chunk_tokens`` each (a message counts at most ``message_cap_tokens``)."""
    entries = [e for e in state.entries if e.position < upto_position]
    costs = _effective_tokens(entries)
    chunks: list[tuple[int, int]] = []
    start: int | None = None
    used = 0
    for entry, tokens in zip(entries, costs):
        tokens = min(tokens, message_cap_tokens)
        if start is not None and used + tokens > chunk_tokens:
            chunks.append((start, entry.position))
            start, used = None, 0
        if start is None:
            start = entry.position
        used += tokens
    if start is not None:
        chunks.append((start, upto_position))
    return chunks


def apply_compaction(state: ContextState, summary_id: int, upto_position: int, summary_tokens: int) -> None:
    """Make summary ``summary_id`` stand for positions < ``upto_position`` and drop their entries."""
    state.entries = [e for e in state.entries if e.position >= upto_position]
    state.summary_id = summary_id
    state.summary_upto = upto_position
    state.summary_tokens = summary_tokens
    state.next_summary_id = max(state.next_summary_id, summary_id + 1)
    state.compactions += 1
