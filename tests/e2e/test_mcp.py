"""MCP servers as a tool source, end to end: real servers (mcp-server-time from PyPI,
@modelcontextprotocol/server-everything from npm, installed by the test setup), a real Temporal
dev server, the scripted model calling `<server>.<tool>`."""

from __future__ import annotations

import sys
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

from agentrt.activities.tools import default_registry
from agentrt.client import AgentClient
from agentrt.schemas import (
    McpServerConfig,
    McpToolsListed,
    ToolInvocationCompleted,
)
from agentrt.worker import AgentrtConfig, build_worker
from tests.conftest import OWNER, Harness
from tests.e2e._support import ALLOW_ALL, session_config, write_script


def time_server() -> McpServerConfig:
    return McpServerConfig(
        name="time", command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"],
        read_paths=[sys.prefix, sys.base_prefix],
    )


@asynccontextmanager
async def mcp_worker(harness: Harness, servers: dict[str, McpServerConfig]) -> AsyncIterator[AgentClient]:
    """A worker on a fresh task queue whose configuration has ``servers``; yields a client for it."""
    queue = f"mcp-{uuid.uuid4().hex[:8]}"
    config = AgentrtConfig(
        temporal_address=harness.server.address, task_queue=queue, database_url=harness.config.database_url,
        mcp_servers=servers,
    )
    async with build_worker(harness.temporal, config, harness.store, default_registry(), task_queue=queue):
        yield AgentClient(harness.temporal, task_queue=queue, principal=OWNER, store=harness.store, mcp_servers=sorted(servers))


async def test_a_scripted_model_calls_an_mcp_tool(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "time.get_current_time", "arguments": {"timezone": "Europe/Paris"}}]},
        {"text": "done"},
    ])
    async with mcp_worker(harness, {"time": time_server()}) as client:
        sid = harness.new_session_id()
        started = await client.start(session_config(client, sid, workspace, script, approval=ALLOW_ALL), "what time is it?")
        outcome = await client.wait(sid, started.turn_id)
    assert outcome.status == "completed", outcome.error
    events = harness.store.events(sid, 0, 1000)
    [listed] = [e for e in events if isinstance(e, McpToolsListed)]
    assert (listed.servers, listed.tools, listed.failures) == (["time"], 2, {})
    [done] = [e for e in events if isinstance(e, ToolInvocationCompleted)]
    assert done.tool == "time.get_current_time" and "Europe/Paris" in done.preview
    tool_messages = [m for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert '"timezone": "Europe/Paris"' in tool_messages[0].text
