"""MCP tools in a turn: the listing a turn offers the model, and server requests as durable waits.

``Mcp`` is one of ``SessionWorkflow``'s steps, over its ``SessionRun``; workflow code only. A turn of a session with
``mcp_servers`` lists their tools once, through ``mcp.list_tools``, before its first model
call: the specs are that activity's result, so a replay on a cold worker reads them from
history and never from a process cache. When a server asks the user something in the middle
of a call, the call returns ``input_required``; the session opens a ``PermissionRequested`` of
kind ``elicitation``, waits durably for ``answer_elicitation`` (a worker may die meanwhile)
and runs the call again with the answer. Skills, the other tool source, add only the events
of their tools' results here (``SkillActivated``, ``SkillDeactivated``).
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import TYPE_CHECKING

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

from agentrt.schemas import (
    SKILL_ACTIVATE,
    SKILL_DEACTIVATE,
    ElicitationAnswer,
    ElicitationAnswered,
    ElicitationRequest,
    McpListToolsInput,
    McpListToolsResult,
    McpToolsListed,
    PermissionRequested,
    SkillActivated,
    SkillDeactivated,
    ToolCall,
    ToolExecuteResult,
    ToolSpec,
    code_span,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows import context
from agentrt.workflows._errors import TurnCancelled, error_text
from agentrt.workflows._session_run import SessionRun
from agentrt.workflows._tool_calls import preview

if TYPE_CHECKING:
    from agentrt.workflows._turn import Turn

# Questions one call may ask before it is failed: a server that keeps asking is stopped.
MAX_ELICITATIONS_PER_CALL = 10


class Mcp:
    """The MCP listing of a turn, the elicitation waits of its calls, and skill events."""

    def __init__(self, run: SessionRun) -> None:
        self.run = run

    def builtin_tools(self) -> dict[str, ToolSpec]:
        return {t.name: t for t in self.run.state.tools}

    async def list_tools(self, turn: Turn) -> None:
        """List the session's MCP servers' tools for this turn (one activity); a server that
        cannot be listed leaves its tools out of this turn, and ``McpToolsListed`` says why.
        Built-in tools keep their names: a server's tool of the same name is not offered."""
        run, turn_id = self.run, turn.id
        builtin = self.builtin_tools()
        servers = list(run.config.mcp_servers)
        await run.before_call()
        workflow.set_current_details(f"turn `{turn_id}` · listing the tools of MCP servers {', '.join(servers)}")
        writes = run.writes_for_call()
        try:
            listed = await run.execute(
                options.MCP_LIST,
                McpListToolsInput(session_id=run.config.session_id, turn_id=turn_id, servers=servers, store_writes=writes),
                local=False,
                result_type=McpListToolsResult,
                summary=f"list MCP tools · {', '.join(servers)}",
                heartbeat_timeout=max(run.config.heartbeat_timeout_seconds, 10.0),
                task_queue=run.config.tool_task_queue,
            )
            run.call_wrote(writes)
        except ActivityError as err:
            if isinstance(err.cause, CancelledError) or run.stop_after_step():
                raise TurnCancelled() from err
            listed = McpListToolsResult(failures={name: f"listing failed: {error_text(err)}" for name in servers})
        offered = [spec for spec in listed.tools if spec.name not in builtin]
        run.tools = {**builtin, **{spec.name: spec for spec in offered}}
        # (Reserved server names keep MCP tools from shadowing built-ins; a call goes to the built-in.)
        turn.tool_listing = listed.digest if offered else None
        turn.mcp_failures = dict(listed.failures)
        turn.mcp_tokens = context.estimate_tokens(context.specs_bytes(offered)) if offered else 0
        run.emit(McpToolsListed(
            turn_id=turn_id, servers=servers, tools=len(offered), digest=turn.tool_listing, failures=listed.failures,
        ))
        if run.stop_after_step():
            raise TurnCancelled()

    def end_turn(self) -> None:
        """A turn's MCP tools are its own: the next turn lists again."""
        if self.run.config.mcp_servers:
            self.run.tools = self.builtin_tools()

    def unavailable_text(self, turn: Turn, call: ToolCall) -> str | None:
        """For a call to a tool of a server this turn could not list: what the model reads instead
        of "unknown tool" (the server is down, not the tool missing). None otherwise."""
        server = call.name.partition(".")[0]
        why = turn.mcp_failures.get(server)
        if why is None or call.name in self.run.tools:
            return None
        return f"{call.name} is not available this turn: MCP server {server!r} could not be listed ({preview(why, 300)})"

    async def elicit(self, turn: Turn, round_number: int, call: ToolCall, asked: ElicitationRequest) -> ElicitationAnswer:
        """Ask the owner what the server asked (``PermissionRequested``, kind ``elicitation``) and
        wait durably for ``answer_elicitation``; the session's approval timeout answers
        ``cancel``. Raises ``TurnCancelled`` when the turn is cancelled meanwhile."""
        run, turn_id = self.run, turn.id
        spec = run.tools.get(call.name)
        request = run.approvals.request(
            turn_id, call, spec.risk if spec is not None else "effectful", f"{call.name} asks: {preview(asked.message, 300)}",
            kind="elicitation", elicitation=asked,
        )
        run.emit(PermissionRequested(turn_id=turn_id, request=request))
        run.set_status("awaiting_approval")
        example = json.dumps({"request_id": request.request_id, "principal": run.config.owner, "action": "accept", "content": {}})
        workflow.set_current_details(
            f"{code_span(call.name, 80)} **asks** {code_span(request.request_id, 80)}: {code_span(asked.message, 300)}\n\n"
            f"Answer with update `answer_elicitation` `{example}` (content matching the schema), "
            f"or `agentrt session answer {run.config.session_id} {request.request_id} '{{...}}'`"
        )
        await run.flush()
        started = workflow.now()
        turn.steps_in_flight = [(round_number, "elicitation", {"tool": call.name, "message": asked.message}, started, call.id)]
        timeout = run.config.approval_timeout_seconds
        try:
            await workflow.wait_condition(
                lambda: run.cancel_requested() or run.approvals.decision(request.request_id) is not None,
                timeout=timedelta(seconds=timeout) if timeout is not None else None,
                timeout_summary="elicitation timeout" if timeout is not None else None,
            )
        except asyncio.TimeoutError:
            assert timeout is not None
            answer = ElicitationAnswer(
                request_id=request.request_id, principal="system", action="cancel", reason=f"no answer within {timeout:g} s"
            )
            run.state.approval_decisions[request.request_id] = answer
            run.emit(ElicitationAnswered(
                turn_id=turn_id, request_id=request.request_id, call_id=call.id, principal="system", action="cancel",
            ))
        if run.cancel_requested():
            raise TurnCancelled()
        turn.steps_in_flight = []
        decision = run.approvals.close(request.request_id)
        assert isinstance(decision, ElicitationAnswer)
        turn.record_step(
            round_number, "elicitation", {"tool": call.name, "message": asked.message},
            decision.action, f"{request.request_id}: {decision.action} by {decision.principal}", started, call_id=call.id,
        )
        run.set_status("running")
        return decision

    def skill_result(self, turn_id: str, call: ToolCall, result: ToolExecuteResult) -> None:
        """``SkillActivated`` / ``SkillDeactivated`` for a successful skill tool call."""
        if not result.ok or call.name not in (SKILL_ACTIVATE, SKILL_DEACTIVATE):
            return
        name = str((call.arguments or {}).get("name", ""))
        if call.name == SKILL_DEACTIVATE:
            self.run.emit(SkillDeactivated(turn_id=turn_id, name=name, call_id=call.id))
            return
        source = next((s.source for s in self.run.state.skills if s.name == name), "")
        self.run.emit(SkillActivated(turn_id=turn_id, name=name, source=source, call_id=call.id, position=result.position))
