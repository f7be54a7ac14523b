"""A workflow whose activity waits to be completed from outside, and the worker process that
runs it (``python -m tests.e2e._ahead_worker ADDRESS TASK_QUEUE TOKEN_FILE``), for the legacy
query tests: the test kills the process while the activity waits, so its sticky queue dies."""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

# The dead worker's sticky schedule-to-start timeout (seconds): a query sent to its sticky queue
# moves to the task queue after it, and so does a workflow task.
STICKY_SECONDS = 2.0


@activity.defn
async def park() -> str:
    """Leaves its task token in ``$AHEAD_TOKEN_FILE`` and waits to be completed from outside."""
    path = os.environ["AHEAD_TOKEN_FILE"]
    with open(path + ".tmp", "wb") as out:
        out.write(activity.info().task_token)
    os.replace(path + ".tmp", path)
    activity.raise_complete_async()


@activity.defn
async def finish() -> str:
    return "finished"


@workflow.defn
class AheadWorkflow:
    """Runs ``park``, then ``finish`` (a command right after the parked result), then waits for a ``ping``."""

    def __init__(self) -> None:
        self.results: list[str] = []
        self.pings = 0

    @workflow.run
    async def run(self) -> list[str]:
        self.results.append(await workflow.execute_activity(park, start_to_close_timeout=timedelta(minutes=5)))
        self.results.append(await workflow.execute_activity(finish, start_to_close_timeout=timedelta(minutes=1)))
        await workflow.wait_condition(lambda: self.pings > 0)
        return self.results

    @workflow.update
    async def ping(self) -> int:
        self.pings += 1
        return self.pings

    @workflow.query
    def state(self) -> list[str]:
        return self.results


async def main(address: str, task_queue: str, token_file: str) -> None:
    os.environ["AHEAD_TOKEN_FILE"] = token_file
    client = await Client.connect(address)
    async with Worker(
        client, task_queue=task_queue, workflows=[AheadWorkflow], activities=[park, finish],
        workflow_runner=UnsandboxedWorkflowRunner(),
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=STICKY_SECONDS),
    ):
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
