"""MCP tools in a turn: the listing a turn offers the model, and server requests as durable waits.

Part of ``SessionWorkflow`` (a base class of it); workflow code only. A turn of a session with
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
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows import context
from agentrt.workflows._errors import TurnCancelled, error_text
from agentrt.workflows._session_core import SessionCore
from agentrt.workflows._tool_calls import preview

# Questions one call may ask before it is failed: a server that keeps asking is stopped.
MAX_ELICITATIONS_PER_CALL = 10


class McpSteps(SessionCore):
    """The MCP listing of a turn, the elicitation waits of its calls, and skill events."""

    def _builtin_tools(self) -> dict[str, ToolSpec]:
        return {t.name: t for t in self._state.tools}

    async def _list_mcp_tools(self, turn_id: str) -> None:
        """List the session's MCP servers' tools for this turn (one activity); a server that
        cannot be listed leaves its tools out of this turn, and ``McpToolsListed`` says why.
        Built-in tools keep their names: a server's tool of the same name is not offered."""
        builtin = self._builtin_tools()
        servers = list(self._config.mcp_servers)
        await self._before_call()
        workflow.set_current_details(f"turn `{turn_id}` · listing the tools of MCP servers {', '.join(servers)}")
        writes = self._writes_for_call()
        try:
            listed = await self._execute(
                options.MCP_LIST,
                McpListToolsInput(session_id=self._config.session_id, turn_id=turn_id, servers=servers, store_writes=writes),
                local=False,
                result_type=McpListToolsResult,
                summary=f"list MCP tools · {', '.join(servers)}",
                heartbeat_timeout=max(self._config.heartbeat_timeout_seconds, 10.0),
                task_queue=self._config.tool_task_queue,
            )
            self._call_wrote(writes)
        except ActivityError as err:
            if isinstance(err.cause, CancelledError) or self._stop_after_step():
                raise TurnCancelled() from err
            listed = McpListToolsResult(failures={name: f"listing failed: {error_text(err)}" for name in servers})
        offered = [spec for spec in listed.tools if spec.name not in builtin]
        self._tools = {**builtin, **{spec.name: spec for spec in offered}}
        # (Reserved server names keep MCP tools from shadowing built-ins; a call goes to the built-in.)
        self._tool_listing = listed.digest if offered else None
        self._mcp_failures = dict(listed.failures)
        self._mcp_tokens = context.estimate_tokens(context.specs_bytes(offered)) if offered else 0
        self._emit(McpToolsListed(
            turn_id=turn_id, servers=servers, tools=len(offered), digest=self._tool_listing, failures=listed.failures,
        ))
        if self._stop_after_step():
            raise TurnCancelled()

    def _end_mcp_turn(self) -> None:
        """A turn's MCP tools are its own: the next turn lists again."""
        if self._config.mcp_servers:
            self._tools = self._builtin_tools()
            self._tool_listing = None
            self._mcp_failures = {}
            self._mcp_tokens = 0

    def _unavailable_text(self, call: ToolCall) -> str | None:
        """For a call to a tool of a server this turn could not list: what the model reads instead
        of "unknown tool" (the server is down, not the tool missing). None otherwise."""
        server = call.name.partition(".")[0]
        why = self._mcp_failures.get(server)
        if why is None or call.name in self._tools:
            return None
        return f"{call.name} is not available this turn: MCP server {server!r} could not be listed ({preview(why, 300)})"

    async def _elicit(self, turn_id: str, round_number: int, call: ToolCall, asked: ElicitationRequest) -> ElicitationAnswer:
        """Ask the owner what the server asked (``PermissionRequested``, kind ``elicitation``) and
        wait durably for ``answer_elicitation``; the session's approval timeout answers
        ``cancel``. Raises ``TurnCancelled`` when the turn is cancelled meanwhile."""
        spec = self._tools.get(call.name)
        request = self._approvals.request(
            turn_id, call, spec.risk if spec is not None else "effectful", f"{call.name} asks: {preview(asked.message, 300)}",
            kind="elicitation", elicitation=asked,
        )
        self._emit(PermissionRequested(turn_id=turn_id, request=request))
        self._set_status("awaiting_approval")
        example = json.dumps({"request_id": request.request_id, "principal": self._config.owner, "action": "accept", "content": {}})
        workflow.set_current_details(
            f"**{call.name} asks** `{request.request_id}`: {preview(asked.message, 300)}\n\n"
            f"Answer with update `answer_elicitation` `{example}` (content matching the schema), "
            f"or `agentrt session answer {self._config.session_id} {request.request_id} '{{...}}'`"
        )
        await self._flush()
        started = workflow.now()
        self._steps_in_flight = [(round_number, "elicitation", {"tool": call.name, "message": asked.message}, started, call.id)]
        timeout = self._config.approval_timeout_seconds
        try:
            await workflow.wait_condition(
                lambda: self._cancel_requested() or self._approvals.decision(request.request_id) is not None,
                timeout=timedelta(seconds=timeout) if timeout is not None else None,
                timeout_summary="elicitation timeout" if timeout is not None else None,
            )
        except asyncio.TimeoutError:
            assert timeout is not None
            answer = ElicitationAnswer(
                request_id=request.request_id, principal="system", action="cancel", reason=f"no answer within {timeout:g} s"
            )
            self._state.approval_decisions[request.request_id] = answer
            self._emit(ElicitationAnswered(
                turn_id=turn_id, request_id=request.request_id, call_id=call.id, principal="system", action="cancel",
            ))
        if self._cancel_requested():
            raise TurnCancelled()
        self._steps_in_flight = []
        decision = self._approvals.close(request.request_id)
        assert isinstance(decision, ElicitationAnswer)
        self._record_step(
            turn_id, round_number, "elicitation", {"tool": call.name, "message": asked.message},
            decision.action, f"{request.request_id}: {decision.action} by {decision.principal}", started, call_id=call.id,
        )
        self._set_status("running")
        return decision

    def _skill_result(self, turn_id: str, call: ToolCall, result: ToolExecuteResult) -> None:
        """``SkillActivated`` / ``SkillDeactivated`` for a successful skill tool call."""
        if not result.ok or call.name not in (SKILL_ACTIVATE, SKILL_DEACTIVATE):
            return
        name = str((call.arguments or {}).get("name", ""))
        if call.name == SKILL_DEACTIVATE:
            self._emit(SkillDeactivated(turn_id=turn_id, name=name, call_id=call.id))
            return
        source = next((s.source for s in self._state.skills if s.name == name), "")
        self._emit(SkillActivated(turn_id=turn_id, name=name, source=source, call_id=call.id, position=result.position))
