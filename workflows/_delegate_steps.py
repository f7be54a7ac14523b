"""The ``delegate`` tool carried out by the session workflow: a child ``SessionWorkflow`` per call.

Part of ``SessionWorkflow`` (a base class of it); workflow code only. A ``delegate`` call is
decided by the policy like any effectful call, but never runs as an activity: the workflow
starts the child session itself (``_delegation.child_config`` says what it gets)
and records ``SessionDelegated``.

- ``wait`` true (foreground): the call's result is the child's answer. Cancelling the turn
  cancels the child and waits until it has ended, so no child outlives its turn.
- ``wait`` false (background): the call's result is a handle at once; a watcher task waits for
  the child and queues its answer as a message in the inbox (the owner's side, labelled as the
  delegated session's), which starts a turn when the session idles. A session that ends
  (archive, Temporal's cancel) cancels its background children and waits for them first.

Either way the child's end is ``DelegatedSessionEnded``, and its spend (tokens, cost, tool calls)
is added to the session's own, so the session's budget counts it. The session does not continue
as new while a child runs (a child's handle cannot travel to the next run); children start
with parent close policy ``REQUEST_CANCEL``, so a session that fails or is terminated still
asks them to end.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import SearchAttributePair, TypedSearchAttributes, WorkflowIDReusePolicy
from temporalio.exceptions import CancelledError, ChildWorkflowError, WorkflowAlreadyStartedError

from agentrt.schemas import (
    SESSION_OWNER,
    SESSION_STATUS,
    SESSION_WORKFLOW,
    Budget,
    CapabilityWidened,
    DelegatedSessionEnded,
    Message,
    SessionDelegated,
    SessionInput,
    SessionResult,
    ToolCall,
    ToolInvocationCompleted,
    ToolInvocationFailed,
    ToolInvocationStarted,
    delegated_session_id,
    session_workflow_id,
)
from agentrt.workflows import _delegation as delegation
from agentrt.workflows._errors import TurnCancelled, error_text
from agentrt.workflows._session_core import SessionCore
from agentrt.workflows._tool_calls import preview

# A delegated session's workflow task timeout, as client-started sessions have (client/_starts.py).
DELEGATED_TASK_TIMEOUT = timedelta(seconds=4)


class DelegateSteps(SessionCore):
    """Starts, waits for and cancels the sessions this session delegated to."""

    # Delegated sessions still running, by session id (foreground and background).
    _delegated: dict[str, workflow.ChildWorkflowHandle]
    _background: dict[str, asyncio.Task[None]]  # the watchers of background ones, by session id
    _reserved: dict[str, Budget | None]  # the budget each running one was given, by session id

    # ---------------------------------------------------------------- deciding

    def _delegation_refusal(self, request: delegation.DelegateRequest) -> str | None:
        """Why this ``delegate`` call may not run (checked before any approval), or None."""
        refused = delegation.refusal(self._config)
        if refused is not None:
            return refused
        if not request.wait and self._config.ends_after_turn:
            return (
                f"session {self._config.session_id} ends after its turn: a background child's answer would "
                "find no session to arrive in; call delegate with wait true"
            )
        try:
            self._delegation_grants(request)
        except CapabilityWidened as err:
            return f"{type(err).__name__}: {err}"
        if len(self._delegated) >= delegation.MAX_RUNNING_DELEGATIONS:
            return f"{len(self._delegated)} delegated sessions run already, the most at once; wait for one to end"
        if self._state.delegations >= delegation.MAX_DELEGATIONS_PER_SESSION:
            return f"this session delegated {self._state.delegations} times, the most a session may"
        longest = session_workflow_id(delegated_session_id(self._config.session_id, self._state.delegations + 1, "0" * 8))
        if len(longest.encode()) > delegation.MAX_WORKFLOW_ID_BYTES:
            return (
                f"a delegated session's workflow id would be {len(longest.encode())} bytes, more than Temporal's "
                f"{delegation.MAX_WORKFLOW_ID_BYTES}: this session's id is too long to delegate from"
            )
        if self._config.budget is not None:
            _, exhausted = self._child_budget()
            if exhausted is not None:
                return f"no {exhausted.replace('_', ' ')} budget is left for a delegated session (running ones hold the rest)"
        return None

    def _child_budget(self) -> tuple:
        """What a new child may spend (``delegation.left_for_child``): the session's remaining budget less
        what running children hold."""
        assert self._config.budget is not None
        remaining = self._config.budget.remaining(self._spend())
        return delegation.left_for_child(remaining, [b for b in self._reserved.values() if b is not None])

    def _delegation_grants(self, request: delegation.DelegateRequest) -> tuple[list[str], list[str], dict]:
        """``delegation.child_grants`` for what this session holds now (its built-in tools and the
        running turn's MCP tools); raises ``CapabilityWidened``."""
        builtin = sorted(t.name for t in self._state.tools)
        mcp = sorted(name for name in self._tools if name not in builtin)
        return delegation.child_grants(self._config, builtin, mcp, request)

    def _delegation_running(self) -> bool:
        return bool(self._delegated)

    # ---------------------------------------------------------------- one call

    async def _delegate(self, turn_id: str, round_number: int, call: ToolCall, note: str | None = None) -> None:
        """Carry out an allowed ``delegate`` call: start the child session, then wait for its answer
        (``wait``) or answer with its handle. Raises ``TurnCancelled`` when the turn is cancelled
        meanwhile (a foreground child is cancelled and has ended by then)."""
        position = self._journal.take_position()
        self._emit(ToolInvocationStarted(turn_id=turn_id, call_id=call.id, tool=call.name, arguments=call.arguments))
        started = workflow.now()
        request = delegation.DelegateRequest.from_arguments(call.arguments)
        refused = self._delegation_refusal(request)  # the tools a turn offers may change between rounds
        if refused is not None:
            self._fail_call(turn_id, call, "denied", refused, position, started=started)
            return
        tools, servers, grants = self._delegation_grants(request)
        await self._before_call()
        self._state.delegations += 1
        number = self._state.delegations
        session_id = delegated_session_id(self._config.session_id, number, workflow.uuid4().hex[:8])
        budget = self._child_budget()[0] if self._config.budget is not None else None
        config = delegation.child_config(
            self._config, session_id=session_id, number=number, request=request, tools=tools, mcp_servers=servers,
            grants=grants, budget=budget,
        )
        workflow.set_current_details(f"turn `{turn_id}` · round {round_number} · delegating to session `{session_id}`")
        try:
            handle = await workflow.start_child_workflow(
                SESSION_WORKFLOW,
                SessionInput(config=config),
                id=session_workflow_id(session_id),
                result_type=SessionResult,
                task_timeout=DELEGATED_TASK_TIMEOUT,
                # An ended session is not restarted under its id (as client starts: client/_starts.py).
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                # A session that fails or is terminated leaves no child running unasked.
                parent_close_policy=workflow.ParentClosePolicy.REQUEST_CANCEL,
                static_summary=f"session {self._config.session_id} · delegation {number}"
                + (f" · {preview(request.title, 80)}" if request.title else ""),
                static_details=f"prompt: {preview(request.prompt, 300)}",
                search_attributes=TypedSearchAttributes(
                    [SearchAttributePair(SESSION_OWNER, self._config.owner), SearchAttributePair(SESSION_STATUS, "idle")]
                ),
            )
        except WorkflowAlreadyStartedError:
            text = f"delegate failed: a workflow with session id {session_id} already exists"
            self._fail_call(turn_id, call, "tool_error", text, position, started=started)
            return
        except (asyncio.CancelledError, ChildWorkflowError):
            if self._cancel_requested():
                raise TurnCancelled() from None  # cancelled before the child started
            raise
        self._delegated[session_id] = handle
        self._reserved[session_id] = budget  # held until the child ends and its spend is counted
        self._emit(SessionDelegated(
            turn_id=turn_id, call_id=call.id, child_session_id=session_id, number=number, wait=request.wait, tools=tools,
        ))
        if not request.wait:
            self._background[session_id] = asyncio.create_task(self._watch_background(handle, session_id, number))
            text = delegation.handle_text(session_id, number)
            self._delegate_result(turn_id, round_number, call, position, True, text, started, note)
            if self._stop_after_step():
                raise TurnCancelled()
            return
        workflow.set_current_details(f"turn `{turn_id}` · round {round_number} · waiting for delegated session `{session_id}`")
        end = await self._child_end(session_id, handle)
        self._delegation_ended(turn_id, session_id, number, end)
        if self._cancel_requested() and end.status == "cancelled":
            raise TurnCancelled()  # the call is answered "cancelled" with the turn (_cancelled_outcome)
        ok, text = delegation.result_text(session_id, end)
        self._delegate_result(turn_id, round_number, call, position, ok, text, started, note)
        if self._stop_after_step():
            raise TurnCancelled()

    async def _child_end(self, session_id: str, handle: workflow.ChildWorkflowHandle) -> delegation.ChildEnd:
        """Wait until the child has ended and say how. A cancellation of the waiting task (the
        turn's cancel, the workflow's) cancels the child once, and the wait goes on until it
        has ended (its workflow ends Canceled)."""
        asked = False
        while not handle.done():
            try:
                await workflow.wait_condition(handle.done)
            except asyncio.CancelledError:
                if not asked:
                    handle.cancel()
                    asked = True
        self._delegated.pop(session_id, None)
        try:
            return delegation.child_end(await handle, None, False)
        except ChildWorkflowError as err:
            return delegation.child_end(None, error_text(err), isinstance(err.cause, CancelledError))
        except asyncio.CancelledError:
            return delegation.child_end(None, "cancelled", True)

    async def _watch_background(self, handle: workflow.ChildWorkflowHandle, session_id: str, number: int) -> None:
        """Wait for a background child; then roll up its spend and, unless the session is ending,
        queue its answer as a message (a turn starts when the session idles). Nothing awaits
        between its end and the message, so a continue-as-new that follows carries both."""
        end = await self._child_end(session_id, handle)
        self._background.pop(session_id, None)
        self._delegation_ended(None, session_id, number, end)
        if not self._ending():
            self._inbox.add_message(self._config.owner, delegation.message_text(session_id, end))

    def _delegation_ended(self, turn_id: str | None, session_id: str, number: int, end: delegation.ChildEnd) -> None:
        """Add the child's spend to the session's (its usage; cost and tool calls where the session
        tracks spend, as its own are) and record ``DelegatedSessionEnded``."""
        spend = delegation.rolled_up(end.spend)
        self._reserved.pop(session_id, None)
        self._state.usage = self._state.usage + spend.usage
        if self._tracks_spend():
            self._state.cost_usd += spend.cost_usd
            self._state.tool_calls += spend.tool_calls
        self._emit(DelegatedSessionEnded(
            turn_id=turn_id, child_session_id=session_id, number=number, status=end.status, spend=spend, error=end.error,
        ))

    def _delegate_result(
        self, turn_id: str, round_number: int, call: ToolCall, position: int, ok: bool, text: str, started: object,
        note: str | None,
    ) -> None:
        """Stage the call's result message and record ``ToolInvocationCompleted`` (or ``Failed``)
        and the trajectory step."""
        if note:
            text = f"{note}\n{text}"
        shown = text if ok else f"error: {text}"
        self._stage_message(position, turn_id, Message(role="tool", tool_call_id=call.id, name=call.name, text=shown, is_error=not ok))
        if ok:
            self._emit(ToolInvocationCompleted(
                turn_id=turn_id, call_id=call.id, tool=call.name, preview=preview(text), size_bytes=len(shown.encode()),
                position=position,
            ))
        else:
            self._emit(ToolInvocationFailed(
                turn_id=turn_id, call_id=call.id, tool=call.name, reason="tool_error", error=text, position=position,
            ))
        self._record_step(
            turn_id, round_number, call.name, call.arguments, "ok" if ok else "error", preview(text), started, call_id=call.id,
        )

    # ---------------------------------------------------------------- the session's end

    async def _end_delegations(self) -> None:
        """Cancel every delegated session still running (the session is ending) and wait until each
        has ended and been recorded. Nothing to do (and no await) when none runs."""
        if not self._delegated and not self._background:
            return
        for handle in list(self._delegated.values()):
            if not handle.done():
                handle.cancel()

        def ended() -> bool:
            return all(h.done() for h in self._delegated.values()) and all(t.done() for t in self._background.values())

        while not ended():
            try:
                await workflow.wait_condition(ended)
            except asyncio.CancelledError:
                continue  # the workflow's cancel, after an archive: the children are being cancelled already
