"""The fleet benchmark's tool, registered on its workers with ``agentrt worker --agents bench._fleet_tools``.

``fleet.append`` is effectful (the effect ledger runs it at most once per call): it sleeps
``pause_seconds`` (a tool call in flight when a worker dies), then appends ``line`` to
``fleet.log`` in the session's workspace with one ``O_APPEND`` write, so the benchmark
counts every effect: a line found twice is a duplicate, a completed call whose line is
missing is lost.
"""

from __future__ import annotations

import os
import time

from agentrt.activities.tools import ToolContext, resolve_in_workspace, tool

LOG_FILE = "fleet.log"


@tool(name="fleet.append", risk="effectful")
def fleet_append(ctx: ToolContext, line: str, pause_seconds: float = 0.0) -> str:
    """Append one line to the workspace's fleet.log, after a pause.

    Args:
        line: The line to append (a newline is added).
        pause_seconds: Sleep this long first (at most 10 s).
    """
    time.sleep(min(max(pause_seconds, 0.0), 10.0))
    path = resolve_in_workspace(ctx.workspace, LOG_FILE)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode("utf-8"))  # one write(2) with O_APPEND: whole or not at all
    finally:
        os.close(fd)
    return "appended"
