"""What one model call sees: the system prompt (agentrt's default as the profile and the session
extend or replace it, the skills, the memories), and the transcript by the workflow's context
plan (ranges, a compaction summary, notes for what is left out, oversized messages cut, results
superseded by later ones hidden, reasoning given back to providers that take it).

``CallContext`` reads all of it from the store, on a transaction when given one; the model
activities (``_model``) decide when and write the receipts.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from sqlalchemy import Connection
from temporalio.exceptions import ApplicationError

from agentrt.activities._system_prompt import compose_system_prompt, default_system_prompt, memory_section, skills_section
from agentrt.schemas import Message, ModelCallInput, ModelProfile, SessionConfig, ToolSpec
from agentrt.workflows.context import superseded_positions, truncate_middle

if TYPE_CHECKING:
    from agentrt.store import Store

SUMMARY_HEADING = "## Summary of the earlier conversation"
OMITTED_NOTE = (
    "[Earlier messages of this conversation are omitted here to fit the context window; "
    "they remain in the session's transcript.]"
)

# Session configs kept per worker process for the default system prompt (a config never
# changes in the parts the prompt shows: workspace, approval policy).
SESSION_CONFIG_CACHE_SIZE = 1024


class CallContext:
    """Reads the system prompt and messages of a model call from ``store``; keeps the sessions'
    stored configs it read (up to ``SESSION_CONFIG_CACHE_SIZE``, least recently used out)."""

    def __init__(self, store: "Store") -> None:
        self._store = store
        self._session_configs: OrderedDict[str, SessionConfig] = OrderedDict()

    def session_config(self, session_id: str, conn: Connection | None) -> SessionConfig | None:
        """The session's stored config (None when the store has none), cached per process."""
        if session_id in self._session_configs:
            self._session_configs.move_to_end(session_id)
            return self._session_configs[session_id]
        config = self._store.session_config(session_id, conn=conn)
        if config is not None:
            self._session_configs[session_id] = config
            while len(self._session_configs) > SESSION_CONFIG_CACHE_SIZE:
                self._session_configs.popitem(last=False)
        return config

    def system_prompt(
        self, input: ModelCallInput, profile: ModelProfile, tools: list[ToolSpec], conn: Connection | None
    ) -> str:
        """agentrt's default system prompt as the profile and the session extend or replace it."""
        default = default_system_prompt(
            self.session_config(input.session_id, conn), tools, datetime.now(timezone.utc).date()
        )
        composed = compose_system_prompt(default, profile, input.system_prompt, input.system_prompt_mode)
        section = skills_section(input.skills)
        if not section:
            return composed
        return f"{composed}\n\n{section}" if composed else section

    def with_memories(self, session_id: str, system: str | None, messages: list[Message], conn: Connection | None) -> str | None:
        """``system`` with the "Relevant memories" section at its end (after a compaction summary:
        the part that changes most goes last, so providers' prompt caches keep the rest): the
        accepted memories the session's owner may see here (owner, session and workspace from the
        stored config), ranked by the latest user message in ``messages``. Unchanged when the
        session has no stored config or no such memory."""
        config = self.session_config(session_id, conn)
        if config is None:
            return system
        found = self._store.visible_memories(config.owner, session_id, config.workspace, conn=conn)
        query = next((m.text for m in reversed(messages) if m.role == "user" and m.text != OMITTED_NOTE), "")
        section = memory_section(found, query, datetime.now(timezone.utc))
        if not section:
            return system
        return f"{system}\n\n{section}" if system else section

    def messages(
        self,
        input: ModelCallInput,
        conn: Connection | None = None,
        *,
        system: str | None = None,
        with_reasoning: bool = False,
        later: Sequence[tuple[int, Message]] = (),
    ) -> tuple[str | None, list[Message]]:
        """The system prompt and messages a call sees: by the plan's ranges, or everything before
        the reply (read on ``conn``, a store transaction, when given). ``system`` is the system
        prompt (default: ``input.system_prompt`` as it is); ``with_reasoning`` attaches each
        assistant message's stored reasoning blocks (for providers that take them back).
        ``later``: ``(position, message)`` pairs after the reply's position that are not stored
        yet (the rounds a fused model call ran itself), shown after the stored ones.

        Raises a retryable ``ApplicationError`` typed ``MissingSummary`` when the plan names a
        compaction summary the store does not hold."""
        if system is None:
            system = input.system_prompt
        plan = input.plan
        if plan is None:
            rows = self._store.messages(input.session_id, input.upto_position, conn=conn)
            if with_reasoning:
                rows = self._with_reasoning(input.session_id, rows, conn)
            return system, [m for _, m in [*rows, *later]]
        rows = self._store.messages_in(input.session_id, plan.ranges, conn=conn)
        if with_reasoning:
            rows = self._with_reasoning(input.session_id, rows, conn)
        rows = [*rows, *later]
        superseded = superseded_positions((p, m.state_keys) for p, m in rows if m.role == "tool" and not m.is_error)
        limits = {t.position: t.max_bytes for t in plan.truncate}
        starts = {start for start, _ in plan.ranges[1:]}
        messages: list[Message] = []
        for position, message in rows:
            if position in starts:
                messages.append(Message(role="user", text=OMITTED_NOTE))
            if position in superseded:
                keys = ", ".join(superseded[position])
                text = f"[superseded: {keys} was updated by a later tool result; this earlier result is not shown]"
                message = message.model_copy(update={"text": text})
            elif position in limits and message.role != "user":
                # A user message is never cut: one that does not fit fails the call (fit_context).
                message = fit(message, limits[position])
            messages.append(message)
        if (plan.omitted or plan.summary_id is not None) and (not messages or messages[0].role != "user"):
            messages.insert(0, Message(role="user", text=OMITTED_NOTE))
        if plan.summary_id is not None:
            summary = self._store.summary(input.session_id, plan.summary_id, conn=conn)
            if summary is None:
                raise ApplicationError(
                    f"compaction summary {plan.summary_id} of session {input.session_id} is not in the store",
                    type="MissingSummary",
                )
            system = f"{system}\n\n{SUMMARY_HEADING}\n{summary}" if system else f"{SUMMARY_HEADING}\n{summary}"
        return system, messages

    def _with_reasoning(
        self, session_id: str, rows: list[tuple[int, Message]], conn: Connection | None
    ) -> list[tuple[int, Message]]:
        found = self._store.reasoning_at(session_id, (p for p, m in rows if m.role == "assistant"), conn=conn)
        if not found:
            return rows
        return [(p, m.model_copy(update={"reasoning": found[p]}) if p in found else m) for p, m in rows]


def takes_reasoning_back(profile: ModelProfile) -> bool:
    """Whether ``profile``'s provider is sent earlier replies' reasoning: Anthropic with extended
    thinking (thinking blocks must accompany tool use), OpenAI Responses (reasoning items) and
    Chat Completions (DeepSeek's ``reasoning_content`` on replies that called tools)."""
    return profile.provider in ("openai", "openai-responses") or (
        profile.provider == "anthropic" and profile.thinking_budget_tokens is not None
    )


def fit(message: Message, max_bytes: int) -> Message:
    """``message`` cut to about ``max_bytes`` UTF-8 bytes in all: its text in the middle, and
    tool-call arguments over their share replaced by a placeholder that says what they were."""
    share = max(max_bytes // (len(message.tool_calls) + 1), 64)
    text = truncate_middle(message.text, share if message.tool_calls else max_bytes)
    calls = []
    for call in message.tool_calls:
        raw = call.arguments_raw or json.dumps(call.arguments)
        size = len(raw.encode())
        if size > share:
            shown = truncate_middle(raw, max(share // 2, 32))
            call = call.model_copy(
                update={"arguments": {"_omitted": f"{size} bytes of arguments, shortened: {shown}"}, "arguments_raw": ""}
            )
        calls.append(call)
    return message.model_copy(update={"text": text, "tool_calls": calls})
