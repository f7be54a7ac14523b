"""Answers to what an MCP server asked the user in the middle of a call (``AgentClient`` mixin).

The session shows the question as a pending request of kind ``elicitation`` (its ``message``
and the ``requested_schema`` the answer must match); ``answer`` sends update
``answer_elicitation``, which the session checks before it records the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from agentrt.schemas import ElicitationAnswer, PermissionRequest, RequestRejected, SessionStateView
from agentrt.workflows.session import SessionWorkflow


class ElicitationMethods:
    """``AgentClient``'s elicitation methods (a mixin: the client's own module is full)."""

    if TYPE_CHECKING:
        principal: str

        async def state(self, session_id: str) -> SessionStateView: ...

        async def _execute(self, session_id: str, name: str, update: Any, argument: Any) -> Any: ...

    async def questions(self, session_id: str) -> list[PermissionRequest]:
        """The session's pending elicitation requests (what its MCP servers asked), oldest first."""
        view = await self.state(session_id)
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
            request_id=request_id, principal=self.principal, action=action,
            content=(content or {}) if action == "accept" else None, reason=reason,
        )
        await self._execute(session_id, "answer_elicitation", SessionWorkflow.answer_elicitation, answer)
