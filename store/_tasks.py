"""Autonomous tasks in the store: each task's row (status, goal, spend), its events and its
checkpoints, written by the task workflow's ``task.record`` and read by the client, so what a
task did over days can be read without its workflow history. With a cipher, the goal, events
and checkpoints are sealed at rest (``store/_cipher.py``).

Every write is idempotent: the row is an upsert, events are kept by (task_id, seq) and
checkpoints by (task_id, number), so a retried ``task.record`` changes nothing it wrote before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from agentrt.schemas import EVENT_ADAPTER, Event, Spend, TaskCheckpoint, TaskRecordInput
from agentrt.store._audit import AuditTable
from agentrt.store._base import text_column, utc
from agentrt.store._models import task_checkpoints, task_events, tasks


@dataclass(frozen=True)
class TaskSummary:
    """One task's row (``Store.get_task``, ``Store.list_tasks``): its latest ``status``, ``goal``
    and ``spend`` as the task last recorded them; times are timezone-aware UTC."""

    task_id: str
    owner: str
    goal: str
    status: str
    workspace: str
    spend: Spend
    created_at: datetime
    updated_at: datetime


class TaskTables(AuditTable):
    """Tables ``tasks``, ``task_events`` and ``task_checkpoints``."""

    def record_task(self, data: TaskRecordInput, *, conn: Connection | None = None) -> None:
        """Write one ``task.record`` in one transaction (``conn``'s, when given); safe to repeat.

        Upserts the task's row (``created_at`` is kept; an empty ``workspace`` keeps the stored
        one), then inserts ``data.events`` by (task_id, seq) and ``data.checkpoint`` by (task_id,
        number): an event or checkpoint already stored is left as it is. The acts of principals
        among the events (pause, resume, a budget raised ...) are written to the audit log, each once.
        """
        now = self._now()
        row = {
            "task_id": data.task_id,
            "owner": text_column(data.owner),
            "goal": self._seal(text_column(data.goal), f"tasks/{data.task_id}"),
            "status": data.status,
            "workspace": text_column(data.workspace),
            "spend_json": data.spend.model_dump_json(),
            "created_at": now,
            "updated_at": now,
        }
        with self._writing(conn) as conn:
            conn.execute(self._work_upsert(tasks, "task_id"), row)
            if data.events:
                rows = [
                    {
                        "task_id": data.task_id,
                        "seq": event.seq,
                        "type": event.type,
                        "at": event.at,
                        "body_json": self._seal(event.model_dump_json(), f"task_events/{data.task_id}"),
                    }
                    for event in data.events
                ]
                conn.execute(self._insert_ignore(task_events, ["task_id", "seq"]), rows)
                self._audit_task(conn, data.task_id, data.owner, data.events)
            if data.checkpoint is not None:
                conn.execute(
                    self._insert_ignore(task_checkpoints, ["task_id", "number"]),
                    {
                        "task_id": data.task_id,
                        "number": data.checkpoint.number,
                        "body_json": self._seal(data.checkpoint.model_dump_json(), f"task_checkpoints/{data.task_id}"),
                        "created_at": now,
                    },
                )

    def task_events(
        self, task_id: str, since_seq: int = 0, limit: int = 1000, *, types: Sequence[str] | None = None
    ) -> list[Event]:
        """The task's events with ``seq > since_seq`` (of the ``types`` given, by their
        ``type`` tag), ordered by seq, at most ``limit``."""
        c = task_events.c
        q = select(c.body_json).where(c.task_id == task_id, c.seq > since_seq).order_by(c.seq).limit(limit)
        if types is not None:
            q = q.where(c.type.in_(list(types)))
        with self._engine.connect() as conn:
            bodies = conn.execute(q).scalars().all()
        return [EVENT_ADAPTER.validate_json(self._open(body, f"task_events/{task_id}")) for body in bodies]

    def task_checkpoints(self, task_id: str) -> list[TaskCheckpoint]:
        """Every checkpoint of the task, ordered by number."""
        c = task_checkpoints.c
        q = select(c.body_json).where(c.task_id == task_id).order_by(c.number)
        with self._engine.connect() as conn:
            bodies = conn.execute(q).scalars().all()
        return [TaskCheckpoint.model_validate_json(self._open(body, f"task_checkpoints/{task_id}")) for body in bodies]

    def get_task(self, task_id: str) -> TaskSummary | None:
        """The task's row, or None when the store has none."""
        with self._engine.connect() as conn:
            row = conn.execute(select(tasks).where(tasks.c.task_id == task_id)).mappings().first()
        return None if row is None else self._summary(row)

    def list_tasks(self, owner: str | None = None, limit: int = 100) -> list[TaskSummary]:
        """Up to ``limit`` tasks (of ``owner`` when given), newest (by ``created_at``) first."""
        c = tasks.c
        q = select(tasks).order_by(c.created_at.desc(), c.task_id.desc()).limit(limit)
        if owner is not None:
            q = q.where(c.owner == owner)
        with self._engine.connect() as conn:
            rows = conn.execute(q).mappings().all()
        return [self._summary(row) for row in rows]

    def _summary(self, row: Any) -> TaskSummary:
        return TaskSummary(
            task_id=row["task_id"],
            owner=row["owner"],
            goal=self._open(row["goal"], f"tasks/{row['task_id']}"),
            status=row["status"],
            workspace=row["workspace"],
            spend=Spend.model_validate_json(row["spend_json"]),
            created_at=utc(row["created_at"]),  # type: ignore[arg-type]
            updated_at=utc(row["updated_at"]),  # type: ignore[arg-type]
        )
