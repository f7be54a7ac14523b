"""Rows of the ``payloads`` table: the bytes behind the ``agentrt.store`` external-storage driver.

Temporal payloads above the size threshold leave workflow history; this module keeps them
in the application database, keyed by their content hash, so storing the same payload
twice (a retried activity, a replayed workflow task) is a no-op.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timezone

from sqlalchemy import select

from agentrt.store._models import payloads
from agentrt.store._store import Store


def put_payloads(store: Store, blobs: Mapping[str, bytes]) -> None:
    """Insert ``{key: serialized payload bytes}`` in one transaction; existing keys are left as they are.

    Keys are content hashes (at most 128 characters), so a key that exists already holds
    the same bytes and re-storing is idempotent.
    """
    if not blobs:
        return
    now = datetime.now(timezone.utc)
    rows = [{"key": key, "data": data, "size_bytes": len(data), "created_at": now} for key, data in blobs.items()]
    with store._write() as conn, conn.begin():
        conn.execute(store._insert_ignore(payloads, ["key"]), rows)


def get_payloads(store: Store, keys: Iterable[str]) -> dict[str, bytes]:
    """The stored bytes of each of ``keys`` that exists, as ``{key: bytes}``; unknown keys are absent."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    with store.engine.connect() as conn:
        rows = conn.execute(select(payloads.c.key, payloads.c.data).where(payloads.c.key.in_(wanted))).all()
    return {key: bytes(data) for key, data in rows}
