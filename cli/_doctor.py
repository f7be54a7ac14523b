"""`agentrt doctor`: the sessions, tasks and graphs whose workflow task keeps failing, which nothing
else shows (their workflows stay RUNNING), each with what to do about it."""

from __future__ import annotations

import json
from typing import Optional

import typer

from agentrt.cli._common import load_config, run_command
from agentrt.client import MAX_EXAMINED, find_stuck_workflows
from agentrt.cli._render import printable
from agentrt.cli._runtime import runtime
from agentrt.schemas import StuckWorkflow


def doctor(
    query: Optional[str] = typer.Option(
        None, "--query", "-q",
        help="Only look at workflows this visibility filter selects, e.g. \"AgentOwner = 'alice'\".",
    ),
    scan: Optional[bool] = typer.Option(
        None, "--scan/--no-scan",
        help="--scan describes every running session, task and graph (finds them from their third attempt on any "
        "server); --no-scan lists only those the server flagged (TemporalReportedProblems). Default: the flag when "
        "the server sets it, else a scan.",
    ),
    limit: int = typer.Option(MAX_EXAMINED, "--limit", min=1, max=100_000, help="Look at most at this many workflows."),
    as_json: bool = typer.Option(False, "--json", help="One JSON array of the stuck workflows."),
) -> None:
    """List running sessions, tasks and graphs whose workflow task keeps failing or timing out (a
    non-determinism error, an exception in workflow code, no worker finishing it), with the cause
    and what to do. Exit status 0 when none is stuck, 1 when some are, 2 on an error."""
    config = load_config()

    async def go() -> list[StuckWorkflow]:
        async with runtime(config, embed_if_missing=False, ensure_worker=False) as rt:
            return await find_stuck_workflows(rt.client.temporal, query, scan=scan, limit=limit)

    stuck = run_command(go)
    if as_json:
        typer.echo(json.dumps([s.model_dump(mode="json") for s in stuck]))
    elif not stuck:
        typer.echo("no stuck workflows")
    else:
        for s in stuck:
            typer.echo(stuck_line(s))
            typer.echo(f"  hint: {printable(s.hint)}")
    raise typer.Exit(1 if stuck else 0)


def stuck_line(s: StuckWorkflow) -> str:
    """``session-k1  session  alice  attempt 4 since 2026-01-01 10:00:00 UTC  nondeterminism: [TMPRL1100] ...``"""
    since = f" since {s.failing_since.strftime('%Y-%m-%d %H:%M:%S UTC')}" if s.failing_since else ""
    message = printable(" ".join(s.message.split())[:500])
    who = f"{printable(s.workflow_id)}  {s.kind}  {printable(s.owner or '-')}"
    return f"{who}  attempt {s.attempt}{since}  {s.cause}: {message}"


def stuck_session_error(session_id: str, s: StuckWorkflow) -> str:
    """What ``agentrt session state`` says of a session whose workflow task fails."""
    message = printable(" ".join(s.message.split())[:500])
    return (
        f"error: session {printable(session_id)} is stuck: its workflow task fails ({s.cause}, attempt {s.attempt}): "
        f"{message}; run `agentrt doctor`"
    )
