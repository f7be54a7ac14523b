"""Which recorded events are acts of a principal, and the audit row each one makes.

The audit log is derived from the events the session, task and graph workflows already record,
not from the surface that carried the act: an approval sent by ``AgentClient.approve``, by
``agentrt session approve``, by ``POST /v1/sessions/{id}/approvals/{request_id}`` or typed into
the Temporal UI's "Send a Signal" reaches the workflow as the same signal and is recorded as the
same ``PermissionGranted`` event, so it makes the same row. Pure functions: no I/O.

Each act has a key that names it once: a retried write of the same events, or a later event
that repeats an act (a grant for the rest of a session used again, the end of a turn whose
cancel was already recorded), makes no second row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agentrt.schemas import (
    AutonomousTaskBudgetRaised,
    AutonomousTaskCancelled,
    AutonomousTaskGoalAmended,
    AutonomousTaskNudged,
    AutonomousTaskPaused,
    AutonomousTaskResumed,
    BudgetRaised,
    CancelRequested,
    EffectReconciled,
    ElicitationAnswered,
    Event,
    ModelProfileSwitched,
    OperatorActed,
    PermissionDenied,
    PermissionGranted,
    SessionArchived,
    SessionRenamed,
    SessionCancelled,
    SessionPaused,
    SessionResumed,
    TaskCancelled,
    TaskGraphPaused,
    TaskGraphResumed,
    TaskPlanApproved,
    TaskPlanRejected,
    TaskRetried,
    ToolCallEdited,
    shorten,
)

__all__ = [
    "ARCHIVE_CANCEL_REASON",
    "Act",
    "ENDED_AFTER_TURN",
    "MAX_AUDIT_DETAIL_CHARS",
    "MAX_AUDIT_REASON_CHARS",
    "TEMPORAL",
    "bounded_detail",
    "graph_acts",
    "session_acts",
    "task_acts",
]

# The most characters of a reason, and of an act's detail as JSON, an audit row keeps.
MAX_AUDIT_REASON_CHARS = 2_000
MAX_AUDIT_DETAIL_CHARS = 4_096
# A detail value whose JSON is longer than this is cut when the whole detail is over its bound.
_CUT_VALUE_CHARS = 300
# The reason a session's archive gives the cancel of its running or queued turns: part of the
# archive (its own row), not an act of its own.
ARCHIVE_CANCEL_REASON = "session archived"
# The archive reason of a session that ends after its one turn (``SessionWorkflow``): no one acted.
ENDED_AFTER_TURN = "ended after its turn"
# The principal of a workflow cancellation sent to Temporal itself: the session's archive row
# records it; the cancel of its running turn is part of it.
TEMPORAL = "temporal"
# What an ``OperatorActed`` event's action is called in the audit log.
_OPERATOR_ACTIONS = {
    "grant": "approve", "deny": "deny", "reconcile": "reconcile", "answer": "answer", "cancel": "cancel",
    "archive": "archive", "raise_budget": "raise_budget", "rename": "rename",
}


@dataclass
class Act:
    """One act found in a batch of events: ``key`` names it once (``<kind>:<id>:<what>``)."""

    key: str
    at: datetime | None
    principal: str
    action: str
    reason: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def bounded_detail(detail: dict[str, Any]) -> str:
    """``detail`` as compact JSON of at most ``MAX_AUDIT_DETAIL_CHARS`` characters: when it is
    longer, each value longer than a few hundred characters is cut (a text, or another value's
    JSON text, ending in ``"…"``), and when that is not
    enough only the keys ``event`` and ``seq`` are kept with ``"cut": true``."""
    text = json.dumps(detail, separators=(",", ":"), default=str)
    if len(text) <= MAX_AUDIT_DETAIL_CHARS:
        return text
    cut: dict[str, Any] = {}
    for name, value in detail.items():
        shown = json.dumps(value, separators=(",", ":"), default=str)
        if len(shown) <= _CUT_VALUE_CHARS:
            cut[name] = value
        else:  # a string cut as it is; anything else as its JSON text, cut
            cut[name] = shorten(value if isinstance(value, str) else shown, _CUT_VALUE_CHARS)
    cut["cut"] = True
    text = json.dumps(cut, separators=(",", ":"), default=str)
    if len(text) <= MAX_AUDIT_DETAIL_CHARS:
        return text
    kept = {k: detail[k] for k in ("event", "seq") if k in detail}
    return json.dumps({**kept, "cut": True}, separators=(",", ":"), default=str)


def _reason(text: str | None) -> str | None:
    return shorten(text, MAX_AUDIT_REASON_CHARS) if text else None


def _act(prefix: str, what: str, event: Event, principal: str, action: str, reason: str | None, **detail: Any) -> Act:
    about: dict[str, Any] = {"event": event.type, "seq": event.seq}
    if event.turn_id is not None:
        about["turn_id"] = event.turn_id
    about.update({k: v for k, v in detail.items() if v is not None})
    return Act(f"{prefix}:{what}", event.at, principal, action, _reason(reason), about)


def session_acts(session_id: str, events: list[Event]) -> list[Act]:
    """The acts among a session's ``events`` (a batch ``store.append`` writes), in order.

    Not acts: a call the policy allowed without asking (``PermissionGranted`` with ``scope``
    ``policy``: no principal acted), a grant for the rest of the session used again (its
    decision is the act), a denial by ``system`` (an approval that timed out), the cancel of
    turns that an archive or a workflow cancellation ends (the archive is the act), the end of a
    session that runs one turn, and ignored decisions and cancels (they changed nothing). An operator's reason recorded beside
    the act (``OperatorActed``) fills a reason the act's own event lacks (an elicitation's answer).
    What a model or a tool wrote stays in the events: an edit keeps the SHA-256 and the field names
    of the arguments it chose, an answer its action, never their values.
    """
    prefix = f"session:{session_id}"
    acts: list[Act] = []
    for e in events:
        match e:
            case PermissionGranted() if e.principal is not None:  # not a call the policy allowed (scope "policy")
                acts.append(_act(
                    prefix, f"decision:{e.request_id}", e, e.principal, "approve", e.reason,
                    request_id=e.request_id, call_id=e.call_id, scope=e.scope if e.scope != "once" else None,
                ))
            case PermissionDenied() if e.principal != "system":
                acts.append(_act(prefix, f"decision:{e.request_id}", e, e.principal, "deny", e.reason, request_id=e.request_id, call_id=e.call_id))
            case ToolCallEdited():
                acts.append(_act(
                    prefix, f"edit:{e.request_id}", e, e.principal, "edit", None,
                    request_id=e.request_id, call_id=e.call_id, arguments_sha256=e.arguments_sha256, fields=sorted(e.arguments),
                ))
            case EffectReconciled():
                acts.append(_act(
                    prefix, f"decision:{e.request_id}", e, e.principal, "reconcile", e.note,
                    request_id=e.request_id, call_id=e.call_id, outcome=e.outcome,
                ))
            case ElicitationAnswered():
                acts.append(_act(
                    prefix, f"decision:{e.request_id}", e, e.principal, "answer", None,
                    request_id=e.request_id, call_id=e.call_id, answer=e.action,
                ))
            case CancelRequested() | SessionCancelled() if (
                e.principal is not None and e.principal != TEMPORAL and e.reason != ARCHIVE_CANCEL_REASON
            ):
                acts.append(_act(prefix, f"cancel:{e.turn_id if e.turn_id is not None else e.seq}", e, e.principal, "cancel", e.reason))
            case SessionArchived() if e.reason != ENDED_AFTER_TURN:
                acts.append(_act(prefix, "archive", e, e.principal, "archive", e.reason))
            case BudgetRaised():
                acts.append(_act(prefix, str(e.seq), e, e.principal, "raise_budget", e.reason, budget=e.budget.model_dump(mode="json", exclude_none=True)))
            case SessionRenamed():
                acts.append(_act(prefix, str(e.seq), e, e.principal, "rename", e.reason, title=e.title, previous=e.previous))
            case ModelProfileSwitched():
                acts.append(_act(prefix, str(e.seq), e, e.principal, "switch_model", None, from_profile=e.from_profile, profile=e.profile))
            case SessionPaused():
                acts.append(_act(prefix, str(e.seq), e, e.principal, "pause", e.reason))
            case SessionResumed():
                acts.append(_act(prefix, str(e.seq), e, e.principal, "resume", e.reason, paused_seconds=round(e.paused_seconds, 3)))
            case _:
                pass
    for e in events:
        if isinstance(e, OperatorActed):
            _add_operator_reason(acts, e)
    return acts


def _add_operator_reason(acts: list[Act], acted: OperatorActed) -> None:
    """Give the act ``acted`` stands beside the operator's reason, when its own event has none."""
    action = _OPERATOR_ACTIONS.get(acted.action)
    for act in acts:
        if act.action != action or act.principal != acted.principal or act.reason is not None:
            continue
        if acted.target is None or acted.target in (act.detail.get("request_id"), act.detail.get("turn_id")):
            act.reason = _reason(acted.reason)
            return


def task_acts(task_id: str, events: list[Event]) -> list[Act]:
    """The acts among an autonomous task's ``events`` (a batch ``task.record`` writes): pause,
    resume, nudge, amend_goal, raise_budget and cancel. A pause because the task's session was
    cancelled (no principal) is not an act."""
    prefix = f"task:{task_id}"
    acts: list[Act] = []
    for e in events:
        what = str(e.seq)
        match e:
            case AutonomousTaskPaused() if e.principal is not None:
                acts.append(_act(prefix, what, e, e.principal, "pause", e.reason))
            case AutonomousTaskResumed():
                acts.append(_act(prefix, what, e, e.principal, "resume", e.reason))
            case AutonomousTaskNudged():
                acts.append(_act(prefix, what, e, e.principal, "nudge", e.reason))
            case AutonomousTaskGoalAmended():
                acts.append(_act(prefix, what, e, e.principal, "amend_goal", e.reason, goal=shorten(e.goal, 500), criteria=e.criteria or None))
            case AutonomousTaskBudgetRaised():
                acts.append(_act(
                    prefix, what, e, e.principal, "raise_budget", e.reason,
                    budget=e.budget.model_dump(mode="json", exclude_none=True), max_sessions=e.max_sessions,
                ))
            case AutonomousTaskCancelled() if e.principal is not None:
                acts.append(_act(prefix, what, e, e.principal, "cancel", e.reason, session_id=e.session_id))
            case _:
                pass
    return acts


def graph_acts(graph_id: str, events: list[Event]) -> list[Act]:
    """The acts among a task graph's ``events`` (a batch ``graph.record`` writes): a plan approved
    or rejected by a principal, a node retried by hand, the graph paused or resumed, and the graph cancelled. A plan the
    graph approved itself (``approve_plan = "auto"``), a retry the graph made itself (no principal) and the cancel of
    each node that a graph's cancel (or a failed node) ends are not acts."""
    prefix = f"graph:{graph_id}"
    acts: list[Act] = []
    for e in events:
        what = str(e.seq)
        match e:
            case TaskPlanApproved() if not e.token.automatic:
                acts.append(_act(
                    prefix, what, e, e.principal, "approve_plan", e.reason,
                    plan_digest=e.token.plan_digest, risk_level=e.token.risk_level, nodes=sorted(e.token.grants),
                ))
            case TaskPlanRejected():
                acts.append(_act(prefix, what, e, e.principal, "reject_plan", e.reason))
            case TaskCancelled() if e.node_id is None and e.principal is not None:
                acts.append(_act(prefix, what, e, e.principal, "cancel", e.reason))
            case TaskRetried() if e.principal is not None:  # by hand (update retry_node); not a retry the graph made itself
                acts.append(_act(
                    prefix, what, e, e.principal, "retry_node", e.reason, node_id=e.node_id, attempt=e.attempt, unblocked=e.unblocked or None,
                ))
            case TaskGraphPaused():
                acts.append(_act(prefix, what, e, e.principal, "pause", e.reason))
            case TaskGraphResumed():
                acts.append(_act(prefix, what, e, e.principal, "resume", e.reason, paused_seconds=round(e.paused_seconds, 3)))
            case _:
                pass
    return acts
