"""`agentrt skills ...`: the skills a session in a workspace would see, and why any were skipped; reads the
disk and agentrt.toml only, so it needs no Temporal server."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import typer

from agentrt.cli._common import load_config
from agentrt.cli._render import printable

skills_app = typer.Typer(
    help="Skills: directories holding a SKILL.md that a session may activate (skill.activate).", no_args_is_help=True
)

DESCRIPTION_COLUMN_CHARS = 60


def _cell(text: str, width: int) -> str:
    text = printable(" ".join(text.split()))
    return text if len(text) <= width else text[: width - 1] + "…"


@skills_app.command("list")
def skills_list(
    workspace: Optional[Path] = typer.Option(
        None, "--workspace", "-w", help="The workspace whose .agentrt/skills to read (default: the current directory)."
    ),
    as_json: bool = typer.Option(False, "--json", help='One JSON object: {"skills": \\[...], "problems": \\[...]}.'),
) -> None:
    """List the skills of a workspace (.agentrt/skills/*/SKILL.md) and of the paths in agentrt.toml's skills table,
    in the order a session sees them (the first of a name wins); skipped ones are reported on stderr."""
    config = load_config()
    root = Path(os.path.realpath((workspace or Path.cwd()).expanduser()))  # as a session records its workspace
    if not root.is_dir():
        typer.echo(f"error: workspace {printable(str(root))} is not a directory", err=True)
        raise typer.Exit(2)
    from agentrt.activities.tools import discover_skills  # the tools' module: loaded by this command only

    found = discover_skills(root, [Path(p) for p in config.skill_paths])
    if as_json:
        skills = [s.model_dump(mode="json") for s in found.skills]
        typer.echo(json.dumps({"skills": skills, "problems": found.problems}))
        return
    for problem in found.problems:
        typer.echo(printable(problem), err=True)
    if not found.skills:
        typer.echo("no skills")
        return
    rows = [(s.name, _cell(s.description, DESCRIPTION_COLUMN_CHARS), printable(s.source)) for s in found.skills]
    name_width = max(len("NAME"), *(len(r[0]) for r in rows))
    text_width = max(len("DESCRIPTION"), *(len(r[1]) for r in rows))
    typer.echo(f"{'NAME':<{name_width}}  {'DESCRIPTION':<{text_width}}  SOURCE")
    for name, text, source in rows:
        typer.echo(f"{name:<{name_width}}  {text:<{text_width}}  {source}")
