"""Context-window bookkeeping shared by the session workflow and the model activities.

The workflow keeps a ``ContextState`` (token estimates per transcript position, the latest
compaction summary, calibration) and sends a small ``ContextPlan`` of position ranges to
the model activity, which loads the content from the store. Units are tokens unless a
name says otherwise.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentrt.schemas._base import Model
from agentrt.schemas._budget import ModelPrice
from agentrt.schemas._messages import Usage

__all__ = [
    "CompactInput",
    "CompactResult",
    "ContextBreakdown",
    "ContextEntry",
    "ContextPlan",
    "ContextState",
    "DescribeProfileInput",
    "ProfileInfo",
    "ProfileLookup",
    "TruncatedMessage",
]


class ContextEntry(Model):
    """One transcript message as the planner sees it: its position, role and size.

    ``tokens`` is the uncalibrated estimate (see ``workflows.context.estimate_tokens``);
    ``state_keys`` are the keys of state this tool result updates (state projection).
    """

    position: int
    role: Literal["system", "user", "assistant", "tool"]
    tokens: int
    state_keys: list[str] = Field(default_factory=list)


class ContextState(Model):
    """The context pointer carried through continue-as-new.

    - ``entries``: messages at positions >= ``summary_upto`` (older ones are summarised).
    - ``summary_id``/``summary_upto``/``summary_tokens``: the latest compaction summary,
      standing for positions < ``summary_upto``; None before the first compaction.
    - ``calibration``: provider-reported input tokens ÷ estimated tokens, smoothed.
    - ``next_summary_id``: the id the next summary gets.
    """

    entries: list[ContextEntry] = Field(default_factory=list)
    summary_id: int | None = None
    summary_upto: int = 0
    summary_tokens: int = 0
    calibration: float = 1.0
    next_summary_id: int = 1
    compactions: int = 0


class TruncatedMessage(Model):
    """Show at most about ``max_bytes`` UTF-8 bytes of the message at ``position`` (head and tail kept)."""

    position: int
    max_bytes: int


class ContextPlan(Model):
    """What one model call sees: ``ranges`` of positions [start, end), the summary, truncations.

    ``estimated_tokens`` is the calibrated estimate of the whole input (system prompt, tools,
    summary, messages); ``omitted`` counts the live-segment messages left out to fit.
    """

    ranges: list[tuple[int, int]]
    summary_id: int | None = None
    truncate: list[TruncatedMessage] = Field(default_factory=list)
    estimated_tokens: int = 0
    raw_tokens: int = 0
    messages: int = 0
    omitted: int = 0


class ContextBreakdown(Model):
    """One model call's assembled input by source, in estimated tokens (bytes ÷ 4 plus 4 per
    message, calibrated by the provider's reports as the context plan is).

    ``system_prompt``: agentrt's default prompt as the profile and session extend it, the
    skills and the budget note; ``tool_specs``: the tools' JSON specs; ``memories``: the
    "Relevant memories" section; ``summary``: the compaction summary; ``current_message``: the
    latest user message; ``history``: every other message sent. ``pinned`` is what the call
    cannot leave out (system prompt, tool specs, summary, current message); ``budget`` the input
    budget (``context_window`` − ``max_output_tokens``). ``omitted_messages``: older messages the
    worker left out beyond the plan to fit; ``memories_dropped``: the memories were left out to fit.
    """

    system_prompt: int
    tool_specs: int
    memories: int = 0
    summary: int = 0
    history: int = 0
    current_message: int = 0
    total: int
    pinned: int
    budget: int
    omitted_messages: int = 0
    memories_dropped: bool = False


class ProfileInfo(Model):
    """The context limits of a model profile (tokens), as the worker's configuration declares them."""

    name: str
    provider: str
    model: str = ""
    context_window: int
    max_output_tokens: int
    price: ModelPrice | None = Field(default=None, exclude_if=lambda v: v is None)
    # The fraction of the input budget past which a turn's end compacts (1.0: never by tokens);
    # None: the session's, else the default ``COMPACT_THRESHOLD`` (0.8).
    compact_threshold: float | None = Field(default=None, exclude_if=lambda v: v is None)


class ProfileLookup(Model):
    """Result of ``profiles.describe``: the profile's limits, or why there are none (an unknown name)."""

    info: ProfileInfo | None = None
    error: str | None = None


class DescribeProfileInput(Model):
    """Activity ``profiles.describe``: the limits of ``profile`` (``ProfileLookup``)."""

    profile: str
    script: str | None = None


class CompactInput(Model):
    """Activity ``context.compact``: summarise the previous summary plus ``ranges`` into summary ``summary_id``.

    ``max_summary_tokens`` bounds the summary; ``max_message_bytes`` bounds each message shown
    to the summariser; the summary stands for positions < ``upto_position`` once stored.
    """

    session_id: str
    profile: str
    script: str | None = None
    previous_summary_id: int | None = None
    ranges: list[tuple[int, int]]
    summary_id: int
    upto_position: int
    max_summary_tokens: int
    max_message_bytes: int


class CompactResult(Model):
    summary_id: int
    summary_chars: int
    preview: str = ""
    usage: Usage = Field(default_factory=Usage)
