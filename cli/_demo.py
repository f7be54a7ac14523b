"""`agentrt demo`: a scripted session on a temporary copy of a repository, with everything it did
printed (progress, transcript, events, the file it wrote) and where to see it in the Temporal UI."""

from __future__ import annotations

import shutil
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Optional

import typer

from agentrt.cli._common import ApproveMode, drive_turn, load_config, print_outcome, run_command
from agentrt.cli._encryption import no_encryption_option, without_encryption
from agentrt.cli._render import event_line, transcript_lines
from agentrt.cli._runtime import Runtime, runtime


async def _temporal_ui_line(rt: Runtime, workflow_id: str) -> str:
    """Where a workflow is in the Temporal UI of ``rt``'s server, or that the UI is not known."""
    ui_url = await rt.temporal_ui_url()
    if ui_url is None:
        return f"Temporal UI: not known for the server at {rt.config.temporal_address} (workflow {workflow_id})"
    line = f"Temporal UI: {ui_url}/namespaces/{rt.config.namespace}/workflows/{workflow_id}"
    if rt.embedded_server is None:
        return line
    if rt.embedded_server.db_file is None:
        return f"{line}  (embedded server with its history in memory: it stops with this demo)"
    return f"{line}  (embedded server: run `agentrt dev` to browse it after this demo)"


DEMO_PROMPT = "Look around this repository, read its README and write a short NOTES.md about it."
IGNORED = shutil.ignore_patterns(".git", ".venv", ".agentrt", "__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis")


def demo(
    source: Path = typer.Option(Path("."), "--source", help="Repository to copy into the demo workspace.", exists=True, file_okay=False, resolve_path=True),
    script_file: Optional[Path] = typer.Option(
        None, "--script", help="A scripted-model file to play instead of the demo's own (to compare trajectories).",
        exists=True, dir_okay=False, resolve_path=True,
    ),
    no_encryption: bool = no_encryption_option(),
) -> None:
    """Run a scripted session on a temporary copy of SOURCE: list, read, write NOTES.md (approved), answer."""
    config = without_encryption(load_config()) if no_encryption else load_config()
    script = script_file or resources.files("agentrt.cli") / "demo" / "script.yaml"

    async def go() -> int:
        with tempfile.TemporaryDirectory(prefix="agentrt-demo-") as tmp:
            workspace = Path(tmp) / source.name
            shutil.copytree(source, workspace, symlinks=True, ignore=IGNORED)  # links as links: a link to ".." loops
            async with runtime(config, notice=sys.stdout, default_keys=True) as rt:
                session_config = rt.client.new_config(str(workspace), profile="scripted", script=str(script))
                typer.echo(f"workspace: {workspace} (a copy of {source})")
                started = await rt.client.start(session_config, DEMO_PROMPT)
                typer.echo(f"session {started.session_id} (workflow {started.workflow_id})\n")
                outcome = await drive_turn(rt, started.session_id, started.turn_id, ApproveMode.auto, sys.stdout)
                print_outcome(started.session_id, outcome, False)
                typer.echo("\n--- transcript (from the store) ---")
                for line in transcript_lines(rt.store.messages(started.session_id)):
                    typer.echo(line)
                typer.echo("\n--- events ---")
                for event in (await rt.client.events(started.session_id)).events:
                    typer.echo(event_line(event))
                notes = workspace / "NOTES.md"
                typer.echo(f"\n--- {notes.name} as written by the session ---")
                typer.echo(notes.read_text() if notes.exists() else "(missing)")
                typer.echo(
                    f"\nTrajectory: agentrt session trajectory {started.session_id}  "
                    f"(compare runs: agentrt trajectory diff {started.session_id} OTHER_SESSION)"
                )
                typer.echo(f"\n{await _temporal_ui_line(rt, started.workflow_id)}")
                return 0 if outcome.status == "completed" and notes.exists() else 1

    raise typer.Exit(run_command(go))
