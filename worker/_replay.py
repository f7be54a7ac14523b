"""Replaying recorded histories against the workflow code installed here: the check a deploy
runs first (``agentrt replay``, docs/deployment.md). A history that does not replay means the
code about to be deployed would fail the running workflow it came from on its next workflow task.

Histories come from files (what ``temporal workflow show --output json`` writes, or
``WorkflowHistory.to_json``) or from a namespace (every run a visibility query finds). Each is
replayed with the worker's own plugin (``AgentrtPlugin``: its workflows, sandbox, data converter,
codec keys and payload storage), so encrypted and externally stored payloads read as a worker
reads them.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHistory
from temporalio.runtime import Runtime, TelemetryConfig
from temporalio.worker import Replayer

from agentrt.schemas import AUTONOMOUS_TASK_WORKFLOW, SESSION_WORKFLOW, TASK_GRAPH_WORKFLOW, ConfigurationError

__all__ = [
    "DEFAULT_REPLAY_QUERY",
    "HistorySource",
    "ReplayOutcome",
    "histories_in_files",
    "histories_in_namespace",
    "quiet_runtime",
    "replay_histories",
]

# Every run of agentrt's workflow types (a visibility query).
DEFAULT_REPLAY_QUERY = (
    f"WorkflowType IN ('{SESSION_WORKFLOW}', '{AUTONOMOUS_TASK_WORKFLOW}', '{TASK_GRAPH_WORKFLOW}')"
)
# The largest history file read (bytes): over Temporal's own limit on a history (50 MiB by
# default, history.historySizeLimitError), with room for JSON's overhead.
MAX_HISTORY_FILE_BYTES = 128 * 1024 * 1024
# The workflow types this code runs; a history of another type cannot replay here.
KNOWN_WORKFLOW_TYPES = frozenset({SESSION_WORKFLOW, AUTONOMOUS_TASK_WORKFLOW, TASK_GRAPH_WORKFLOW})
# How sdk-core's wrapped failure quotes the workflow's own message.
_WRAPPED_MESSAGE = re.compile(r'message: "((?:[^"\\]|\\.)*)"')
# What a non-determinism error says (sdk-core's error code, and its words).
_NONDETERMINISM_SIGNS = ("[TMPRL1100]", "Nondeterminism", "nondeterminism")


@dataclass(frozen=True)
class HistorySource:
    """One history to replay and where it came from (``origin``: a file's path, or
    ``namespace <name>``)."""

    history: WorkflowHistory
    origin: str


@dataclass(frozen=True)
class ReplayOutcome:
    """How one history replayed: ``error`` is None when it did; otherwise the failure's first
    line (for a non-determinism error: the event and the command that differ), and
    ``nondeterminism`` whether it was one (else the workflow code raised, or the history could
    not be read: a missing codec key, say)."""

    workflow_id: str
    run_id: str
    workflow_type: str
    origin: str
    error: str | None = None
    nondeterminism: bool = False

    @property
    def replayed(self) -> bool:
        return self.error is None

    def as_json(self) -> dict[str, Any]:
        return {
            "workflow_id": self.workflow_id, "run_id": self.run_id, "workflow_type": self.workflow_type,
            "origin": self.origin, "replayed": self.replayed, "nondeterminism": self.nondeterminism, "error": self.error,
        }


def histories_in_files(paths: Iterable[Path]) -> Iterator[HistorySource]:
    """The histories in ``paths``: JSON files, and the ``*.json`` files of directories (sorted,
    not recursive). A history's workflow id is the one its start event records (servers since
    1.24 record it), else a top-level ``workflowId`` field, else the file's name without ``.json``
    (name exported files by workflow id: a session and a task check their id).
    Raises ``ConfigurationError`` for a path that does not exist and a file that is not a history."""
    for path in paths:
        if path.is_dir():
            files = sorted(p for p in path.glob("*.json") if p.is_file())
        elif path.is_file():
            files = [path]
        elif path.exists():
            raise ConfigurationError(f"{path}: not a regular file or a directory")
        else:
            raise ConfigurationError(f"{path}: no such file or directory")
        for file in files:
            yield HistorySource(_read_history(file), str(file))


def _read_history(file: Path) -> WorkflowHistory:
    try:
        size = file.stat().st_size
        if size > MAX_HISTORY_FILE_BYTES:
            raise ConfigurationError(f"{file}: {size} bytes, more than a Temporal history holds ({MAX_HISTORY_FILE_BYTES} bytes read at most)")
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise ConfigurationError(f"{file}: not a JSON history ({err})") from None
    if not isinstance(data, dict) or not isinstance(data.get("events"), list) or not data["events"]:
        raise ConfigurationError(f"{file}: not a workflow history (no \"events\" list; export one with `temporal workflow show --output json`)")
    first = data["events"][0]
    started = first.get("workflowExecutionStartedEventAttributes", {}) if isinstance(first, dict) else {}
    workflow_id = started.get("workflowId") or data.get("workflowId") or file.name.removesuffix(".json")
    try:
        return WorkflowHistory.from_json(str(workflow_id), data)
    except Exception as err:  # noqa: BLE001 - protobuf's parse errors have no common type
        raise ConfigurationError(f"{file}: not a workflow history ({str(err).splitlines()[0][:300]})") from None


async def histories_in_namespace(client: Client, query: str, limit: int) -> AsyncIterator[HistorySource]:
    """The histories of at most ``limit`` runs that visibility ``query`` finds in ``client``'s
    namespace (running and closed), newest first, each fetched whole."""
    origin = f"namespace {client.namespace}"
    count = 0
    async for execution in client.list_workflows(query):
        if count >= limit:
            return
        count += 1
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        yield HistorySource(await handle.fetch_history(), origin)


async def replay_histories(sources: AsyncIterator[HistorySource], replayer: Replayer) -> list[ReplayOutcome]:
    """Replay every history of ``sources`` with ``replayer`` (``Replayer(workflows=[],
    plugins=[AgentrtPlugin(config)])``); one outcome per history, in order."""
    outcomes: list[ReplayOutcome] = []
    async for source in sources:
        history = source.history
        started = history.events[0].workflow_execution_started_event_attributes
        run_id = started.original_execution_run_id or ""
        error: str | None = None
        if started.workflow_type.name not in KNOWN_WORKFLOW_TYPES:
            outcomes.append(ReplayOutcome(
                workflow_id=history.workflow_id, run_id=run_id, workflow_type=started.workflow_type.name, origin=source.origin,
                error=f"workflow type {started.workflow_type.name[:200]!r} is not one this code runs ({', '.join(sorted(KNOWN_WORKFLOW_TYPES))})",
            ))
            continue
        try:
            async with replayer.workflow_replay_iterator(_one(history)) as results:
                async for result in results:
                    if result.replay_failure is not None:
                        error = str(result.replay_failure)
        except Exception as err:  # noqa: BLE001 - a history the replayer cannot even start is a failure too
            error = f"{type(err).__name__}: {err}"
        outcomes.append(ReplayOutcome(
            workflow_id=history.workflow_id, run_id=run_id, workflow_type=started.workflow_type.name, origin=source.origin,
            error=None if error is None else _first_line(error),
            nondeterminism=error is not None and any(sign in error for sign in _NONDETERMINISM_SIGNS),
        ))
    return outcomes


async def _one(history: WorkflowHistory) -> AsyncIterator[WorkflowHistory]:
    yield history


def _first_line(text: str) -> str:
    """The failure's own message when the SDK wrapped it (``Failure { message: "..." }``), else
    its first line; at most 1,000 characters."""
    found = _WRAPPED_MESSAGE.search(text)
    if found is not None:
        text = found.group(1).replace('\\"', '"')
    line = next((part for part in text.splitlines() if part.strip()), text)
    return line[:1000]


def quiet_runtime() -> Runtime:
    """A Temporal runtime that logs nothing of its own: a replay's failures are reported as its
    outcomes (sdk-core would also log each one as a warning on standard output)."""
    return Runtime(telemetry=TelemetryConfig(logging=None))
