"""The session workflow's inputs, outputs, messages (updates, signals, queries) and state view."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from datetime import datetime
from typing import Any, Literal, TypeVar

from pydantic import Field, TypeAdapter, field_validator

from agentrt.schemas._base import Model
from agentrt.schemas._budget import Budget, BudgetCrossing, Spend
from agentrt.schemas._config import SessionConfig
from agentrt.schemas._context import ContextState, ProfileInfo
from agentrt.schemas._events import Event
from agentrt.schemas._health import ActivityWait
from agentrt.schemas._mcp import ElicitationAnswer
from agentrt.schemas._memory import MemoryProposal
from agentrt.schemas._messages import PositionedMessage, ToolSpec, Usage
from agentrt.schemas._output import OutputSpec
from agentrt.schemas._pause import PauseState
from agentrt.schemas._run_errors import OutputInvalid
from agentrt.schemas._skills import SkillInfo
from agentrt.schemas._turns import PermissionRequest, TurnStatus

__all__ = [
    "ArchiveInput",
    "CancelTurnInput",
    "CompactOutcome",
    "CompactRequest",
    "EventsQuery",
    "MAX_IDEMPOTENCY_KEY_CHARS",
    "MAX_TITLE_CHARS",
    "PermissionDecision",
    "QueuedOperation",
    "ReconcileDecision",
    "RenameInput",
    "SendMessageInput",
    "SendMessageResult",
    "SentMessage",
    "SessionGrant",
    "SessionInput",
    "SessionResult",
    "SessionState",
    "SessionStateView",
    "SessionStatus",
    "SwitchModelInput",
    "SwitchModelResult",
    "TurnOutcome",
    "WaitTurnInput",
    "idempotency_digest",
    "idempotency_key_problem",
    "title_problem",
]

SessionStatus = Literal["idle", "running", "awaiting_approval", "cancelling", "archived", "failed", "paused"]

T = TypeVar("T")


# An idempotency key: 1 to MAX_IDEMPOTENCY_KEY_CHARS characters of these (a UUID, a ULID, "order-42:retry").
MAX_IDEMPOTENCY_KEY_CHARS = 200
IDEMPOTENCY_KEY_CHARACTERS = "A-Z a-z 0-9 . _ : -"
_IDEMPOTENCY_KEY = re.compile(r"[A-Za-z0-9._:-]{1,%d}" % MAX_IDEMPOTENCY_KEY_CHARS)
# Hex digits an idempotency digest keeps: the first 128 bits of a SHA-256.
IDEMPOTENCY_DIGEST_CHARS = 32


def idempotency_key_problem(key: str) -> str | None:
    """Why ``key`` is not an idempotency key (1 to ``MAX_IDEMPOTENCY_KEY_CHARS`` characters of
    ``IDEMPOTENCY_KEY_CHARACTERS``), or None when it is one."""
    if not isinstance(key, str):
        return f"an idempotency key is a string, not {type(key).__name__}"
    if _IDEMPOTENCY_KEY.fullmatch(key):
        return None
    if not key:
        return "the idempotency key is empty"
    if len(key) > MAX_IDEMPOTENCY_KEY_CHARS:
        return f"an idempotency key has at most {MAX_IDEMPOTENCY_KEY_CHARS} characters, this one has {len(key)}"
    bad = next(c for c in key if not _IDEMPOTENCY_KEY.fullmatch(c))
    return f"an idempotency key has only the characters {IDEMPOTENCY_KEY_CHARACTERS}, this one has {bad!r}"


def idempotency_digest(*parts: str) -> str:
    """A short digest of ``parts`` (e.g. principal, key, message text): the first
    ``IDEMPOTENCY_DIGEST_CHARS`` hex digits of the SHA-256 of their JSON array, so no two lists
    of parts share an encoding. Deterministic across processes (used inside workflows)."""
    encoded = json.dumps(list(parts), ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
    return hashlib.sha256(encoded).hexdigest()[:IDEMPOTENCY_DIGEST_CHARS]


class SendMessageInput(Model):
    """Update ``send_message``: queue a user message; returns a ``SendMessageResult``.

    ``idempotency_key`` (1 to 200 characters of ``A-Z a-z 0-9 . _ : -``): the session keeps the
    first message sent with it by ``principal`` (its turn id and text digest) and answers a repeat
    with that message's turn instead of queueing another; the same key with another text is
    rejected. Left out when None: a worker of an earlier version still reads the message.
    ``output``: the JSON object this turn's final answer must be (``OutputSpec``); overrides the
    session's ``SessionConfig.output`` for this turn. Left out when None.
    ``if_idle``: send only if the session is idle; the update is rejected with type ``SessionBusy``
    (nothing queued) while a turn runs, a compaction runs or anything is queued. A repeat of a message
    sent with its ``idempotency_key`` answers the first one's turn, busy or not. Left out when False.
    """

    text: str
    principal: str
    idempotency_key: str | None = Field(default=None, exclude_if=lambda v: v is None)
    output: OutputSpec | None = Field(default=None, exclude_if=lambda v: v is None)
    if_idle: bool = Field(default=False, exclude_if=lambda v: v is False)

    @field_validator("idempotency_key")
    @classmethod
    def _key_is_valid(cls, key: str | None) -> str | None:
        problem = None if key is None else idempotency_key_problem(key)
        if problem is not None:
            raise ValueError(problem)
        return key


# The longest session title (characters).
MAX_TITLE_CHARS = 200


class RenameInput(Model):
    """Update ``rename``: the session's ``title`` becomes ``title`` (1 to ``MAX_TITLE_CHARS``
    characters, no control characters; None clears it). The owner, or an operator with a ``reason``.
    Recorded as ``SessionRenamed``; the store's session row and listings show the new title."""

    principal: str
    title: str | None = Field(default=None, min_length=1, max_length=MAX_TITLE_CHARS)
    reason: str | None = None

    @field_validator("title")
    @classmethod
    def _title_is_text(cls, title: str | None) -> str | None:
        problem = None if title is None else title_problem(title)
        if problem is not None:
            raise ValueError(problem)
        return title


def title_problem(title: str) -> str | None:
    """Why ``title`` cannot be a session's title (blank, or holding a control character), or None."""
    if not title.strip():
        return "a title is not blank (leave it out to clear the title)"
    if any(unicodedata.category(c) == "Cc" for c in title):
        return "a title holds no control characters (newlines, tabs, escapes)"
    return None


class SendMessageResult(Model):
    turn_id: str
    queued_behind: int = 0


class WaitTurnInput(Model):
    """Update ``wait_turn``: wait until the turn ends; ``timeout_seconds`` None waits forever (at
    most ten years otherwise; 0 answers at once: the outcome, or ``pending``)."""

    turn_id: str
    timeout_seconds: float | None = Field(default=None, ge=0)


class TurnOutcome(Model):
    """How a turn ended.

    ``status``: ``completed`` (final answer in ``answer``), ``failed`` (``error`` says why),
    ``cancelled`` (``cancel_turn`` or ``archive``), ``round_limit`` (``max_rounds_per_turn``
    model calls without a final answer) or ``budget_exceeded`` (the session's spend crossed a
    limit of its budget, or a model call was refused before it was sent because its prompt alone
    would pass one or its tenant is at a quota; ``error`` says which, ``error_type`` is
    ``BudgetExceeded`` or ``QuotaExceeded``, ``crossing`` the limit) or
    ``output_invalid`` (a turn with an output spec whose last allowed answer still did not match
    it; ``answer`` keeps that answer, ``error`` the validation errors, ``error_type`` is
    ``OutputInvalid``). ``output``: a structured turn's validated object (a JSON object; see
    ``output_as``), None for a plain-text turn.
    ``pending``: ``wait_turn`` returned before the turn ended, because its timeout passed or
    (``ask_again`` True) because the session is about to continue as new; wait again (a handle
    without a run id follows the new run).
    """

    turn_id: str
    status: TurnStatus | Literal["pending"]
    answer: str | None = None
    error: str | None = None
    error_type: str | None = Field(default=None, exclude_if=lambda v: v is None)
    rounds: int = 0
    tool_calls: int = 0
    usage: Usage = Field(default_factory=Usage)
    ask_again: bool = False
    output: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)
    crossing: BudgetCrossing | None = Field(default=None, exclude_if=lambda v: v is None)

    def output_as(self, output_type: type[T]) -> T:
        """``output`` validated as ``output_type`` (a pydantic model class, or any type pydantic
        validates: ``output_as(Triage)``). Raises ``OutputInvalid`` for an ``output_invalid`` turn
        (its last answer and errors), ``ValueError`` for a turn with no output (a plain-text
        turn, or one that did not complete) and pydantic's ``ValidationError`` for an object
        that does not fit ``output_type``."""
        if self.status == "output_invalid":
            raise OutputInvalid(self.turn_id, self.error or "", self.answer)
        if self.output is None:
            raise ValueError(f"turn {self.turn_id} has no structured output (status {self.status})")
        return TypeAdapter(output_type).validate_python(self.output)


class SessionResult(Model):
    """Result of ``SessionWorkflow.run`` once the session is archived or cancelled."""

    session_id: str
    turns: int
    usage: Usage
    status: Literal["archived", "cancelled"]
    # A session with ``ends_after_turn``: its turn's outcome, and its whole spend (tokens, cost, tool calls).
    outcome: TurnOutcome | None = Field(default=None, exclude_if=lambda v: v is None)
    spend: Spend | None = Field(default=None, exclude_if=lambda v: v is None)


class PermissionDecision(Model):
    """Signal ``permission_decision``: ``{"request_id": "req-1", "decision": "grant", "principal": "alice"}``.

    ``call_id`` and ``arguments_sha256`` are optional bindings: when given they must match
    the request, so a decision made for one call can never approve another. A grant may
    also say ``scope = "session"`` (later calls under the same policy rule run without
    asking; see ``SessionGrant``) and ``arguments``: the call runs with these instead (they
    must be valid for the tool; the sandbox and policy still apply), recorded as
    ``ToolCallEdited`` with the editor and the new arguments' SHA-256.
    """

    request_id: str
    decision: Literal["grant", "deny"]
    principal: str
    reason: str | None = None
    call_id: str | None = None
    arguments_sha256: str | None = None
    # Left out at their defaults: a worker of an earlier version still reads the decision.
    scope: Literal["once", "session"] = Field(default="once", exclude_if=lambda v: v == "once")
    arguments: dict[str, Any] | None = Field(default=None, exclude_if=lambda v: v is None)


class SessionGrant(Model):
    """An approval that holds for the rest of the session: calls whose policy rule is ``rule``
    (``"<tool>:<risk class>:<classification>"``, e.g. ``"shell.run:destructive:rm -r"``) run
    without asking. Granted by ``principal`` (the owner) on ``request_id``."""

    principal: str
    tool: str
    rule: str
    request_id: str


class ReconcileDecision(Model):
    """Signal ``reconcile``: ``{"request_id": "req-2", "outcome": "not_applied", "principal": "alice"}``.

    ``applied``: the effect happened; the call is recorded as done (result unknown).
    ``not_applied``: it did not; the call runs once more.
    """

    request_id: str
    outcome: Literal["applied", "not_applied"]
    principal: str
    note: str | None = None


class CancelTurnInput(Model):
    """Signal ``cancel_turn``: cancel the running turn (``turn_id`` None means whichever runs),
    or the queued turn ``turn_id``. ``include_queued``: drop every queued turn as well.

    The turn ends ``cancelled`` within about a second wherever it is (model call, tool call,
    approval wait, between rounds); a tool call or model reply that finished meanwhile is
    recorded, and nothing further runs.
    """

    turn_id: str | None = None
    principal: str | None = None
    reason: str | None = None
    include_queued: bool = False


class ArchiveInput(Model):
    """Update ``archive``: end the session; a running turn is cancelled, queued ones too."""

    principal: str
    reason: str | None = None


class EventsQuery(Model):
    """Query ``events``: events with ``seq > since_seq``, at most ``limit`` of them."""

    since_seq: int = 0
    limit: int = Field(default=1000, ge=1, le=10_000)


class SwitchModelInput(Model):
    """Update ``switch_model``: use ``profile`` from the next turn on.

    Runs behind the active turn and queued messages; compacts first when the conversation
    does not fit the new profile's window. Fails for a non-owner or an unknown profile.
    """

    profile: str
    principal: str


class SwitchModelResult(Model):
    """A switch that happened. ``compaction_error`` says why a needed compaction failed (the
    older part of the conversation is then omitted rather than summarised);
    ``estimated_tokens`` is the next call's planned input. ``from_profile == profile`` means
    the session already used it (nothing changed)."""

    from_profile: str
    profile: str
    context_window: int
    max_output_tokens: int
    compacted: bool = False
    compaction_error: str | None = None
    estimated_tokens: int = 0


class CompactRequest(Model):
    """Update ``compact``: summarise the conversation now (behind the active turn)."""

    principal: str


class CompactOutcome(Model):
    """What a compaction did. ``compacted`` False: nothing old enough to summarise or a
    compaction already running (``reason`` says why), or the summary call failed (``error``;
    ``fallback_used``: the session goes on with the sliding window). Token counts are estimates."""

    compacted: bool
    summary_id: int | None = None
    upto_position: int | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    reason: str | None = None
    error: str | None = None
    fallback_used: bool = Field(default=False, exclude_if=lambda v: v is False)


class QueuedOperation(Model):
    """An inbox entry: a user message (a turn), a model switch or a compaction."""

    kind: Literal["message", "switch_model", "compact"]
    op_id: str
    principal: str
    text: str = ""
    profile: str | None = None
    # A message's own output spec (``SendMessageInput.output``); left out when None.
    output: OutputSpec | None = Field(default=None, exclude_if=lambda v: v is None)


class SentMessage(Model):
    """A message the session queued for an idempotency key: its turn and the digest of its text
    (``idempotency_digest(text)``)."""

    turn_id: str
    text_digest: str


class SessionState(Model):
    """Everything a session carries through continue-as-new (the config travels beside it).

    The workflow holds one instance and continues as new with it as it is. Counters number
    turns (``turn-N``), approval requests (``req-N``) and inbox operations (``op-N``);
    ``approval_decisions`` holds decisions on ``pending_approvals`` not yet acted on;
    ``auto_compaction_pause`` counts turns left without automatic compaction after one failed.
    """

    run: int = 1
    seq: int = 0
    next_position: int = 0
    turn_counter: int = 0
    request_counter: int = 0
    op_counter: int = 0
    assistant_messages: int = 0
    turns_completed: int = 0
    usage: Usage = Field(default_factory=Usage)
    tools: list[ToolSpec] = Field(default_factory=list)
    profile: ProfileInfo | None = None
    context: ContextState = Field(default_factory=ContextState)
    inbox: list[QueuedOperation] = Field(default_factory=list)
    recent_outcomes: list[TurnOutcome] = Field(default_factory=list)
    pending_approvals: list[PermissionRequest] = Field(default_factory=list)
    approval_decisions: dict[str, PermissionDecision | ReconcileDecision | ElicitationAnswer] = Field(default_factory=dict)
    # Left out when empty: a worker of an earlier version still reads the carried state.
    session_grants: list[SessionGrant] = Field(default_factory=list, exclude_if=lambda v: not v)
    # Decisions and cancels from strangers (not the owner, no principal) ignored in this run; only
    # the first MAX_RECORDED_STRANGER_EVENTS of them are recorded as events.
    strangers_ignored: int = Field(default=0, exclude_if=lambda v: v == 0)
    # Proposed memories waiting for the owner's decide_memory, and advisor reviews run so far.
    memory_proposals: list[MemoryProposal] = Field(default_factory=list, exclude_if=lambda v: not v)
    advisor_reviews: int = Field(default=0, exclude_if=lambda v: v == 0)
    # Sessions this one delegated to (``delegate``), numbering them across continue-as-new.
    delegations: int = Field(default=0, exclude_if=lambda v: v == 0)
    # The skills found when the session started (``skill.activate`` offers them).
    skills: list[SkillInfo] = Field(default_factory=list, exclude_if=lambda v: not v)
    auto_compaction_pause: int = 0
    # Spend tracking, for a session with a budget (or ``ends_after_turn``): when it started
    # (``workflow.now()``; None: spend is not tracked), the cost of its model calls (US dollars,
    # by its profile's price) and the tool calls its model asked for. Left out at their defaults.
    started_at: datetime | None = Field(default=None, exclude_if=lambda v: v is None)
    cost_usd: float = Field(default=0.0, exclude_if=lambda v: v == 0)
    tool_calls: int = Field(default=0, exclude_if=lambda v: v == 0)
    unflushed_events: list[Event] = Field(default_factory=list)
    unflushed_messages: list[PositionedMessage] = Field(default_factory=list)
    # Messages sent with an idempotency key, by ``idempotency_digest(principal, key)``, oldest first;
    # at most MAX_SENT_KEYS of them (workflows/_idempotency.py). Left out when empty.
    sent_keys: dict[str, SentMessage] = Field(default_factory=dict, exclude_if=lambda v: not v)
    # Who paused the session (update ``pause``), while it is paused; left out otherwise.
    paused: PauseState | None = Field(default=None, exclude_if=lambda v: v is None)


class SessionInput(Model):
    """Input of ``SessionWorkflow.run``: ``state`` is None for a new session and the carried
    state when the session continues as new."""

    config: SessionConfig
    state: SessionState | None = None


class SessionStateView(Model):
    """Answer of query ``state``.

    ``context_tokens`` is the estimated input of the next model call (tokens, as planned
    against ``context_window``); ``live_tokens`` the whole conversation since the latest
    summary, before anything is omitted or cut (what compaction reduces); ``run`` counts
    the workflow runs (continue-as-new) so far.
    """

    session_id: str
    owner: str
    operators: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    # The session's confinement and who decides (left out at their defaults).
    sandbox: str = Field(default="workspace_write", exclude_if=lambda v: v == "workspace_write")
    network: bool = Field(default=False, exclude_if=lambda v: v is False)
    approval_mode: str = Field(default="on_request", exclude_if=lambda v: v == "on_request")
    strangers_ignored: int = Field(default=0, exclude_if=lambda v: v == 0)
    status: SessionStatus
    # Why the session's workflow failed (``"AgentNotRegistered: ..."``), with status ``failed``.
    error: str | None = Field(default=None, exclude_if=lambda v: v is None)
    profile: str
    # The registered agent the session runs as (docs/agents.md); left out for none.
    agent: str | None = Field(default=None, exclude_if=lambda v: v is None)
    # The session's title (``SessionConfig.title``, changed by ``rename``); left out for none.
    title: str | None = Field(default=None, exclude_if=lambda v: v is None)
    workspace: str
    active_turn_id: str | None = None
    queued_turn_ids: list[str] = Field(default_factory=list)
    pending_approvals: list[PermissionRequest] = Field(default_factory=list)
    pending_memories: list[MemoryProposal] = Field(default_factory=list, exclude_if=lambda v: not v)
    advisor: str = Field(default="off", exclude_if=lambda v: v == "off")
    turns_completed: int = 0
    usage: Usage = Field(default_factory=Usage)
    last_seq: int = 0
    current_round: int = 0
    context_window: int | None = None
    max_output_tokens: int | None = None
    context_tokens: int | None = None
    live_tokens: int | None = None
    summary_id: int | None = None
    compactions: int = 0
    run: int = 1
    first_seq_in_run: int = 1
    # A session with a budget: the budget, what it spent and what is left (left out otherwise).
    budget: Budget | None = Field(default=None, exclude_if=lambda v: v is None)
    spend: Spend | None = Field(default=None, exclude_if=lambda v: v is None)
    remaining: Budget | None = Field(default=None, exclude_if=lambda v: v is None)
    # While the session is paused (status ``paused``): who paused it, why and since when.
    paused: PauseState | None = Field(default=None, exclude_if=lambda v: v is None)
    # Its running activities that wait for the store or are being retried (``AgentClient.state(...,
    # waits=True)`` and the gateway fill it in from the workflow's description; the query leaves it empty).
    waits: list[ActivityWait] = Field(default_factory=list, exclude_if=lambda v: not v)

