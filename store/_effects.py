"""The effect ledger: how an effectful tool call happens at most once although Temporal runs
activities at least once. A call is claimed before its effect and recorded after it; a
claim with no record means the outcome is unknown, and an operator reconciles it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Connection, select, update

from agentrt.store._base import StoreBase, text_column, utc
from agentrt.store._models import effects


@dataclass(frozen=True)
class EffectRecord:
    """One row of the effect ledger; times are timezone-aware UTC.

    ``state`` is one of:

    - ``claimed``: an attempt is about to perform (or performed) the effect; with no
      record after it, whether the effect happened is unknown.
    - ``applied`` / ``failed``: the effect's outcome was recorded (``result_text``), or an
      operator reconciled it as applied (``result_text`` None, ``note`` set if given).
    - ``not_applied``: an operator reconciled it as "did not happen"; it may be claimed again.
    """

    idempotency_key: str
    session_id: str
    tool: str
    state: str
    result_text: str | None
    note: str | None
    claimed_at: datetime
    updated_at: datetime


class EffectLedger(StoreBase):
    """Table ``effects``, keyed by the call's idempotency key (``<workflow id>/<turn>/<call id>``)."""

    def claim_effect(self, key: str, session_id: str, tool: str) -> tuple[bool, EffectRecord]:
        """Claim the effect ``key`` before performing it; at most one caller wins.

        Returns ``(True, record)`` (state ``claimed``) only to the caller whose claim took
        effect: the one that created the row, or the one that re-claimed a row in state
        ``not_applied`` (released by ``reconcile_effect``; its ``claimed_at`` is reset and
        its note kept) of the same ``session_id``: another session's row is never re-claimed.
        Every other caller gets ``(False, existing_record)``, whatever its state: ``applied``/``failed`` carry the recorded result, ``claimed`` means another
        attempt holds the claim and the outcome is unknown. The existing record's
        ``session_id`` and ``tool`` are the first claimer's, not the arguments.

        Atomic on both dialects: ``INSERT .. ON CONFLICT DO NOTHING``, then a conditional
        ``UPDATE .. WHERE state = 'not_applied'``, in one write transaction.
        """
        now = self._now()
        c = effects.c
        with self._write() as conn, conn.begin():
            # RETURNING, not rowcount: psycopg reports rowcount -1 for these INSERTs.
            insert_stmt = (
                self._insert_ignore(effects, ["idempotency_key"])
                .values(
                    idempotency_key=key, session_id=session_id, tool=tool, state="claimed",
                    result_text=None, note=None, claimed_at=now, updated_at=now,
                )
                .returning(c.idempotency_key)
            )
            won = conn.execute(insert_stmt).first() is not None
            if not won:
                reclaim = (
                    update(effects)
                    .where(c.idempotency_key == key, c.session_id == session_id, c.state == "not_applied")
                    .values(state="claimed", result_text=None, claimed_at=now, updated_at=now)
                    .returning(c.idempotency_key)
                )
                won = conn.execute(reclaim).first() is not None
            record = _effect_row(conn, key)
        assert record is not None  # inserted or already present, and never deleted
        return won, self._opened(record)

    def record_effect(self, key: str, state: Literal["applied", "failed"], result_text: str) -> EffectRecord:
        """Record the outcome of a claimed effect: ``claimed`` -> ``applied`` | ``failed``.

        Repeating the state the effect already has is a no-op returning the stored record
        (its ``result_text`` is not overwritten). Raises ``KeyError`` when ``key`` was never
        claimed, ``ValueError`` for ``state`` not ``applied``/``failed`` and for any other
        transition (e.g. ``applied`` -> ``failed``, or recording a ``not_applied`` effect).
        """
        if state not in ("applied", "failed"):
            raise ValueError(f"record_effect: state must be 'applied' or 'failed', not {state!r}")
        return self._close_claim(key, state, "recorded", result_text=self._seal(text_column(result_text), f"effects/{key}"))

    def reconcile_effect(
        self, key: str, outcome: Literal["applied", "not_applied"], note: str | None = None
    ) -> EffectRecord:
        """An operator's answer for a ``claimed`` effect whose outcome is unknown.

        ``applied``: the state becomes ``applied`` (``result_text`` stays as it is, i.e. None;
        ``note`` is stored). ``not_applied``: the state becomes ``not_applied`` and the key may
        be claimed again (``note`` is stored). Repeating the outcome the effect already has is
        a no-op returning the stored record. Raises ``KeyError`` for an unknown key and
        ``ValueError`` for an unknown outcome or when the effect is in another final state
        (``applied``/``failed`` recorded by an attempt, or the opposite reconciliation).
        """
        if outcome not in ("applied", "not_applied"):
            raise ValueError(f"reconcile_effect: outcome must be 'applied' or 'not_applied', not {outcome!r}")
        return self._close_claim(key, outcome, "reconciled", note=note)

    def _close_claim(self, key: str, state: str, verb: str, **values: Any) -> EffectRecord:
        """Move a ``claimed`` effect to ``state`` (with ``values``) in one transaction; repeating is a no-op."""
        c = effects.c
        with self._write() as conn, conn.begin():
            current = _effect_row(conn, key, for_update=True)
            if current is None:
                raise KeyError(key)
            if current.state == state:
                return self._opened(current)
            if current.state != "claimed":
                raise ValueError(
                    f"effect {key!r} is {current.state!r}; only a 'claimed' effect can be {verb} as {state!r}"
                )
            conn.execute(
                update(effects)
                .where(c.idempotency_key == key, c.state == "claimed")
                .values(state=state, updated_at=self._now(), **values)
            )
            record = _effect_row(conn, key)
        assert record is not None
        return self._opened(record)

    def effect(self, key: str) -> EffectRecord | None:
        """The ledger row for ``key``, or None when it was never claimed."""
        with self._engine.connect() as conn:
            record = _effect_row(conn, key)
        return None if record is None else self._opened(record)

    def effects(self, session_id: str) -> list[EffectRecord]:
        """The session's effects ordered by ``claimed_at``, then ``idempotency_key``."""
        c = effects.c
        q = select(effects).where(c.session_id == session_id).order_by(c.claimed_at, c.idempotency_key)
        with self._engine.connect() as conn:
            rows = conn.execute(q).all()
        return [self._opened(_effect_record(r)) for r in rows]

    def _opened(self, record: EffectRecord) -> EffectRecord:
        """``record`` with its ``result_text`` in clear (sealed at rest when the store has a cipher)."""
        if record.result_text is None:
            return record
        return replace(record, result_text=self._open(record.result_text, f"effects/{record.idempotency_key}"))


def _effect_row(conn: Connection, key: str, for_update: bool = False) -> EffectRecord | None:
    q = select(effects).where(effects.c.idempotency_key == key)
    if for_update:
        q = q.with_for_update()  # PostgreSQL row lock; SQLite already holds the write lock
    row = conn.execute(q).one_or_none()
    return None if row is None else _effect_record(row)


def _effect_record(r: Any) -> EffectRecord:
    return EffectRecord(
        idempotency_key=r.idempotency_key, session_id=r.session_id, tool=r.tool, state=r.state,
        result_text=r.result_text, note=r.note, claimed_at=utc(r.claimed_at), updated_at=utc(r.updated_at),
    )
