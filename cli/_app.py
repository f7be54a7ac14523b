"""The `agentrt` command line: run a prompt, drive sessions, run a worker or the embedded dev server.

The commands live beside this module: `_cli_process` (run, worker, dev), `_demo` (demo),
`_cli_session` (the `session` group), `_cli_memory` (the `memory` group), `_cli_skills` (the
`skills` group), `_cli_task` (the `task` group: autonomous tasks), `_cli_graph` (the `graph`
group: task graphs), `_cli_trajectory` (`session trajectory` and the `trajectory` group),
`_cli_serve` (`serve`: the HTTP gateway), `_quota` (the `quota` group: tenant quotas), `_cli_codec` (`codec-server`), `_cli_doctor`
(`doctor`: stuck workflows), `_cli_audit` (`audit`: the audit log), `_pause` (`pause`, `resume` and
`session|graph pause|resume`: the kill switch) and `_cli_common` (what they share); this module assembles them
and is the console script's entry point. A reader that stops reading a command's output
(`agentrt session list | head -1`) ends it quietly, with exit code 0.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import typer
import typer.main
from typer.core import TyperCommand, TyperGroup


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


@dataclass(frozen=True)
class LazyCommand:
    """A command of ``agentrt`` loaded only when it runs (or its own ``--help`` is asked for):
    ``summary`` is what ``agentrt --help`` lists (the first paragraph of the command's help;
    tests/cli/test_cli.py holds them equal), ``load`` returns the typer app of a group or the
    function of a command."""

    summary: str
    load: Callable[[], Any]


def _attribute(module: str, name: str) -> Callable[[], Any]:
    return lambda: getattr(importlib.import_module(module), name)


def _session_group() -> typer.Typer:
    from agentrt.cli._pause import session_command
    from agentrt.cli._session import session_app
    from agentrt.cli._trajectory import session_trajectory

    if not any(info.name == "trajectory" for info in session_app.registered_commands):
        session_app.command("trajectory")(session_trajectory)
        session_app.command("pause")(session_command(True))
        session_app.command("resume")(session_command(False))
    return session_app


def _graph_group() -> typer.Typer:
    from agentrt.cli._graph import graph_app
    from agentrt.cli._pause import graph_command

    if not any(info.name == "pause" for info in graph_app.registered_commands):
        graph_app.command("pause")(graph_command(True))
        graph_app.command("resume")(graph_command(False))
    return graph_app


# The commands, in the order `agentrt --help` lists them.
COMMANDS: dict[str, LazyCommand] = {
    "run": LazyCommand(
        "Start a session with PROMPT, stream its progress and print the answer.", _attribute("agentrt.cli._process", "run")
    ),
    "worker": LazyCommand(
        "Run a worker for the configured task queue until Ctrl-C.", _attribute("agentrt.cli._process", "worker")
    ),
    "dev": LazyCommand(
        "Start the embedded Temporal dev server and a worker; Ctrl-C stops both.", _attribute("agentrt.cli._process", "dev")
    ),
    "demo": LazyCommand(
        "Run a scripted session on a temporary copy of SOURCE: list, read, write NOTES.md (approved), answer.",
        _attribute("agentrt.cli._demo", "demo"),
    ),
    "serve": LazyCommand(
        "Serve the HTTP gateway: sessions, autonomous tasks and task graphs over HTTP, with an\n"
        "OpenAPI schema at /openapi.json and docs at /docs (see docs/gateway.md).",
        _attribute("agentrt.cli._serve", "serve"),
    ),
    "codec-server": LazyCommand(
        "Serve the payload codec to the Temporal UI and CLI: POST /decode and /encode with the \\[codec] keys.",
        _attribute("agentrt.cli._codec", "codec_server"),
    ),
    "doctor": LazyCommand(
        "List running sessions, tasks and graphs whose workflow task keeps failing or timing out (a\n"
        "non-determinism error, an exception in workflow code, no worker finishing it), with the cause\n"
        "and what to do. Exit status 0 when none is stuck, 1 when some are, 2 on an error.",
        _attribute("agentrt.cli._doctor", "doctor"),
    ),
    "replay": LazyCommand(
        "Replay workflow histories against the workflow code installed here (with the worker's own\n"
        "plugin: its converter, codec keys and payload storage) and say which do not replay, naming the\n"
        "workflow and the first event and command that differ. Exit status 0 when every history\n"
        "replays, 1 when one does not (deploying this code would fail that run), 2 on an error. Put it\n"
        "in CI before a deploy, over exported histories or the live namespace (docs/deployment.md).",
        _attribute("agentrt.cli._replay", "replay"),
    ),
    "audit": LazyCommand(
        "List the audit log, newest first: every act of a principal on a session, task, graph or memory\n"
        "(approve, deny, edit, cancel, archive, reconcile, raise a budget, pause, decide a memory, ...),\n"
        "with who, when and the reason given, whatever carried it (client, CLI, HTTP or the Temporal UI).",
        _attribute("agentrt.cli._audit", "audit"),
    ),
    "pause": LazyCommand(
        "Pause every running session, task and graph of one owner (found by AgentOwner): no model or\n"
        "tool call starts in any until `agentrt resume --owner`.",
        _attribute("agentrt.cli._pause", "pause"),
    ),
    "resume": LazyCommand(
        "Resume every paused session, task and graph of one owner, each where it stopped.",
        _attribute("agentrt.cli._pause", "resume"),
    ),
    "session": LazyCommand("Inspect and steer existing sessions.", _session_group),
    "memory": LazyCommand(
        "Memories your sessions wrote: list them, accept or reject the proposed ones.",
        _attribute("agentrt.cli._memory", "memory_app"),
    ),
    "mcp": LazyCommand(
        "MCP servers: their state in the workers, and the tools they offer.", _attribute("agentrt.cli._mcp", "mcp_app")
    ),
    "skills": LazyCommand(
        "Skills: directories holding a SKILL.md that a session may activate (skill.activate).",
        _attribute("agentrt.cli._skills", "skills_app"),
    ),
    "task": LazyCommand(
        "Autonomous tasks: a goal pursued over hours or days by sessions that run, checkpoint and sleep.",
        _attribute("agentrt.cli._task", "task_app"),
    ),
    "graph": LazyCommand(
        "Task graphs: a goal planned into a DAG of agent tasks, approved once, run in parallel and reviewed.",
        _graph_group,
    ),
    "trajectory": LazyCommand(
        "Compare trajectories: what turns did, step by step.", _attribute("agentrt.cli._trajectory", "trajectory_app")
    ),
    "store": LazyCommand(
        "The application store: its schema, migrated on its own.", _attribute("agentrt.cli._store", "store_app")
    ),
    "quota": LazyCommand(
        "Tenant quotas: concurrent sessions, and tokens, dollars and tool calls per UTC day.",
        _attribute("agentrt.cli._quota", "quota_app"),
    ),
}


def load_command(name: str) -> Any:
    """The click command (or group) of ``agentrt <name>``, its module imported now."""
    loaded = COMMANDS[name].load()
    if isinstance(loaded, typer.Typer):
        command = typer.main.get_group(loaded)
    else:
        single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
        single.command(name)(loaded)
        command = typer.main.get_command(single)
    command.name = name
    return command


class _Commands(TyperGroup):
    """The ``agentrt`` group: every command, its options and its ``--help`` run under
    ``_reader_gone_is_success`` (typer would exit 1 on a closed pipe). A command's module is
    imported when the command runs; ``agentrt --help`` lists ``COMMANDS``' summaries without
    importing any. The contexts are those of typer's own copy of click, hence ``Any``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: dict[str, Any] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        return [*COMMANDS, *(name for name in super().list_commands(ctx) if name not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in COMMANDS:
            return super().get_command(ctx, cmd_name)
        if cmd_name in self._loaded:
            return self._loaded[cmd_name]
        # Listed by `agentrt --help`: its summary, without importing the command's module.
        return TyperCommand(cmd_name, help=COMMANDS[cmd_name].summary)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] in COMMANDS and args[0] not in self._loaded:
            self._loaded[args[0]] = load_command(args[0])
        return super().resolve_command(ctx, args)

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


@app.callback()
def _agentrt() -> None:
    """A durable agent runtime on Temporal: sessions whose turns, tool calls and approvals survive crashes."""


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
    if "agentrt.worker" in sys.modules:  # a command ran with the configuration, hence telemetry, loaded
        from agentrt.worker import flush_telemetry

        flush_telemetry()  # os._exit runs no exit handlers: send the last spans and metrics first
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # its reader stopped reading: what it wanted was printed before
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
