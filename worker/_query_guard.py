"""LegacyQueryGuard: a legacy query never lets a workflow run ahead of its history.

temporalio 1.35.0 (its sdk-core): a *legacy* query — one Temporal sends on its own, when no
workflow task is in flight — to a run that no worker has cached carries the run's whole
history, including events no workflow task has handled yet (an activity's result whose
workflow task waits on a dead worker's sticky queue). Core replays that history and hands
the workflow those events too, so the workflow runs its next step while answering the
query; those commands stay pending in the cached run, and the next real workflow task sends
them ahead of what it brings itself (an update's acceptance). Replay hands both over in one
activation, the update first: a non-determinism error on every later replay, and the run
is stuck (``tests/e2e/test_legacy_query_guard.py`` reproduces it).

The guard wraps the worker's workflow runner. Every workflow task starts at a new workflow
time (its ``WorkflowTaskStarted`` event), so an activation that is not replaying but carries
the same workflow time as the activation before it ran without a workflow task of its own.
When a legacy query is the next activation, the guard fails that activation instead of
answering: core then evicts the run and answers the query with ``QUERY_RAN_AHEAD`` (the
caller asks again; agentrt's client does so itself), and the next workflow task replays the
run from its history, as Temporal recorded it. Any other activation passes untouched.

A local activity's result also comes without a workflow task of its own; a legacy query
right after one is failed the same way. That costs the caller one retry and the worker one
replay; nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import temporalio.workflow
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner

from agentrt.schemas import QUERY_RAN_AHEAD

__all__ = ["LegacyQueryGuard", "QUERY_RAN_AHEAD"]

logger = logging.getLogger(__name__)

# The id core gives the query of a legacy query task (sdk-core ``LEGACY_QUERY_ID``).
LEGACY_QUERY_ID = "legacy_query"
_JOBS_WITHOUT_WORK = frozenset({"query_workflow", "remove_from_cache"})


class LegacyQueryGuard(WorkflowRunner):
    """Wraps ``runner`` (the worker's workflow runner); its instances fail a legacy query that
    follows an activation which ran ahead of the run's workflow tasks (see the module)."""

    def __init__(self, runner: WorkflowRunner) -> None:
        self.runner = runner

    def prepare_workflow(self, defn: temporalio.workflow._Definition) -> None:
        self.runner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _GuardedInstance(self.runner.create_instance(det))

    def set_worker_level_failure_exception_types(self, types: Sequence[type[BaseException]]) -> None:
        self.runner.set_worker_level_failure_exception_types(types)


class _GuardedInstance(WorkflowInstance):
    def __init__(self, instance: WorkflowInstance) -> None:
        self.instance = instance
        self.ran_ahead = False
        self._last_time: tuple[int, int] | None = None

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        if self.ran_ahead and _is_legacy_query(act):
            return self._refuse(act)
        if any(job.WhichOneof("variant") not in _JOBS_WITHOUT_WORK for job in act.jobs):
            time = (act.timestamp.seconds, act.timestamp.nanos)
            self.ran_ahead = not act.is_replaying and time == self._last_time
            self._last_time = time
        return self.instance.activate(act)

    def _refuse(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        info = self.instance.get_info()
        logger.warning(
            "legacy query to %s (run %s) came after events no workflow task has handled; "
            "evicting the run so that its next workflow task replays it from history",
            info.workflow_id,
            act.run_id,
        )
        completion = WorkflowActivationCompletion(run_id=act.run_id)
        completion.failed.failure.message = (
            f"{QUERY_RAN_AHEAD} the query reached the worker before a workflow task it waits behind; "
            "the worker dropped its copy of the run, ask again"
        )
        completion.failed.failure.application_failure_info.SetInParent()
        return completion

    def get_serialization_context(self, command_info):  # type: ignore[no-untyped-def]
        return self.instance.get_serialization_context(command_info)

    def get_external_store_context(self, command_info):  # type: ignore[no-untyped-def]
        return self.instance.get_external_store_context(command_info)

    def get_info(self) -> temporalio.workflow.Info:
        return self.instance.get_info()

    def get_thread_id(self) -> int | None:
        return self.instance.get_thread_id()


def _is_legacy_query(act: WorkflowActivation) -> bool:
    return any(job.HasField("query_workflow") and job.query_workflow.query_id == LEGACY_QUERY_ID for job in act.jobs)
