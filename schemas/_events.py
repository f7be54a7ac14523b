"""The ``Event`` tagged union: everything observable that happens in a session.

Each event has a per-session ``seq`` (1, 2, 3, ...) and a ``type`` tag. The workflow
emits them (they answer the ``events`` query) and the store keeps a projection keyed
by (session_id, seq). ``ModelTokenDelta`` is the exception: deltas go to the store only,
never into workflow history.

The ``type`` tags are wire format (histories, the store, the HTTP API): they never change. The
event classes live by what they are about: ``_events_session`` (lifecycle, turns, model calls,
context, budget, delegation), ``_events_tools`` (approvals, advisor, invocations, MCP, skills),
``_events_memory`` (memories, trajectories), ``_events_task`` (autonomous tasks) and
``_events_graph`` (task graphs).
"""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import Field, TypeAdapter

from agentrt.schemas._base import Model
from agentrt.schemas._events_graph import (
    AgentTaskCompleted,
    AgentTaskFailed,
    AgentTaskStarted,
    TaskBlocked,
    TaskCancelled,
    TaskDecomposed,
    TaskGraphCompleted,
    TaskGraphCreated,
    TaskGraphFailed,
    TaskGraphPaused,
    TaskGraphResumed,
    TaskGraphStatusChanged,
    TaskPlanApproved,
    TaskPlanRejected,
    TaskRetried,
    TaskReviewed,
)
from agentrt.schemas._events_memory import (
    MemoryAccepted,
    MemoryDropped,
    MemoryProposed,
    MemoryRejected,
    TrajectoryCompleted,
    TrajectoryStarted,
    TrajectoryStepRecorded,
)
from agentrt.schemas._events_session import (
    AssistantMessageCompleted,
    BudgetExceededEvent,
    BudgetRaised,
    CancelIgnored,
    CancelRequested,
    ContextAssembled,
    ContextCompactionCompleted,
    ContextCompactionFailed,
    ContextCompactionSkipped,
    ContextCompactionStarted,
    DelegatedSessionEnded,
    ModelProfileSwitchFailed,
    ModelProfileSwitched,
    ModelCallRetried,
    ModelRequestStarted,
    ModelTokenDelta,
    ModelToolCallRequested,
    OutputValidationFailed,
    SessionArchived,
    SessionCancelled,
    SessionContinuedAsNew,
    SessionDelegated,
    SessionInitialized,
    SessionPaused,
    SessionRenamed,
    SessionResumed,
    TurnEnded,
    TurnStarted,
    UserMessageAdded,
)
from agentrt.schemas._events_task import (
    AutonomousTaskAcceptanceChecked,
    AutonomousTaskBudgetExceeded,
    AutonomousTaskBudgetRaised,
    AutonomousTaskCancelled,
    AutonomousTaskCheckpointed,
    AutonomousTaskCompleted,
    AutonomousTaskCreated,
    AutonomousTaskFailed,
    AutonomousTaskGoalAmended,
    AutonomousTaskNudged,
    AutonomousTaskPaused,
    AutonomousTaskResumed,
    AutonomousTaskSessionEnded,
    AutonomousTaskSessionStarted,
    AutonomousTaskStatusChanged,
    AutonomousTaskWaiting,
    AutonomyDecision,
)
from agentrt.schemas._events_tools import (
    AdvisorReviewCompleted,
    AdvisorReviewStarted,
    EffectReconciled,
    ElicitationAnswered,
    McpToolsListed,
    OperatorActed,
    PermissionDecisionIgnored,
    PermissionDenied,
    PermissionGranted,
    PermissionRequested,
    SkillActivated,
    SkillDeactivated,
    SkillDiscovered,
    ToolCallEdited,
    ToolInvocationCompleted,
    ToolInvocationFailed,
    ToolInvocationStarted,
)

__all__ = ["EVENT_ADAPTER", "EVENT_LIST_ADAPTER", "Event", "EventsPage"]

Event = Annotated[
    Union[
        SessionInitialized,
        UserMessageAdded,
        TurnStarted,
        ModelRequestStarted,
        ModelCallRetried,
        ModelTokenDelta,
        ModelToolCallRequested,
        AssistantMessageCompleted,
        OutputValidationFailed,
        PermissionRequested,
        PermissionGranted,
        PermissionDenied,
        PermissionDecisionIgnored,
        EffectReconciled,
        OperatorActed,
        ToolCallEdited,
        ToolInvocationStarted,
        ToolInvocationCompleted,
        ToolInvocationFailed,
        TurnEnded,
        SessionCancelled,
        CancelRequested,
        CancelIgnored,
        ContextCompactionStarted,
        ContextCompactionCompleted,
        ContextCompactionFailed,
        ContextCompactionSkipped,
        ContextAssembled,
        ModelProfileSwitched,
        ModelProfileSwitchFailed,
        SessionContinuedAsNew,
        SessionArchived,
        AdvisorReviewStarted,
        AdvisorReviewCompleted,
        MemoryProposed,
        MemoryAccepted,
        MemoryRejected,
        MemoryDropped,
        TrajectoryStarted,
        TrajectoryStepRecorded,
        TrajectoryCompleted,
        McpToolsListed,
        ElicitationAnswered,
        SkillDiscovered,
        SkillActivated,
        SkillDeactivated,
        BudgetExceededEvent,
        BudgetRaised,
        SessionRenamed,
        AutonomousTaskCreated,
        AutonomyDecision,
        AutonomousTaskSessionStarted,
        AutonomousTaskSessionEnded,
        AutonomousTaskAcceptanceChecked,
        AutonomousTaskCheckpointed,
        AutonomousTaskWaiting,
        AutonomousTaskPaused,
        AutonomousTaskResumed,
        AutonomousTaskNudged,
        AutonomousTaskGoalAmended,
        AutonomousTaskBudgetExceeded,
        AutonomousTaskBudgetRaised,
        AutonomousTaskCompleted,
        AutonomousTaskFailed,
        AutonomousTaskCancelled,
        TaskGraphCreated,
        TaskDecomposed,
        TaskPlanApproved,
        TaskPlanRejected,
        AgentTaskStarted,
        AgentTaskCompleted,
        AgentTaskFailed,
        TaskReviewed,
        TaskRetried,
        TaskBlocked,
        TaskCancelled,
        TaskGraphCompleted,
        TaskGraphFailed,
        SessionDelegated,
        DelegatedSessionEnded,
        SessionPaused,
        SessionResumed,
        TaskGraphPaused,
        TaskGraphResumed,
        AutonomousTaskStatusChanged,
        TaskGraphStatusChanged,
    ],
    Field(discriminator="type"),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
EVENT_LIST_ADAPTER: TypeAdapter[list[Event]] = TypeAdapter(list[Event])


class EventsPage(Model):
    """Answer of query ``events``: events in ``seq`` order and the session's latest ``last_seq``.

    The workflow holds only the events of its current run, from ``first_seq`` on; earlier
    ones (before a continue-as-new) are in the store's event projection.
    """

    events: list[Event]
    last_seq: int
    first_seq: int = 1
