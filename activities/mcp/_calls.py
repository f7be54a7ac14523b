"""One run of a ``tools/call`` on a live connection: the request, the 2026-07-28 rounds of
``InputRequiredResult`` it answers, the stop when the server asks beyond the answers, and the
SDK's errors mapped to agentrt's. How questions are answered is ``_elicitation``'s concern."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
from mcp import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    HEADER_MISMATCH,
    CallToolResult,
    CreateMessageRequest,
    ElicitRequest,
    InputRequiredResult,
    InputResponse,
    ListRootsRequest,
    ListRootsResult,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from agentrt.activities.mcp._diagnostics import describe, first_line
from agentrt.activities.mcp._elicitation import CallRun, ResumeState, elicit_result, elicitation_request
from agentrt.activities.mcp._listing import list_tools
from agentrt.schemas import ElicitationAnswer, ElicitationRequest, McpServerUnavailable, McpToolError

if TYPE_CHECKING:
    from mcp.shared.dispatcher import ProgressFnT

    from agentrt.activities.mcp._connections import Connection, Server

# Rounds of 2026-07-28 InputRequiredResult answered in one run of a call.
MAX_INPUT_ROUNDS = 10
# How long a call that broke waits for its connection's diagnostic (exit status, stderr).
BROKEN_DIAGNOSTIC_WAIT_SECONDS = 2.0


class _Broken(Exception):
    """The connection broke during a call (mapped to ``McpServerUnavailable`` by ``run_call``)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


async def run_call(
    srv: Server,
    conn: Connection,
    tool: str,
    arguments: dict[str, Any],
    answers: Sequence[ElicitationAnswer],
    request_state: str | None,
    on_progress: Callable[[float, float | None, str | None], None] | None,
) -> CallToolResult | ElicitationRequest:
    """One run of a call of ``tool`` on ``conn``: its result, or the question it stopped at (the
    request cancelled at the server). ``answers``, ``request_state`` and ``on_progress`` are
    ``McpManager.call_tool``'s.

    Raises ``McpServerUnavailable`` (the connection broke, ``in_flight``: the server may have
    done the call's work; with the server's exit status and stderr when they come within
    ``BROKEN_DIAGNOSTIC_WAIT_SECONDS``), ``McpToolError`` (a
    JSON-RPC error, an invalid result, more than ``MAX_INPUT_ROUNDS`` rounds, a request for
    sampling). Cancelling the awaiting task cancels the request at the server.
    """
    call = CallRun(answers)
    conn.calls.add(call)
    request = asyncio.create_task(_request(srv, conn, call, tool, arguments, request_state, on_progress))
    asked = asyncio.create_task(call.asked.wait())
    try:
        await asyncio.wait({request, asked}, return_when=asyncio.FIRST_COMPLETED)
        if request.done():
            return _outcome(srv, conn, tool, request)
        # The server asked (elicitation/create) beyond the answers: stop the call at the server.
        await _cancel(request)
        assert call.question is not None
        return call.question
    except _Broken as broken:
        diagnostic = await _broken_diagnostic(srv, broken.reason)
        raise McpServerUnavailable(srv.config.name, diagnostic, in_flight=True) from broken.__cause__
    finally:
        conn.calls.discard(call)
        call.stopped.set()
        asked.cancel()
        if not request.done():
            await _cancel(request)


async def _request(
    srv: Server,
    conn: Connection,
    call: CallRun,
    tool: str,
    arguments: dict[str, Any],
    request_state: str | None,
    on_progress: Callable[[float, float | None, str | None], None] | None,
) -> CallToolResult | ElicitationRequest:
    """Send tools/call, answering a 2026-07-28 server's ``InputRequiredResult`` rounds from the
    call's answers; an ``ElicitationRequest`` when they run out."""
    assert conn.client is not None
    session = conn.client.session
    modern = conn.client.protocol_version in MODERN_PROTOCOL_VERSIONS
    progress: ProgressFnT | None = None
    if on_progress is not None:
        report = on_progress

        async def forward(progress: float, total: float | None, message: str | None) -> None:  # ProgressFnT's names
            report(progress, total, message)

        progress = forward

    responses: dict[str, InputResponse] | None = None
    state: str | None = None
    consumed = 0
    resumed = ResumeState.decode(request_state) if modern and request_state else None
    if resumed is not None and len(call.answers) >= resumed.base + len(resumed.keys):
        responses = {key: elicit_result(call.answers[resumed.base + i]) for i, key in enumerate(resumed.keys)}
        state = resumed.state
        consumed = resumed.base + len(resumed.keys)
    else:
        resumed = None
    rounds = 0
    relisted = False
    while True:
        try:
            result = await session.call_tool(
                tool, arguments, progress_callback=progress, input_responses=responses, request_state=state,
                allow_input_required=True,
            )
        except MCPError as err:
            if err.code == HEADER_MISMATCH and modern and not relisted:
                # The server's listing of the tool changed since this connection listed it.
                relisted = True
                await list_tools(srv, conn)
                continue
            if resumed is not None and err.code != CONNECTION_CLOSED:
                # The server no longer takes its state (it restarted, or the state expired):
                # run the call from the start, answering each question again.
                resumed, responses, state, consumed = None, None, None, 0
                continue
            raise
        resumed = None
        if not isinstance(result, InputRequiredResult):
            return result
        rounds += 1
        if rounds > MAX_INPUT_ROUNDS:
            raise McpToolError(srv.config.name, tool, None, f"the server asked for input more than {MAX_INPUT_ROUNDS} times")
        requests = result.input_requests or {}
        state = result.request_state
        if not requests:  # only state: retry after a short pause, as the SDK's own driver does
            await asyncio.sleep(min(0.05 * 2 ** (rounds - 1), 0.25))
            responses = None
            continue
        elicit_keys = [key for key, request in requests.items() if isinstance(request, ElicitRequest)]
        responses = {}
        for key, request in requests.items():
            if isinstance(request, ElicitRequest):
                index = consumed + elicit_keys.index(key)
                if index >= len(call.answers):
                    token = ResumeState(state, elicit_keys, consumed).encode()
                    return elicitation_request(request.params, key=key, request_state=token)
                responses[key] = elicit_result(call.answers[index])
            elif isinstance(request, ListRootsRequest):
                responses[key] = ListRootsResult(roots=[])
            elif isinstance(request, CreateMessageRequest):
                raise McpToolError(
                    srv.config.name, tool, None, "the server asked the client to sample a model, which agentrt does not offer"
                )
        consumed += len(elicit_keys)


def _outcome(srv: Server, conn: Connection, tool: str, request: asyncio.Task[Any]) -> Any:
    """The finished ``request``'s result, with SDK errors mapped to agentrt's."""
    name = srv.config.name
    try:
        return request.result()
    except MCPError as err:
        if err.code == CONNECTION_CLOSED:
            conn.broke("the connection closed during a call")
            raise _Broken("the connection closed during the call") from err
        raise McpToolError(name, tool, err.code, err.error.message) from err
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream, OSError) as err:
        conn.broke(f"the connection failed during a call: {describe(err)}")
        raise _Broken(f"the connection failed during the call: {describe(err)}") from err
    except (ValidationError, RuntimeError) as err:
        # An answer the protocol does not allow (a result of the wrong shape, structured content
        # that does not match the tool's output schema).
        raise McpToolError(name, tool, None, f"invalid result: {first_line(str(err))}") from err


async def _broken_diagnostic(srv: Server, reason: str) -> str:
    """``reason``, with the server's exit status and stderr once its connection has wound down
    (waiting a little for it)."""
    owner = srv.owner
    if owner is not None and not owner.done():
        await asyncio.wait({owner}, timeout=BROKEN_DIAGNOSTIC_WAIT_SECONDS)
    if owner is not None and owner.done() and srv.diagnostic:
        return f"{reason} ({srv.diagnostic})"
    return reason


async def _cancel(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait for it to finish (its exception, if any, dropped)."""
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()
