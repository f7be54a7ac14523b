"""An MCP server's oversized answer is cut while it is read (the stdio relay, ``_relay.py``; the
HTTP client's bounded transport, ``_bounded_http.py``), not after it is buffered: a 200 MiB answer, or a line that never ends, fails its call with a typed
error while the worker's memory grows by a small part of it, and the worker goes on calling."""

from __future__ import annotations

import asyncio
import json
import resource
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from agentrt.activities.mcp._launch import MAX_MESSAGE_BYTES
from agentrt.schemas import McpServerConfig, McpServerUnavailable, McpToolError, ToolError
from tests.activities.mcp.conftest import MakeManager
from tests.cli._serving import serving
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


# ---------------------------------------------------------------- over HTTP


class _HugeAnswers(BaseHTTPRequestHandler):
    """A streamable-HTTP MCP server answering in JSON (no SSE): tool ``huge`` answers with a body of
    ``ANSWER_BYTES``, written 1 MiB at a time, never held whole; ``fine`` answers a short text."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # no server-to-client stream
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_DELETE(self) -> None:
        self.do_GET()

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if "id" not in message:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        method, rid = message["method"], message["id"]
        if method == "initialize":
            result: dict[str, object] = {
                "protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "huge", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [tool("huge"), tool("fine")]}
        elif method != "tools/call":
            self.answer({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no {method}"}})
            return
        elif message["params"]["name"] == "fine":
            result = {"content": [{"type": "text", "text": "called fine"}]}
        else:
            head = ('{"jsonrpc": "2.0", "id": ' + json.dumps(rid) + ', "result": {"content": [{"type": "text", "text": "').encode()
            tail = b'"}]}}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(head) + ANSWER_BYTES + len(tail)))
            self.end_headers()
            try:
                self.wfile.write(head)
                piece = b"x" * (1 << 20)
                for _ in range(ANSWER_BYTES >> 20):
                    self.wfile.write(piece)
                self.wfile.write(tail)
            except (BrokenPipeError, ConnectionResetError):  # the client stopped reading: what it should do
                pass
            return
        self.answer({"jsonrpc": "2.0", "id": rid, "result": result})

    def answer(self, message: dict[str, object]) -> None:
        body = json.dumps(message).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def huge_http() -> Iterator[McpServerConfig]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HugeAnswers)
    server.daemon_threads = True
    with serving(server):
        yield McpServerConfig(name="huge", url=f"http://127.0.0.1:{server.server_address[1]}/mcp", timeout_seconds=60)


async def test_a_200_mib_json_answer_over_http_fails_its_call_while_read_and_the_next_call_is_served(
    huge_http: McpServerConfig, managers: MakeManager
) -> None:
    manager = managers(huge_http)
    await manager.list_tools("huge")
    before = rss_bytes()

    with pytest.raises(McpToolError, match="longer than"):
        await asyncio.wait_for(manager.call_tool("huge", "huge", {}, timeout_seconds=60), 120)

    # The SDK holds a JSON body until it is whole: at most the bound of it here, not the answer.
    assert rss_bytes() - before < 2 * MAX_MESSAGE_BYTES < ANSWER_BYTES
    assert (await manager.call_tool("huge", "fine", {}, timeout_seconds=30)).text == "called fine"
