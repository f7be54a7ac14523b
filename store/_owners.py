"""Who owns each workflow id, for good: the principal that first started a session, task or graph
id. Temporal forgets a closed workflow after its namespace's retention; this record does not, so
an id once used never passes to another owner and a stored transcript never reaches another
owner's model (docs/gateway.md, "Trust model")."""

from __future__ import annotations

from sqlalchemy import Connection, select

from agentrt.schemas import GRAPH_ID_PREFIX, SESSION_ID_PREFIX, TASK_ID_PREFIX
from agentrt.store._base import StoreBase, text_column
from agentrt.store._models import graphs, sessions, tasks, workflow_owners


class WorkflowOwnerTable(StoreBase):
    """Table ``workflow_owners``: workflow id -> the principal that first claimed it."""

    def claim_owner(self, workflow_id: str, owner: str, *, conn: Connection | None = None) -> str:
        """Record ``owner`` as the owner of ``workflow_id`` unless the id has one already, and return
        the owner on record (``owner`` itself, or the first claimant: compare them). An id written
        before this table (a ``sessions``, ``tasks`` or ``graphs`` row) keeps that row's owner.
        Safe to repeat and to race: the first claim wins."""
        with self._writing(conn) as conn:
            found = self._recorded_owner(conn, workflow_id)
            if found is not None:
                return found
            first = self._legacy_owner(conn, workflow_id) or text_column(owner)
            conn.execute(
                self._insert_ignore(workflow_owners, ["workflow_id"]),
                {"workflow_id": workflow_id, "owner": first, "claimed_at": self._now()},
            )
            return self._recorded_owner(conn, workflow_id) or first

    def workflow_owner(self, workflow_id: str, *, conn: Connection | None = None) -> str | None:
        """The owner on record of ``workflow_id`` (claimed, or of its ``sessions``/``tasks``/``graphs``
        row), or None when the store knows no such workflow."""
        with self._reading(conn) as conn:
            return self._recorded_owner(conn, workflow_id) or self._legacy_owner(conn, workflow_id)

    @staticmethod
    def _recorded_owner(conn: Connection, workflow_id: str) -> str | None:
        c = workflow_owners.c
        return conn.execute(select(c.owner).where(c.workflow_id == workflow_id)).scalar_one_or_none()

    @staticmethod
    def _legacy_owner(conn: Connection, workflow_id: str) -> str | None:
        """The owner of the row the workflow wrote before claims were recorded, if any."""
        for prefix, table, key in (
            (SESSION_ID_PREFIX, sessions, sessions.c.session_id),
            (TASK_ID_PREFIX, tasks, tasks.c.task_id),
            (GRAPH_ID_PREFIX, graphs, graphs.c.graph_id),
        ):
            if workflow_id.startswith(prefix):
                item_id = workflow_id.removeprefix(prefix)
                return conn.execute(select(table.c.owner).where(key == item_id)).scalar_one_or_none()
        return None
