"""The operator's kill switch from a shell: `agentrt pause --owner X` / `agentrt resume --owner X` (every
running session, task and graph of one owner), and `agentrt session pause|resume` and `agentrt graph
pause|resume` (one of them; `agentrt task pause|resume` live with the task commands)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import typer

from agentrt.cli._common import load_config, run_command
from agentrt.cli._runtime import runtime
from agentrt.schemas import GraphSnapshot, OwnerPauseReport, PauseState, SessionStateView

__all__ = ["PAUSE_SUMMARY", "RESUME_SUMMARY", "graph_command", "owner_command", "pause", "report_lines", "resume", "session_command"]

REASON_HELP = "Recorded with the change (an operator must give one)."
# The first paragraphs of `agentrt pause --help` and `agentrt resume --help` (`agentrt --help` lists them).
PAUSE_SUMMARY = (
    "Pause every running session, task and graph of one owner (found by AgentOwner): no model or\n"
    "tool call starts in any until `agentrt resume --owner`."
)
RESUME_SUMMARY = "Resume every paused session, task and graph of one owner, each where it stopped."


def _runtime(config: Any) -> Any:
    return runtime(config, embed_if_missing=False, ensure_worker=False)


def _paused_text(paused: PauseState | None) -> str:
    if paused is None:
        return ""
    why = f": {paused.reason}" if paused.reason else ""
    return f" (by {paused.principal} since {paused.since:%Y-%m-%d %H:%M:%S} UTC{why})"


def session_command(pausing: bool) -> Callable[..., None]:
    """`agentrt session pause` (``pausing``) or `agentrt session resume`."""

    def command(
        session_id: str,
        reason: Optional[str] = typer.Option(None, "--reason", help=REASON_HELP),
        as_json: bool = typer.Option(False, "--json", help="The session's state afterwards as one JSON object."),
    ) -> None:
        config = load_config()

        async def go() -> None:
            async with _runtime(config) as rt:
                sessions = rt.client.sessions
                view: SessionStateView = await (sessions.pause if pausing else sessions.resume)(session_id, reason)
            if as_json:
                typer.echo(view.model_dump_json())
            elif view.paused is not None:
                typer.echo(
                    f"session {session_id} is paused{_paused_text(view.paused)}: no model or tool call starts until "
                    f"`agentrt session resume {session_id}`"
                )
            else:
                typer.echo(f"session {session_id} is not paused: it is {view.status}")

        run_command(go)

    command.__doc__ = (
        "Pause a session: no model or tool call starts (one in flight finishes) until `session resume`;\n"
        "messages sent meanwhile queue, approvals and cancels are taken. Pausing a paused session is no error."
        if pausing else
        "Resume a paused session where it stopped: the call it held, then the queued messages."
    )
    return command


def graph_command(pausing: bool) -> Callable[..., None]:
    """`agentrt graph pause` (``pausing``) or `agentrt graph resume`."""

    def command(
        graph_id: str,
        reason: Optional[str] = typer.Option(None, "--reason", help=REASON_HELP),
        as_json: bool = typer.Option(False, "--json", help="The graph's snapshot afterwards as one JSON object."),
    ) -> None:
        config = load_config()

        async def go() -> None:
            async with _runtime(config) as rt:
                graphs = rt.client.graphs
                snapshot: GraphSnapshot = await (graphs.pause if pausing else graphs.resume)(graph_id, reason)
            if as_json:
                typer.echo(snapshot.model_dump_json())
            elif snapshot.paused is not None:
                typer.echo(f"graph {graph_id} is paused{_paused_text(snapshot.paused)}; {snapshot.running} node(s) running, paused too")
            else:
                typer.echo(f"graph {graph_id} is not paused: it is {snapshot.status}")

        run_command(go)

    command.__doc__ = (
        "Pause a graph: no node, retry or review starts and its running sessions pause until `graph resume`."
        if pausing else
        "Resume a paused graph: its sessions go on and ready nodes start."
    )
    return command


def report_lines(report: OwnerPauseReport) -> list[str]:
    """What an owner-wide pause or resume did, for a person: the counts, then each refusal or failure."""
    done = "paused" if report.action == "pause" else "resumed"
    kinds = []
    for kind in ("session", "task", "graph"):
        count = report.count(done, kind)  # type: ignore[arg-type]
        kinds.append(f"{count} {kind}{'' if count == 1 else 's'}")
    line = f"{done} {', '.join(kinds)} of owner {report.owner}"
    if report.action == "pause":
        line += f"; {report.count('already')} already paused"
    others = [(o, report.count(o)) for o in ("refused", "gone", "failed")]  # type: ignore[misc]
    line += "".join(f"; {n} {o}" for o, n in others if n)
    lines = [line]
    for item in report.items:
        if item.outcome in ("refused", "gone", "failed"):
            lines.append(f"  {item.outcome} {item.kind} {item.id}: {item.detail or ''}".rstrip())
    return lines


def owner_command(pausing: bool) -> Callable[..., None]:
    """`agentrt pause` (``pausing``) or `agentrt resume`: everything of one owner."""

    def command(
        owner: str = typer.Option(..., "--owner", help="The principal whose work it is (its AgentOwner)."),
        reason: Optional[str] = typer.Option(None, "--reason", help="Recorded with each change (an operator must give one)."),
        as_json: bool = typer.Option(False, "--json", help="The report as one JSON object (every workflow and its outcome)."),
    ) -> None:
        config = load_config()

        async def go() -> OwnerPauseReport:
            async with _runtime(config) as rt:
                return await (rt.client.pause_owner if pausing else rt.client.resume_owner)(owner, reason)

        report = run_command(go)
        if as_json:
            typer.echo(report.model_dump_json())
        else:
            for line in report_lines(report):
                typer.echo(line)
        if any(i.outcome in ("refused", "failed") for i in report.items):
            raise typer.Exit(1)

    command.__doc__ = (PAUSE_SUMMARY if pausing else RESUME_SUMMARY) + (
        "\n\nThe owner, or an operator with --reason (each workflow checks its own operators too). "
        "Sessions a task, graph or session started go with their parent. "
        f"Exit status 0 when each is {'paused' if pausing else 'resumed'}, 1 when one refused or could not be reached, 2 on an error."
    )
    return command


pause = owner_command(True)
resume = owner_command(False)
