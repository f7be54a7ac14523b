"""The baseline of ``bench.streams``: a workflow that hosts the SDK's experimental
``temporalio.contrib.workflow_streams.WorkflowStream`` and nothing else, so publishers signal
items into it and subscribers long-poll them out with updates.

Not part of agentrt; its workflow name is prefixed ``bench.`` and it runs on a task queue of its own.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream

STREAM_HOST_WORKFLOW = "bench.StreamHostWorkflow"


@workflow.defn(name=STREAM_HOST_WORKFLOW)
class StreamHostWorkflow:
    """Holds a stream until signal ``finish``."""

    @workflow.init
    def __init__(self) -> None:
        self.stream = WorkflowStream()
        self._finished = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self._finished)
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)

    @workflow.signal
    def finish(self) -> None:
        self._finished = True
