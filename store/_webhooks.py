"""Webhooks in the store: what is watched (a session, task or run, with a cursor) and the log of
notifications owed to each target, so a gateway that restarts resumes where it stopped and
redelivers a notification under the id it had.

A watch's cursor and the notifications it made move in one transaction (an outbox): a crash
before the commit makes nothing, and the same poll after the restart makes the same
notifications. Delivery rows are claimed before each attempt (the claim pushes ``next_attempt_at``
past the attempt, a lease), so two dispatchers on one database do not post the same row at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, select, update

from agentrt.store._base import StoreBase, text_column, utc
from agentrt.store._models import WEBHOOK_WATCH_KINDS, webhook_deliveries, webhook_watches

# Characters of a failed attempt's error kept in the delivery log.
ERROR_CHARS = 2_000


def webhook_watch_id(kind: str, target_id: str) -> str:
    """The watch id of ``target_id`` of ``kind`` (``session``, ``task``, ``run``): ``w`` and 40 hex
    digits of the SHA-256 of both, so one target has one watch whatever asks for it."""
    return "w" + hashlib.sha256(f"{kind}\x00{target_id}".encode()).hexdigest()[:40]


@dataclass(frozen=True)
class WebhookWatch:
    """One watch (``Store.webhook_watch``): ``cursor`` is, for a session, the last event seq turned
    into notifications; for a task or run, the seq of the last status event notified (or, for one
    whose event log records no status, the number of status changes its workflow was seen to show),
    ``last_status`` the latest; ``state`` ``active`` or ``ended``. Times are timezone-aware UTC."""

    watch_id: str
    kind: str
    target_id: str
    principal: str
    cursor: int
    last_status: str | None
    state: str
    created_at: datetime
    updated_at: datetime
    ended_at: datetime | None


@dataclass(frozen=True)
class NewWebhookDelivery:
    """A notification owed to one target: ``body`` is the exact JSON text posted on every attempt."""

    webhook_id: str
    target_url: str
    type: str
    body: str


@dataclass(frozen=True)
class WebhookDelivery:
    """One row of the delivery log: ``state`` ``pending`` (due at ``next_attempt_at``),
    ``delivered`` (a 2xx answer at ``delivered_at``) or ``failed`` (every attempt failed);
    ``attempts`` counts requests begun; ``last_status_code`` / ``last_error``: the latest answer or
    why there was none. Times are timezone-aware UTC."""

    id: int
    webhook_id: str
    target_url: str
    watch_id: str
    type: str
    body: str
    state: str
    attempts: int
    next_attempt_at: datetime
    last_status_code: int | None
    last_error: str | None
    created_at: datetime
    delivered_at: datetime | None


class WebhookTables(StoreBase):
    """Tables ``webhook_watches`` and ``webhook_deliveries``."""

    def add_webhook_watch(
        self, kind: str, target_id: str, principal: str, cursor: int = 0
    ) -> tuple[bool, WebhookWatch]:
        """Watch ``target_id`` of ``kind`` for ``principal`` from ``cursor``; returns ``(True, watch)``
        when this call made it, ``(False, existing)`` when the target was already watched (the
        existing watch, active or ended, is left as it is). Raises ``ValueError`` for an unknown
        ``kind`` or a negative ``cursor``."""
        if kind not in WEBHOOK_WATCH_KINDS:
            raise ValueError(f"a webhook watch's kind is one of {', '.join(WEBHOOK_WATCH_KINDS)}, not {kind!r}")
        if cursor < 0:
            raise ValueError(f"a webhook watch's cursor is >= 0, not {cursor}")
        now = self._now()
        watch_id = webhook_watch_id(kind, target_id)
        row = {
            "watch_id": watch_id, "kind": kind, "target_id": text_column(target_id),
            "principal": text_column(principal), "cursor": cursor, "last_status": None, "state": "active",
            "created_at": now, "updated_at": now, "ended_at": None,
        }
        with self.transaction() as conn:
            stmt = self._insert_ignore(webhook_watches, ["watch_id"]).returning(webhook_watches.c.watch_id)
            created = conn.execute(stmt, row).first() is not None
            watch = _watch_row(conn, watch_id)
        assert watch is not None  # inserted or already present, and never deleted
        return created, watch

    def webhook_watch(self, watch_id: str) -> WebhookWatch | None:
        """The watch ``watch_id`` (see ``webhook_watch_id``), or None."""
        with self._engine.connect() as conn:
            return _watch_row(conn, watch_id)

    def webhook_watches(self, state: str | None = "active") -> list[WebhookWatch]:
        """Watches in ``state`` (None: all), oldest first."""
        c = webhook_watches.c
        q = select(webhook_watches).order_by(c.created_at, c.watch_id)
        if state is not None:
            q = q.where(c.state == state)
        with self._engine.connect() as conn:
            return [_watch(r) for r in conn.execute(q).mappings().all()]

    def advance_webhook_watch(
        self,
        watch_id: str,
        expected_cursor: int,
        cursor: int,
        *,
        last_status: str | None = None,
        ended: bool = False,
        deliveries: Sequence[NewWebhookDelivery] = (),
    ) -> bool:
        """Move an active watch from ``expected_cursor`` to ``cursor`` (with ``last_status``; ``ended``
        ends it) and queue ``deliveries``, in one transaction. Returns False, changing nothing, when
        the watch is not active at ``expected_cursor`` (another dispatcher moved it first). A
        delivery already in the log (same webhook id and target URL) is left as it is."""
        now = self._now()
        c = webhook_watches.c
        values: dict[str, Any] = {"cursor": cursor, "last_status": last_status, "updated_at": now}
        if ended:
            values.update(state="ended", ended_at=now)
        move = (
            update(webhook_watches)
            .where(c.watch_id == watch_id, c.cursor == expected_cursor, c.state == "active")
            .values(**values)
            .returning(c.watch_id)
        )
        with self.transaction() as conn:
            if conn.execute(move).first() is None:
                return False
            if deliveries:
                rows = [
                    {
                        "webhook_id": d.webhook_id, "target_url": d.target_url, "watch_id": watch_id, "type": d.type,
                        "body": text_column(d.body), "state": "pending", "attempts": 0, "next_attempt_at": now,
                        "last_status_code": None, "last_error": None, "created_at": now, "delivered_at": None,
                    }
                    for d in deliveries
                ]
                conn.execute(self._insert_ignore(webhook_deliveries, ["webhook_id", "target_url"]), rows)
        return True

    def claim_webhook_deliveries(
        self, target_url: str, *, lease_seconds: float, limit: int = 10
    ) -> list[WebhookDelivery]:
        """Claim up to ``limit`` pending deliveries to ``target_url`` that are due, oldest first: each
        gets one more attempt counted and is not due again for ``lease_seconds`` (seconds) unless
        ``finish_webhook_delivery`` or ``release_webhook_delivery`` says otherwise. A row another
        caller claimed first is left out."""
        now = self._now()
        c = webhook_deliveries.c
        due = (
            select(c.id)
            .where(c.target_url == target_url, c.state == "pending", c.next_attempt_at <= now)
            .order_by(c.id)
            .limit(limit)
            # PostgreSQL: concurrent claimers pass over each other's rows; SQLite holds the write lock.
            .with_for_update(skip_locked=True)
        )
        claimed: list[WebhookDelivery] = []
        with self.transaction() as conn:
            for delivery_id in conn.execute(due).scalars().all():
                claim = (
                    update(webhook_deliveries)
                    .where(c.id == delivery_id, c.state == "pending", c.next_attempt_at <= now)
                    .values(attempts=c.attempts + 1, next_attempt_at=now + timedelta(seconds=lease_seconds))
                    .returning(*webhook_deliveries.c)
                )
                row = conn.execute(claim).mappings().first()
                if row is not None:
                    claimed.append(_delivery(row))
        return claimed

    def finish_webhook_delivery(
        self,
        delivery_id: int,
        *,
        delivered: bool,
        status_code: int | None = None,
        error: str | None = None,
        retry_at: datetime | None = None,
    ) -> WebhookDelivery | None:
        """Record how an attempt of a pending delivery ended: ``delivered`` (a 2xx answer), or not,
        then due again at ``retry_at`` or, without one, ``failed`` for good. ``status_code`` is the
        answer's HTTP status (None: no answer), ``error`` why it failed (cut to ``ERROR_CHARS``).
        Returns the row after it; None for an unknown id. A row no longer pending is not changed."""
        now = self._now()
        c = webhook_deliveries.c
        values: dict[str, Any] = {"last_status_code": status_code}
        if delivered:
            values.update(state="delivered", delivered_at=now, last_error=None)
        else:
            values["last_error"] = text_column(error[:ERROR_CHARS]) if error else None
            if retry_at is None:
                values["state"] = "failed"
            else:
                values["next_attempt_at"] = retry_at
        with self.transaction() as conn:
            conn.execute(update(webhook_deliveries).where(c.id == delivery_id, c.state == "pending").values(**values))
            row = conn.execute(select(webhook_deliveries).where(c.id == delivery_id)).mappings().first()
        return None if row is None else _delivery(row)

    def release_webhook_delivery(self, delivery_id: int) -> None:
        """Make a claimed, still pending delivery due now (its attempt was cut short by a stop)."""
        c = webhook_deliveries.c
        with self.transaction() as conn:
            pending = update(webhook_deliveries).where(c.id == delivery_id, c.state == "pending")
            conn.execute(pending.values(next_attempt_at=self._now()))

    def next_webhook_due(self, target_url: str) -> datetime | None:
        """When the earliest pending delivery to ``target_url`` is due (UTC), or None when none is pending."""
        c = webhook_deliveries.c
        q = select(func.min(c.next_attempt_at)).where(c.target_url == target_url, c.state == "pending")
        with self._engine.connect() as conn:
            return utc(conn.execute(q).scalar_one_or_none())

    def webhook_deliveries(
        self, *, watch_id: str | None = None, target_url: str | None = None, state: str | None = None, limit: int = 1000
    ) -> list[WebhookDelivery]:
        """The delivery log (of ``watch_id``, to ``target_url``, in ``state`` when given), in the order
        the notifications were made, at most ``limit`` rows."""
        c = webhook_deliveries.c
        q = select(webhook_deliveries).order_by(c.id).limit(limit)
        if watch_id is not None:
            q = q.where(c.watch_id == watch_id)
        if target_url is not None:
            q = q.where(c.target_url == target_url)
        if state is not None:
            q = q.where(c.state == state)
        with self._engine.connect() as conn:
            return [_delivery(r) for r in conn.execute(q).mappings().all()]


def _watch_row(conn: Connection, watch_id: str) -> WebhookWatch | None:
    row = conn.execute(select(webhook_watches).where(webhook_watches.c.watch_id == watch_id)).mappings().first()
    return None if row is None else _watch(row)


def _watch(r: Any) -> WebhookWatch:
    return WebhookWatch(
        watch_id=r["watch_id"], kind=r["kind"], target_id=r["target_id"], principal=r["principal"], cursor=r["cursor"],
        last_status=r["last_status"], state=r["state"], created_at=utc(r["created_at"]),  # type: ignore[arg-type]
        updated_at=utc(r["updated_at"]), ended_at=utc(r["ended_at"]),  # type: ignore[arg-type]
    )


def _delivery(r: Any) -> WebhookDelivery:
    return WebhookDelivery(
        id=r["id"], webhook_id=r["webhook_id"], target_url=r["target_url"], watch_id=r["watch_id"], type=r["type"],
        body=r["body"], state=r["state"], attempts=r["attempts"],
        next_attempt_at=utc(r["next_attempt_at"]),  # type: ignore[arg-type]
        last_status_code=r["last_status_code"], last_error=r["last_error"],
        created_at=utc(r["created_at"]), delivered_at=utc(r["delivered_at"]),  # type: ignore[arg-type]
    )
