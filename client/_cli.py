"""The `agentrt` command line: run a prompt, drive sessions, run a worker or the embedded dev server.

The commands live beside this module: `_cli_process` (run, worker, dev, demo),
`_cli_session` (the `session` group), `_cli_memory` (the `memory` group), `_cli_skills` (the
`skills` group), `_cli_task` (the `task` group: autonomous tasks), `_cli_graph` (the `graph`
group: task graphs), `_cli_trajectory` (`session trajectory` and the `trajectory` group),
`_cli_serve` (`serve`: the HTTP gateway), `_cli_codec` (`codec-server`), `_cli_doctor`
(`doctor`: stuck workflows) and `_cli_common` (what they share); this module assembles them
and is the console script's entry point.
"""

from __future__ import annotations

import os
import sys

import typer

from agentrt.client._cli_codec import codec_server
from agentrt.client._cli_doctor import doctor
from agentrt.client._cli_graph import graph_app
from agentrt.client._cli_mcp import mcp_app
from agentrt.client._cli_memory import memory_app
from agentrt.client._cli_process import demo, dev, run, worker
from agentrt.client._cli_serve import serve
from agentrt.client._cli_session import session_app
from agentrt.client._cli_skills import skills_app
from agentrt.client._cli_task import task_app
from agentrt.client._cli_trajectory import session_trajectory, trajectory_app
from agentrt.worker import flush_telemetry

app = typer.Typer(
    name="agentrt",
    help="A durable agent runtime on Temporal: sessions whose turns, tool calls and approvals survive crashes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
session_app.command("trajectory")(session_trajectory)
app.add_typer(session_app, name="session")
app.add_typer(memory_app, name="memory")
app.add_typer(mcp_app, name="mcp")
app.add_typer(skills_app, name="skills")
app.add_typer(task_app, name="task")
app.add_typer(graph_app, name="graph")
app.add_typer(trajectory_app, name="trajectory")
app.command()(run)
app.command()(worker)
app.command()(dev)
app.command()(demo)
app.command()(serve)
app.command("codec-server")(codec_server)
app.command()(doctor)


def main() -> None:
    """Entry point of the `agentrt` console script.

    Exits with ``os._exit`` after flushing output: the Temporal client's core threads can
    abort CPython's finalization ("PyGILState_Release: thread state must be current",
    temporalio/sdk-python#300), which would turn a successful command into exit code 134.
    """
    try:
        app()
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if isinstance(exit_.code, str):
            print(exit_.code, file=sys.stderr)
    flush_telemetry()  # os._exit runs no exit handlers: send the last spans and metrics first
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
