"""The stdio MCP server ``bench.chaos_kinds`` kills mid-call: one effectful tool that appends a line.

Run as a script by a worker (``python bench/_chaos_mcp_server.py MARKS``, through the worker's
MCP launcher), standard library and the MCP SDK only. Its one tool, ``append``, annotated as
neither read-only nor idempotent (so agentrt calls it ``effectful`` and runs it through the
effect ledger), sleeps ``pause_before_seconds``, appends ``line + "\\n"`` to the file ``path``
(absolute: a session's workspace file) in one ``O_APPEND`` write, then sleeps
``pause_after_seconds``. While a call runs, the file ``MARKS/inflight/<pid>-<n>`` holds its
phase (``before``, then ``after`` once the line is in the file), so the harness can aim its
SIGKILLs of this process at a call in flight; the directory ``MARKS`` in the command line is
also how the harness finds this server's processes.
"""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("agentrt-chaos")
EFFECTFUL = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False)
_calls = itertools.count(1)


def _marks() -> Path:
    folder = Path(sys.argv[1]) / "inflight"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@server.tool(annotations=EFFECTFUL)
async def append(path: str, line: str, pause_before_seconds: float = 0.0, pause_after_seconds: float = 0.0) -> str:
    """Append ``line`` to the file at the absolute ``path`` (pausing before and after, for chaos testing)."""
    mark = _marks() / f"{os.getpid()}-{next(_calls)}"
    mark.write_text("before")
    try:
        await anyio.sleep(max(0.0, min(pause_before_seconds, 60.0)))
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (line + "\n").encode("utf-8"))  # one write(2) with O_APPEND: whole or not at all
        finally:
            os.close(fd)
        mark.write_text("after")
        await anyio.sleep(max(0.0, min(pause_after_seconds, 60.0)))
    finally:
        mark.unlink(missing_ok=True)
    return "appended"


if __name__ == "__main__":
    server.run("stdio")
