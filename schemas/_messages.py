"""Conversation content: messages, tool calls, tool results and token usage."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from agentrt.schemas._base import Model

__all__ = [
    "Message",
    "PositionedMessage",
    "ReasoningBlock",
    "ToolCall",
    "ToolSpec",
    "Usage",
]


def _zero(value: int) -> bool:
    return value == 0


class Usage(Model):
    """Token counts as reported by the provider (tokens).

    - ``input_tokens``: every prompt token, cached ones included (OpenAI's ``prompt_tokens``;
      Anthropic's ``input_tokens`` + ``cache_read_input_tokens`` + ``cache_creation_input_tokens``).
    - ``output_tokens``: every completion token, reasoning included.
    - ``cache_read_tokens``: of ``input_tokens``, those read from the provider's prompt cache
      (OpenAI ``prompt_tokens_details.cached_tokens``, Anthropic ``cache_read_input_tokens``).
    - ``cache_write_tokens``: of ``input_tokens``, those written to the cache (Anthropic
      ``cache_creation_input_tokens``; OpenAI writes its cache without saying).
    - ``reasoning_tokens``: of ``output_tokens``, those spent on reasoning
      (``completion_tokens_details.reasoning_tokens``, ``output_tokens_details.reasoning_tokens``).

    The last three are left out of the JSON when 0, so a usage without them reads as before.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = Field(default=0, exclude_if=_zero)
    cache_write_tokens: int = Field(default=0, exclude_if=_zero)
    reasoning_tokens: int = Field(default=0, exclude_if=_zero)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class ReasoningBlock(Model):
    """Reasoning a model produced beside its answer: stored and shown as reasoning, never as the
    answer, and sent back to the provider that made it where its API requires that.

    - ``type``: ``thinking`` (Anthropic extended thinking; ``signature`` must go back unchanged),
      ``redacted_thinking`` (Anthropic; ``data`` is opaque and goes back as is), ``reasoning``
      (reasoning text: DeepSeek/GLM ``reasoning_content``, Mistral ``thinking`` parts,
      OpenRouter ``reasoning``, ``<think>`` blocks in content; never sent back) or
      ``reasoning_item`` (an OpenAI Responses reasoning item: ``id``, summary in ``text``,
      ``data`` its ``encrypted_content``).
    - ``provider``: the adapter that produced it (``anthropic``, ``openai``,
      ``openai-responses``); another provider never receives it.
    - ``source``: for ``reasoning``, the wire field it came in when that decides whether it
      goes back (``reasoning_content``: DeepSeek requires it back on a reply that called tools).

    Sources: https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking,
    https://api-docs.deepseek.com/guides/reasoning_model,
    https://platform.openai.com/docs/guides/reasoning.
    """

    type: Literal["thinking", "redacted_thinking", "reasoning", "reasoning_item"]
    provider: str
    text: str = ""
    signature: str | None = Field(default=None, exclude_if=lambda v: v is None)
    data: str | None = Field(default=None, exclude_if=lambda v: v is None)
    id: str | None = Field(default=None, exclude_if=lambda v: v is None)
    source: str | None = Field(default=None, exclude_if=lambda v: v is None)


class ToolCall(Model):
    """One tool call requested by the model.

    ``arguments`` is the parsed JSON object, or None when the model's argument text did not
    parse as a JSON object; then ``arguments_error`` says why and ``arguments_raw`` keeps
    the text the model sent, so the error can be shown back to it.
    """

    id: str
    name: str
    arguments: dict[str, Any] | None = None
    arguments_raw: str = ""
    arguments_error: str | None = None


class ToolSpec(Model):
    """A tool as the model and the policy engine see it.

    ``parameters`` is a JSON Schema (draft 2020-12) object for the arguments; ``risk`` is
    the tool's risk class: ``read_only`` (no effect), ``idempotent`` (repeatable effect) or
    ``effectful`` (at most once). ``local_activity``: the tool is read-only and returns in
    well under a second (``fs.read``, ``fs.list``), so a session may run it as a Temporal
    local activity, inside the workflow task that asked for it (``SessionConfig.local_tools``);
    never sent to a model.
    """

    name: str
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    risk: Literal["read_only", "idempotent", "effectful"] = "read_only"
    # Left out when False: a worker of an earlier version (extra fields forbidden) still reads the spec.
    local_activity: bool = Field(default=False, exclude_if=lambda v: v is False)
    # Tools of another source than the worker's registry (left out for built-ins, as above):
    # ``source`` names it (``mcp:<server>``); ``untrusted``: every call needs an approval unless
    # the policy denies it; ``destructive``: a call is classified ``destructive`` (an MCP tool's
    # ``destructiveHint``); ``risk_reason``: where ``risk`` came from (an annotation, an override).
    source: str | None = Field(default=None, exclude_if=lambda v: v is None)
    untrusted: bool = Field(default=False, exclude_if=lambda v: v is False)
    destructive: bool = Field(default=False, exclude_if=lambda v: v is False)
    risk_reason: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # A tool's own bound on one call (seconds; ``@tool(timeout_seconds=...)``), within the session's
    # ``tool_timeout_seconds``; left out when None.
    timeout_seconds: float | None = Field(default=None, gt=0, allow_inf_nan=False, exclude_if=lambda v: v is None)


class Message(Model):
    """One transcript entry, as stored and as sent to a provider.

    - ``user``: ``text``.
    - ``assistant``: ``text`` (may be empty) and ``tool_calls``; ``reasoning`` the blocks
      the model reasoned in before them (filled in from the store's ``reasoning`` table when
      a context is read; never in workflow history).
    - ``tool``: the result of ``tool_call_id`` (``name`` is the tool); ``is_error`` marks a
      failed call whose ``text`` is the error shown to the model; ``state_keys`` name the
      state this result updates (e.g. ``file:notes.md``): a later result updating the same
      keys supersedes it in the context, while the stored result is never rewritten.
    """

    role: Literal["system", "user", "assistant", "tool"]
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    state_keys: list[str] = Field(default_factory=list)
    reasoning: list[ReasoningBlock] = Field(default_factory=list, exclude_if=lambda v: not v)


class PositionedMessage(Model):
    """A transcript message at its ``position`` (0, 1, 2, ... per session), with the turn that added it."""

    position: int
    turn_id: str | None = None
    message: Message
