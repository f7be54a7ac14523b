"""The `agentrt` command line: run a prompt, drive sessions, run a worker or the embedded dev server.

The commands live beside this module: `_cli_process` (run, worker, dev, demo),
`_cli_session` (the `session` group), `_cli_memory` (the `memory` group), `_cli_skills` (the
`skills` group), `_cli_task` (the `task` group: autonomous tasks), `_cli_graph` (the `graph`
group: task graphs), `_cli_trajectory` (`session trajectory` and the `trajectory` group),
`_cli_serve` (`serve`: the HTTP gateway), `_cli_codec` (`codec-server`), `_cli_doctor`
(`doctor`: stuck workflows) and `_cli_common` (what they share); this module assembles them
and is the console script's entry point. A reader that stops reading a command's output
(`agentrt session list | head -1`) ends it quietly, with exit code 0.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
from typer.core import TyperGroup

from agentrt.cli._codec import codec_server
from agentrt.cli._doctor import doctor
from agentrt.cli._graph import graph_app
from agentrt.cli._mcp import mcp_app
from agentrt.cli._memory import memory_app
from agentrt.cli._process import demo, dev, run, worker
from agentrt.cli._serve import serve
from agentrt.cli._session import session_app
from agentrt.cli._skills import skills_app
from agentrt.cli._task import task_app
from agentrt.cli._trajectory import session_trajectory, trajectory_app
from agentrt.worker import flush_telemetry


def _stdout_file() -> tuple[int, int] | None:
    """Which file standard output is (device, inode), None when it has no file descriptor."""
    try:
        status = os.fstat(sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        return None
    return status.st_dev, status.st_ino


@contextmanager
def _reader_gone_is_success() -> Iterator[None]:
    """A reader that stops reading (``agentrt session list | head -1``) had what it wanted: the
    command ends quietly with exit code 0, what is left to print going to /dev/null."""
    before = _stdout_file()
    try:
        yield
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        raise typer.Exit(0) from None
    except SystemExit as exit_:
        # rich, which prints the help pages, points standard output at /dev/null and exits 1 instead
        if exit_.code == 1 and before is not None and _stdout_file() not in (None, before):
            raise typer.Exit(0) from None
        raise


class _Commands(TyperGroup):
    """The ``agentrt`` group: every command, its options and its ``--help`` run under
    ``_reader_gone_is_success`` (typer would exit 1 on a closed pipe). The contexts are those of
    typer's own copy of click, hence ``Any``."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        with _reader_gone_is_success():
            return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: Any) -> Any:
        with _reader_gone_is_success():
            return super().invoke(ctx)


app = typer.Typer(
    cls=_Commands,
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
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # its reader stopped reading: what it wanted was printed before
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
