"""Activities ``tools.list`` and ``tool.execute``: built-in tools run on the worker, results go to the store."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from temporalio import activity

from activities.tools import ToolContext, ToolRegistry
from schemas import ListToolsInput, ListToolsResult, Message, ToolError, ToolExecuteInput, ToolExecuteResult

if TYPE_CHECKING:
    from store import Store

PREVIEW_CHARS = 200


class ToolActivities:
    def __init__(self, registry: ToolRegistry, store: "Store") -> None:
        self._registry = registry
        self._store = store

    @activity.defn(name="tools.list")
    def list_tools(self, input: ListToolsInput) -> ListToolsResult:
        """Specs of the requested tools (all when ``names`` is None) and the names not registered."""
        tools, unknown = self._registry.specs(input.names)
        return ListToolsResult(tools=tools, unknown=unknown)

    @activity.defn(name="tool.execute")
    def execute(self, input: ToolExecuteInput) -> ToolExecuteResult:
        """Run one tool call in the session's workspace and store its result at ``result_position``.

        A ``ToolError`` (bad path, workspace escape, invalid arguments, timeout) is a result
        with ``ok=False``, not an activity failure: the model sees the error and goes on.
        """
        context = ToolContext(
            workspace=Path(input.workspace),
            timeout_seconds=input.timeout_seconds,
            heartbeat=activity.heartbeat,
            is_cancelled=activity.is_cancelled,
        )
        error_type = None
        try:
            text = self._registry.execute(input.call, context).text
            ok = True
        except ToolError as err:
            text, ok, error_type = f"error: {err}", False, type(err).__name__
        message = Message(role="tool", tool_call_id=input.call.id, name=input.call.name, text=text, is_error=not ok)
        self._store.put_message(input.session_id, input.result_position, input.turn_id, message)
        preview = " ".join(text.split())[:PREVIEW_CHARS]
        return ToolExecuteResult(
            ok=ok,
            preview=preview,
            size_bytes=len(text.encode()),
            error=None if ok else text.removeprefix("error: "),
            error_type=error_type,
            position=input.result_position,
        )
