"""LegacyQueryGuard's second rule, on the activations core hands a run: a workflow task whose
history is too short to hold the commands the run made in its last activation with work (they
never reached the server: the run ran ahead of its task while answering a query on a worker
that took it over) is failed, so core evicts the run and the task replays it from history.
The chaos run of 2026-12-07 left a session stuck so (``tests/histories/sdk-race/
stuck-update-accepted-after-a-run-ahead-on-a-fresh-worker.json``): its update was accepted
after such held commands, and every replay failed."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.worker import UnsandboxedWorkflowRunner

from agentrt.worker import LegacyQueryGuard
from agentrt.worker._query_guard import TASK_BEHIND_RUN, _GuardedInstance

RUN = "run-1"


class Inner:
    """A workflow instance that answers each activation with the commands it is told to make."""

    def __init__(self) -> None:
        self.seen: list[int] = []
        self.next_commands: list[str] = []

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        self.seen.append(act.history_length)
        completion = WorkflowActivationCompletion(run_id=act.run_id)
        completion.successful.SetInParent()
        for variant in self.next_commands:
            getattr(completion.successful.commands.add(), variant).SetInParent()
        self.next_commands = []
        return completion

    def get_info(self) -> Any:
        class Info:
            workflow_id = "session-s1"

        return Info()


def activation(seconds: int, history_length: int, *, replaying: bool = False, job: str = "resolve_activity") -> WorkflowActivation:
    act = WorkflowActivation(run_id=RUN, is_replaying=replaying, history_length=history_length)
    act.timestamp.seconds = seconds
    getattr(act.jobs.add(), job).SetInParent()
    return act


def guarded() -> tuple[_GuardedInstance, Inner]:
    inner = Inner()
    return _GuardedInstance(inner, LegacyQueryGuard(UnsandboxedWorkflowRunner())), inner  # type: ignore[arg-type]


def test_a_task_after_recorded_commands_passes() -> None:
    instance, inner = guarded()
    inner.next_commands = ["upsert_workflow_search_attributes", "schedule_activity"]
    instance.activate(activation(100, 569))
    # Completed, upsert, schedule, then activity started and failed, task scheduled and started.
    completion = instance.activate(activation(106, 576))
    assert completion.HasField("successful") and inner.seen == [569, 576]


def test_a_task_whose_history_lacks_the_commands_the_run_made_is_failed_and_the_run_evicted() -> None:
    instance, inner = guarded()
    instance.activate(activation(100, 569, replaying=True))
    inner.next_commands = ["upsert_workflow_search_attributes", "schedule_activity"]
    instance.activate(activation(106, 577))  # ran ahead: the result, while a query was answered
    completion = instance.activate(activation(111, 579, job="do_update"))  # the task with the update
    assert completion.HasField("failed") and completion.failed.failure.message.startswith(TASK_BEHIND_RUN)
    assert inner.seen == [569, 577]  # the task never reached the workflow


@pytest.mark.parametrize(
    ("second", "why"),
    [
        (activation(106, 577), "another activation of the same task (same workflow time)"),
        (activation(111, 579, replaying=True), "a replay"),
        (activation(111, 579, job="query_workflow"), "a query"),
    ],
)
def test_activations_of_the_same_task_replays_and_queries_pass(second: WorkflowActivation, why: str) -> None:
    instance, inner = guarded()
    inner.next_commands = ["schedule_activity"]
    instance.activate(activation(106, 577))
    assert instance.activate(second).HasField("successful"), why


def test_commands_that_may_make_no_event_set_no_expectation() -> None:
    instance, inner = guarded()
    inner.next_commands = ["respond_to_query", "schedule_local_activity", "update_response"]
    instance.activate(activation(106, 577))
    assert instance.activate(activation(111, 579)).HasField("successful")
