"""`agentrt serve`: the HTTP gateway."""

from __future__ import annotations

import typer


def serve() -> None:
    """Serve the HTTP gateway."""
    raise typer.Exit(2)
