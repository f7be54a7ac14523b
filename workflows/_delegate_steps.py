"""The ``delegate`` tool carried out by the session workflow: a child ``SessionWorkflow`` per call.

``Delegations`` is one of ``SessionWorkflow``'s steps, over its ``SessionRun``; workflow code only. A ``delegate`` call is
decided by the policy like any effectful call, but never runs as an activity: the workflow
starts the child session through ``ChildSessions`` (``_children``, as tasks and graphs do;
``_delegation.child_config`` says what it gets) and records ``SessionDelegated``.

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
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.exceptions import ChildWorkflowError, WorkflowAlreadyStartedError

from agentrt.schemas import (
    Budget,
    CapabilityWidened,
    DelegatedSessionEnded,
    Message,
    SessionDelegated,
    ToolCall,
    ToolInvocationCompleted,
    ToolInvocationFailed,
    ToolInvocationStarted,
    code_span,
    delegated_session_id,
    session_workflow_id,
)
from agentrt.workflows import _delegation as delegation
from agentrt.workflows._children import ChildEnd, ChildSessions
from agentrt.workflows._errors import TurnCancelled
from agentrt.workflows._session_run import SessionRun
from agentrt.workflows._tool_calls import preview

if TYPE_CHECKING:
    from agentrt.workflows._turn import Turn

class Delegations:
    """Starts, waits for and cancels the sessions this session delegated to."""

    def __init__(self, run: SessionRun) -> None:
        self.run = run
        # Starts the delegated sessions; ``running``: those still running, by session id (foreground and
        # background). A session that fails or is terminated leaves no child running unasked.
        self.children = ChildSessions(run.config.owner, parent_close=workflow.ParentClosePolicy.REQUEST_CANCEL, console=False)
        self._background: dict[str, asyncio.Task[None]] = {}  # the watchers of background ones, by session id
        self._reserved: dict[str, Budget | None] = {}  # the budget each running one was given, by session id

    # ---------------------------------------------------------------- deciding

    def refusal(self, request: delegation.DelegateRequest) -> str | None:
        """Why this ``delegate`` call may not run (checked before any approval), or None."""
        refused = delegation.refusal(self.run.config)
        if refused is not None:
            return refused
        if not request.wait and self.run.config.ends_after_turn:
            return (
                f"session {self.run.config.session_id} ends after its turn: a background child's answer would "
                "find no session to arrive in; call delegate with wait true"
            )
        try:
            self._grants(request)
        except CapabilityWidened as err:
            return f"{type(err).__name__}: {err}"
        if len(self.children.running) >= delegation.MAX_RUNNING_DELEGATIONS:
            return f"{len(self.children.running)} delegated sessions run already, the most at once; wait for one to end"
        if self.run.state.delegations >= delegation.MAX_DELEGATIONS_PER_SESSION:
            return f"this session delegated {self.run.state.delegations} times, the most a session may"
        longest = session_workflow_id(delegated_session_id(self.run.config.session_id, self.run.state.delegations + 1, "0" * 8))
        if len(longest.encode()) > delegation.MAX_WORKFLOW_ID_BYTES:
            return (
                f"a delegated session's workflow id would be {len(longest.encode())} bytes, more than Temporal's "
                f"{delegation.MAX_WORKFLOW_ID_BYTES}: this session's id is too long to delegate from"
            )
        if self.run.config.budget is not None:
            _, exhausted = self._child_budget()
            if exhausted is not None:
                return f"no {exhausted.replace('_', ' ')} budget is left for a delegated session (running ones hold the rest)"
        return None

    def _child_budget(self) -> tuple:
        """What a new child may spend (``delegation.left_for_child``): the session's remaining budget less
        what running children hold."""
        assert self.run.config.budget is not None
        remaining = self.run.config.budget.remaining(self.run.spend())
        return delegation.left_for_child(remaining, [b for b in self._reserved.values() if b is not None])

    def _grants(self, request: delegation.DelegateRequest) -> tuple[list[str], list[str], dict]:
        """``delegation.child_grants`` for what this session holds now (its built-in tools and the
        running turn's MCP tools); raises ``CapabilityWidened``."""
        builtin = sorted(t.name for t in self.run.state.tools)
        mcp = sorted(name for name in self.run.tools if name not in builtin)
        return delegation.child_grants(self.run.config, builtin, mcp, request)

    def running(self) -> bool:
        return bool(self.children.running)

    # ---------------------------------------------------------------- one call

    async def delegate(
        self, turn: Turn, round_number: int, call: ToolCall, note: str | None = None, position: int | None = None
    ) -> None:
        """Carry out an allowed ``delegate`` call, its result at ``position`` (None: the next one):
        start the child session, then wait for its answer (``wait``) or answer with its handle.
        Raises ``TurnCancelled`` when the turn is cancelled meanwhile (a foreground child is
        cancelled and has ended by then)."""
        turn_id = turn.id
        if position is None:
            position = self.run.journal.take_position()
        self.run.emit(ToolInvocationStarted(turn_id=turn_id, call_id=call.id, tool=call.name, arguments=call.arguments))
        started = workflow.now()
        request = delegation.DelegateRequest.from_arguments(call.arguments)
        refused = self.refusal(request)  # the tools a turn offers may change between rounds
        if refused is not None:
            turn.fail_call(call, "denied", refused, position, started=started)
            return
        tools, servers, grants = self._grants(request)
        await self.run.before_call()
        self.run.state.delegations += 1
        number = self.run.state.delegations
        session_id = delegated_session_id(self.run.config.session_id, number, workflow.uuid4().hex[:8])
        budget = self._child_budget()[0] if self.run.config.budget is not None else None
        config = delegation.child_config(
            self.run.config, session_id=session_id, number=number, request=request, tools=tools, mcp_servers=servers,
            grants=grants, budget=budget,
        )
        workflow.set_current_details(f"turn `{turn_id}` · round {round_number} · delegating to session `{session_id}`")
        try:
            handle = await self.children.start(
                config,
                summary=f"session {self.run.config.session_id} · delegation {number}"
                + (f" · {code_span(request.title, 80)}" if request.title else ""),
                details=f"prompt: {code_span(request.prompt, 300)}",
            )
        except WorkflowAlreadyStartedError:
            text = f"delegate failed: a workflow with session id {session_id} already exists"
            turn.fail_call(call, "tool_error", text, position, started=started)
            return
        except (asyncio.CancelledError, ChildWorkflowError):
            if self.run.cancel_requested():
                raise TurnCancelled() from None  # cancelled before the child started
            raise
        self._reserved[session_id] = budget  # held until the child ends and its spend is counted
        self.run.emit(SessionDelegated(
            turn_id=turn_id, call_id=call.id, child_session_id=session_id, number=number, wait=request.wait, tools=tools,
        ))
        if not request.wait:
            self._background[session_id] = asyncio.create_task(self._watch_background(handle, session_id, number))
            text = delegation.handle_text(session_id, number)
            self._result(turn, round_number, call, position, True, text, started, note)
            if self.run.stop_after_step():
                raise TurnCancelled()
            return
        workflow.set_current_details(f"turn `{turn_id}` · round {round_number} · waiting for delegated session `{session_id}`")
        end = await self.children.wait(session_id, handle, shield=True)
        self._ended(turn_id, session_id, number, end)
        if self.run.cancel_requested() and end.status == "cancelled":
            raise TurnCancelled()  # the call is answered "cancelled" with the turn (_cancelled_outcome)
        ok, text = delegation.result_text(session_id, end)
        self._result(turn, round_number, call, position, ok, text, started, note)
        if self.run.stop_after_step():
            raise TurnCancelled()

    async def _watch_background(self, handle: workflow.ChildWorkflowHandle, session_id: str, number: int) -> None:
        """Wait for a background child; then roll up its spend and, unless the session is ending,
        queue its answer as a message (a turn starts when the session idles). Nothing awaits
        between its end and the message, so a continue-as-new that follows carries both."""
        end = await self.children.wait(session_id, handle, shield=True)
        self._background.pop(session_id, None)
        self._ended(None, session_id, number, end)
        if not self.run.ending():
            self.run.inbox.add_message(self.run.config.owner, delegation.message_text(session_id, end))

    def _ended(self, turn_id: str | None, session_id: str, number: int, end: ChildEnd) -> None:
        """Add the child's spend to the session's (its usage; cost and tool calls where the session
        tracks spend, as its own are) and record ``DelegatedSessionEnded``."""
        spend = delegation.rolled_up(end.spend)
        self._reserved.pop(session_id, None)
        self.run.state.usage = self.run.state.usage + spend.usage
        if self.run.tracks_spend():
            self.run.state.cost_usd += spend.cost_usd
            self.run.state.tool_calls += spend.tool_calls
        self.run.emit(DelegatedSessionEnded(
            turn_id=turn_id, child_session_id=session_id, number=number, status=end.status, spend=spend, error=end.error,
        ))

    def _result(
        self, turn: Turn, round_number: int, call: ToolCall, position: int, ok: bool, text: str, started: object,
        note: str | None,
    ) -> None:
        """Stage the call's result message and record ``ToolInvocationCompleted`` (or ``Failed``)
        and the trajectory step."""
        turn_id = turn.id
        if note:
            text = f"{note}\n{text}"
        shown = text if ok else f"error: {text}"
        self.run.stage_message(position, turn_id, Message(role="tool", tool_call_id=call.id, name=call.name, text=shown, is_error=not ok))
        if ok:
            self.run.emit(ToolInvocationCompleted(
                turn_id=turn_id, call_id=call.id, tool=call.name, preview=preview(text), size_bytes=len(shown.encode()),
                position=position,
            ))
        else:
            self.run.emit(ToolInvocationFailed(
                turn_id=turn_id, call_id=call.id, tool=call.name, reason="tool_error", error=text, position=position,
            ))
        turn.record_step(
            round_number, call.name, call.arguments, "ok" if ok else "error", preview(text), started, call_id=call.id,
        )

    # ---------------------------------------------------------------- the session's end

    async def end_all(self) -> None:
        """Cancel every delegated session still running (the session is ending) and wait until each
        has ended and been recorded. Nothing to do (and no await) when none runs."""
        if not self.children.running and not self._background:
            return
        for handle in list(self.children.running.values()):
            if not handle.done():
                handle.cancel()

        def ended() -> bool:
            return all(h.done() for h in self.children.running.values()) and all(t.done() for t in self._background.values())

        while not ended():
            try:
                await workflow.wait_condition(ended)
            except asyncio.CancelledError:
                continue  # the workflow's cancel, after an archive: the children are being cancelled already
