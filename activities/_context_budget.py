"""The context budget of one model call, held on the worker, where the whole input is known.

The workflow plans which messages a call sees (``workflows/context.py``) without the parts
only the worker reads: agentrt's default system prompt, the skills, the memories, the budget
note. ``fit_context`` measures every source of the assembled input (``ContextBreakdown``) and
keeps it inside the profile's input budget (``context_window`` − ``max_output_tokens``):

- the pinned parts (system prompt, tool specs, compaction summary, the latest user message)
  alone over the budget: the call is not sent; a non-retryable ``ApplicationError`` typed
  ``ContextOverflow`` (the turn fails ``context_overflow``) carries the breakdown;
- the whole over the budget: the memories section is left out, then the oldest messages
  before the latest user message (a tool result never without its call), with a note; then
  the messages after it (the newest reply and its tool results) share what is left, cut in
  the middle. Still over: ``ContextOverflow`` too; no request above the window is sent.

Sizes are estimated as the workflow does (``estimate_tokens``) and calibrated by the plan's
ratio of calibrated to raw tokens, so both sides count alike.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from temporalio.exceptions import ApplicationError

from agentrt.activities._call_context import OMITTED_NOTE, CallContext, fit, takes_reasoning_back
from agentrt.activities._object_memo import ObjectMemo
from agentrt.activities._system_prompt import budget_section
from agentrt.schemas import ContextBreakdown, Message, ModelCallInput, ModelProfile, ToolSpec
from agentrt.workflows.context import BYTES_PER_TOKEN, estimate_tokens, input_budget, specs_bytes

if TYPE_CHECKING:
    from sqlalchemy import Connection

# Tokens of a cut message's overhead and "[… N bytes omitted …]" note.
_CUT_NOTE_TOKENS = 24

__all__ = ["AssembledContext", "assemble_context", "fit_context"]


@dataclass
class AssembledContext:
    """The system prompt and messages to send, and what they hold by source."""

    system: str | None
    messages: list[Message]
    breakdown: ContextBreakdown


def assemble_context(
    context: CallContext,
    input: ModelCallInput,
    profile: ModelProfile,
    tools: Sequence[ToolSpec],
    conn: "Connection | None",
    *,
    later: Sequence[tuple[int, Message]] = (),
) -> AssembledContext | ApplicationError:
    """Read the call's system prompt, messages (``later``: ones not stored yet) and memories from
    the store (on ``conn``) and ``fit_context`` them; the budget note goes last, as it changes
    every round and everything before it stays in providers' prompt caches."""
    base = context.system_prompt(input, profile, list(tools), conn)
    summarised, messages = context.messages(
        input, conn, system=base, with_reasoning=takes_reasoning_back(profile), later=later
    )
    return fit_context(
        input, profile, tools, base=base, summarised=summarised, messages=messages,
        with_memories=context.with_memories(input.session_id, summarised, messages, conn),
        budget_note=budget_section(input.budget_note),
    )


def _text_tokens(text: str | None) -> int:
    return estimate_tokens(len(text.encode())) if text else 0


def _measure_message(message: Message) -> int:
    size = len(message.text.encode()) + sum(
        len(c.name) + len(c.arguments_raw or json.dumps(c.arguments)) for c in message.tool_calls
    )
    return estimate_tokens(size)


# Each message's estimate, by the message object: the store hands out one parsed Message per stored
# row (ParsedMessages), so a turn's later calls measure only what is new.
_MESSAGE_TOKENS: ObjectMemo[Message, int] = ObjectMemo(_measure_message, limit=8192)


def _message_tokens(message: Message) -> int:
    return _MESSAGE_TOKENS.of(message)


def _joined(*parts: str | None) -> str | None:
    kept = [p for p in parts if p]
    return "\n\n".join(kept) if kept else None


def _current_index(messages: Sequence[Message]) -> int | None:
    return next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user" and messages[i].text != OMITTED_NOTE), None)


def fit_context(
    input: ModelCallInput,
    profile: ModelProfile,
    tools: Sequence[ToolSpec],
    *,
    base: str | None,
    summarised: str | None,
    with_memories: str | None,
    budget_note: str | None,
    messages: list[Message],
) -> AssembledContext | ApplicationError:
    """The call's input fitted to ``profile``'s budget, or the ``ContextOverflow`` error to raise.

    ``base`` is the system prompt (default, profile, session, skills); ``summarised`` it with the
    compaction summary; ``with_memories`` that with the memories section; ``budget_note`` goes last.
    """
    calibration = 1.0
    if input.plan is not None and input.plan.raw_tokens > 0 and input.plan.estimated_tokens > 0:
        calibration = input.plan.estimated_tokens / input.plan.raw_tokens

    def cal(tokens: int) -> int:
        return math.ceil(tokens * calibration)

    budget = input_budget(profile.context_window, profile.max_output_tokens)
    base_len = len(base or "")
    summary = _text_tokens((summarised or "")[base_len:]) if summarised and len(summarised) > base_len else 0
    memories = _text_tokens((with_memories or "")[len(summarised or ""):]) if with_memories and len(with_memories) > len(summarised or "") else 0
    system_tokens = cal(_text_tokens(_joined(base, budget_note)))
    tool_tokens = cal(estimate_tokens(specs_bytes(tools))) if tools else 0
    summary, memories = cal(summary), cal(memories)
    messages = list(messages)
    current = _current_index(messages)
    current_tokens = cal(_message_tokens(messages[current])) if current is not None else 0
    pinned = system_tokens + tool_tokens + summary + current_tokens

    def breakdown(**extra: object) -> ContextBreakdown:
        history = sum(cal(_message_tokens(m)) for i, m in enumerate(messages) if i != current)
        used_memories = 0 if extra.get("memories_dropped") else memories
        return ContextBreakdown(
            system_prompt=system_tokens, tool_specs=tool_tokens, memories=used_memories, summary=summary,
            history=history, current_message=current_tokens,
            total=system_tokens + tool_tokens + used_memories + summary + history + current_tokens,
            pinned=pinned, budget=budget, **extra,  # type: ignore[arg-type]
        )

    described = breakdown()
    if pinned > budget:
        return _overflow(profile, budget, described)
    if described.total <= budget:
        return AssembledContext(_joined(with_memories, budget_note), messages, described)
    described = breakdown(memories_dropped=memories > 0)
    omitted = 0
    while described.total > budget and current is not None and current > 0:
        del messages[0]
        current -= 1
        omitted += 1
        while current > 0 and messages[0].role == "tool":  # a tool result never without its call
            del messages[0]
            current -= 1
            omitted += 1
        described = breakdown(memories_dropped=memories > 0, omitted_messages=omitted)
    if omitted and messages and messages[0].text != OMITTED_NOTE:
        messages.insert(0, Message(role="user", text=OMITTED_NOTE))
        if current is not None:
            current += 1
        described = breakdown(memories_dropped=memories > 0, omitted_messages=omitted)
    if described.total > budget and current is not None:
        # What follows the latest user message (the newest reply and its tool results) shares what is left.
        tail = list(range(current + 1, len(messages)))
        room = budget - described.total + sum(cal(_message_tokens(messages[i])) for i in tail)
        if tail and room > 0:
            share = room // len(tail)
            for i in tail:
                if cal(_message_tokens(messages[i])) > share:
                    messages[i] = fit(messages[i], max(int(share / calibration) - _CUT_NOTE_TOKENS, 16) * BYTES_PER_TOKEN)
            described = breakdown(memories_dropped=memories > 0, omitted_messages=omitted)
    if described.total > budget:
        return _overflow(profile, budget, described)
    return AssembledContext(_joined(summarised, budget_note), messages, described)


def _overflow(profile: ModelProfile, budget: int, described: ContextBreakdown) -> ApplicationError:
    return ApplicationError(
        f"the context needs ~{described.total} tokens, ~{described.pinned} of them pinned (system prompt "
        f"{described.system_prompt}, tool specs {described.tool_specs}, summary {described.summary}, current message "
        f"{described.current_message}), but profile {profile.name!r} has {budget} for input (context_window "
        f"{profile.context_window} - max_output_tokens {profile.max_output_tokens}); nothing was sent",
        described.model_dump(mode="json"),
        type="ContextOverflow",
        non_retryable=True,
    )
