"""Tools a careless user might write, and what a hostile model might send them: each leaves a
line in the session's workspace when its body runs, so a test can tell whether it ran."""

from __future__ import annotations

import sys

from agentrt import Agent, ToolContext, tool


def _ran(ctx: ToolContext, what: str) -> None:
    with (ctx.workspace / "ran.log").open("a") as f:
        f.write(what + "\n")


@tool(risk="read_only")
def measure(ctx: ToolContext, length: float, label: str = "") -> str:
    """Record a length."""
    _ran(ctx, f"measure {length!r} {label}")
    return f"measured {length}"


@tool(risk="effectful")
def quit_writer(ctx: ToolContext) -> str:
    """An effectful tool that calls sys.exit."""
    _ran(ctx, "quit_writer")
    sys.exit(2)


@tool(risk="read_only")
def ledger_total(ctx: ToolContext) -> str:
    """Sum the tool's own ledger: a SQLite database of its own, which cannot be opened (its path is
    the workspace, a directory), so SQLAlchemy raises OperationalError("unable to open database file")."""
    import sqlalchemy as sa

    _ran(ctx, "ledger_total")
    with sa.create_engine(f"sqlite:///{ctx.workspace}").connect() as conn:
        return str(conn.execute(sa.text("SELECT 1")).scalar())


@tool(risk="read_only")
def shout(ctx: ToolContext) -> str:
    """Raise an exception whose message is 3 MB (a response body put in the message, say)."""
    _ran(ctx, "shout")
    raise RuntimeError("A" * 3_000_000)


careless = Agent(name="careless", tools=[measure, quit_writer, ledger_total, shout])


@tool(risk="read_only", timeout_seconds=2)
def stuck(ctx: ToolContext) -> str:
    """A tool that waits on something that never comes, without looking at is_cancelled."""
    import threading

    _ran(ctx, "stuck")
    threading.Event().wait()
    return "never"


stuck_desk = Agent(name="stuck-desk", tools=[stuck, measure])


@tool(risk="effectful", timeout_seconds=2)
def stuck_charge(ctx: ToolContext, order_id: str) -> str:
    """An effectful tool whose payment service never answers (it may still charge)."""
    import threading

    _ran(ctx, f"stuck_charge {order_id}")
    threading.Event().wait()
    return "never"


stuck_desk = Agent(name="stuck-desk", tools=[stuck, measure, stuck_charge])


@tool(risk="read_only")
def gate(ctx: ToolContext) -> str:
    """Wait until the file ``go`` is in the workspace (a test stops the store meanwhile)."""
    import time

    _ran(ctx, "gate")
    while not (ctx.workspace / "go").exists() and not ctx.is_cancelled():
        time.sleep(0.05)
    return "went"


gatekeeper = Agent(name="gatekeeper", tools=[gate])


@tool(risk="read_only")
def silent_store(ctx: ToolContext, port: int) -> str:
    """Open an agentrt store at ``port`` on loopback, whose server hangs up."""
    from agentrt.store import Store

    _ran(ctx, "silent_store")
    with Store.open(f"postgresql://postgres@127.0.0.1:{port}/x"):
        return "opened"


silent_desk = Agent(name="silent-desk", tools=[silent_store])
