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


careless = Agent(name="careless", tools=[measure, quit_writer])


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
