"""The frame a task and a graph workflow share: the check of their own workflow id, the status
board (current details and search attributes), the standing check of update validators and when
a run continues as new (``NextRun``; a session's ``Continuation`` asks the same of its run).

Workflow code only (``workflow.info``, ``workflow.patched``, upserts); each piece is an object the
workflow holds, given what it uses when it is made.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, NoReturn, Protocol

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from agentrt.schemas import SESSION_STATUS, Event
from agentrt.workflows import _console as console
from agentrt.workflows._approvals import standing_refusal
from agentrt.workflows._errors import rejected


# upgrade-at-turn-boundary-v1: a pinned run whose Worker Deployment has a newer current build
# continues as new onto it at its next boundary (a session between turns, a task between sessions).
# Asked at every run's start: the step comes when a deploy does, in any task.
UPGRADE_PATCH = "upgrade-at-turn-boundary-v1"


# status-events-v1: a task or graph records each status it shows as an event (AutonomousTaskStatusChanged,
# TaskGraphStatusChanged), so a reader of its events (the webhook dispatcher) sees every one. Asked at
# every run's start: the events change what the store writes (their seq numbers), not the commands.
STATUS_EVENTS_PATCH = "status-events-v1"


# Patches added after Worker Versioning that change a task's or graph's commands: every run asks
# them, a pinned one too (the pinned histories an earlier build recorded lack their markers and
# replay with the old branch; tests/histories/README.md, "When each patch retires").
ASKED_BY_PINNED_RUNS = frozenset({"workspace-commit-v1", "ignore-dismisses-v1", "graph-error-answer-v1"})


def started_pinned() -> bool:
    """The run's first workflow task was completed by a worker of a Worker Deployment version (a
    pinned run). Temporal records the version with each completed task and
    ``workflow.info().get_current_deployment_version()`` reads it back on replay ("deterministic and
    safe to use for branching"); an unversioned worker's task reads back with no deployment name,
    only the SDK's own build id. Asked in the run's first activation."""
    version = workflow.info().get_current_deployment_version()
    return version is not None and bool(version.deployment_name)


class Patches:
    """The ``workflow.patched`` answers of one run, made in its first activation.

    A run that started on a versioned (pinned) worker has every patch's behaviour and asks none
    (``latest``): it lives on the build that started it, or moves to a newer one by continuing as
    new (a new history), so no history recorded before reaches it live. One can only be replayed
    there: a run an earlier build recorded pinned, moved by hand (``temporal workflow
    update-options``), or ``agentrt replay``. Such a history holds the marker of ``probe`` (a patch
    every run of the generation before asked first, at its start), which a replay reads without
    recording anything; a live run never asks it. A run started unversioned asks each patch, on
    any worker (tests/histories/README.md, "When each patch retires")."""

    def __init__(self, probe: str) -> None:
        self.latest = started_pinned() and not (workflow.unsafe.is_replaying() and workflow.patched(probe))

    def has(self, patch_id: str) -> bool:
        """True where the run has ``patch_id``'s behaviour: always for ``latest`` (but a patch of
        ``ASKED_BY_PINNED_RUNS``), else asked."""
        return (self.latest and patch_id not in ASKED_BY_PINNED_RUNS) or workflow.patched(patch_id)


def frame_patches() -> Patches:
    """The patches of a task's or a graph's run, probed with ``console-v1``: the first patch both
    asked (their status board is made first) since before Worker Versioning."""
    return Patches(console.CONSOLE_PATCH)


def target_build_changed(upgrades: bool) -> bool:
    """``upgrades`` (the run has ``upgrade-at-turn-boundary-v1``) and another version of the run's
    Worker Deployment is current: Temporal says so in each workflow task of a pinned run
    (``WorkflowTaskStarted``); never for an unversioned worker."""
    return upgrades and workflow.info().is_target_worker_deployment_version_changed()


class BuildWatch:
    """``target_build_changed`` for a run, asked only after its first workflow task: in the first
    task of a run that continued as new onto the new build, Temporal may still say another version
    is current (a graph was seen to move twice). Made in the run's first activation. Sessions,
    tasks and graphs ask through it; a move comes in a later task anyway (a turn's end, a wake)."""

    def __init__(self, upgrades: bool) -> None:
        self.upgrades = upgrades
        self.first_task = workflow.info().get_current_history_length()

    def changed(self) -> bool:
        return workflow.info().get_current_history_length() > self.first_task and target_build_changed(self.upgrades)


def next_run_behavior(upgrade: bool) -> workflow.ContinueAsNewVersioningBehavior | None:
    """The next run's first task goes to the deployment's current build (``AUTO_UPGRADE``; the run
    is pinned there) when ``upgrade``, else where this run is (None: Temporal's default)."""
    return workflow.ContinueAsNewVersioningBehavior.AUTO_UPGRADE if upgrade else None


class NextRun:
    """When a task's run continues as new: Temporal suggests it (the history's size), or a newer
    build is current. Asks ``upgrade-at-turn-boundary-v1`` of ``patches`` when made (the run's first task)."""

    def __init__(self, patches: Patches) -> None:
        self.build = BuildWatch(patches.has(UPGRADE_PATCH))

    def new_build(self) -> bool:
        return self.build.changed()

    def due(self) -> bool:
        return workflow.info().is_continue_as_new_suggested() or self.new_build()

    def go(self, input: Any) -> NoReturn:
        """Continue as new with ``input``: onto the current build when a newer one is (``AUTO_UPGRADE``)."""
        workflow.continue_as_new(input, initial_versioning_behavior=next_run_behavior(self.new_build()))


class StatusState(Protocol):
    """What ``StatusLog`` keeps in a task's or graph's carried state."""

    recorded_status: str | None
    status_changes: int


class StatusLog:
    """Records each status a task or graph shows as one event, in the order shown, when ``on``
    (``status-events-v1``): ``seen(status)`` emits ``make(status=, previous=, change=)`` when
    ``status`` differs from the last one recorded. The last status and the count travel in the
    carried state, so a continued run goes on counting."""

    def __init__(self, on: bool, state: StatusState, make: Callable[..., Event], emit: Callable[[Event], Any]) -> None:
        self.on = on
        self._state = state
        self._make = make
        self._emit = emit

    def seen(self, status: str) -> None:
        state = self._state
        if not self.on or status == state.recorded_status:
            return
        state.status_changes += 1
        previous, state.recorded_status = state.recorded_status, status
        self._emit(self._make(status=status, previous=previous, change=state.status_changes))


def require_workflow_id(kind: console.Kind, object_id: str, expected: str) -> None:
    """Fail the run (``<Kind>IdMismatch``, not retried) unless it runs as workflow ``expected``:
    a ``kind`` with id ``object_id`` has one workflow id, so two runs cannot both be it."""
    actual = workflow.info().workflow_id
    if actual != expected:
        raise ApplicationError(
            f"workflow {actual!r} cannot run {kind} {object_id!r}: a {kind} runs as workflow {expected!r}",
            type=f"{kind.capitalize()}IdMismatch",
            non_retryable=True,
        )


class StatusBoard:
    """What the Temporal UI shows of one workflow: its current details and its search attributes.

    Asks ``console-v1`` of ``patches`` once, when it is made (in the run's first workflow task):
    with it, every attribute of ``console.Listing`` is written when its value changes; before it,
    ``AgentSessionStatus`` alone, when the status changes.
    """

    def __init__(self, kind: console.Kind, owner: str, profile: str, patches: Patches) -> None:
        self.kind: console.Kind = kind
        self.owner = owner
        self.profile = profile
        self.console = patches.has(console.CONSOLE_PATCH)
        self._written: str | None = None

    def show(self, details: str) -> None:
        workflow.set_current_details(details)

    def set(self, status: str, details: str, *, cost_usd: float, pending_approvals: int = 0) -> None:
        """Show ``details`` and write the search attributes that changed for ``status`` and the
        spend so far (``cost_usd``, US dollars)."""
        workflow.set_current_details(details)
        if self.console:
            listing = console.Listing(
                kind=self.kind, owner=self.owner, status=status, profile=self.profile,
                pending_approvals=pending_approvals, spend_usd=console.spend_or_none(cost_usd),
            )
            updates = console.changed(listing, workflow.info().typed_search_attributes)
            if updates:
                workflow.upsert_search_attributes(updates)
        elif status != self._written:
            self._written = status
            workflow.upsert_search_attributes([SESSION_STATUS.value_set(status)])


class Standing:
    """Who may act on a workflow: its ``owner``, or one of its ``operators`` giving a reason.
    ``what`` names it in the refusal (``task t1``, ``graph g1``)."""

    def __init__(self, owner: str, operators: list[str], what: str) -> None:
        self.owner = owner
        self.operators = list(operators)
        self.what = what

    def refusal(self, principal: str, reason: str | None, verb: str) -> str | None:
        """Why ``principal`` may not ``verb`` it, or None (``standing_refusal``)."""
        return standing_refusal(self.owner, self.operators, principal, reason, verb, self.what)

    def check(self, request: Decision, verb: str) -> None:
        """Refuse (an update validator's rejection) a request whose ``expires_at`` has passed (type
        ``RequestExpired``: its caller stopped waiting, so it is not applied behind its back; update
        validators run only when a worker takes an update, never on replay), then a principal that
        may not ``verb`` it."""
        if request.expires_at is not None and workflow.now() > request.expires_at:
            raise ApplicationError(
                f"{self.what}: this request expired at {request.expires_at:%Y-%m-%d %H:%M:%S} UTC, before a worker took it "
                "(its caller stopped waiting); nothing was changed",
                type="RequestExpired",
                non_retryable=True,
            )
        refusal = self.refusal(request.principal, request.reason, verb)
        if refusal is not None:
            raise rejected(refusal)


class Decision(Protocol):
    """A task's or graph's update input, as ``Standing.check`` reads it."""

    @property
    def principal(self) -> str: ...

    @property
    def reason(self) -> str | None: ...

    @property
    def expires_at(self) -> datetime | None: ...
