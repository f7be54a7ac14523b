"""The ``agentrt`` command line (the console script ``agentrt = agentrt.cli:main``): a typer app
above ``agentrt.client`` whose commands load what they need only when they run."""

from agentrt.cli._app import app, main

__all__ = ["app", "main"]
