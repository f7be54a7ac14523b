"""`agentrt store migrate`: a store brought to this release's schema, from nothing or from an older
revision, and said so; again, it is current; a store that does not answer is one line, exit 2."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from agentrt.store import head_revision

AGENTRT = str(Path(sys.executable).parent / "agentrt")


def migrate(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "AGENTRT_DATABASE_URL": url}
    env.pop("AGENTRT_CONFIG", None)
    return subprocess.run([AGENTRT, "store", "migrate", *args], env=env, capture_output=True, text=True, timeout=120)


def test_a_new_store_is_migrated_then_current_and_an_older_one_is_brought_up(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    url = f"sqlite:///{db}"
    head = head_revision()

    first = migrate(url)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"agentrt store {url}: schema migrated from revision none to {head}"
    again = migrate(url, "--json")
    assert json.loads(again.stdout) == {"url": url, "from": head, "to": head}

    with sqlite3.connect(db) as conn:  # as a store of the release before the last migration left it
        conn.execute("DROP TABLE mcp_trust_decisions")
        conn.execute("DROP TABLE mcp_server_changes")
        conn.execute("UPDATE alembic_version SET version_num = '0015'")
    older = migrate(url)
    assert older.stdout.strip() == f"agentrt store {url}: schema migrated from revision 0015 to {head}"
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM mcp_trust_decisions").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM mcp_server_changes").fetchone() == (0,)


def test_a_store_that_does_not_answer_is_one_line_with_its_password_hidden(tmp_path: Path) -> None:
    result = migrate("postgresql+psycopg://agentrt:hunter2@127.0.0.1:1/agentrt?connect_timeout=5")
    assert result.returncode == 2
    assert result.stderr.startswith("error: the store does not answer at postgresql+psycopg://agentrt:***@127.0.0.1:1/agentrt")
    assert "hunter2" not in result.stderr and "Traceback" not in result.stderr


def test_a_store_url_that_is_no_url_is_one_line() -> None:
    result = migrate("notaurl")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "error: the store URL ([store] url / AGENTRT_DATABASE_URL) is not a database URL" in result.stderr
