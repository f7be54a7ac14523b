"""support_agent.py: the shop's support agent; `agentrt worker --agents support_agent` serves it."""

import os
from typing import Annotated, Any, Literal

import httpx
from pydantic import BaseModel, Field

from agentrt import Agent, ToolContext, ToolError, tool

OrderId = Annotated[str, Field(pattern=r"^[A-Z]-\d{1,9}$", description="The order's id, e.g. A-1.")]


class Triage(BaseModel):
    """What the desk made of a customer's message."""
    category: Literal["refund", "delivery", "other"]
    order_id: str | None
    refunded_cents: int = Field(ge=0)
    reply: str = Field(description="The message to send the customer.")


async def deps() -> httpx.AsyncClient:
    """The worker's one client of the orders service, shared by every tool call."""
    return httpx.AsyncClient(base_url=os.environ.get("ORDERS_URL", "http://127.0.0.1:8085"), timeout=30)


def answer(response: httpx.Response) -> Any:
    if response.status_code in (404, 409, 422):
        raise ToolError(response.json()["detail"])  # the model reads it and goes on
    response.raise_for_status()  # anything else: retried, then a tool failure
    return response.json()


@tool(risk="read_only")
async def lookup_order(ctx: ToolContext, order_id: OrderId) -> dict[str, Any]:
    """Look up an order: item, status, total and refunded so far (in cents)."""
    return answer(await ctx.deps.get(f"/orders/{order_id}"))


@tool(risk="effectful", timeout_seconds=30)
async def refund(ctx: ToolContext, order_id: OrderId, amount_cents: Annotated[int, Field(gt=0)], reason: str) -> dict[str, Any]:
    """Refund part of an order to the customer's card.

    Args:
        amount_cents: How much to refund, in cents.
        reason: Why, in a few words.
    """
    body = {"amount_cents": amount_cents, "reason": reason}
    headers = {"Idempotency-Key": ctx.idempotency_key}  # a retry of this call never refunds twice
    return answer(await ctx.deps.post(f"/orders/{order_id}/refunds", json=body, headers=headers))


support = Agent(
    name="support",
    instructions="You are the support desk of a shop. Look the order up before you refund; never refund more than was paid.",
    tools=[lookup_order, refund],
    output_type=Triage,
    approval={"effectful": "ask"},  # a person approves every refund
)
