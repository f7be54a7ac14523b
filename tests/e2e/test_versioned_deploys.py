"""Versioned deploys (Temporal's Worker Deployment Versioning): workers started with a deployment
version run every session they start pinned to their build; a session started before a new
version was made current goes on on the build that started it, new ones start on the new build."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path

from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import WorkerDeploymentVersion

from agentrt.activities.tools import default_registry
from agentrt.client import AgentClient
from agentrt.worker import build_worker
from tests.conftest import OWNER, Harness
from tests.e2e._support import session_config, write_script

WAIT = 60  # seconds: only so that a broken session fails the test instead of hanging it


async def make_current(temporal: Client, deployment: str, build_id: str) -> None:
    """Make ``build_id`` the current version of ``deployment`` (as `temporal worker deployment
    set-current-version` does), once its workers' first poll has registered it."""
    request = SetWorkerDeploymentCurrentVersionRequest(
        namespace=temporal.namespace, deployment_name=deployment, build_id=build_id, identity="test",
    )
    for _ in range(300):
        try:
            await temporal.workflow_service.set_worker_deployment_current_version(request)
            return
        except RPCError:
            await asyncio.sleep(0.1)  # the version is not registered yet
    await temporal.workflow_service.set_worker_deployment_current_version(request)


async def pinned_build(client: AgentClient, session_id: str) -> str:
    info = (await client.temporal.get_workflow_handle(f"session-{session_id}").describe()).raw_description.workflow_execution_info
    assert info.versioning_info.behavior == 1, info.versioning_info  # VERSIONING_BEHAVIOR_PINNED
    return info.versioning_info.deployment_version.build_id


async def test_a_session_stays_on_the_build_that_started_it_and_new_ones_start_on_the_current_build(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    queue, deployment = f"{harness.task_queue}-versioned", f"agentrt-{uuid.uuid4().hex[:8]}"
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER, store=harness.store)
    script = write_script(tmp_path, [{"text": "one"}, {"text": "two"}])

    def worker(build_id: str):  # type: ignore[no-untyped-def]
        version = WorkerDeploymentVersion(deployment_name=deployment, build_id=build_id)
        return build_worker(harness.temporal, harness.config, harness.store, default_registry(), task_queue=queue, deployment=version)

    old, new = harness.new_session_id(), harness.new_session_id()
    async with worker("build-a"):
        await make_current(harness.temporal, deployment, "build-a")
        first = await client.start(session_config(client, old, workspace, script), "first")
        assert (await client.wait(old, first.turn_id, timeout_seconds=WAIT)).status == "completed"
        assert await pinned_build(client, old) == "build-a"

        async with worker("build-b"):
            await make_current(harness.temporal, deployment, "build-b")
            started = await client.start(session_config(client, new, workspace, script), "first")
            assert (await client.wait(new, started.turn_id, timeout_seconds=WAIT)).status == "completed"
            again = await client.send(old, "second")
            assert (await client.wait(old, again.turn_id, timeout_seconds=WAIT)).answer == "two"
            assert (await pinned_build(client, old), await pinned_build(client, new)) == ("build-a", "build-b")


def test_a_deployment_and_a_build_id_are_given_together_or_the_worker_names_the_missing_one(tmp_path: Path) -> None:
    agentrt = str(Path(sys.executable).parent / "agentrt")
    for args, said in (
        (["--deployment", "agentrt"], "Invalid value for --deployment: a deployment needs a non-empty build id"),
        (["--build-id", "b1"], "Invalid value for --build-id: a build id needs a deployment name"),
        (["--deployment", "agentrt", "--build-id", " "], "a deployment needs a non-empty build id"),
    ):
        result = subprocess.run([agentrt, "worker", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60)
        assert result.returncode == 2 and said in " ".join(result.stderr.replace("│", " ").split()), result.stderr
