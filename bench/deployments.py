"""Making a Worker Deployment Version current, as `temporal worker deployment set-current-version`
does, from a client: for benchmarks and tests that start versioned workers in their own process."""

from __future__ import annotations

import asyncio

from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest
from temporalio.client import Client
from temporalio.service import RPCError


async def make_current(temporal: Client, deployment_name: str, build_id: str, *, identity: str = "agentrt-bench") -> None:
    """Make ``build_id`` the current version of ``deployment_name`` once its workers' first poll has
    registered it: refused (``RPCError``) until then, asked again every 0.1 s for 30 s, then once
    more, whose ``RPCError`` is raised."""
    request = SetWorkerDeploymentCurrentVersionRequest(
        namespace=temporal.namespace, deployment_name=deployment_name, build_id=build_id, identity=identity,
    )
    for _ in range(300):
        try:
            await temporal.workflow_service.set_worker_deployment_current_version(request)
            return
        except RPCError:
            await asyncio.sleep(0.1)  # the version is not registered yet
    await temporal.workflow_service.set_worker_deployment_current_version(request)
