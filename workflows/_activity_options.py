"""Activity options, one ``ActivityConfig`` per activity: timeouts, retry policy, cancellation.

Temporal's ``RetryPolicy`` is the only retry loop in agentrt; every policy here has a bound
or says why it has none. Timeouts that depend on the session (model and tool timeouts,
heartbeat timeout) are given per call from ``SessionConfig``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityCancellationType

from agentrt.schemas import (
    ADVISOR_REVIEW,
    CONTEXT_COMPACT,
    EFFECTS_RECONCILE,
    MCP_CALL_TOOL,
    MCP_LIST_TOOLS,
    MEMORY_DECIDE,
    PROFILES_DESCRIBE,
    PROVIDER_COMPLETE,
    SESSION_PREPARE,
    STORE_APPEND,
    TOOL_EXECUTE,
    TOOLS_LIST,
)
from agentrt.schemas import GRAPH_PLAN as PLAN_ACTIVITY
from agentrt.schemas import GRAPH_RECORD as GRAPH_RECORD_ACTIVITY
from agentrt.schemas import GRAPH_REVIEW as NODE_REVIEW_ACTIVITY
from agentrt.schemas import TASK_CHECK_COMMAND as CHECK_COMMAND_ACTIVITY
from agentrt.schemas import TASK_EVALUATE_TRIGGER as EVALUATE_TRIGGER_ACTIVITY
from agentrt.schemas import TASK_NEXT_WAKE as NEXT_WAKE_ACTIVITY
from agentrt.schemas import TASK_RECORD as RECORD_ACTIVITY
from agentrt.schemas import TASK_REVIEW as REVIEW_ACTIVITY
from agentrt.schemas import TASK_WORKSPACE_COMMIT as WORKSPACE_COMMIT_ACTIVITY

CONFIGURATION_ERRORS = ("ConfigurationError", "UnknownProfileError", "InvalidScriptError")

# regular-activities-v1: sessions and tasks run every activity as a regular one, none local.
# With temporalio 1.35.0, a local activity that resolves while the worker answers a query that
# came with the same workflow task has its marker reported in that task while its result reaches
# the workflow only in the next one (sdk-core ``prepare_complete_resp``: query responses with a
# pending local-activity resolution force a new task). Replay hands the result over in the
# first task, so whatever the workflow did next moves to another workflow task: a
# non-determinism error on replay, or an update completion the server refuses as an "absent
# message", and the workflow never moves again (docs/durability.md). Asked when a run starts;
# runs recorded before it keep their local activities.
REGULAR_ACTIVITIES_PATCH = "regular-activities-v1"

# Provider retries: bounded, exponential (Retry-After, when sent, is the next delay); configuration mistakes are final.
# The first retry comes soon (a lost worker's call, timed out by its heartbeat, should not
# wait); nine attempts keep about two minutes of back-off for a failing provider.
MODEL_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=0.5),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=60),
    maximum_attempts=9,
    non_retryable_error_types=CONFIGURATION_ERRORS,
)
# Compaction is an optimisation the session can go on without (the plan omits what does not
# fit): a few attempts, so a failing provider delays a switch by seconds, not minutes.
COMPACT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
    non_retryable_error_types=CONFIGURATION_ERRORS,
)
# Tool failures come back as results; activity retries cover lost workers only.
TOOL_RETRY = RetryPolicy(initial_interval=timedelta(seconds=0.5), maximum_attempts=5)
# Listing tools reads the worker's registry: a few attempts (about 1.5 minutes) cover a
# worker restart; a registry that keeps failing is a broken worker, and the session says so.
TOOLS_LIST_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10), maximum_attempts=12
)
# Listing MCP tools may start a server: a few attempts (about half a minute) cover a lost
# worker; a server that stays down is a failure the turn reports and goes on without.
MCP_LIST_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10), maximum_attempts=4)
# Store writes retry without a bound on purpose: the store is the session's own database and
# a session must not fail because it was briefly down; the retrying activity shows in the UI.
STORE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=0
)

# An advisor review is a second opinion the turn goes on without (fail-open): two attempts,
# so a failing provider delays a batch by about a second, not minutes.
ADVISOR_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_attempts=2, non_retryable_error_types=CONFIGURATION_ERRORS
)
# Recording an owner's memory decision writes the store: bounded, so the owner's update
# answers (with the store's error) instead of waiting without end on a store that stays down.
MEMORY_DECIDE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10), maximum_attempts=10
)

# An autonomous task's commands (acceptance check, trigger) return every way a command ends
# (exit code, timeout, a command that cannot start) as a result, so an attempt fails only when
# its worker is lost (heartbeat timeout) or crashes. Such an attempt is retried, not left
# non-retryable: these commands are checks meant to run again (a test suite, a probe), so a
# second run is what a person would do, and a task must not fail because a worker restarted
# under its check. Three attempts, so a command that takes its worker down each time ends the
# check (the workflow then counts it as failed).
TASK_COMMAND_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=10), maximum_attempts=3
)
# The next time of a cron schedule is pure computation: an invalid expression is final; a few
# attempts cover a lost worker.
NEXT_WAKE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_attempts=3, non_retryable_error_types=("InvalidCron",)
)


@dataclass(frozen=True)
class ActivityConfig:
    """How one activity is scheduled.

    - ``start_to_close``: fixed bound on one attempt (seconds); None when the session gives it.
    - ``heartbeats``: the activity heartbeats, so a lost worker is noticed within the
      session's ``heartbeat_timeout_seconds`` and a cancel reaches it. A session's store writes
      and its preparation heartbeat too (with the 30 s bound alone, a write its worker took down
      was retried 30 s later, and the session waited that long: ``python -m bench.fleet``).
    - ``cancellable``: the workflow waits for the activity to acknowledge a cancel
      (``WAIT_CANCELLATION_COMPLETED``), so nothing of a cancelled call runs after the turn ends.
    """

    name: str
    retry_policy: RetryPolicy
    start_to_close: float | None = None
    heartbeats: bool = False
    cancellable: bool = False
    # The per-call bound is also the bound on all attempts (schedule-to-close): a second
    # opinion the turn waits for at most that long, retries included.
    whole_bound: bool = False

    def options(
        self, *, summary: str, start_to_close: float | None = None, heartbeat_timeout: float | None = None
    ) -> dict[str, Any]:
        """Keyword arguments for ``workflow.execute_activity`` (seconds in, ``timedelta`` out).

        Raises ``ValueError`` when the activity needs a per-call bound that was not given.
        """
        options = self._common(summary, start_to_close)
        if self.whole_bound:
            options["schedule_to_close_timeout"] = options["start_to_close_timeout"]
        if self.heartbeats:
            if heartbeat_timeout is None:
                raise ValueError(f"activity {self.name} heartbeats and needs a heartbeat timeout")
            options["heartbeat_timeout"] = timedelta(seconds=heartbeat_timeout)
        if self.cancellable:
            options["cancellation_type"] = ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
        return options

    def local_options(self, *, summary: str, start_to_close: float | None = None) -> dict[str, Any]:
        """Keyword arguments for ``workflow.execute_local_activity``: the same bound and retries.

        A local activity runs in the worker that runs the workflow task, records only its
        result (a marker) in history and needs no activity task: for short, idempotent steps.
        It cannot heartbeat; a cancel of a ``cancellable`` one waits for it to end (it is short),
        so a tool never writes its result after the turn recorded the call as cancelled.
        Retries longer apart than ``local_retry_threshold`` (the SDK's, one minute) wait on a
        timer. Raises ``ValueError`` when the activity needs a per-call bound that was not given.
        """
        options = self._common(summary, start_to_close)
        if self.cancellable:
            options["cancellation_type"] = ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
        return options

    async def execute(
        self,
        arg: Any,
        *,
        local: bool,
        summary: str,
        result_type: type | None = None,
        start_to_close: float | None = None,
        heartbeat_timeout: float | None = None,
        task_queue: str | None = None,
    ) -> Any:
        """Run this activity with ``arg`` from workflow code and return its result: a local activity
        when ``local`` (only runs from before ``regular-activities-v1`` ask for one), else a regular
        one (on ``task_queue`` when given, else the workflow's). Raises what the activity raises."""
        if local:
            return await workflow.execute_local_activity(
                self.name, arg, result_type=result_type, **self.local_options(summary=summary, start_to_close=start_to_close)
            )
        extra: dict[str, Any] = {"task_queue": task_queue} if task_queue is not None else {}
        return await workflow.execute_activity(
            self.name,
            arg,
            result_type=result_type,
            **self.options(summary=summary, start_to_close=start_to_close, heartbeat_timeout=heartbeat_timeout),
            **extra,
        )

    def _common(self, summary: str, start_to_close: float | None) -> dict[str, Any]:
        bound = start_to_close if start_to_close is not None else self.start_to_close
        if bound is None:
            raise ValueError(f"activity {self.name} needs a start_to_close bound")
        return {"start_to_close_timeout": timedelta(seconds=bound), "retry_policy": self.retry_policy, "summary": summary}


MODEL_CALL = ActivityConfig(PROVIDER_COMPLETE, MODEL_RETRY, heartbeats=True, cancellable=True)
COMPACTION = ActivityConfig(CONTEXT_COMPACT, COMPACT_RETRY, heartbeats=True)
DESCRIBE_PROFILE = ActivityConfig(PROFILES_DESCRIBE, MODEL_RETRY, start_to_close=30)
LIST_TOOLS = ActivityConfig(TOOLS_LIST, TOOLS_LIST_RETRY, start_to_close=30)
PREPARE_SESSION = ActivityConfig(SESSION_PREPARE, TOOLS_LIST_RETRY, start_to_close=30, heartbeats=True)
TOOL_CALL = ActivityConfig(TOOL_EXECUTE, TOOL_RETRY, heartbeats=True, cancellable=True)
RECONCILE_EFFECT = ActivityConfig(EFFECTS_RECONCILE, STORE_RETRY, start_to_close=30)
STORE_WRITE = ActivityConfig(STORE_APPEND, STORE_RETRY, start_to_close=30, heartbeats=True)
ADVISOR = ActivityConfig(ADVISOR_REVIEW, ADVISOR_RETRY, heartbeats=True, cancellable=True, whole_bound=True)
DECIDE_MEMORY = ActivityConfig(MEMORY_DECIDE, MEMORY_DECIDE_RETRY, start_to_close=30)
# A listing starts a server that is not running yet: bounded by the server's own connect
# timeout (at most 600 s, McpServerConfig) plus its listing.
MCP_LIST = ActivityConfig(MCP_LIST_TOOLS, MCP_LIST_RETRY, start_to_close=660, heartbeats=True, cancellable=True)
MCP_CALL = ActivityConfig(MCP_CALL_TOOL, TOOL_RETRY, heartbeats=True, cancellable=True)

# Extra time a tool activity gets beyond the tool's own time bound (seconds): to store its result.
TOOL_GRACE_SECONDS = 30
# The bound (seconds) of one attempt of a tool run as a local activity (a fast, read-only
# tool): the tool gets this much, less LOCAL_TOOL_GRACE_SECONDS to store its result.
LOCAL_TOOL_SECONDS = 10.0
LOCAL_TOOL_GRACE_SECONDS = 2.0

# Autonomous tasks. The task's store write is a store write (STORE_RETRY, unbounded on purpose:
# a task must not fail because its database was briefly down), run as a local activity. A
# command's bound is given per call: its ``timeout_seconds`` plus TOOL_GRACE_SECONDS. The
# acceptance review is a model call the task's completion waits on: the model calls' bounded
# retries (MODEL_RETRY), configuration mistakes final; one attempt takes at most 10 minutes.
# (The activity names are imported under other names: these configs are named after them.)
TASK_RECORD = ActivityConfig(RECORD_ACTIVITY, STORE_RETRY, start_to_close=30)
TASK_CHECK_COMMAND = ActivityConfig(CHECK_COMMAND_ACTIVITY, TASK_COMMAND_RETRY, heartbeats=True, cancellable=True)
TASK_EVALUATE_TRIGGER = ActivityConfig(EVALUATE_TRIGGER_ACTIVITY, TASK_COMMAND_RETRY, heartbeats=True, cancellable=True)
TASK_REVIEW = ActivityConfig(REVIEW_ACTIVITY, MODEL_RETRY, start_to_close=600, heartbeats=True, cancellable=True)
TASK_NEXT_WAKE = ActivityConfig(NEXT_WAKE_ACTIVITY, NEXT_WAKE_RETRY, start_to_close=10)
# Reading the workspace's git commit reads a few small files: a few attempts cover a lost worker
# (TOOL_RETRY's five); what it cannot read is no commit, never a failure.
TASK_WORKSPACE_COMMIT = ActivityConfig(WORKSPACE_COMMIT_ACTIVITY, TOOL_RETRY, start_to_close=10)

# Task graphs. Planning and a node's review are model calls: the model calls' bounded retries
# (MODEL_RETRY), configuration mistakes (and an invalid plan) final; one attempt takes at most
# 10 minutes and heartbeats, so a lost worker's call moves on.
GRAPH_PLAN = ActivityConfig(PLAN_ACTIVITY, MODEL_RETRY, start_to_close=600, heartbeats=True, cancellable=True)
GRAPH_REVIEW = ActivityConfig(NODE_REVIEW_ACTIVITY, MODEL_RETRY, start_to_close=600, heartbeats=True, cancellable=True)
# A graph's store write, as a task's (frame-v1).
GRAPH_RECORD = ActivityConfig(GRAPH_RECORD_ACTIVITY, STORE_RETRY, start_to_close=30)
