"""When and how a session's run continues as new: Temporal suggests it (the history's size), its
history reached ``RUN_HISTORY_EVENTS``, or a newer build of the session's Worker Deployment is current.

A session started by a versioned worker (``agentrt worker --deployment --build-id``) is ``PINNED``:
the run lives on the build that started it. Once another version of that deployment is made
current, every workflow task the run gets says so (``is_target_worker_deployment_version_changed``,
recorded in the history's ``WorkflowTaskStarted`` event), and the run continues as new between
turns with ``ContinueAsNewVersioningBehavior.AUTO_UPGRADE``: the next run starts on the current
build and is pinned there. A turn in progress (a model or tool call, an approval wait) ends on the
build that began it. An idle run gets no workflow task of its own when the current version
changes: the new build's workers send it the ``upgrade`` signal (worker/_upgrades.py) to wake it.
Workflow code only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio import workflow

from agentrt.schemas import QueuedOperation, SessionContinuedAsNew, SessionInput
from agentrt.workflows._delegate_steps import Delegations
from agentrt.workflows._frame import BuildWatch, next_run_behavior
from agentrt.workflows._session_run import SessionRun


# Events a session run's history may reach before the run continues as new between turns, far
# below Temporal's suggestion (4,096): a worker that takes over sessions from a dead one replays
# every history it is handed at once, within each task's 4 s timeout (docs/long-sessions.md).
RUN_HISTORY_EVENTS = 500


class Continuation:
    """Decides and performs a session run's continue-as-new; ``draining`` is True while waiting
    update handlers are told to ask again (they answer ``pending`` with ``ask_again``)."""

    def __init__(self, run: SessionRun, delegations: Delegations) -> None:
        self._run = run
        self._delegations = delegations
        self._build = BuildWatch(run.gen.upgrades)  # made in @workflow.init: the run's first activation
        self.draining = False

    def new_build(self) -> bool:
        """Another version of this run's deployment is current and the run moves to it
        (``upgrade-at-turn-boundary-v1`` runs; unversioned workers never see one)."""
        return self._build.changed()

    def due(self) -> bool:
        """Temporal suggests continue-as-new, the history is full (``history_full``), or a newer build
        is current, and nothing holds it back
        (handlers are drained first; a delegated session still running keeps this run: its handle
        cannot travel to the next)."""
        run = self._run
        if run.archive_request is not None or self._delegations.running():
            return False
        if self.new_build():
            return True
        return (
            run.gen.context
            and (self.history_full() or workflow.info().is_continue_as_new_suggested())
            and (run.gen.turn_control or workflow.all_handlers_finished())
        )

    def history_full(self) -> bool:
        """The run's history holds ``RUN_HISTORY_EVENTS`` events or more (``history-bound-v1``, asked
        the first time it does: runs recorded before it go on to Temporal's suggestion)."""
        return workflow.info().get_current_history_length() >= RUN_HISTORY_EVENTS and self._run.gen.history_bound()

    async def drain_handlers(self, run_operation: Callable[[QueuedOperation], Awaitable[None]]) -> bool:
        """Let every update handler finish before continue-as-new; False if the session was archived
        meanwhile, or if a queued model switch or compaction waits behind a message.

        Model switches and compactions at the head of the queue run (``run_operation``; their
        callers wait for them); one behind a message keeps its place, so that message runs first,
        in this run (the caller runs it when this returns False); queued messages with no
        operation behind them travel to the next run. Only then, with continue-as-new at hand, do
        waiting ``wait_turn`` calls answer ``pending`` with ``ask_again`` (a client asks again at once).
        """
        run = self._run
        try:
            while not workflow.all_handlers_finished() and not run.ending():
                operation = run.inbox.pop_leading_operation()
                if operation is not None:
                    self.draining = False
                    await run_operation(operation)
                    continue
                if run.inbox.has_operation():
                    return False  # behind a message: the turn runs first, in arrival order
                self.draining = True
                await workflow.wait_condition(
                    lambda: workflow.all_handlers_finished() or run.inbox.has_operation() or run.ending()
                )
        finally:
            self.draining = False
        return not run.ending()

    def continue_as_new(self) -> None:
        """Continue as a new run carrying ``SessionState`` as it is; onto the current build when a
        newer one is (``AUTO_UPGRADE`` for the next run's first task; it is pinned there).

        Synchronous on purpose: between the check that no handler runs and the continue-as-new
        there is no await, so no update or signal can arrive in between and be left behind.
        Events not yet in the store travel in the state; the new run writes them first.
        """
        info, run = workflow.info(), self._run
        upgrade = self.new_build()
        run.emit(SessionContinuedAsNew(
            run=run.state.run + 1, history_events=info.get_current_history_length(), history_bytes=info.get_current_history_size(),
            reason="new_build" if upgrade else "history",
        ))
        run.state.run += 1
        workflow.continue_as_new(
            SessionInput(config=run.config, state=run.state),
            initial_versioning_behavior=next_run_behavior(upgrade),
        )
