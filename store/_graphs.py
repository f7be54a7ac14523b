"""Task graphs in the store: each graph's row (status, goal, spend) and its events, written by the
graph workflow's ``graph.record`` and read by the client, so what a graph did can be read without
its workflow (or a worker to answer a query). With a cipher, the goal and events are sealed at rest
(``store/_cipher.py``).

Every write is idempotent: the row is an upsert and events are kept by (graph_id, seq), so a
retried ``graph.record`` changes nothing it wrote before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, func, select

from agentrt.schemas import EVENT_ADAPTER, Event, GraphRecordInput
from agentrt.store._audit import AuditTable
from agentrt.store._base import text_column
from agentrt.store._models import graph_events, graphs


class GraphTables(AuditTable):
    """Tables ``graphs`` and ``graph_events``."""

    def record_graph(self, data: GraphRecordInput, *, conn: Connection | None = None) -> None:
        """Write one ``graph.record`` in one transaction (``conn``'s, when given); safe to repeat.

        Upserts the graph's row (``created_at`` is kept; an empty ``workspace`` keeps the stored
        one), then inserts ``data.events`` by (graph_id, seq): an event already stored is left as it is.
        The acts of principals among the events (a plan approved, a cancel) go to the audit log, each once.
        """
        now = self._now()
        row = {
            "graph_id": data.graph_id,
            "owner": text_column(data.owner),
            "goal": self._seal(text_column(data.goal), f"graphs/{data.graph_id}"),
            "status": data.status,
            "workspace": text_column(data.workspace),
            "spend_json": data.spend.model_dump_json(),
            "created_at": now,
            "updated_at": now,
        }
        with self._writing(conn) as conn:
            conn.execute(self._work_upsert(graphs, "graph_id"), row)
            if data.events:
                rows = [
                    {"graph_id": data.graph_id, "seq": e.seq, "type": e.type, "at": e.at, "body_json": self._seal(e.model_dump_json(), f"graph_events/{data.graph_id}")}
                    for e in data.events
                ]
                conn.execute(self._insert_ignore(graph_events, ["graph_id", "seq"]), rows)
                self._audit_graph(conn, data.graph_id, data.owner, data.events)

    def graph_events(
        self, graph_id: str, since_seq: int = 0, limit: int = 1000, *, types: Sequence[str] | None = None
    ) -> list[Event]:
        """The graph's events with ``seq > since_seq`` (of the ``types`` given, by their
        ``type`` tag), ordered by seq, at most ``limit``."""
        c = graph_events.c
        q = select(c.body_json).where(c.graph_id == graph_id, c.seq > since_seq).order_by(c.seq).limit(limit)
        if types is not None:
            q = q.where(c.type.in_(list(types)))
        with self._engine.connect() as conn:
            bodies = conn.execute(q).scalars().all()
        return [EVENT_ADAPTER.validate_json(self._open(body, f"graph_events/{graph_id}")) for body in bodies]

    def graph_progress(self, graph_id: str) -> tuple[str, int] | None:
        """The graph's status as last recorded and the highest event ``seq`` stored (0: none yet);
        None when the store has no row for it (graphs from before ``frame-v1`` write none)."""
        with self._engine.connect() as conn:
            status = conn.execute(select(graphs.c.status).where(graphs.c.graph_id == graph_id)).scalar()
            if status is None:
                return None
            last = conn.execute(select(func.max(graph_events.c.seq)).where(graph_events.c.graph_id == graph_id)).scalar()
        return str(status), int(last or 0)
