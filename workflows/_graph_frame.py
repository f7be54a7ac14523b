"""What a task graph's run shows and records of itself, and how it ends: its journal of events, the
status board and status log (``TaskGraphStatusChanged``), the store record (``graph.record``,
``frame-v1``), the move to a newer build (continue-as-new) and the graph's end (completed or failed).

Workflow code only; ``GraphFrame`` is held by ``TaskGraphWorkflow``, made in the run's first
activation (it asks the frame's patches: ``console-v1``, ``frame-v1``, ``status-events-v1``).
"""

from __future__ import annotations

from typing import NoReturn

from temporalio import workflow

from agentrt.schemas import (
    Event,
    GraphConfig,
    GraphSnapshot,
    GraphState,
    GraphStatus,
    TaskGraphCompleted,
    TaskGraphFailed,
    TaskGraphInput,
    TaskGraphStatusChanged,
)
from agentrt.workflows import _graph_parts as parts
from agentrt.workflows import _graph_steps as steps
from agentrt.workflows._children import FRAME_PATCH
from agentrt.workflows._frame import STATUS_EVENTS_PATCH, BuildWatch, StatusBoard, StatusLog, frame_patches, next_run_behavior
from agentrt.workflows._journal import Journal


class GraphFrame:
    """The journal, status board, status log, store record and build watch of the graph with
    ``config`` and ``state``. console-v1 (asked by the board): every search attribute kept current,
    child sessions started with their kind and profile; frame-v1 (``recorded``): the graph's events
    and row are written to the store and a graph that closes asks its running sessions to end. A run
    started pinned asks none (``Patches``) and moves to a newer build after its running nodes."""

    def __init__(self, config: GraphConfig, state: GraphState) -> None:
        self._config = config
        self._state = state
        self.journal = Journal(state, state.events)
        self.patches = frame_patches()
        self.board = StatusBoard("graph", config.owner, config.profile, self.patches)
        self.recorded = self.patches.has(FRAME_PATCH)
        self.statuses = StatusLog(self.patches.has(STATUS_EVENTS_PATCH), state, TaskGraphStatusChanged, self.emit)
        self.moves = BuildWatch(self.patches.latest)
        self.record = steps.GraphRecord(config, state, self.journal)

    def emit(self, event: Event) -> None:
        self.journal.emit(event, workflow.now())
        self.board.show(parts.current_details(self._config, self._state))

    def set_status(self, status: GraphStatus) -> None:
        """Record ``status`` (the shown one as an event when it changed), show the details and write
        the search attributes that changed (its plan approval counted as one waiting)."""
        self._state.status = status
        details = parts.current_details(self._config, self._state)
        shown = parts.shown_status(self._state)
        self.statuses.seen(shown)
        self.board.set(shown, details, cost_usd=self._state.spend.cost_usd, pending_approvals=int(status == "pending_approval"))

    def snapshot(self) -> GraphSnapshot:
        return parts.snapshot(self._config, self._state, workflow.now())

    async def move(self) -> NoReturn:
        """Continue as new onto the deployment's current build (``AUTO_UPGRADE``), carrying the state,
        once the staged events are stored and every handler has finished."""
        await self.record.close()
        await workflow.wait_condition(workflow.all_handlers_finished)
        workflow.continue_as_new(TaskGraphInput(config=self._config, state=self._state), initial_versioning_behavior=next_run_behavior(True))

    # ---------------------------------------------------------------- ending

    def finish(self) -> None:
        """End the graph once no node runs: completed when every node did, else failed (``parts.failure``)."""
        state = self._state
        failed = [n for n in state.order if state.nodes[n].status != "completed"]
        if not failed:
            state.answer = parts.final_answer(state)
            self.complete()
            return
        first = next((n for n in state.order if state.nodes[n].status == "failed"), failed[0])
        details = ", ".join(f"{n} {state.nodes[n].status}" for n in failed[:10])
        state.answer = parts.final_answer(state) or None
        self.fail(*parts.failure(self._config, state, first, details))

    def complete(self) -> None:
        self._state.ended_at = workflow.now()
        self.set_status("completed")
        self.emit(TaskGraphCompleted(answer=parts.cut(self._state.answer or ""), spend=self.snapshot().spend))

    def fail(self, reason: str, error: str) -> None:
        state = self._state
        state.failure_reason = reason
        state.failure = parts.cut(error, 4_000)
        state.ended_at = workflow.now()
        self.set_status("failed")
        self.emit(TaskGraphFailed(reason=reason, error=state.failure, spend=self.snapshot().spend))
