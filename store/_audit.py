"""The audit log in the store: one row per act of a principal, written in the transaction that
records the act, and the listing that reads them back (``agentrt audit``, ``GET /v1/audit``,
``AgentClient.audit``).

Acts carried by a workflow are found in the events it writes (``store.append``, ``task.record``,
``graph.record``; ``_audit_acts.py`` says which events are acts), so the row does not depend on
the surface that carried the act; acts on the store itself (a memory decided, or forgotten) write
their row where they change it. A row is inserted by its ``key`` or not at all: a retried write
adds no second row.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Connection, select

from agentrt.schemas import AuditEntry, Event, SessionConfig
from agentrt.store._audit_acts import (
    MAX_AUDIT_REASON_CHARS,
    TEMPORAL,
    Act,
    bounded_detail,
    graph_acts,
    session_acts,
    task_acts,
)
from agentrt.store._base import StoreBase, text_column, utc
from agentrt.store._models import audit_log, sessions

# The most entries one ``audit`` call returns.
MAX_AUDIT_LIMIT = 10_000


class AuditTable(StoreBase):
    """Table ``audit_log``; the table groups that record acts (transcript, tasks, graphs,
    memories) are built on it."""

    def _audit_session(self, conn: Connection, session_id: str, config: SessionConfig | None, events: list[Event]) -> None:
        """The acts among a session's ``events``. A workflow cancellation of a child session (by
        ``temporal``) names the child's parent in ``detail.parent`` (``task:<id>``, ``graph:<id>``,
        ``session:<id>``): a parent that ends cancels its children that way."""
        acts = session_acts(session_id, events)
        if not acts:
            return
        if config is None:
            row = conn.execute(select(sessions.c.config_json).where(sessions.c.session_id == session_id)).scalar()
            config = SessionConfig.model_validate_json(row) if row is not None else None
        parent = config.parent if config is not None else None
        for act in acts:
            if act.principal == TEMPORAL and parent is not None:
                act.detail["parent"] = f"{parent.kind}:{parent.id}"
        self._write_acts(conn, "session", session_id, config.owner if config is not None else "", acts)

    def _audit_task(self, conn: Connection, task_id: str, owner: str, events: list[Event]) -> None:
        self._write_acts(conn, "task", task_id, owner, task_acts(task_id, events))

    def _audit_graph(self, conn: Connection, graph_id: str, owner: str, events: list[Event]) -> None:
        self._write_acts(conn, "graph", graph_id, owner, graph_acts(graph_id, events))

    def _write_acts(self, conn: Connection, kind: str, target_id: str, owner: str, acts: list[Act]) -> None:
        if not acts:
            return
        now = self._now()
        rows = []
        for act in acts:
            if act.principal and act.principal == owner:
                act.detail["as"] = "owner"
            elif act.principal == TEMPORAL:
                act.detail["as"] = "temporal"
            elif owner:
                act.detail["as"] = "operator"
            rows.append(_row(act, kind, target_id, owner, now))
        conn.execute(self._insert_ignore(audit_log, ["key"]), rows)

    def record_act(
        self,
        principal: str,
        action: str,
        target_kind: str,
        target_id: str,
        *,
        owner: str = "",
        reason: str | None = None,
        detail: dict[str, Any] | None = None,
        key: str | None = None,
        at: datetime | None = None,
        conn: Connection | None = None,
    ) -> None:
        """Record one act done on the store itself, not through a workflow (in ``conn``'s
        transaction when given, so the act and its row commit together).

        ``key`` names the act once (``<target_kind>:<target_id>:<what>``): an act recorded again
        under the same key adds no row; None records it under a key of its own. ``at``: when it
        took effect (UTC; default now). ``reason`` is cut to ``MAX_AUDIT_REASON_CHARS`` and
        ``detail`` to ``MAX_AUDIT_DETAIL_CHARS`` characters of JSON.
        """
        act = Act(key or f"{target_kind}:{target_id}:{action}:{uuid.uuid4().hex}", at, principal, action, None, dict(detail or {}))
        if reason:
            act.reason = reason[:MAX_AUDIT_REASON_CHARS]
        with self._writing(conn) as conn:
            conn.execute(self._insert_ignore(audit_log, ["key"]), [_row(act, target_kind, target_id, owner, self._now())])

    def audit(
        self,
        *,
        principal: str | None = None,
        target: str | None = None,
        action: str | None = None,
        owner: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
    ) -> list[AuditEntry]:
        """The latest ``limit`` acts (newest first), of ``principal``, on ``target`` (a session,
        task, graph or memory id), of ``action`` and on what ``owner`` owns, each when given, at or
        after ``since`` (timezone-aware; a naive time is taken as UTC). Raises ``ValueError`` for a
        ``limit`` outside 1..``MAX_AUDIT_LIMIT``."""
        if not 1 <= limit <= MAX_AUDIT_LIMIT:
            raise ValueError(f"limit must be between 1 and {MAX_AUDIT_LIMIT}, not {limit}")
        c = audit_log.c
        q = select(audit_log).order_by(c.at.desc(), c.id.desc()).limit(limit)
        for column, value in ((c.principal, principal), (c.target_id, target), (c.action, action), (c.owner, owner)):
            if value is not None:
                q = q.where(column == value)
        if since is not None:
            q = q.where(c.at >= utc(since).astimezone(timezone.utc))
        with self._engine.connect() as conn:
            rows = conn.execute(q).mappings().all()
        return [
            AuditEntry(
                id=r["id"], at=utc(r["at"]), principal=r["principal"], action=r["action"], target_kind=r["target_kind"],
                target_id=r["target_id"], owner=r["owner"], reason=r["reason"], detail=json.loads(r["detail_json"]),
            )
            for r in rows
        ]


def _row(act: Act, kind: str, target_id: str, owner: str, now: datetime) -> dict[str, Any]:
    return {
        "key": text_column(act.key)[:600],
        "at": act.at or now,
        "principal": text_column(act.principal)[:255],
        "action": act.action,
        "target_kind": kind,
        "target_id": text_column(target_id)[:255],
        "owner": text_column(owner)[:255],
        "reason": text_column(act.reason) if act.reason is not None else None,
        "detail_json": text_column(bounded_detail(act.detail)),
    }
