"""Pause and resume, the operator's kill switch, for each kind of workflow: what a pause changes in a
session, a task and a graph, held by each as a collaborator.

While paused, no model or tool call starts (a call in flight finishes and is recorded); messages,
decisions and cancels are taken as ever and act after the resume, where the work stopped. A
paused session shows status ``paused`` (its state and ``AgentSessionStatus``), so does a paused
graph and a paused task, and each pauses the child sessions it runs (signal ``set_paused``). A
pause of what is paused, and a resume of what is not, changes nothing and is no error.

``SessionPause`` keeps the pause in ``SessionState.paused`` (through continue-as-new); the holds
are ``SessionRun.hold_while_paused`` (before every call, a turn's start and a compaction).
``GraphPause`` keeps it in ``GraphState.paused``: no node, retry or review starts. ``TaskPause``
adds to a task's existing pause what ``pause-v1`` changes (``PAUSE_PATCH``): its running session
pauses and resumes with it, a task paused while it woke starts no session, and its acceptance
check waits for the resume. Workflow code only.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from temporalio import workflow

from agentrt.schemas import (
    TERMINAL_GRAPH_STATUSES,
    AutonomousTaskPaused,
    AutonomousTaskResumed,
    Event,
    GraphControlInput,
    GraphState,
    PauseInput,
    PauseState,
    SessionPaused,
    SessionResumed,
    SessionStateView,
    SetPausedInput,
    StoreAppendInput,
    TaskControlInput,
    TaskGraphPaused,
    TaskGraphResumed,
    TaskState,
    TaskStatus,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows._children import ChildSessions
from agentrt.workflows._errors import rejected
from agentrt.workflows._frame import Patches, Standing
from agentrt.workflows._session_control import SessionControl
from agentrt.workflows._session_run import SessionRun

# pause-v1 (AutonomousTaskWorkflow): a pause also pauses the task's running session (and a resume
# resumes it, showing the task ``running`` again), a task paused while it woke starts no session,
# and the acceptance check of a session that ended while the task is paused waits for the resume.
# Asked only where one of these steps is taken; runs recorded before it replay without them.
PAUSE_PATCH = "pause-v1"


def pause_signal(pause: PauseState | None) -> SetPausedInput | None:
    """What a child session started under ``pause`` is told (None: not paused)."""
    return None if pause is None else SetPausedInput(paused=True, principal=pause.principal, reason=pause.reason)


def paused_seconds(pause: PauseState, now: datetime) -> float:
    """Seconds from ``pause.since`` to ``now``, never negative."""
    return max((now - pause.since).total_seconds(), 0.0)


class SessionPause:
    """The pause of one session run: its ``pause``/``resume`` updates and ``set_paused`` signal,
    over its ``SessionRun`` and ``SessionControl``; ``children``: the sessions it delegated to,
    paused and resumed with it."""

    def __init__(self, run: SessionRun, control: SessionControl, children: ChildSessions) -> None:
        self.run = run
        self.control = control
        self.children = children
        children.pause_of = self.child_signal

    def validate(self, input: PauseInput, verb: str) -> None:
        """Refuse (update validator) a change of an archived or ending session, or by a principal
        that is neither the owner nor, with a reason, an operator."""
        run, session = self.run, self.run.config.session_id
        if run.archive_request is not None:
            raise rejected(f"session {session} is archived")
        if run.ending():
            raise rejected(f"session {session} is ending: its workflow was cancelled")
        self.control.check_owner_or_operator(input.principal, input.reason, verb)

    async def apply(self, input: PauseInput, *, paused: bool) -> SessionStateView:
        """Update ``pause`` (``paused``) or ``resume``: the state once the change is in the store.
        The flag holds at once; a change that comes before ``SessionInitialized`` (the session's
        first event: a parent's pause of a child just started) is recorded after it."""
        run = self.run
        event = self._change(input.principal, input.reason, paused)
        if event is None:
            return run.view()
        if not run.initialized:
            await workflow.wait_condition(lambda: run.initialized or run.ending())
        run.emit(event)
        run.set_status(run.status)  # AgentSessionStatus: paused, or the status under it again
        run.show_details()
        await self.children.set_paused(SetPausedInput(paused=paused, principal=input.principal, reason=input.reason))
        await self._write()
        return run.view()

    async def signalled(self, input: SetPausedInput) -> None:
        """Signal ``set_paused``: as the update, from a parent (or any client); a stranger's, or an
        operator's without a reason, changes nothing and is counted (``strangers_ignored``)."""
        run = self.run
        if run.archive_request is not None or run.ending():
            return
        if self.control.standing(input.principal, input.reason) in ("not_owner", "no_reason"):
            run.state.strangers_ignored += 1
            return
        await self.apply(PauseInput(principal=input.principal, reason=input.reason), paused=input.paused)

    def child_signal(self) -> SetPausedInput | None:
        """What a delegated session started while this one is paused is told (None: not paused)."""
        return pause_signal(self.run.state.paused)

    def _change(self, principal: str, reason: str | None, paused: bool) -> Event | None:
        """Pause or resume the session now; the event that records it, None when it already is so."""
        run = self.run
        if (run.state.paused is not None) == paused:
            return None
        now = workflow.now()
        if paused:
            run.state.paused = PauseState(principal=principal, reason=reason, since=now)
            return SessionPaused(principal=principal, reason=reason)
        assert run.state.paused is not None
        since, run.state.paused = run.state.paused, None
        return SessionResumed(principal=principal, reason=reason, paused_seconds=paused_seconds(since, now))

    async def _write(self) -> None:
        """Write everything staged now, so readers see the pause in order; it stays staged (a turn's
        next write repeats it, idempotent by seq and position), as a call may be writing beside this."""
        run = self.run
        events, messages = run.journal.unflushed()
        await run.execute(
            options.STORE_WRITE,
            StoreAppendInput(session_id=run.config.session_id, config=run.config, messages=messages, events=events),
            local=True,
            summary="store pause" if run.state.paused is not None else "store resume",
        )


class GraphPause:
    """The pause of a task graph over its ``state``: the ``pause``/``resume`` updates' checks and
    bodies, and the hold its run waits in before a node, a retry or a review starts. ``emit``
    records an event, ``refresh`` writes the status it shows; ``resumes`` counts resumes (the run's
    wait for a node to end also wakes on one)."""

    def __init__(
        self, graph_id: str, state: GraphState, children: ChildSessions, standing: Standing,
        emit: Callable[[Event], None], refresh: Callable[[], None],
    ) -> None:
        self.graph_id = graph_id
        self.state = state
        self.children = children
        self.standing = standing
        self.emit = emit
        self.refresh = refresh
        self.resumes = 0
        children.pause_of = self.child_signal

    @property
    def paused(self) -> bool:
        return self.state.paused is not None

    def validate(self, input: GraphControlInput, verb: str, *, cancelling: bool) -> None:
        """Refuse (update validator) a principal without standing, an ended graph, one being cancelled."""
        self.standing.check(input, verb)
        if self.state.status in TERMINAL_GRAPH_STATUSES:
            raise rejected(f"graph {self.graph_id} has ended ({self.state.status}): it cannot be {verb}d")
        if cancelling:
            raise rejected(f"graph {self.graph_id} is being cancelled")

    async def apply(self, input: GraphControlInput, *, paused: bool) -> None:
        """Update ``pause`` (``paused``) or ``resume``: record it and tell the running child sessions."""
        if self.paused == paused:
            return
        now = workflow.now()
        if paused:
            self.state.paused = PauseState(principal=input.principal, reason=input.reason, since=now)
            self.emit(TaskGraphPaused(principal=input.principal, reason=input.reason))
        else:
            assert self.state.paused is not None
            since, self.state.paused = self.state.paused, None
            self.resumes += 1
            self.emit(TaskGraphResumed(principal=input.principal, reason=input.reason, paused_seconds=paused_seconds(since, now)))
        self.refresh()
        await self.children.set_paused(SetPausedInput(paused=paused, principal=input.principal, reason=input.reason))

    def child_signal(self) -> SetPausedInput | None:
        return pause_signal(self.state.paused)

    async def hold(self, stop: Callable[[], bool]) -> None:
        """Wait while the graph is paused, unless ``stop`` holds (a cancel); nothing when not paused."""
        if self.state.paused is not None:
            await workflow.wait_condition(lambda: self.state.paused is None or stop())


class TaskPause:
    """What ``pause-v1`` adds to an autonomous task's pause (its status ``paused``, ``paused_by``):
    its running session pauses and resumes with it, and nothing starts while it is paused."""

    def __init__(self, state: TaskState, children: ChildSessions, patches: Patches) -> None:
        self.state = state
        self.children = children
        self.patches = patches
        self.last: SetPausedInput | None = None  # the pause a session started meanwhile is told
        children.pause_of = self.child_signal

    def holds(self) -> bool:
        """Paused, in a run with ``pause-v1``: start no session and no check."""
        return self.state.status == "paused" and self.patches.has(PAUSE_PATCH)

    def mark_paused(self, principal: str | None, reason: str | None) -> Event:
        """Record the pause (``principal`` None: the task's session was cancelled); the event to emit."""
        self.state.status = "paused"
        self.state.paused_by = principal or "session cancelled"
        return AutonomousTaskPaused(principal=principal, reason=reason)

    def mark_resumed(self, input: TaskControlInput) -> Event:
        """Record the resume (``running`` again while its session runs, under ``pause-v1``); the event to emit."""
        running: TaskStatus = "running" if self.state.running_session and self.patches.has(PAUSE_PATCH) else "waiting"
        self.state.status = running
        self.state.paused_by = None
        return AutonomousTaskResumed(principal=input.principal, reason=input.reason)

    async def tell_session(self, input: TaskControlInput, *, paused: bool) -> None:
        """Pause or resume the running session too (``pause-v1``)."""
        signal = SetPausedInput(paused=paused, principal=input.principal, reason=input.reason)
        self.last = signal if paused else None
        if self.children.running and self.patches.has(PAUSE_PATCH):
            await self.children.set_paused(signal)

    async def wait_for_resume(self, cancelled: Callable[[], bool]) -> bool:
        """While paused (``pause-v1``), wait for the resume; False when ``cancelled`` ended the wait."""
        if self.holds():
            await workflow.wait_condition(lambda: self.state.status != "paused" or cancelled())
        return not cancelled()

    def child_signal(self) -> SetPausedInput | None:
        return self.last if self.last is not None and self.holds() else None
