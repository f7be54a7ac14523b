"""StuckWatch: a worker that runs workflows names, in its own log, the ones on its task queue whose workflow task keeps failing.

A workflow stuck on a failing workflow task cannot say so itself, and the SDK's own log lines
name its run id at most. The Temporal server flags such a workflow with the system search
attribute ``TemporalReportedProblems`` (Temporal 1.28+, after
``system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute`` problems in a row); the
watch lists the flagged ones of its task queue every ``STUCK_CHECK_SECONDS`` with one
visibility query and logs a warning per workflow, once for each stretch of being stuck (not
once a minute).
``agentrt doctor`` tells the cause and what to do.
"""

from __future__ import annotations

import asyncio
import logging

from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError

from agentrt.schemas import ConfigurationError

log = logging.getLogger("agentrt.worker")

__all__ = ["STUCK_CHECK_SECONDS", "StuckWatch"]

# How often the watch asks (seconds): one visibility query per worker each time.
STUCK_CHECK_SECONDS = 60.0
# The most flagged workflows one check names.
MAX_NAMED = 100
REPORTED_PROBLEMS = SearchAttributeKey.for_keyword_list("TemporalReportedProblems")


def problem_text(problems: list[str]) -> str:
    """``TemporalReportedProblems`` in words: ``['category=WorkflowTaskFailed',
    'cause=WorkflowTaskFailedCauseNonDeterministicError']`` -> "its workflow task keeps failing
    (non deterministic error)"."""
    values = dict(p.split("=", 1) for p in problems if "=" in p)
    what = "timing out" if values.get("category") == "WorkflowTaskTimedOut" else "failing"
    cause = values.get("cause", "")
    for prefix in ("WorkflowTaskFailedCause", "WorkflowTaskTimedOutCause"):
        cause = cause.removeprefix(prefix)
    words = "".join(f" {c.lower()}" if c.isupper() else c for c in cause).strip()
    return f"its workflow task keeps {what}" + (f" ({words})" if words else "")


class StuckWatch:
    """Logs the running workflows of ``task_queue`` that Temporal flags as stuck (see the module docstring)."""

    def __init__(self, client: Client, task_queue: str, *, every_seconds: float = STUCK_CHECK_SECONDS) -> None:
        self._client = client
        self._task_queue = task_queue
        self._every = every_seconds
        self._named: set[tuple[str, str]] = set()

    def query(self) -> str:
        """The visibility query of one check. Raises ``ConfigurationError`` for a task queue name
        with a backslash: Temporal's list filters read backslashes inconsistently."""
        if "\\" in self._task_queue:
            raise ConfigurationError(f"task queue {self._task_queue!r} holds a backslash: it cannot be put in a visibility filter")
        queue = self._task_queue.replace("'", "\\'")
        return (
            f"ExecutionStatus = 'Running' AND TaskQueue = '{queue}' AND {REPORTED_PROBLEMS.name} "
            "IN ('category=WorkflowTaskFailed', 'category=WorkflowTaskTimedOut')"
        )

    async def check(self) -> list[str]:
        """One check: log (and return) the ids of workflows newly flagged since the last check.
        Raises ``RPCError`` when the server cannot answer (a server without the attribute)."""
        query = self.query()
        flagged: dict[tuple[str, str], list[str]] = {}
        async for execution in self._client.list_workflows(query, limit=MAX_NAMED):
            problems = execution.typed_search_attributes.get(REPORTED_PROBLEMS) or []
            flagged[(execution.id, execution.run_id)] = list(problems)
        new = [key for key in flagged if key not in self._named]
        for workflow_id, run_id in new:
            log.warning(
                "workflow %r (run %s) on task queue %r is stuck: %s; `agentrt doctor` tells why and what to do",
                workflow_id, run_id, self._task_queue, problem_text(flagged[(workflow_id, run_id)]),
            )
        self._named = set(flagged)  # one that recovered and gets stuck again is named again
        return [workflow_id for workflow_id, _ in new]

    async def run(self) -> None:
        """Check every ``every_seconds`` until cancelled; stops (with one line in the log) on a
        server that does not know the attribute, goes on through other errors."""
        while True:
            await asyncio.sleep(self._every)
            try:
                await self.check()
            except ConfigurationError as err:
                log.warning("stuck workflows of this worker's task queue are not watched: %s", err)
                return
            except RPCError as err:
                if "TemporalReportedProblems" in str(err):
                    log.info("the Temporal server does not flag stuck workflows (%s); use `agentrt doctor --scan`", err)
                    return
                log.debug("stuck-workflow check failed: %s", err)
