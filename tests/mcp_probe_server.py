"""A small MCP server for tests, run as a script (``python tests/mcp_probe_server.py [http PORT]``).

Built on the SDK's ``MCPServer``, so it speaks both protocol eras: the 2026-07-28 revision
(elicitation as an ``InputRequiredResult``) and the 2025-11-25 handshake. Its tools look
at what a sandboxed server can see (files, environment), ask the user (``ask_name``), report
progress, sleep until cancelled, and carry the odd shapes a client must skip (a name too long
to qualify, no annotations).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import anyio
from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.types import ToolAnnotations
from pydantic import BaseModel

server = MCPServer("agentrt-probe")
READ_ONLY = ToolAnnotations(readOnlyHint=True)


class Name(BaseModel):
    name: str


def ask(question: str) -> Elicit[Name]:
    return Elicit(question, Name)


@server.tool(annotations=READ_ONLY)
def read_file(path: str) -> str:
    """The text of the file at ``path``, or the error opening it."""
    try:
        return Path(path).read_text()
    except OSError as err:
        return f"cannot read: {type(err).__name__}: {err}"


@server.tool(annotations=READ_ONLY)
def fetch(url: str) -> str:
    """The body at ``url`` (through the proxy the environment names, as urllib does), or the error."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()
    except (OSError, urllib.error.URLError) as err:
        return f"cannot fetch: {err}"


@server.tool(annotations=READ_ONLY)
def environment() -> dict[str, str]:
    """The server process's environment variables."""
    return dict(os.environ)


@server.tool(annotations=READ_ONLY)
def header(name: str, ctx: Context) -> str:
    """The value of the HTTP request header ``name`` this call came with (streamable HTTP)."""
    return (ctx.headers or {}).get(name.lower(), "(none)")


@server.tool(annotations=ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False))
def ask_name(answer: Annotated[ElicitationResult[Name], Resolve(lambda: ask("What is your name?"))]) -> str:
    """Asks the user for a name and greets them."""
    if answer.action == "accept":
        return f"hello {answer.data.name}"
    return f"no name: {answer.action}"


@server.tool(annotations=READ_ONLY)
async def count(steps: int, ctx: Context) -> str:
    """Counts to ``steps``, reporting progress at each step."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
        await anyio.sleep(0.05)
    return f"counted to {steps}"


@server.tool(annotations=READ_ONLY)
async def sleep(seconds: float, marker: str) -> str:
    """Sleeps; writes ``started`` to the file ``marker`` (in the server's directory), and
    ``cancelled`` when the call is cancelled."""
    path = Path(marker)
    path.write_text("started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        path.write_text("cancelled")
        raise
    return "slept"


@server.tool()
def unannotated() -> str:
    """A tool without annotations."""
    return "ok"


@server.tool(name="t" * 60, annotations=READ_ONLY)
def long_name() -> str:
    """A tool whose name is too long once qualified with the server's name."""
    return "ok"


@server.tool(annotations=READ_ONLY)
def fail() -> str:
    """Always fails: the result is an error the model reads."""
    raise ToolError("this tool always fails")


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
