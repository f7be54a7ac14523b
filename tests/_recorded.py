"""The session histories a test run records, gathered for the ``replay_last`` test of tests/test_replay.py.

In one process they are the handles in ``RECORDED_HISTORIES``, fetched from the run's Temporal dev
server when the replay test runs. Under pytest-xdist (``make test`` runs ``pytest -n 2``) every worker
process has its own dev server and store, and the replay test runs in one of them: each other worker
writes the histories it recorded to the run's shared directory (``histories-<worker>.json``:
``{"store_url": str | None, "histories": [{"workflow_id": str, "history": <history JSON>}]}``) before
its server stops, then marks its end (``worker-<worker>.done``); the replay test waits for every
worker that started (``worker-<worker>.pid``) to end, or to have died, and replays what they wrote.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest
from temporalio.client import WorkflowHandle, WorkflowHistory
from temporalio.service import RPCError, RPCStatusCode

RECORDED_HISTORIES: list[WorkflowHandle] = []

# How long the replay test waits for the other workers to end (they run the tests queued to them).
OTHER_WORKERS_TIMEOUT_SECONDS = 1800.0


def xdist_worker(config: pytest.Config) -> str | None:
    """This process's pytest-xdist worker id (``gw0``, ``gw1``, ...), or None when not a worker."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput["workerid"] if workerinput is not None else None


def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory every worker of this run shares: the parent of each worker's base temp."""
    return tmp_path_factory.getbasetemp().parent


def worker_started(directory: Path, worker: str) -> None:
    (directory / f"worker-{worker}.pid").write_text(str(os.getpid()))


def worker_ended(directory: Path, worker: str) -> None:
    (directory / f"worker-{worker}.done").touch()


async def fetch_recorded() -> list[WorkflowHistory]:
    """The histories of ``RECORDED_HISTORIES``, from this process's server."""
    histories = []
    for handle in RECORDED_HISTORIES:
        try:
            histories.append(await handle.fetch_history())
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise  # NOT_FOUND: a test whose start was rightly refused left no workflow
    return histories


async def export_recorded(directory: Path, worker: str, store_url: str | None) -> None:
    """Write this worker's recorded histories (and the store their big payloads live in) for the replay test."""
    histories = [{"workflow_id": h.workflow_id, "history": json.loads(h.to_json())} for h in await fetch_recorded()]
    path = directory / f"histories-{worker}.json"
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps({"store_url": store_url, "histories": histories}))
    partial.replace(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def histories_of_other_workers(directory: Path, worker: str) -> dict[str | None, list[WorkflowHistory]]:
    """Once every other worker of the run has ended (or died): the histories they recorded, by store URL.

    Raises TimeoutError when a worker still runs after ``OTHER_WORKERS_TIMEOUT_SECONDS``."""
    deadline = time.monotonic() + OTHER_WORKERS_TIMEOUT_SECONDS
    while True:
        running = [
            pid_file.stem.removeprefix("worker-")
            for pid_file in directory.glob("worker-*.pid")
            if pid_file.stem != f"worker-{worker}"
            and not pid_file.with_suffix(".done").exists()
            and _alive(int(pid_file.read_text()))
        ]
        if not running:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"workers {', '.join(running)} still run after {OTHER_WORKERS_TIMEOUT_SECONDS:.0f} s")
        await asyncio.sleep(0.5)
    by_store: dict[str | None, list[WorkflowHistory]] = {}
    for path in sorted(directory.glob("histories-*.json")):
        if path.stem == f"histories-{worker}":
            continue
        data = json.loads(path.read_text())
        by_store.setdefault(data["store_url"], []).extend(
            WorkflowHistory.from_json(h["workflow_id"], h["history"]) for h in data["histories"]
        )
    return by_store
