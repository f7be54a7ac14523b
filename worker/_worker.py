"""The worker process: hosts SessionWorkflow and every activity on one task queue."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import AsyncIterator

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from agentrt.activities import build_activities
from agentrt.activities.tools import ToolRegistry, default_registry
from agentrt.store import Store
from agentrt.worker._config import AgentrtConfig
from agentrt.workflows.session import SessionWorkflow

log = logging.getLogger("agentrt.worker")

WORKFLOWS = [SessionWorkflow]
# A cancel reaches an activity only in the answer to a heartbeat, and the worker sends
# heartbeats at most every 0.8 x heartbeat timeout unless bounded here (24 s with the 30 s
# default): a model reply could come first and a cancelled turn would complete.
HEARTBEAT_THROTTLE = timedelta(seconds=1)
# Modules that are deterministic and safe to share with the workflow sandbox.
PASSTHROUGH_MODULES = ("agentrt.schemas", "agentrt.workflows.policy", "agentrt.workflows.context", "jsonschema", "referencing", "rpds", "pydantic")


def workflow_runner() -> SandboxedWorkflowRunner:
    return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES))


def build_worker(
    client: Client,
    config: AgentrtConfig,
    store: Store,
    registry: ToolRegistry | None = None,
    *,
    task_queue: str | None = None,
    max_concurrent_activities: int = 32,
) -> Worker:
    """A worker for ``task_queue`` (default ``config.task_queue``) with all workflows and activities.

    Payloads go through ``client``'s data converter, so big ones land where that converter's
    external storage puts them: connect with ``build_data_converter(config, store)``.
    """
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=max_concurrent_activities)
    return Worker(
        client,
        task_queue=task_queue or config.task_queue,
        workflows=WORKFLOWS,
        activities=build_activities(config, store, registry or default_registry()),
        activity_executor=executor,
        max_concurrent_activities=max_concurrent_activities,
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        default_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        workflow_runner=workflow_runner(),
    )


@asynccontextmanager
async def running_worker(client: Client, config: AgentrtConfig, store: Store | None = None) -> AsyncIterator[Worker]:
    """Run a worker in this process for the duration of the ``async with`` block."""
    own_store = store is None
    store = store or Store.open(config.database_url)
    worker = build_worker(client, config, store)
    task = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        await worker.shutdown()
        try:
            await task
        except Exception:  # noqa: BLE001 - shutdown errors are logged, not raised over the caller's error
            log.exception("worker stopped with an error")
        if own_store:
            store.close()
