"""Upgrades: the workers of a deployment's current build wake the sessions and tasks still pinned to
an older build, which then continue as new onto the current one at their next boundary.

A run started by a versioned worker is ``PINNED`` to its build (docs/deployment.md). Once another
build is made current, the run learns it from its next workflow task
(``is_target_worker_deployment_version_changed``) and continues as new between turns
(workflows/_continuation.py), but an idle session or a sleeping task gets no workflow task of its
own. So a worker asks which version of its deployment is current every
``CURRENT_CHECK_SECONDS`` (``DescribeWorkerDeployment``, which the server rate-limits per
deployment: not more often), and while its own is, every ``UPGRADE_CHECK_SECONDS`` lists the
running sessions and tasks of the deployment pinned elsewhere (one visibility query: Temporal's
``TemporalWorkerDeployment`` and ``TemporalWorkerDeploymentVersion`` search attributes) and sends
each run the ``upgrade`` signal, once per run. A run in the middle of a turn (or of a task's
session) finishes it on its own build first.
"""

from __future__ import annotations

import asyncio
import logging
import random

from temporalio.api.workflowservice.v1 import DescribeWorkerDeploymentRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentVersion

from agentrt.schemas import AUTONOMOUS_TASK_WORKFLOW, SESSION_WORKFLOW, TASK_GRAPH_WORKFLOW, UPGRADE_SIGNAL, ConfigurationError

log = logging.getLogger("agentrt.worker")

__all__ = ["CURRENT_CHECK_SECONDS", "UPGRADE_CHECK_SECONDS", "Upgrades"]

# How often a worker of the current build looks for runs pinned to older builds (seconds): one
# visibility query.
UPGRADE_CHECK_SECONDS = 3.0
# How often a worker asks whether its build is current (seconds, give or take a fifth so that a
# fleet's workers spread their calls): Temporal limits the requests to one Worker Deployment
# ("too many requests issued to Worker Deployment"), which operators' set-current-version needs too.
CURRENT_CHECK_SECONDS = 10.0
# The workflow types that continue as new onto a newer build (a graph after its running nodes).
UPGRADING_WORKFLOWS = (SESSION_WORKFLOW, AUTONOMOUS_TASK_WORKFLOW, TASK_GRAPH_WORKFLOW)


def quoted(value: str) -> str:
    """``value`` as a visibility-query string literal. Raises ``ConfigurationError`` for a backslash
    (Temporal's list filters read backslashes inconsistently)."""
    if "\\" in value:
        raise ConfigurationError(f"{value!r} holds a backslash: it cannot be put in a visibility filter")
    return "'" + value.replace("'", "\\'") + "'"


class Upgrades:
    """Wakes the runs pinned to older builds of ``version``'s deployment while ``version`` is current."""

    def __init__(
        self, client: Client, version: WorkerDeploymentVersion, *, every_seconds: float = UPGRADE_CHECK_SECONDS,
        current_every_seconds: float = CURRENT_CHECK_SECONDS,
    ) -> None:
        self._client = client
        self._version = version
        self._every = every_seconds
        self._current_every = current_every_seconds
        self._current = False  # as last asked
        self._asked_at: float | None = None  # loop time of the last answer
        self._woken: set[str] = set()  # run ids signalled by this worker

    def query(self) -> str:
        """The visibility query of the runs to wake: running sessions, tasks and graphs of this deployment on another build."""
        name, build = self._version.deployment_name, self._version.build_id
        types = ", ".join(quoted(t) for t in UPGRADING_WORKFLOWS)
        return (
            f"ExecutionStatus = 'Running' AND WorkflowType IN ({types}) AND TemporalWorkerDeployment = {quoted(name)} "
            f"AND TemporalWorkerDeploymentVersion != {quoted(f'{name}:{build}')}"
        )

    async def is_current(self) -> bool:
        """Whether this worker's build is its deployment's current version. Raises ``RPCError``."""
        try:
            described = await self._client.workflow_service.describe_worker_deployment(
                DescribeWorkerDeploymentRequest(namespace=self._client.namespace, deployment_name=self._version.deployment_name)
            )
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return False  # no poller of the deployment has registered it yet
            raise
        current = described.worker_deployment_info.routing_config.current_deployment_version
        return current.deployment_name == self._version.deployment_name and current.build_id == self._version.build_id

    async def still_current(self) -> bool:
        """``is_current``, asked again only once ``current_every_seconds`` (jittered) have passed."""
        now = asyncio.get_running_loop().time()
        if self._asked_at is None or now - self._asked_at >= self._current_every * random.uniform(0.8, 1.2):
            try:
                self._current = await self.is_current()
            except RPCError as err:
                if err.status != RPCStatusCode.RESOURCE_EXHAUSTED and "too many requests" not in err.message.lower():
                    raise
                log.debug("deployment %r is busy: asking whether this build is current later", self._version.deployment_name)
            self._asked_at = now
        return self._current

    async def check(self) -> list[str]:
        """One check: signal ``upgrade`` to each run pinned to another build that this worker has not
        signalled yet; returns their workflow ids. A run that ended meanwhile is skipped. Raises
        ``RPCError`` when the server cannot answer the describe or the query."""
        if not await self.still_current():
            return []
        woken: list[str] = []
        listed: set[str] = set()
        async for execution in self._client.list_workflows(self.query()):
            listed.add(execution.run_id)
            if execution.run_id in self._woken:
                continue
            try:
                await self._client.get_workflow_handle(execution.id, run_id=execution.run_id).signal(UPGRADE_SIGNAL)
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise
            self._woken.add(execution.run_id)
            woken.append(execution.id)
        self._woken &= listed  # a run no longer listed has moved on: forget it
        if woken:
            log.info(
                "build %s of deployment %r is current: woke %d run(s) pinned to older builds to continue on it",
                self._version.build_id, self._version.deployment_name, len(woken),
            )
        return woken

    async def run(self) -> None:
        """Check every ``every_seconds`` until cancelled; a failed check is logged and tried again. A
        deployment name or build id no visibility query can hold is logged once, and the watch ends."""
        while True:
            try:
                await self.check()
            except RPCError as err:
                log.warning("could not look for runs pinned to older builds of %r: %s", self._version.deployment_name, err)
            except ConfigurationError as err:
                log.error("runs pinned to older builds are not moved to this one: %s", err)
                return
            await asyncio.sleep(self._every)
