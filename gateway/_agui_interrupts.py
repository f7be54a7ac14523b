"""A session's pending requests as AG-UI interrupts, and a run's ``resume`` entries as the
session's decisions (the AG-UI interrupt lifecycle, docs.ag-ui.com/concepts/interrupts).

    pending request (PermissionRequest)   Interrupt                      resume payload (status resolved)
    kind tool_call                        reason "tool_call", toolCallId  {"approved": bool, "editedArgs"?: {...},
                                                                           "reason"?: str, "forSession"?: bool}
    kind elicitation (an MCP question)    reason "input_required"         {"action"?: "accept"|"decline"|"cancel",
                                                                           "content"?: {...}}
    kind reconcile                        reason "agentrt:reconcile"      {"outcome": "applied"|"not_applied",
                                                                           "note"?: str}

A ``cancelled`` entry denies a tool call (reason "cancelled in the front end") and cancels an
elicitation; a reconcile cannot be cancelled (someone must say what happened). Each interrupt's
id is the request id (``req-1`` ...), its ``responseSchema`` the payload above, its
``metadata.agentrt`` the tool, arguments and risk.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ag_ui.core import Interrupt, ResumeEntry

from agentrt.client import AgentClient
from agentrt.schemas import PermissionRequest

__all__ = ["ResumeRefused", "interrupt_for", "resume_decision"]

CANCELLED_REASON = "cancelled in the front end"

_TOOL_CALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "editedArgs": {"type": "object", "description": "The arguments to run the call with instead (all of them)."},
        "reason": {"type": "string"},
        "forSession": {"type": "boolean", "description": "Grant later calls under the same policy rule too."},
    },
    "required": ["approved"],
}
_RECONCILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"outcome": {"enum": ["applied", "not_applied"]}, "note": {"type": "string"}},
    "required": ["outcome"],
}


class ResumeRefused(Exception):
    """A resume the session cannot take (``code``: the RUN_ERROR code; the message says why)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def interrupt_for(request: PermissionRequest) -> Interrupt:
    """The AG-UI interrupt of a pending request."""
    metadata = {"agentrt": {"tool": request.tool, "arguments": request.arguments, "risk": request.risk, "kind": request.kind}}
    if request.kind == "elicitation":
        schema = {
            "type": "object",
            "properties": {"action": {"enum": ["accept", "decline", "cancel"]}, "content": request.requested_schema or {"type": "object"}},
        }
        return Interrupt(id=request.request_id, reason="input_required", message=request.message or request.reason,
                         tool_call_id=request.call_id, response_schema=schema, metadata=metadata)
    if request.kind == "reconcile":
        return Interrupt(id=request.request_id, reason="agentrt:reconcile", message=request.reason,
                         tool_call_id=request.call_id, response_schema=_RECONCILE_SCHEMA, metadata=metadata)
    message = f"Run {request.tool}? {request.reason}"
    return Interrupt(id=request.request_id, reason="tool_call", message=message, tool_call_id=request.call_id,
                     response_schema=_TOOL_CALL_SCHEMA, metadata=metadata)


def resume_decision(
    client: AgentClient, session_id: str, request: PermissionRequest, entry: ResumeEntry
) -> Callable[[], Awaitable[None]]:
    """What giving the session the decision ``entry`` carries for ``request`` does (its signal or
    update, as the client's principal), to await later: every entry of a resume is read before
    any decision is given. Raises ``ResumeRefused`` for a payload that is not one (see the
    module's table); the session's own refusals (``RequestRejected``: an edit that does not fit
    the tool ...) are raised when the decision is given."""
    payload = entry.payload if entry.status == "resolved" else None
    if payload is not None and not isinstance(payload, dict):
        raise ResumeRefused("invalid_resume_payload", f"the payload for {request.request_id} must be an object")
    payload = payload or {}
    rid = request.request_id
    if request.kind == "elicitation":
        action = "cancel" if entry.status == "cancelled" else payload.get("action", "accept")
        content = payload.get("content")
        if action not in ("accept", "decline", "cancel") or (content is not None and not isinstance(content, dict)):
            raise ResumeRefused("invalid_resume_payload", f"the payload for {rid} must be "
                                '{"action": "accept"|"decline"|"cancel", "content": {...}}')
        return lambda: client.answer(session_id, rid, content, action=action)
    if request.kind == "reconcile":
        outcome, note = payload.get("outcome"), payload.get("note")
        if entry.status == "cancelled" or outcome not in ("applied", "not_applied") or not isinstance(note, str | None):
            raise ResumeRefused("invalid_resume_payload", f"{rid} asks whether an effect was applied: "
                                'resolve it with {"outcome": "applied"|"not_applied"}')
        return lambda: client.reconcile(session_id, rid, outcome, note)
    if entry.status == "cancelled":
        return lambda: client.deny(session_id, rid, CANCELLED_REASON)
    approved, reason = payload.get("approved"), payload.get("reason")
    edited, for_session = payload.get("editedArgs"), payload.get("forSession", False)
    if not isinstance(approved, bool) or not isinstance(reason, str | None) or not isinstance(edited, dict | None) \
            or not isinstance(for_session, bool):
        raise ResumeRefused("invalid_resume_payload", f"the payload for {rid} must be "
                            '{"approved": true|false, "editedArgs"?: {...}, "reason"?: "...", "forSession"?: bool}')
    if approved:
        return lambda: client.approve(session_id, rid, reason, for_session=for_session, arguments=edited)
    return lambda: client.deny(session_id, rid, reason)

