"""An agents module whose tools declare secrets, as `agentrt worker --agents tests.e2e.secret_tools`
imports it: ``echo_key`` hands its secret back in every way a careless tool would (as it is, in
JSON, in a ``ToolError``, in a crash), ``warehouse`` declares another one."""

from __future__ import annotations

from typing import Any, Literal

from agentrt import Agent, ToolContext, ToolError, tool

ORDERS_KEY_NAME = "ORDERS_API_KEY"
WAREHOUSE_KEY_NAME = "WAREHOUSE_TOKEN"


@tool(secrets=[ORDERS_KEY_NAME], risk="effectful")
def echo_key(ctx: ToolContext, how: Literal["plain", "json", "error", "crash", "repr"] = "plain") -> Any:
    """Say which orders key this worker uses (a careless tool: it prints it)."""
    value = ctx.secrets[ORDERS_KEY_NAME]
    if how == "json":
        return {"key": value, "quoted": f'"{value}"'}
    if how == "error":
        raise ToolError(f"the orders service refused key {value}")
    if how == "crash":
        raise RuntimeError(f"connection reset while sending {value}")
    if how == "repr":
        return repr(ctx)  # the context's repr holds no value
    return f"using key {value}"


@tool(secrets=[WAREHOUSE_KEY_NAME], risk="read_only")
def warehouse(ctx: ToolContext) -> str:
    """Whether the warehouse answers."""
    return "warehouse up" if ctx.secrets[WAREHOUSE_KEY_NAME] else "warehouse down"


keyed = Agent(name="keyed", instructions="Use the orders service.", tools=[echo_key, warehouse, "shell.run", "fs.read"])
