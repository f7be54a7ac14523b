"""Throwaway PostgreSQL databases for tests, without pytest fixtures so any test module can reuse them.

The server is ``AGENTRT_TEST_POSTGRES_ADMIN_URL`` (default: postgres on 127.0.0.1:5432,
trust auth). ``create_temp_database`` raises ``psycopg.OperationalError`` when it is
unreachable; callers decide whether that skips or fails.
"""

from __future__ import annotations

import os
import uuid

import psycopg
from psycopg import sql
from sqlalchemy.engine import make_url

ADMIN_URL = os.environ.get("AGENTRT_TEST_POSTGRES_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def _admin() -> psycopg.Connection:
    return psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)


def postgres_available() -> bool:
    """True when the admin database accepts a connection."""
    try:
        with _admin():
            return True
    except psycopg.OperationalError:
        return False


def create_temp_database() -> str:
    """Create ``agentrt_test_<uuid hex>`` and return its SQLAlchemy URL (``postgresql+psycopg://...``)."""
    name = f"agentrt_test_{uuid.uuid4().hex}"
    with _admin() as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    admin = make_url(ADMIN_URL)
    return admin.set(drivername="postgresql+psycopg", database=name).render_as_string(hide_password=False)


def drop_database(url: str) -> None:
    """Drop the database named in ``url``, disconnecting any sessions still on it."""
    name = make_url(url).database
    with _admin() as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
