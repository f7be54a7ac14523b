"""Activities ``mcp.list_tools`` and ``mcp.call_tool``: MCP tools through the worker's ``McpManager``.

A session lists its servers' tools at most once per turn (``mcp.list_tools``; the manager
caches each server's listing for a while, so many sessions cost the server one listing); the
specs are the activity's result, so the list a turn used is in that turn's history, and the
store keeps them by digest for the turn's model calls. Calls (``mcp.call_tool``) follow the
protocol of ``tool.execute``: ``read_only`` and ``idempotent`` tools run on every attempt,
``effectful`` ones at most once through the effect ledger. A call the server interrupts to
ask the user something returns ``input_required`` and stores nothing; its claim on the
ledger is released, so the call runs again, with the answer, under the same key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel
from temporalio import activity

from agentrt.activities import _attempts
from agentrt.activities._telemetry import tool_call
from agentrt.activities._tools import finish_call, ledger_outcome, outcome_unknown
from agentrt.activities.providers import redact
from agentrt.activities.tools import checked_workspace, redact_secrets
from agentrt.schemas import (
    MCP_CALL_TOOL,
    MCP_LIST_TOOLS,
    McpCallInput,
    McpCallResult,
    McpListToolsInput,
    McpListToolsResult,
    McpServerUnavailable,
    ToolError,
    ToolExecuteResult,
    ToolSpec,
)
from agentrt.store import text_column

if TYPE_CHECKING:
    from agentrt.activities.mcp import McpManager
    from agentrt.store import Store

# Where a call's images and binary resources are saved, under the session's workspace.
MCP_FILES_DIR = ".agentrt/mcp-files"
# The largest question (message and schema, JSON) a server may ask the user: it is kept in
# history and shown at a terminal. A bigger one fails the call.
MAX_QUESTION_BYTES = 64 * 1024

_M = TypeVar("_M", bound=BaseModel)


class McpActivities:
    """Bound to the worker's ``McpManager`` and store. ``secrets``: values redacted from every
    result besides the manager's own (the worker's provider keys)."""

    def __init__(self, manager: "McpManager", store: "Store", secrets: Callable[[], list[str]] = list) -> None:
        self._manager = manager
        self._store = store
        self._secrets = secrets

    def _all_secrets(self) -> list[str]:
        return [*self._secrets(), *self._manager.secrets()]

    @activity.defn(name=MCP_LIST_TOOLS)
    async def list_tools(self, input: McpListToolsInput) -> McpListToolsResult:
        """The specs of ``input.servers``' tools (``<server>.<tool>``), stored under their digest.

        A server that cannot be listed (not configured on this worker, failed to start, timed
        out) is in ``failures`` with why; the others' tools are listed all the same. Raises only
        when the store cannot be written (retried by Temporal).
        """
        async with _attempts.heartbeating():
            if input.store_writes is not None:
                await asyncio.to_thread(self._store.append, input.store_writes)
            servers = list(dict.fromkeys(input.servers))
            listings = await asyncio.gather(*(self._listing(name) for name in servers))
        specs: list[ToolSpec] = []
        failures: dict[str, str] = {}
        secrets = self._all_secrets()
        for name, (found, failure) in zip(servers, listings):
            # A server may spell its ${VAR} secrets into a description or schema: the model never reads them.
            specs += [spec for spec in (_redacted(s, secrets) for s in found) if spec is not None]
            if failure is not None:
                failures[name] = redact(redact_secrets(failure), secrets)
        digest = await asyncio.to_thread(self._store.put_tool_listing, specs) if specs else None
        return McpListToolsResult(tools=specs, digest=digest, failures=failures)

    async def _listing(self, server: str) -> tuple[list[ToolSpec], str | None]:
        try:  # McpServerUnavailable also for a server this worker has no [mcp.servers.NAME] of
            listing = await self._manager.list_tools(server)
        except ToolError as err:
            return [], str(err)
        return listing.specs, None

    @activity.defn(name=MCP_CALL_TOOL)
    async def call_tool(self, input: McpCallInput) -> McpCallResult:
        """Run one MCP call and store its result at ``result_position``.

        The server's ``isError`` result, an unreachable or crashed server
        (``McpServerUnavailable``), a protocol error (``McpToolError``) and a timeout are
        results with ``ok=False`` the model sees. ``input_required``: the server asked the user
        something ``input.answers`` holds no answer for; nothing is stored. Raises
        ``ApplicationError(type="EffectOutcomeUnknown", non_retryable=True)`` for an effectful
        call an earlier attempt claimed and never recorded, and for one whose server died with
        the call in flight (its claim left open: the session asks a person to reconcile it). Traced as every tool call is
        (``tool_call``: an ``execute_tool <server>.<tool>`` span).
        """
        async with _attempts.heartbeating():
            with tool_call(input, activity.info().attempt, local=False) as call:
                if input.store_writes is not None:
                    await asyncio.to_thread(self._store.append, input.store_writes)
                result = await (self._call(input) if input.risk != "effectful" else self._call_at_most_once(input))
                if result.input_required is None:
                    call.result(result)
                return result

    async def _call_at_most_once(self, input: McpCallInput) -> McpCallResult:
        claimed, record = await asyncio.to_thread(
            self._store.claim_effect, input.idempotency_key, input.session_id, input.call.name
        )
        known = ledger_outcome(input, claimed, record)
        if known is not None:
            return await self._finish(input, *known)
        return await self._call(input, record_effect=True)

    async def _call(self, input: McpCallInput, *, record_effect: bool = False) -> McpCallResult:
        server, _, tool = input.call.name.partition(".")
        if input.call.arguments is None:
            reason = input.call.arguments_error or "arguments are not a JSON object"
            text = f"error: invalid arguments for {input.call.name}: arguments are not valid JSON: {reason}"
            return await self._recorded(input, False, text, "ToolArgumentsError", record_effect)
        info = activity.info()

        def progress(done: float, total: float | None, message: str | None) -> None:
            if not info.is_local:
                activity.heartbeat(_attempts.WORKER_PROCESS, {"progress": done, "total": total, "message": message})

        try:
            # Files are saved in the workspace only while it is still the session's (not swapped for a symlink).
            files_dir = checked_workspace(input.workspace) / MCP_FILES_DIR
            outcome = await self._manager.call_tool(
                server,
                tool,
                input.call.arguments,
                timeout_seconds=input.timeout_seconds,
                answers=input.answers,
                request_state=input.request_state,
                on_progress=progress,
                files_dir=files_dir,
            )
        except McpServerUnavailable as err:
            if record_effect and err.in_flight:
                # The server died with the call in flight: it may have done the call's work. The
                # claim stays open for a person to reconcile, as after a worker that died
                # mid-call (never "failed", which a model would answer by calling again under a
                # new key).
                detail = redact(redact_secrets(str(err)), self._all_secrets())
                raise outcome_unknown(input.idempotency_key, f" ({input.call.name}: {detail})") from None
            return await self._recorded(input, False, text_column(f"error: {err}"), type(err).__name__, record_effect)
        except ToolError as err:
            # McpToolError, a timeout; a WorkspaceEscapeError before the call (the server was not called).
            return await self._recorded(input, False, text_column(f"error: {err}"), type(err).__name__, record_effect)
        if outcome.input_required is not None:
            if record_effect:  # the server stopped before any result: the call runs again, with the answer
                await asyncio.to_thread(
                    self._store.reconcile_effect, input.idempotency_key, "not_applied", "the server asked for input"
                )
            request = _redacted(outcome.input_required, self._all_secrets())
            size = len(request.model_dump_json().encode()) if request is not None else 0
            if request is None or size > MAX_QUESTION_BYTES:
                why = f"{size} bytes, more than {MAX_QUESTION_BYTES}" if request is not None else "it cannot be shown"
                text = f"error: {input.call.name} asked the user a question agentrt does not pass on ({why})"
                return await self._recorded(input, False, text, "McpToolError", record_effect)
            return McpCallResult(ok=True, position=input.result_position, input_required=request)
        text = text_column(outcome.text if not outcome.is_error else f"error: {outcome.text}")
        return await self._recorded(input, not outcome.is_error, text, None if not outcome.is_error else "McpToolResultError", record_effect)

    async def _recorded(
        self, input: McpCallInput, ok: bool, text: str, error_type: str | None, record_effect: bool
    ) -> McpCallResult:
        text = redact(redact_secrets(text), self._all_secrets())  # the effect ledger holds no secret either
        if record_effect:
            await asyncio.to_thread(self._store.record_effect, input.idempotency_key, "applied" if ok else "failed", text)
        return await self._finish(input, ok, text, error_type)

    async def _finish(self, input: McpCallInput, ok: bool, text: str, error_type: str | None) -> McpCallResult:
        result: ToolExecuteResult = await asyncio.to_thread(
            finish_call, self._store, self._all_secrets(), input, ok, text, error_type
        )
        return McpCallResult(**result.model_dump())


def _redacted(model: _M, secrets: list[str]) -> _M | None:
    """``model`` with every secret redacted from its JSON; None when what is left is no longer valid."""
    data = model.model_dump_json()
    clean = redact(redact_secrets(data), secrets)
    if clean == data:
        return model
    try:
        return type(model).model_validate_json(clean)
    except ValueError:
        return None


__all__ = ["MAX_QUESTION_BYTES", "MCP_FILES_DIR", "McpActivities"]
