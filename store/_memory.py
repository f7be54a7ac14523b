"""Memories that outlive a session, per owner: written by the ``memory.write`` tool, decided by
the owner (``memory.decide``), read into every model call's context (accepted ones only).

What a model writes is untrusted: the store bounds how many memories an owner and a session
may hold (``MemoryLimitExceeded``), keeps every memory to its owner (no read here crosses
owners) and takes text no backend refuses (``text_column``).
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Any, Literal

from sqlalchemy import ColumnElement, Connection, and_, delete, func, or_, select, text, update

from agentrt.schemas import (
    MAX_DEAD_MEMORIES_PER_OWNER,
    MAX_MEMORIES_PER_OWNER,
    MAX_PENDING_PROPOSALS_PER_SESSION,
    MAX_SESSION_MEMORIES_PER_SESSION,
    MemoryAlreadyDecided,
    MemoryLimitExceeded,
    MemoryNotFound,
    MemoryRecord,
)
from agentrt.store._audit import AuditTable
from agentrt.store._base import text_column, utc
from agentrt.store._models import memories

LIVE_STATUSES = ("proposed", "accepted")


class MemoryTable(AuditTable):
    """Table ``memories``: one row per memory, keyed by ``memory_id``.

    Writes of one owner take turns (SQLite: the write lock every transaction takes; PostgreSQL:
    a transaction-scoped advisory lock per owner), so the bounds hold and at most one accepted
    memory fills an owner's (scope, scope target, key) even when sessions write at once.
    """

    def write_memory(self, record: MemoryRecord, *, conn: Connection | None = None) -> MemoryRecord:
        """Store ``record`` (status ``proposed`` or ``accepted``) and return it as stored.

        Idempotent by ``memory_id``: when the id is already stored, the stored record is returned
        unchanged (whatever ``record`` says). An ``accepted`` write supersedes the owner's earlier
        accepted memory of the same scope, scope target (the session for ``session`` scope, the
        workspace for ``workspace``, none for ``user``) and key. Raises ``MemoryLimitExceeded``
        when the owner already has ``MAX_MEMORIES_PER_OWNER`` live (proposed or accepted)
        memories (one this write supersedes does not count), or, for a proposal, the session
        ``MAX_PENDING_PROPOSALS_PER_SESSION`` pending proposals; ``ValueError`` for another status.
        """
        if record.status not in LIVE_STATUSES:
            raise ValueError(f"write_memory: a new memory is 'proposed' or 'accepted', not {record.status!r}")
        values = _row_values(record)
        c = memories.c
        with self._writing(conn) as conn:
            self._lock_owner(conn, values["owner"])
            stored = _memory_row(conn, values["memory_id"])
            if stored is not None:
                return stored
            slot = _same_slot(values["owner"], values["scope"], values["key"], values["session_id"], values["workspace"])
            live = conn.execute(
                select(func.count()).select_from(memories).where(c.owner == values["owner"], c.status.in_(LIVE_STATUSES))
            ).scalar_one()
            if record.status == "accepted" and live >= MAX_MEMORIES_PER_OWNER:
                live -= conn.execute(select(func.count()).select_from(memories).where(slot)).scalar_one()
            if live >= MAX_MEMORIES_PER_OWNER:
                raise MemoryLimitExceeded(f"owner {record.owner!r}", "live memories", MAX_MEMORIES_PER_OWNER)
            if record.status == "proposed":
                pending = conn.execute(
                    select(func.count())
                    .select_from(memories)
                    .where(c.session_id == values["session_id"], c.status == "proposed")
                ).scalar_one()
                if pending >= MAX_PENDING_PROPOSALS_PER_SESSION:
                    raise MemoryLimitExceeded(
                        f"session {record.session_id!r}", "pending proposals", MAX_PENDING_PROPOSALS_PER_SESSION
                    )
            else:
                if record.scope == "session":
                    held = conn.execute(
                        select(func.count()).select_from(memories).where(
                            c.session_id == values["session_id"], c.scope == "session", c.status == "accepted",
                            c.key != values["key"],
                        )
                    ).scalar_one()
                    if held >= MAX_SESSION_MEMORIES_PER_SESSION:
                        raise MemoryLimitExceeded(
                            f"session {record.session_id!r}", "session memories", MAX_SESSION_MEMORIES_PER_SESSION
                        )
                conn.execute(update(memories).where(slot).values(status="superseded"))
                self._prune_dead(conn, values["owner"])
            conn.execute(self._insert_ignore(memories, ["memory_id"]), values)
            stored = _memory_row(conn, values["memory_id"])
        assert stored is not None  # inserted above, or by a writer of the same id before us
        return stored

    def memory(self, memory_id: str, *, conn: Connection | None = None) -> MemoryRecord | None:
        """The memory ``memory_id`` (any owner, any status), or None when there is none."""
        with self._reading(conn) as conn:
            return _memory_row(conn, text_column(memory_id))

    def memories(
        self,
        owner: str,
        *,
        status: str | tuple[str, ...] | None = None,
        scope: str | None = None,
        session_id: str | None = None,
        limit: int = 200,
    ) -> list[MemoryRecord]:
        """The owner's memories, newest first, at most ``limit``; only those of ``status`` (one, or
        a tuple of them), ``scope`` and the writing session ``session_id`` when given."""
        c = memories.c
        q = select(memories).where(c.owner == text_column(owner))
        if isinstance(status, tuple):
            q = q.where(c.status.in_(status))
        elif status is not None:
            q = q.where(c.status == status)
        if scope is not None:
            q = q.where(c.scope == scope)
        if session_id is not None:
            q = q.where(c.session_id == text_column(session_id))
        with self._engine.connect() as conn:
            rows = conn.execute(_newest_first(q, limit)).all()
        return [_memory_record(r) for r in rows]

    def visible_memories(
        self, owner: str, session_id: str, workspace: str, *, limit: int = 200, conn: Connection | None = None
    ) -> list[MemoryRecord]:
        """The accepted memories of ``owner`` that session ``session_id`` on ``workspace`` may
        see, newest first, at most ``limit``: ``user`` scope, ``workspace`` scope of this
        workspace, ``session`` scope of this session. Never another owner's."""
        c = memories.c
        q = select(memories).where(
            c.owner == text_column(owner),
            c.status == "accepted",
            or_(
                c.scope == "user",
                and_(c.scope == "workspace", c.workspace == text_column(workspace)),
                and_(c.scope == "session", c.session_id == text_column(session_id)),
            ),
        )
        with self._reading(conn) as conn:
            rows = conn.execute(_newest_first(q, limit)).all()
        return [_memory_record(r) for r in rows]

    def decide_memory(
        self,
        memory_id: str,
        decision: Literal["accept", "reject"],
        principal: str,
        reason: str | None = None,
        *,
        conn: Connection | None = None,
    ) -> MemoryRecord:
        """The owner ``principal`` accepts or rejects the proposal ``memory_id``; returns it as stored.

        ``accept``: ``proposed`` -> ``accepted``, superseding the owner's earlier accepted memory
        of the same scope, scope target and key (as ``write_memory``); ``reject``: ``proposed``
        -> ``rejected``. ``decided_at``, ``decided_by`` (``principal``) and ``reason`` are
        recorded. The decision the memory already has returns it unchanged (a retried activity
        is safe; an accepted proposal since superseded counts as accepted). Raises
        ``MemoryNotFound`` for an unknown id or one ``principal`` does not own (the same error:
        a stranger learns nothing), ``MemoryAlreadyDecided`` for the other decision or a memory
        that was never a proposal (a ``session``-scope write), ``ValueError`` for another decision.
        The decision is recorded in the audit log (``accept_memory``, ``reject_memory``) in the
        same transaction, whichever path made it (the proposing session's ``memory.decide``, or
        the client on the store once that session has closed).
        """
        if decision not in ("accept", "reject"):
            raise ValueError(f"decide_memory: decision must be 'accept' or 'reject', not {decision!r}")
        memory_id, principal = text_column(memory_id), text_column(principal)
        c = memories.c
        with self._writing(conn) as conn:
            found = _memory_row(conn, memory_id)
            if found is None or found.owner != principal:
                raise MemoryNotFound(memory_id)
            self._lock_owner(conn, found.owner)
            current = _memory_row(conn, memory_id, for_update=True)
            if current is None:  # forgotten meanwhile
                raise MemoryNotFound(memory_id)
            if current.status != "proposed":
                was_proposal = current.scope != "session"
                done = "rejected" if decision == "reject" else ("accepted", "superseded")
                if was_proposal and current.status in done:
                    return current
                raise MemoryAlreadyDecided(memory_id, current.status, current.decided_by)
            status = "accepted" if decision == "accept" else "rejected"
            if status == "accepted":
                slot = _same_slot(current.owner, current.scope, current.key, current.session_id, current.workspace)
                conn.execute(update(memories).where(slot, c.memory_id != memory_id).values(status="superseded"))
            now = self._now()
            conn.execute(
                update(memories)
                .where(c.memory_id == memory_id, c.status == "proposed")
                .values(
                    status=status, decided_at=now, decided_by=principal,
                    reason=None if reason is None else text_column(reason),
                )
            )
            self.record_act(
                principal, f"{decision}_memory", "memory", memory_id, owner=current.owner, reason=reason,
                detail=_memory_detail(current), key=f"memory:{memory_id}:decision", at=now, conn=conn,
            )
            if status == "rejected":
                self._prune_dead(conn, current.owner)
            stored = _memory_row(conn, memory_id)
        assert stored is not None
        return stored

    def forget_memory(self, memory_id: str, principal: str, *, conn: Connection | None = None) -> MemoryRecord:
        """Delete the memory ``memory_id`` of the owner ``principal`` (any status) and return it as
        it was (recorded in the audit log as ``forget_memory``). Raises ``MemoryNotFound`` for an
        unknown id or one ``principal`` does not own."""
        memory_id, principal = text_column(memory_id), text_column(principal)
        with self._writing(conn) as conn:
            found = _memory_row(conn, memory_id)
            if found is None or found.owner != principal:
                raise MemoryNotFound(memory_id)
            self._lock_owner(conn, found.owner)
            conn.execute(delete(memories).where(memories.c.memory_id == memory_id))
            self.record_act(
                principal, "forget_memory", "memory", memory_id, owner=found.owner,
                detail={**_memory_detail(found), "status": found.status}, key=f"memory:{memory_id}:forget", conn=conn,
            )
        return found

    def _prune_dead(self, conn: Connection, owner: str) -> None:
        """Delete ``owner``'s oldest superseded and rejected memories past ``MAX_DEAD_MEMORIES_PER_OWNER``."""
        c = memories.c
        dead = and_(c.owner == owner, c.status.in_(("superseded", "rejected")))
        count = conn.execute(select(func.count()).select_from(memories).where(dead)).scalar_one()
        if count < MAX_DEAD_MEMORIES_PER_OWNER:
            return
        oldest = select(c.memory_id).where(dead).order_by(c.created_at, c.memory_id).limit(count - MAX_DEAD_MEMORIES_PER_OWNER + 1)
        conn.execute(delete(memories).where(c.memory_id.in_(oldest.scalar_subquery())))

    def _lock_owner(self, conn: Connection, owner: str) -> None:
        """Make ``owner``'s memory writes take turns until ``conn``'s transaction ends. SQLite's
        write transactions already do (``BEGIN IMMEDIATE``); PostgreSQL takes an advisory lock."""
        if self._dialect == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _owner_lock_key(owner)})


def _owner_lock_key(owner: str) -> int:
    """A signed 64-bit advisory lock key for ``owner``'s memories."""
    digest = hashlib.sha256(f"agentrt memories {owner}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _same_slot(owner: str, scope: str, key: str, session_id: str, workspace: str) -> ColumnElement[bool]:
    """The owner's accepted memories an accepted memory of (scope, target, key) replaces."""
    c = memories.c
    conditions = [c.owner == owner, c.scope == scope, c.key == key, c.status == "accepted"]
    if scope == "session":
        conditions.append(c.session_id == session_id)
    elif scope == "workspace":
        conditions.append(c.workspace == workspace)
    return and_(*conditions)


def _memory_detail(record: MemoryRecord) -> dict[str, Any]:
    """What the audit log keeps of a decided or forgotten memory: where it lives, never its text."""
    return {"scope": record.scope, "key": record.key, "session_id": record.session_id}


def _row_values(record: MemoryRecord) -> dict[str, Any]:
    """``record`` as column values: text as every backend takes it, times in UTC."""
    values = record.model_dump()
    for name, value in values.items():
        if isinstance(value, str):
            values[name] = text_column(value)
        elif isinstance(value, datetime):
            values[name] = value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return values


def _newest_first(q: Any, limit: int) -> Any:
    c = memories.c
    return q.order_by(c.created_at.desc(), c.memory_id.desc()).limit(max(0, limit))


def _memory_row(conn: Connection, memory_id: str, for_update: bool = False) -> MemoryRecord | None:
    q = select(memories).where(memories.c.memory_id == memory_id)
    if for_update:
        q = q.with_for_update()  # PostgreSQL row lock; SQLite already holds the write lock
    row = conn.execute(q).one_or_none()
    return None if row is None else _memory_record(row)


def _memory_record(r: Any) -> MemoryRecord:
    return MemoryRecord(
        memory_id=r.memory_id, owner=r.owner, scope=r.scope, key=r.key, text=r.text, status=r.status,
        session_id=r.session_id, workspace=r.workspace, created_at=utc(r.created_at),
        decided_at=utc(r.decided_at), decided_by=r.decided_by, reason=r.reason,
    )
