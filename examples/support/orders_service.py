"""orders_service.py: the shop's orders service the support agent works with (FastAPI, on loopback).

    python orders_service.py [--port 8085] [--refund-seconds 0]

GET /orders/{order_id} answers an order; POST /orders/{order_id}/refunds refunds part of it and
requires an Idempotency-Key header: a key seen before answers the refund it made (header
Idempotent-Replayed: true) and never makes a second one. Each refund request is one line on
stdout: ``refund key=K order=O amount_cents=N result=applied|replayed|refused``.
``--refund-seconds`` is how long the payment processor takes after the refund is recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import re

import uvicorn
from fastapi import FastAPI, Header, HTTPException, Response
from pydantic import BaseModel, Field

KEY = re.compile(r"[\w.:/-]{1,200}")


class Order(BaseModel):
    order_id: str
    customer: str
    item: str
    status: str
    total_cents: int
    refunded_cents: int = 0


class RefundRequest(BaseModel):
    amount_cents: int = Field(gt=0)
    reason: str = Field(max_length=500)


class Refund(BaseModel):
    refund_id: str
    order_id: str
    amount_cents: int
    reason: str


def create_app(refund_seconds: float = 0.0) -> FastAPI:
    """The service, with its orders in memory (A-1 delivered broken, B-2 on its way)."""
    app = FastAPI(title="orders")
    orders = {
        "A-1": Order(order_id="A-1", customer="Ada", item="teapot", status="delivered", total_cents=1250),
        "B-2": Order(order_id="B-2", customer="Bo", item="kettle", status="shipped", total_cents=4000),
    }
    refunds: dict[str, Refund] = {}  # by idempotency key

    def log(key: str, order_id: str, amount_cents: int, result: str) -> None:
        print(f"refund key={key} order={order_id} amount_cents={amount_cents} result={result}", flush=True)

    @app.get("/orders/{order_id}")
    async def get_order(order_id: str) -> Order:
        if order_id not in orders:
            raise HTTPException(404, f"no order {order_id!r}")
        return orders[order_id]

    @app.post("/orders/{order_id}/refunds", status_code=201)
    async def refund(
        order_id: str, body: RefundRequest, response: Response, idempotency_key: str = Header(..., alias="Idempotency-Key")
    ) -> Refund:
        if not KEY.fullmatch(idempotency_key):
            raise HTTPException(400, "Idempotency-Key must be 1-200 letters, digits or . : / - _")
        if idempotency_key in refunds:
            log(idempotency_key, order_id, body.amount_cents, "replayed")
            response.status_code, response.headers["Idempotent-Replayed"] = 200, "true"
            return refunds[idempotency_key]
        order = orders.get(order_id)
        if order is None:
            raise HTTPException(404, f"no order {order_id!r}")
        if order.refunded_cents + body.amount_cents > order.total_cents:
            log(idempotency_key, order_id, body.amount_cents, "refused")
            left = order.total_cents - order.refunded_cents
            raise HTTPException(409, f"order {order_id} has {left} cents left to refund, not {body.amount_cents}")
        order.refunded_cents += body.amount_cents
        made = Refund(refund_id=f"rf-{len(refunds) + 1}", order_id=order_id, amount_cents=body.amount_cents, reason=body.reason)
        refunds[idempotency_key] = made
        log(idempotency_key, order_id, body.amount_cents, "applied")
        await asyncio.sleep(refund_seconds)  # the payment processor at work
        return made

    return app


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The shop's orders service.")
    parser.add_argument("--port", type=int, default=8085)
    parser.add_argument("--refund-seconds", type=float, default=0.0)
    args = parser.parse_args()
    uvicorn.run(create_app(args.refund_seconds), host="127.0.0.1", port=args.port, log_level="warning")
