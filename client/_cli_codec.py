"""`agentrt codec-server`: the Temporal UI's remote codec endpoint."""

from __future__ import annotations

import typer


def codec_server() -> None:
    """Serve the payload codec for the Temporal UI."""
    raise typer.Exit(2)
