"""`--output-schema FILE` and `--output-attempts N` (`agentrt run`, `agentrt session send`): the
structured output a turn's final answer must match (docs/structured-output.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer

from agentrt.schemas import InvalidOutputSchema, OutputSpec


def output_schema_option() -> Any:
    return typer.Option(
        None, "--output-schema", metavar="FILE", exists=True, dir_okay=False, resolve_path=True,
        help="A JSON Schema (a JSON file, root \"type\": \"object\") the final answer must match; the validated "
        "object is printed as the answer and as \"output\" with --json.",
    )


def output_attempts_option() -> Any:
    return typer.Option(
        3, "--output-attempts", min=1, max=10, help="Answers the model may give for --output-schema before the turn ends output_invalid."
    )


def output_spec(path: Optional[Path], attempts: int) -> OutputSpec | None:
    """The spec of ``--output-schema FILE`` (None without one): the file's JSON Schema, named by its
    ``title``. Raises ``typer.BadParameter`` for a file that is not JSON or not such a schema."""
    if path is None:
        return None
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise typer.BadParameter(f"{path} is not a JSON file: {err}", param_hint="--output-schema") from None
    try:
        return OutputSpec.from_schema(schema, max_attempts=attempts)
    except InvalidOutputSchema as err:
        raise typer.BadParameter(f"{path}: {err}", param_hint="--output-schema") from None
