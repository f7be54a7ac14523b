"""A PostgreSQL server of one's own (``initdb`` and ``pg_ctl`` on a free port, trust auth), so that a
test or a benchmark can stop and start it without touching the server others share. As root (CI),
the server runs as the ``postgres`` user (``runuser``): PostgreSQL refuses to run as root."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from agentrt.worker import free_port

BIN_ROOT = Path("/usr/lib/postgresql")


def pg_bin(name: str) -> str:
    """The path of PostgreSQL's program ``name`` (its newest version's); RuntimeError if none is here."""
    found = shutil.which(name)
    if found:
        return found
    versions = sorted(BIN_ROOT.iterdir(), key=lambda p: p.name) if BIN_ROOT.is_dir() else []
    for version in reversed(versions):
        candidate = version / "bin" / name
        if candidate.exists():
            return str(candidate)
    raise RuntimeError(f"PostgreSQL's {name} is not on this machine (the postgresql package provides it)")


class PrivatePostgres:
    """A server in a directory of its own under the system's temporary directory (one the
    ``postgres`` user can reach, unlike pytest's or a private run directory), on 127.0.0.1:``port``; ``start``, ``stop``,
    ``create_database``, ``url``; ``close`` stops it if it runs and removes the directory."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="agentrt-pg-"))
        self.data = self.directory / "data"
        self.port = free_port()
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.directory, "postgres")
        self._run(pg_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")

    def _run(self, *args: str) -> None:
        command = (["runuser", "-u", "postgres", "--"] if self._as_postgres else []) + list(args)
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {result.stderr or result.stdout}")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.directory / "log"), "-w", "start")

    def stop(self) -> None:
        self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def create_database(self, name: str) -> str:
        """Create database ``name``; its SQLAlchemy URL."""
        self._run(pg_bin("createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
        return self.url(name)

    def url(self, database: str) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def close(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)
