"""A person's decisions on a session's pending requests (``AgentClient.decisions``): approvals of tool
calls, reconciles of effects of unknown outcome, and answers to what an MCP server asked in the
middle of a call (a request of kind ``elicitation``: its ``message`` and the ``requested_schema``
the answer must match; ``answer`` sends update ``answer_elicitation``, which the session checks
before it records the answer).
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any, Literal

from agentrt.schemas import (
    MAX_ARGUMENT_DEPTH,
    ElicitationAnswer,
    PermissionDecision,
    PermissionRequest,
    ReconcileDecision,
    RequestRejected,
    SessionStateView,
    nested_deeper_than,
)
from agentrt.client._connection import Connection
from agentrt.client._session_calls import SessionCalls
from agentrt.client._session_handlers import SessionHandlers
from agentrt.client._sessions import Sessions


class Decisions:
    """A person's decisions on a client's sessions' pending requests (``AgentClient.decisions``):
    approvals of tool calls, reconciliations of effects of unknown outcome, answers to MCP servers' questions."""

    def __init__(self, connection: Connection, sessions: Sessions, calls: SessionCalls) -> None:
        self._connection = connection
        self._sessions = sessions
        self._calls = calls

    async def approve(
        self,
        session_id: str,
        request_id: str,
        reason: str | None = None,
        *,
        for_session: bool = False,
        arguments: dict[str, Any] | None = None,
    ) -> None:
        """Grant a pending approval. ``for_session``: later calls under the same policy rule (the
        request's ``grant_rule``, e.g. ``shell.run:destructive:rm -r``) run without asking for the
        rest of the session. ``arguments``: the call runs with these instead of the model's
        (``ToolCallEdited``; the model reads that they were changed). Raises ``RequestRejected``
        for an unknown or decided request, a non-owner, or edited arguments the tool refuses or
        that nest deeper than ``MAX_ARGUMENT_DEPTH`` levels (refused before anything is sent)."""
        scope = "session" if for_session else "once"
        await self._decide(session_id, request_id, "grant", reason, scope=scope, arguments=arguments)

    async def deny(self, session_id: str, request_id: str, reason: str | None = None) -> None:
        await self._decide(session_id, request_id, "deny", reason)

    async def _decide(self, session_id: str, request_id: str, decision: str, reason: str | None, *,
                      scope: str = "once", arguments: dict[str, Any] | None = None) -> None:
        if arguments is not None and nested_deeper_than(arguments, MAX_ARGUMENT_DEPTH):
            raise RequestRejected(
                session_id, "decide", f"the edited arguments nest lists and objects deeper than {MAX_ARGUMENT_DEPTH} levels"
            )
        await self._check_pending(session_id, request_id, "tool_call", reason)
        signal = PermissionDecision(
            request_id=request_id, decision=decision, principal=self._connection.principal, reason=reason,  # type: ignore[arg-type]
            scope=scope, arguments=arguments,  # type: ignore[arg-type]
        )
        if arguments is not None:  # the session checks them: the update says what is wrong
            return await self._calls.execute(session_id, "decide", SessionHandlers.decide, signal)
        await self._calls.signal(session_id, SessionHandlers.permission_decision, signal)

    async def reconcile(self, session_id: str, request_id: str, outcome: str, note: str | None = None) -> None:
        """Answer a ``reconcile`` request: ``applied`` records the call as done, ``not_applied`` runs it once more.

        Raises ``RequestRejected`` (unknown or decided request, not the owner, not a reconcile request).
        """
        await self._check_pending(session_id, request_id, "reconcile", note)
        signal = ReconcileDecision(
            request_id=request_id, outcome=outcome, principal=self._connection.principal, note=note  # type: ignore[arg-type]
        )
        await self._calls.signal(session_id, SessionHandlers.reconcile, signal)

    async def _check_pending(self, session_id: str, request_id: str, kind: str, reason: str | None) -> None:
        """Refuse, with the reason, a decision the session would record and ignore.

        Decisions travel as signals (durable even while no worker runs); the session
        re-checks them, so a race with another decision is still recorded and ignored.
        """
        what = f"the decision on {request_id}"
        view = await self._sessions.state(session_id)
        if self._connection.principal != view.owner and self._connection.principal not in view.operators:
            raise RequestRejected(session_id, what, f"principal {self._connection.principal!r} is not the owner of this session")
        if self._connection.principal != view.owner and not (reason or "").strip():
            raise RequestRejected(session_id, what, f"operator {self._connection.principal!r} must give a reason (not the owner)")
        pending = {r.request_id: r for r in view.pending_approvals}
        if request_id not in pending:
            raise RequestRejected(session_id, what, f"no pending request {request_id} (unknown, or already decided)")
        if (other := pending[request_id].kind) != kind:
            hint = f": answer it with agentrt session answer {session_id} {request_id}" if other == "elicitation" else ""
            raise RequestRejected(session_id, what, f"request {request_id} is of another kind ({other}){hint}")

    async def questions(self, session_id: str) -> builtins.list[PermissionRequest]:
        """The session's pending elicitation requests (what its MCP servers asked), oldest first."""
        view = await self._sessions.state(session_id)
        return [r for r in view.pending_approvals if r.kind == "elicitation"]

    async def answer(
        self,
        session_id: str,
        request_id: str,
        content: dict[str, Any] | None = None,
        *,
        action: Literal["accept", "decline", "cancel"] = "accept",
        reason: str | None = None,
    ) -> None:
        """Answer elicitation request ``request_id``: ``accept`` with ``content`` (a JSON object
        matching the request's ``requested_schema``), ``decline`` or ``cancel``. The server's call
        runs again with the answer. Raises ``SessionNotFound``, and ``RequestRejected`` for an
        unknown or answered request, a request of another kind, a stranger (an operator needs a
        ``reason``) or content off the schema (the message lists the problems)."""
        if action != "accept" and content is not None:
            raise RequestRejected(session_id, "answer_elicitation", f"a {action} carries no content")
        answer = ElicitationAnswer(
            request_id=request_id, principal=self._connection.principal, action=action,
            content=(content or {}) if action == "accept" else None, reason=reason,
        )
        await self._calls.execute(session_id, "answer_elicitation", SessionHandlers.answer_elicitation, answer)
