"""The one way the client's sub-clients reach a session's workflow: its handle by id, updates sent
with patience (and the wording of a session that has ended), signals, the visibility check of a
child session, and every RPC failure translated by ``SESSION.error`` (client/_addressed.py), the
translation tasks and graphs use too."""

from __future__ import annotations

from typing import Any

from temporalio.client import RPCError, WorkflowHandle, WorkflowQueryFailedError
from temporalio.service import RPCStatusCode

from agentrt.client._addressed import STUCK_QUERY_SIGNS, WorkflowKind
from agentrt.client._connection import Connection
from agentrt.client._outcomes import ended_error
from agentrt.client._patience import Patience
from agentrt.client._updates import UPDATE_PATIENCE_SECONDS, execute_session_update
from agentrt.schemas import SESSION_OWNER, RequestRejected, SessionNotFound, SessionStuck, session_workflow_id

__all__ = ["SESSION", "SessionCalls", "query_failed"]

SESSION = WorkflowKind("session", SessionNotFound, stuck=SessionStuck)


class SessionCalls:
    """Calls to sessions over ``connection`` (its Temporal client, principal and operators)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def handle(self, session_id: str) -> WorkflowHandle:
        return self.connection.temporal.get_workflow_handle(session_workflow_id(session_id))

    async def signal(self, session_id: str, signal: Any, argument: Any) -> None:
        try:
            await self.handle(session_id).signal(signal, argument)
        except RPCError as err:
            raise SESSION.error(session_id, err) from err

    async def execute(self, session_id: str, name: str, update: Any, argument: Any, update_id: str | None = None) -> Any:
        """Send update ``update`` (named ``name`` in errors) until the session answers it; raises
        ``SessionNotFound``, ``RequestRejected`` (refused, or the session has ended), ``WorkerUnavailable``."""
        patience = Patience(session_id, f"update {name}", UPDATE_PATIENCE_SECONDS)
        address = self.connection.temporal.service_client.config.target_host
        await patience.retried(lambda: self.check_visible(session_id), address)
        handle = self.handle(session_id)

        async def translate(err: RPCError) -> Exception:
            return await self._translate_closed(session_id, handle, name, err)

        return await execute_session_update(
            handle, session_id, name, update, argument, update_id, translate, patience, address
        )

    async def _translate_closed(self, session_id: str, handle: WorkflowHandle, name: str, err: RPCError) -> Exception:
        """An update to a closed workflow fails NOT_FOUND; say the session ended instead of 'no session'."""
        if err.status == RPCStatusCode.NOT_FOUND:
            try:
                description = await handle.describe()
            except RPCError:
                return SessionNotFound(session_id)
            if description.close_time is not None:
                return ended_error(session_id, name, description)
        return SESSION.error(session_id, err)

    async def check_visible(self, session_id: str) -> None:
        """A child session (started by a task, a graph or a delegating session) shows itself only to
        its owner (``AgentOwner``) and this client's operators: anyone else gets ``SessionNotFound``,
        as for a missing session, from its reads (state, events, wait) and updates. Checked once
        per session and client (one describe)."""
        connection = self.connection
        if session_id in connection.readable_sessions:
            return
        try:
            description = await self.handle(session_id).describe()
        except RPCError as err:
            raise SESSION.error(session_id, err) from err
        owner = description.typed_search_attributes.get(SESSION_OWNER)
        if description.parent_id is not None and connection.principal != owner and connection.principal not in connection.operators:
            raise SessionNotFound(session_id)
        connection.readable_sessions.add(session_id)

    async def is_closed(self, handle: WorkflowHandle) -> bool:
        description = await handle.describe()
        return description.close_time is not None


def query_failed(session_id: str, request: str, err: WorkflowQueryFailedError) -> Exception:
    """``SessionStuck`` when the query failed because the workflow task does, else ``RequestRejected``."""
    if any(sign in str(err) for sign in STUCK_QUERY_SIGNS):
        return SessionStuck(session_id, str(err))
    return RequestRejected(session_id, request, str(err))
