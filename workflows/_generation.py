"""Which behaviour generations (``workflow.patched`` ids) a session run has, asked in one place.

A patch id marks a change of the commands a session issues. Histories recorded before it
replay without the commands it added; every run recorded after it has its marker. The
session asks the generations that shape a whole run once, in ``@workflow.init``
(``Generation.ask``), and holds the answer as a frozen value (``SessionRun.gen``): update
validators and queries of the first activation run before ``run()`` does and may not ask a
patch themselves. Several patches gate a step that most runs never take, and are asked where it
is first taken (the methods below; the SDK keeps a run's first answer): asked at a run's
start, a run recorded after the patch but before its step was ever taken would find no
marker there, replay as the old generation and then diverge from its own history once it
takes the step. ``console-v1`` too is asked where its step first comes, a run's first
activity or status: each answer True also upserts ``TemporalChangeVersion``, and an update
accepted in the run's first workflow task comes in history before that upsert.

A run started on a versioned worker (pinned) asks none of them: ``Generation.for_run`` gives it
``LATEST``, every new branch taken (``_frame.Patches``). ``tests/histories/README.md`` says, for
each id, which build retires it. Workflow code only.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow

from agentrt.workflows import _activity_options as options
from agentrt.workflows import _console as console, _frame

# context-window-v1: context planning, compaction, model switching and continue-as-new.
CONTEXT_PATCH = "context-window-v1"
# turn-control-v1: a cancel is re-checked after every model and tool call and ends the turn
# even when the call finished or failed meanwhile; a workflow cancellation cancels the turn
# and the queued ones; continue-as-new answers waiting ``wait_turn`` calls instead of waiting
# for them; a tool listing that keeps failing fails the session instead of retrying forever.
TURN_CONTROL_PATCH = "turn-control-v1"
# lean-rounds-v1: a round costs two activities and two workflow tasks, as bare Temporal does.
# Staged events and messages travel in the next model or tool call's input instead of a
# store.append activity of their own; the remaining store writes, tools.list,
# profiles.describe, effects.reconcile and fast read-only tools (``local_tools``) run as
# local activities; search attributes are written only when they change.
LEAN_ROUNDS_PATCH = "lean-rounds-v1"
# lean-start-v1: implies the three above, under one marker (each patch adds a marker and a
# TemporalChangeVersion upsert to every new session); tools and profile come from one
# session.prepare local activity; a session started with a message writes its config and
# first events with the first model call, and its owner with its first status; a workflow
# whose id is not session-<config.session_id> fails before it writes anything.
LEAN_START_PATCH = "lean-start-v1"
# trajectory-v1: each turn records its trajectory (TrajectoryStarted, a TrajectoryStepRecorded per
# tool invocation, advisor review and approval wait, TrajectoryCompleted). Runs recorded before
# it replay without these events, so their sequence numbers hold.
TRAJECTORY_PATCH = "trajectory-v1"
# regular-activities-v1: every activity of a run is a regular one (see _activity_options).
REGULAR_ACTIVITIES_PATCH = options.REGULAR_ACTIVITIES_PATCH
# console-v1: every search attribute of the session written when its value changes (_console).
CONSOLE_PATCH = console.CONSOLE_PATCH
# round-limit-message-v1: a turn that reaches max_rounds_per_turn ends with an assistant message saying so.
ROUND_LIMIT_MESSAGE_PATCH = "round-limit-message-v1"
# principal-required-v1: a cancel_turn signal without a principal is ignored (CancelIgnored,
# why "no_principal") like a stranger's; runs recorded before it applied such a cancel.
PRINCIPAL_PATCH = "principal-required-v1"
# stranger-limit-v1: a stranger's ignored decisions and cancels beyond the first
# MAX_RECORDED_STRANGER_EVENTS of a run are counted, not recorded as events.
STRANGER_LIMIT_PATCH = "stranger-limit-v1"
# policy-sandbox-v1: the policy engine's second version (SandboxPolicy, approval modes, calls
# classified by their arguments: destructive and network commands). Runs recorded before it
# replay with the first (a rule per the tool's own risk class).
POLICY_PATCH = "policy-sandbox-v1"
# policy-decisions-v1: the policy engine's third version (a file write outside the workspace is
# refused before anyone is asked, read-only calls are never asked about, danger_full_access with
# mode never runs destructive and network calls); a call the policy allows records
# PermissionGranted (scope "policy", its rule); a batch's results take transcript positions in
# call order, so the model reads them in the order it asked, refused calls included.
POLICY_DECISIONS_PATCH = "policy-decisions-v1"
# effect-key-position-v1: a call's idempotency key holds its result position, so a call id a
# model sends again in a later round of the turn names a new effect.
EFFECT_KEY_PATCH = "effect-key-position-v1"
# child-spend-v1: a child session that ends cancelled first signals its spend to its parent
# (``child_spend``, _children.report_cancelled), which counts it as the child's.
CHILD_SPEND_PATCH = "child-spend-v1"
# structured-output-v1: a turn with an output spec passes it to each model call and, on an answer
# that does not match, records OutputValidationFailed and feeds the errors back as a user message
# (another model call), up to the spec's max_attempts, then ends ``output_invalid``.
STRUCTURED_OUTPUT_PATCH = "structured-output-v1"
# registered-tools-v1: a session whose tools (its own or its agent's) are not all registered on
# the worker fails at its start (ToolNotRegistered); runs recorded before it went on without them.
REGISTERED_TOOLS_PATCH = "registered-tools-v1"
# context-events-v1: the context is described and compactions not run are recorded: each model
# call's result is followed by ContextAssembled (its input by source) and a compaction with nothing
# to summarise by ContextCompactionSkipped (with a store write); a compact request while one runs
# is answered at once (ContextCompactionSkipped ``already_compacting``) instead of queued after it.
# Runs recorded before it replay without these events, so their sequence numbers hold.
CONTEXT_EVENTS_PATCH = "context-events-v1"
# upgrade-at-turn-boundary-v1: a pinned run whose deployment has a newer current build continues
# as new onto it between turns (_continuation).
UPGRADE_PATCH = _frame.UPGRADE_PATCH
# fused-rounds-v1: a session with ``fused_rounds`` lets its model call run the read-only calls the
# policy allows and call the model again, in one activity (_fused_rounds); the workflow then
# records those rounds as its own.
FUSED_ROUNDS_PATCH = "fused-rounds-v1"
# history-bound-v1: a run continues as new once its history holds RUN_HISTORY_EVENTS events
# (_continuation), not only when Temporal suggests it (4,096 by default): a worker that takes
# sessions over from a dead one replays each history within the workflow task timeout.
HISTORY_BOUND_PATCH = "history-bound-v1"
# tools-queue-writes-v1: a session whose tool calls go to a tools queue of their own
# (``tool_task_queue``) writes its staged events and messages with a store.append of its own before
# each tool call, so they do not travel in the call's input: a tools worker of another build (its
# activity contract refuses the call, typed) never has to read events this build added.
TOOLS_QUEUE_WRITES_PATCH = "tools-queue-writes-v1"
# pinned-tools-writes-v1: a pinned run sends its staged events in the tool call's input on a tools
# queue too, as on its own queue: Temporal gives a pinned run's activity to the workers of the
# run's own version on that queue (tests/e2e/test_versioned_deploys.py), so the build that reads
# them is its own. Asked by pinned runs (those an earlier build recorded wrote them first).
PINNED_TOOLS_WRITES_PATCH = "pinned-tools-writes-v1"


@dataclass(frozen=True)
class Generation:
    """The generations of one session run: True where the run has the patch's behaviour.

    ``latest``: every patch's behaviour, no patch asked (``Generation.for_run`` of a run that
    started on a versioned worker). Otherwise each is asked of history as before."""

    lean_start: bool  # lean-start-v1 (implies context, turn_control and lean_rounds)
    context: bool  # context-window-v1; a continued run always has it
    turn_control: bool  # turn-control-v1
    lean_rounds: bool  # lean-rounds-v1
    trajectories: bool  # trajectory-v1
    local_activities: bool  # NOT regular-activities-v1: steps marked local run as local activities
    upgrades: bool  # upgrade-at-turn-boundary-v1
    latest: bool = False

    @classmethod
    def for_run(cls, *, carried: bool) -> Generation:
        """The generation of this run, in its first activation: ``LATEST`` for a run that started
        on a versioned (pinned) worker, which asks none of the patches below; else ``ask``
        (``_frame.Patches``, probing with ``lean-start-v1``, which every session run asked first
        since before Worker Versioning)."""
        return LATEST if _frame.Patches(LEAN_START_PATCH).latest else cls.ask(carried=carried)

    @classmethod
    def ask(cls, *, carried: bool) -> Generation:
        """Ask the run-wide patches, in the order the session has always asked them (each answer
        True records its marker now); ``carried``: the run continued as new from another."""
        lean_start = workflow.patched(LEAN_START_PATCH)
        if lean_start:
            context = turn_control = lean_rounds = True
        else:
            context = carried or workflow.patched(CONTEXT_PATCH)
            turn_control = workflow.patched(TURN_CONTROL_PATCH)
            lean_rounds = workflow.patched(LEAN_ROUNDS_PATCH)
        # Asked here, at the run's first workflow task: asked at a turn's start, which may come
        # in the same task as a local activity's result, replay would ask it in a task before
        # the one holding its marker.
        trajectories = workflow.patched(TRAJECTORY_PATCH)
        local_activities = not workflow.patched(REGULAR_ACTIVITIES_PATCH)
        upgrades = workflow.patched(UPGRADE_PATCH)
        return cls(
            lean_start=lean_start, context=context, turn_control=turn_control, lean_rounds=lean_rounds,
            trajectories=trajectories, local_activities=local_activities, upgrades=upgrades,
        )

    # Patches asked where the step they change is first taken (the SDK keeps the first answer).

    def _has(self, patch_id: str) -> bool:
        return self.latest or workflow.patched(patch_id)

    def console(self) -> bool:
        """console-v1, asked at a run's first activity or status (both in its first workflow task)."""
        return self._has(CONSOLE_PATCH)

    def round_limit_message(self) -> bool:
        """round-limit-message-v1, asked when a turn reaches its round limit."""
        return self._has(ROUND_LIMIT_MESSAGE_PATCH)

    def principal_required(self) -> bool:
        """principal-required-v1, asked when a ``cancel_turn`` signal comes without a principal."""
        return self._has(PRINCIPAL_PATCH)

    def stranger_limit(self) -> bool:
        """stranger-limit-v1, asked when a run's strangers pass the recorded limit."""
        return self._has(STRANGER_LIMIT_PATCH)

    def policy_v2(self) -> bool:
        """policy-sandbox-v1, asked at a run's first batch of tool calls."""
        return self._has(POLICY_PATCH)

    def policy_decisions(self) -> bool:
        """policy-decisions-v1, asked at a run's first batch of tool calls (after policy-sandbox-v1)."""
        return self._has(POLICY_DECISIONS_PATCH)

    def effect_key_position(self) -> bool:
        """effect-key-position-v1, asked by the first call that goes through the effect ledger."""
        return self._has(EFFECT_KEY_PATCH)

    def structured_output(self) -> bool:
        """structured-output-v1, asked when a turn with an output spec starts."""
        return self._has(STRUCTURED_OUTPUT_PATCH)

    def child_spend_report(self) -> bool:
        """child-spend-v1, asked when a child session ends cancelled."""
        return self._has(CHILD_SPEND_PATCH)

    def context_events(self) -> bool:
        """context-events-v1, asked at a run's first model call result, compaction with nothing to
        summarise or compact request while one runs, whichever comes first."""
        return self._has(CONTEXT_EVENTS_PATCH)

    def registered_tools(self) -> bool:
        """registered-tools-v1, asked when a session's listing names tools the worker lacks."""
        return self._has(REGISTERED_TOOLS_PATCH)

    def fused_rounds(self) -> bool:
        """fused-rounds-v1, asked before a model call that may run read-only rounds itself."""
        return self._has(FUSED_ROUNDS_PATCH)

    def history_bound(self) -> bool:
        """history-bound-v1, asked when a run's history first reaches ``RUN_HISTORY_EVENTS`` at a
        turn boundary (before Temporal suggests continue-as-new)."""
        return self._has(HISTORY_BOUND_PATCH)

    def tools_queue_writes(self) -> bool:
        """Whether staged events are written by a store.append of their own before a tool call on a
        tools queue of the session's own, asked before its first such call: an unversioned run
        asks tools-queue-writes-v1 (a tools worker of any build may take the call); a pinned one
        asks pinned-tools-writes-v1 and, with it, sends them in the call (its own build takes it)."""
        if self.latest:
            return not workflow.patched(PINNED_TOOLS_WRITES_PATCH)
        return workflow.patched(TOOLS_QUEUE_WRITES_PATCH)


# Every patch's behaviour, none asked: the generation of a run started on a versioned worker.
LATEST = Generation(
    lean_start=True, context=True, turn_control=True, lean_rounds=True, trajectories=True,
    local_activities=False, upgrades=True, latest=True,
)
