"""The one way the client's sub-clients reach a session's workflow: its handle by id, updates sent
with patience (and the wording of a session that has ended), signals, the visibility check of a
session (``check_visible``: its owner's and the operators', to anyone else as a missing one), and
every RPC failure translated by ``SESSION.error`` (client/_addressed.py), the translation tasks
and graphs use too."""

from __future__ import annotations

from typing import Any

from temporalio.client import RPCError, WorkflowHandle, WorkflowQueryFailedError
from temporalio.service import RPCStatusCode

from agentrt.client._addressed import STUCK_QUERY_SIGNS, WorkflowKind
from agentrt.client._connection import Connection
from agentrt.client._outcomes import ended_error
from agentrt.client._patience import Patience
from agentrt.client._updates import UPDATE_PATIENCE_SECONDS, execute_session_update
from agentrt.client._visibility import check_visible, forget_visible
from agentrt.schemas import RequestRejected, SessionNotFound, SessionStuck, session_workflow_id

__all__ = ["SESSION", "SessionCalls", "query_failed"]

SESSION = WorkflowKind("session", SessionNotFound, stuck=SessionStuck)


class SessionCalls:
    """Calls to sessions over ``connection`` (its Temporal client, principal and operators)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def handle(self, session_id: str) -> WorkflowHandle:
        return self.connection.temporal.get_workflow_handle(session_workflow_id(session_id))

    async def signal(self, session_id: str, signal: Any, argument: Any) -> None:
        await self.check_visible(session_id)
        try:
            await self.handle(session_id).signal(signal, argument)
        except RPCError as err:
            raise self.error(session_id, err) from err

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
                forget_visible(self.connection, session_workflow_id(session_id))
                return SessionNotFound(session_id)
            if description.close_time is not None:
                forget_visible(self.connection, session_workflow_id(session_id))
                return ended_error(session_id, name, description)
        return self.error(session_id, err)

    async def check_visible(self, session_id: str) -> None:
        """A session shows itself only to its owner (``AgentOwner``) and this client's operators:
        anyone else gets ``SessionNotFound``, as for a missing session, from its reads (state,
        events, wait, trajectory), updates and signals (``check_visible``: one describe per
        session and client)."""
        await check_visible(
            self.connection, session_workflow_id(session_id), lambda: SessionNotFound(session_id),
            lambda err: SESSION.error(session_id, err),
        )

    def forget(self, session_id: str) -> None:
        """The session is closing: the next call checks who may see it again (``forget_visible``)."""
        forget_visible(self.connection, session_workflow_id(session_id))

    def error(self, session_id: str, err: RPCError) -> Exception:
        """``SESSION.error``; a session found gone is checked again by the next call (``forget_visible``)."""
        if err.status == RPCStatusCode.NOT_FOUND:
            forget_visible(self.connection, session_workflow_id(session_id))
        return SESSION.error(session_id, err)

    async def is_closed(self, handle: WorkflowHandle) -> bool:
        description = await handle.describe()
        if description.close_time is not None:
            forget_visible(self.connection, handle.id)
            return True
        return False


def query_failed(session_id: str, request: str, err: WorkflowQueryFailedError) -> Exception:
    """``SessionStuck`` when the query failed because the workflow task does, else ``RequestRejected``."""
    if any(sign in str(err) for sign in STUCK_QUERY_SIGNS):
        return SessionStuck(session_id, str(err))
    return RequestRejected(session_id, request, str(err))
