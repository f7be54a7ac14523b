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

That rule misses a run ahead whose history ends in a workflow task a dead worker started (and
which timed out): core then gives the run-ahead activation that task's time, not the last
one's. So the guard also keeps, after each activation with work, how long a history a later
workflow task needs to hold the commands it made (the task's completion, one event per
command, then a new task's scheduled and started events). A workflow task at another workflow
time with a shorter history comes after commands that never reached the server: the guard fails
that task (``TASK_BEHIND_RUN``) before the workflow sees it; core evicts the run, and the task,
retried, replays it from history. (The chaos run of 2026-12-07 left a session stuck that way:
its task accepted an update after such held commands.)

A local activity's result also comes without a workflow task of its own; a legacy query
right after one is failed the same way. That costs the caller one retry and the worker one
replay; nothing else.

A run that ended while a workflow task was pending (terminated, timed out) keeps events no
workflow task will ever handle; no task is coming, and nothing can diverge any more. So a run
refused again for the same workflow time ``no_task_coming_seconds`` after its first refusal
(longer than any sticky schedule-to-start timeout: its task would have run by then) has its
queries answered from what the workflow has.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
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
# After this long (seconds) since a run's first refusal for a workflow time, no workflow task is
# coming for it (module docstring); over the 3 s sticky timeout of agentrt's workers and the SDK's 10 s.
NO_TASK_COMING_SECONDS = 15.0
# Commands that each become one history event when a workflow task completes with them.
RECORDED_COMMANDS = frozenset({
    "start_timer", "schedule_activity", "start_child_workflow_execution", "signal_external_workflow_execution",
    "upsert_workflow_search_attributes", "modify_workflow_properties",
})
# A workflow task after one that completed holds at least its completion, then a new task's
# scheduled and started events: 3 events more than the first task's history, besides its commands'.
RECORDED_AT_LEAST = 3
# The failure of a workflow task that came after the run ran ahead of it (``_GuardedInstance._behind``).
TASK_BEHIND_RUN = "[agentrt:task-behind-run]"
# Runs whose first refusal the guard remembers (the oldest is forgotten first).
REMEMBERED_RUNS = 1000


class LegacyQueryGuard(WorkflowRunner):
    """Wraps ``runner`` (the worker's workflow runner); its instances fail a legacy query that
    follows an activation which ran ahead of the run's workflow tasks, for up to
    ``no_task_coming_seconds`` per run and workflow time (see the module)."""

    def __init__(self, runner: WorkflowRunner, no_task_coming_seconds: float = NO_TASK_COMING_SECONDS) -> None:
        self.runner = runner
        self.no_task_coming_seconds = no_task_coming_seconds
        self._first_refusals: OrderedDict[str, tuple[tuple[int, int], float]] = OrderedDict()
        self._lock = threading.Lock()  # instances activate on the worker's workflow threads

    def refuses(self, run_id: str, workflow_time: tuple[int, int]) -> bool:
        """Whether a legacy query to ``run_id``, which ran ahead at ``workflow_time``, is refused:
        yes unless its first refusal for that time is ``no_task_coming_seconds`` old."""
        now = time.monotonic()
        with self._lock:
            first = self._first_refusals.get(run_id)
            if first is not None and first[0] == workflow_time:
                return now - first[1] < self.no_task_coming_seconds
            self._first_refusals[run_id] = (workflow_time, now)
            self._first_refusals.move_to_end(run_id)
            while len(self._first_refusals) > REMEMBERED_RUNS:
                self._first_refusals.popitem(last=False)
            return True

    def prepare_workflow(self, defn: temporalio.workflow._Definition) -> None:
        self.runner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _GuardedInstance(self.runner.create_instance(det), self)

    def set_worker_level_failure_exception_types(self, types: Sequence[type[BaseException]]) -> None:
        self.runner.set_worker_level_failure_exception_types(types)


class _GuardedInstance(WorkflowInstance):
    def __init__(self, instance: WorkflowInstance, guard: LegacyQueryGuard) -> None:
        self.instance = instance
        self.guard = guard
        self.ran_ahead = False
        self._last_time: tuple[int, int] | None = None
        # (workflow time, least history length): the last activation with work made commands that
        # become events; a workflow task at another time must have a history at least this long.
        self._recorded_by: tuple[tuple[int, int], int] | None = None

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        if (
            self.ran_ahead
            and self._last_time is not None
            and _is_legacy_query(act)
            and self.guard.refuses(act.run_id, self._last_time)
        ):
            return self._refuse(act)
        has_work = any(job.WhichOneof("variant") not in _JOBS_WITHOUT_WORK for job in act.jobs)
        time = (act.timestamp.seconds, act.timestamp.nanos)
        if has_work and not act.is_replaying and self._recorded_by is not None:
            at, least = self._recorded_by
            if time != at and act.history_length < least:
                return self._behind(act, least)
        if has_work:
            self.ran_ahead = not act.is_replaying and time == self._last_time
            self._last_time = time
        completion = self.instance.activate(act)
        if has_work and not act.is_replaying:
            made = _recorded_commands(completion)
            self._recorded_by = (time, act.history_length + made + RECORDED_AT_LEAST) if made else None
        return completion

    def _behind(self, act: WorkflowActivation, least: int) -> WorkflowActivationCompletion:
        """Fail a workflow task whose history lacks the commands this run made before (they never
        reached the server: the run ran ahead of its task); core evicts the run, and the task,
        retried, replays it from history."""
        info = self.instance.get_info()
        logger.warning(
            "workflow task of %s (run %s) has %d history events, fewer than the %d the run's last commands need: "
            "they were never recorded; evicting the run so that the task replays it from history",
            info.workflow_id, act.run_id, act.history_length, least,
        )
        return _failed(
            act, f"{TASK_BEHIND_RUN} the run made commands its history does not hold (it ran ahead of its workflow task); "
            "the worker dropped its copy of the run, the task is retried from history",
        )

    def _refuse(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        info = self.instance.get_info()
        logger.warning(
            "legacy query to %s (run %s) came after events no workflow task has handled; "
            "evicting the run so that its next workflow task replays it from history",
            info.workflow_id,
            act.run_id,
        )
        return _failed(
            act, f"{QUERY_RAN_AHEAD} the query reached the worker before a workflow task it waits behind; "
            "the worker dropped its copy of the run, ask again",
        )

    def get_serialization_context(self, command_info):  # type: ignore[no-untyped-def]
        return self.instance.get_serialization_context(command_info)

    def get_external_store_context(self, command_info):  # type: ignore[no-untyped-def]
        return self.instance.get_external_store_context(command_info)

    def get_info(self) -> temporalio.workflow.Info:
        return self.instance.get_info()

    def get_thread_id(self) -> int | None:
        return self.instance.get_thread_id()


def _failed(act: WorkflowActivation, message: str) -> WorkflowActivationCompletion:
    """A failed completion of ``act``: core fails its task (or query) and evicts the run."""
    completion = WorkflowActivationCompletion(run_id=act.run_id)
    completion.failed.failure.message = message
    completion.failed.failure.application_failure_info.SetInParent()
    return completion


def _recorded_commands(completion: WorkflowActivationCompletion) -> int:
    """How many of a successful completion's commands surely become history events once a
    workflow task completes with them (``RECORDED_COMMANDS``; others may not, so they do not count)."""
    if not completion.HasField("successful"):
        return 0
    return sum(command.WhichOneof("variant") in RECORDED_COMMANDS for command in completion.successful.commands)


def _is_legacy_query(act: WorkflowActivation) -> bool:
    return any(job.HasField("query_workflow") and job.query_workflow.query_id == LEGACY_QUERY_ID for job in act.jobs)
