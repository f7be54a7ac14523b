"""Big content in a session: multi-megabyte tool results, tool arguments and messages neither hang nor fail.

Tool results go to the store and reach the model through the context plan; payloads of
256 KiB or more that must cross Temporal (a model's 1.3 MB tool-call arguments, a 1 MB
user message) go through the SDK's external storage, so history keeps references.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import AsyncIterator

import pytest
from pydantic import Field

from agentrt.activities.tools import Tool, ToolArgs, ToolContext, ToolOutput, default_registry
from agentrt.client import AgentClient
from agentrt.schemas import ModelRequestStarted, ToolInvocationCompleted
from tests.conftest import OWNER, Harness
from tests.e2e._support import ALLOW_ALL, session_config, write_script
from agentrt.worker import build_worker

MB = 1024 * 1024


class BlobTool(Tool):
    """Returns ``size`` bytes of text: a stand-in for a tool with a huge result."""

    name = "blob.make"
    description = "Return size bytes of text."
    risk = "read_only"

    class Args(ToolArgs):
        size: int = Field(ge=1)

    def run(self, args: Args, ctx: ToolContext) -> ToolOutput:
        line = "0123456789abcdef" * 4 + "\n"
        return ToolOutput(text=(line * (args.size // len(line) + 1))[: args.size])


@pytest.fixture
async def big_client(harness: Harness) -> AsyncIterator[AgentClient]:
    registry = default_registry()
    registry.register(BlobTool())
    task_queue = f"big-{uuid.uuid4().hex[:8]}"
    async with build_worker(harness.temporal, harness.config, harness.store, registry, task_queue=task_queue):
        yield AgentClient(harness.temporal, task_queue=task_queue, principal=OWNER, store=harness.store)


async def _history_bytes(client: AgentClient, session_id: str) -> int:
    description = await client.temporal.get_workflow_handle(f"session-{session_id}").describe()
    return description.raw_description.workflow_execution_info.history_size_bytes


async def test_a_5_mb_tool_result_is_stored_whole_and_the_next_call_fits_the_window(
    harness: Harness, big_client: AgentClient, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "blob.make", "arguments": {"size": 5 * MB}}]},
        {"text": "read it"},
    ])
    sid = harness.new_session_id()
    config = session_config(big_client, sid, workspace, script, tools=["blob.make"])
    started = await big_client.start(config, "make a blob")
    outcome = await big_client.wait(sid, started.turn_id, timeout_seconds=120)
    assert outcome.status == "completed" and outcome.answer == "read it"

    tool_message = next(m for _, m in harness.store.messages(sid) if m.role == "tool")
    assert len(tool_message.text) == 5 * MB
    page = await big_client.events(sid)
    done = next(e for e in page.events if isinstance(e, ToolInvocationCompleted))
    assert done.size_bytes == 5 * MB
    second_call = [e for e in page.events if isinstance(e, ModelRequestStarted)][1]
    assert second_call.context_tokens <= 200_000 - 4_096  # the result was cut to fit, not dropped
    assert await _history_bytes(big_client, sid) < 256 * 1024


async def test_a_1_3_mb_tool_call_argument_then_another_model_call_completes(
    harness: Harness, big_client: AgentClient, workspace: Path, tmp_path: Path
) -> None:
    content = "x" * (1_300_000)
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "big.txt", "content": content}}]},
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "big.txt", "limit": 1048576}}]},
        {"text": "wrote and read it"},
        {"text": "got your long message"},
    ])
    sid = harness.new_session_id()
    config = session_config(big_client, sid, workspace, script, tools=["fs.write", "fs.read"], approval=ALLOW_ALL)
    started = await big_client.start(config, "write a big file")
    outcome = await big_client.wait(sid, started.turn_id, timeout_seconds=120)
    assert outcome.status == "completed" and outcome.answer == "wrote and read it"
    assert (workspace / "big.txt").stat().st_size == 1_300_000

    # A 1 MB user message crosses Temporal too (the send_message update).
    sent = await big_client.send(sid, "y" * MB)
    assert (await big_client.wait(sid, sent.turn_id, timeout_seconds=120)).status == "completed"
    page = await big_client.events(sid)
    assert sum(isinstance(e, ModelRequestStarted) for e in page.events) == 4
    # Four copies of 1.3 MB went through activities and events: history holds references only.
    assert await _history_bytes(big_client, sid) < 512 * 1024
