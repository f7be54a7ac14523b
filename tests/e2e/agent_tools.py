"""A user's agents module, as `agentrt worker --agents tests.e2e.agent_tools` imports it: tools that
leave what they saw in files of the session's workspace, so a test in another process can read it."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Annotated

from pydantic import BaseModel

from agentrt import Agent, ToolContext, ToolError, tool


class Order(BaseModel):
    order_id: str
    status: str
    total_cents: int


@tool(risk="read_only", local_activity=True)
def lookup_order(order_id: Annotated[str, "The order's id, e.g. A-1."]) -> Order:
    """Look up an order by id."""
    if order_id == "missing":
        raise ToolError(f"no order {order_id!r}")
    return Order(order_id=order_id, status="shipped", total_cents=1250)


@tool(risk="effectful", timeout_seconds=60)
async def refund(ctx: ToolContext, order_id: str, amount_cents: int, hold_seconds: float = 0.0) -> str:
    """Refund part of an order.

    Args:
        order_id: The order to refund.
        amount_cents: How much, in cents (positive).
        hold_seconds: How long the payment service takes (seconds).
    """
    log = ctx.workspace / "refunds.log"
    with log.open("a") as f:  # the payment service's own record, keyed by the idempotency key
        f.write(json.dumps({"key": ctx.idempotency_key, "order": order_id, "amount": amount_cents}) + "\n")
    await asyncio.sleep(hold_seconds)
    return f"refunded {amount_cents} cents on {order_id}"


@tool(risk="idempotent")
def whoami(ctx: ToolContext) -> dict[str, object]:
    """Say what the call's context holds."""
    deps = ctx.deps
    return {
        "session_id": ctx.session_id, "turn_id": ctx.turn_id, "call_id": ctx.call_id, "principal": ctx.principal,
        "idempotency_key": ctx.idempotency_key, "workspace": str(ctx.workspace),
        "deps": None if deps is None else deps["name"], "thread": "worker",
    }


@tool(risk="effectful")
def flaky_charge(ctx: ToolContext, order_id: str) -> str:
    """Charge an order through a service that keeps failing."""
    with (ctx.workspace / "attempts.log").open("a") as f:
        f.write(f"{ctx.idempotency_key} {time.monotonic()}\n")
    raise ConnectionError("payment service unreachable")


@tool(risk="effectful", timeout_seconds=1)
async def slow_payout(ctx: ToolContext, order_id: str) -> str:
    """Pay an order out through a service that answers after the call's time bound."""
    with (ctx.workspace / "payouts.log").open("a") as f:  # the service has it
        f.write(f"{ctx.idempotency_key}\n")
    await asyncio.sleep(30)
    return f"paid out {order_id}"


support = Agent(
    name="support",
    instructions="You are the support desk of a shop. Refund only what the customer paid.",
    tools=[lookup_order, refund, whoami, flaky_charge, slow_payout],
)

# The same desk answering with a typed result: every final answer must be an Order.
order_desk = Agent(name="order-desk", instructions="Answer with the order.", tools=[lookup_order], output_type=Order)
