"""An MCP server's oversized answer is cut while it is read (the stdio relay, ``_relay.py``), not
after it is buffered: a 200 MiB answer, or a line that never ends, fails its call with a typed
error while the worker's memory grows by a small part of it, and the worker goes on calling."""

from __future__ import annotations

import asyncio
import resource
from pathlib import Path

import pytest

from agentrt.activities.mcp._launch import MAX_MESSAGE_BYTES
from agentrt.schemas import McpServerUnavailable, McpToolError, ToolError
from tests.activities.mcp.conftest import MakeManager
from tests.mcp_hostile_server import hostile_config

ANSWER_BYTES = 200 * 1024 * 1024


def tool(name: str) -> dict[str, object]:
    return {"name": name, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}


async def served_again(manager, name: str = "fine") -> str:  # type: ignore[no-untyped-def]
    """The text of a call of ``name`` once the server, stopped by the relay, is started anew (a
    call that meets the closing connection is unavailable; the next starts the server again)."""
    for _ in range(20):
        try:
            return (await manager.call_tool("evil", name, {}, timeout_seconds=30)).text
        except McpServerUnavailable:
            await asyncio.sleep(0.2)
    raise AssertionError("the server was never started again")


def rss_bytes() -> int:
    """This process's resident memory now (``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


async def test_a_200_mib_answer_fails_its_call_with_a_typed_error_and_the_worker_s_memory_stays_small(
    tmp_path: Path, managers: MakeManager
) -> None:
    plan = {"tools": [tool("huge"), tool("fine")], "before": {"huge": [{"huge_answer": ANSWER_BYTES}]}}
    manager = managers(hostile_config(tmp_path, plan, timeout_seconds=60))
    await manager.list_tools("evil")
    before = rss_bytes()

    with pytest.raises(McpToolError, match="longer than") as caught:
        await asyncio.wait_for(manager.call_tool("evil", "huge", {}, timeout_seconds=60), 120)

    assert f"{MAX_MESSAGE_BYTES:,} bytes" in str(caught.value)
    assert rss_bytes() - before < ANSWER_BYTES // 8
    assert await served_again(manager) == "called fine"


async def test_an_endless_line_fails_its_call_and_the_worker_s_memory_stays_small(tmp_path: Path, managers: MakeManager) -> None:
    plan = {"tools": [tool("endless"), tool("fine")], "before": {"endless": [{"endless": True}]}}
    manager = managers(hostile_config(tmp_path, plan, timeout_seconds=60))
    await manager.list_tools("evil")
    before = rss_bytes()

    with pytest.raises(McpToolError, match="longer than"):
        await asyncio.wait_for(manager.call_tool("evil", "endless", {}, timeout_seconds=60), 120)

    assert rss_bytes() - before < ANSWER_BYTES // 8
    assert await served_again(manager) == "called fine"


async def test_an_answer_under_the_bound_passes_whole(tmp_path: Path, managers: MakeManager) -> None:
    plan = {"tools": [tool("big")], "before": {"big": [{"huge_answer": 3 * 1024 * 1024}]}}
    manager = managers(hostile_config(tmp_path, plan))
    out = await manager.call_tool("evil", "big", {}, timeout_seconds=30)
    assert isinstance(out.text, str) and out.text.startswith("xxxx") and "more bytes not shown" in out.text
    assert not isinstance(out, ToolError)
