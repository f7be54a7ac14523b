"""examples/support, run as its guide (docs/build-your-own-agent.md) runs it: the orders service
on loopback, `agentrt worker --agents support_agent` in a process of its own, `agentrt run
--agent support`, the backend's service.py, and a worker killed while a refund is in flight."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from temporalio.service import RPCError

from agentrt.client import AgentClient
from agentrt.schemas import OutputValidationFailed, PermissionRequested
from agentrt.worker import free_port
from tests.cli.test_cli import agentrt
from tests.conftest import Harness
from tests.e2e._support import kill_hard, session_config, wait_for_event, worker_process

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "support"
PROMPT = "My teapot (order A-1) arrived broken. Can I get my money back?"
REFUND_LINE = re.compile(r"^refund key=(?P<key>\S+) order=(?P<order>\S+) amount_cents=(?P<amount>\d+) result=(?P<result>\w+)$")


class OrdersService:
    """examples/support/orders_service.py as a process on a free loopback port."""

    def __init__(self, url: str, log: Path) -> None:
        self.url, self.log = url, log

    def refunds(self) -> list[dict[str, str]]:
        """What the service logged of each refund request, in order."""
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [m.groupdict() for line in lines if (m := REFUND_LINE.match(line))]

    async def order(self, order_id: str) -> dict[str, object]:
        async with httpx.AsyncClient(base_url=self.url) as http:
            return (await http.get(f"/orders/{order_id}")).json()


@contextlib.asynccontextmanager
async def orders_service(tmp_path: Path, refund_seconds: float = 0.0) -> AsyncIterator[OrdersService]:
    port = free_port()
    log = tmp_path / "orders.log"
    process = subprocess.Popen(
        [sys.executable, "orders_service.py", "--port", str(port), "--refund-seconds", str(refund_seconds)],
        cwd=EXAMPLE, stdout=log.open("ab"), stderr=subprocess.STDOUT,
    )
    service = OrdersService(f"http://127.0.0.1:{port}", log)
    try:
        async with httpx.AsyncClient(base_url=service.url) as http:
            for _ in range(300):
                assert process.poll() is None, log.read_text()
                with contextlib.suppress(httpx.TransportError):
                    if (await http.get("/orders/A-1")).status_code == 200:
                        break
                await asyncio.sleep(0.1)
        yield service
    finally:
        process.kill()  # a refund held open would keep a graceful shutdown waiting
        process.wait(timeout=30)


@contextlib.contextmanager
def support_worker(harness: Harness, service: OrdersService, log: Path, queue: str) -> Iterator[subprocess.Popen[bytes]]:
    """`agentrt worker --agents support_agent`, run in examples/support as the guide runs it."""
    env = {"AGENTRT_TASK_QUEUE": queue, "ORDERS_URL": service.url, "AGENTRT_HOME": str(log.parent / "home")}
    with worker_process(harness, log, "--agents", "support_agent", cwd=EXAMPLE, env=env) as process:
        yield process


async def first_poll(harness: Harness, queue: str) -> None:
    """Until the worker process's first poll of ``queue`` reaches the server (it imports for a while)."""
    client = harness.client_on(queue)
    for _ in range(600):
        try:
            if await client.has_worker():
                return
        except RPCError:  # a loaded dev server cancelled the DescribeTaskQueue call: ask again
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"no worker polled {queue!r}")


async def test_the_guide_runs_end_to_end_from_the_cli_and_from_the_backend_s_program(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    queue = harness.task_queue + "-support"
    async with orders_service(tmp_path) as service:
        with support_worker(harness, service, tmp_path / "worker.log", queue):
            await first_poll(harness, queue)  # else `agentrt run` finds no worker and runs its own, without the agent
            result = await agentrt(
                harness, "run", PROMPT, "--agent", "support", "--workspace", str(workspace), "--script", "script.yaml",
                "--json", cwd=EXAMPLE, input="y\n", env={"AGENTRT_TASK_QUEUE": queue},
            )
            assert result.returncode == 0, result.stderr + (tmp_path / "worker.log").read_text()
            body = json.loads(result.stdout)
            harness.session_ids.append(body["session_id"])
            assert body["outcome"] == "completed"
            assert body["output"] == {
                "category": "refund", "order_id": "A-1", "refunded_cents": 1250,
                "reply": "Sorry about the teapot! We refunded the 12.50 EUR to your card.",
            }
            assert "approve refund" in result.stderr and "OutputValidationFailed" in result.stderr
            events = [e async for e in harness.client_on(queue).all_events(body["session_id"])]
            [invalid] = [e for e in events if isinstance(e, OutputValidationFailed)]
            assert "'refunded_cents' is a required property" in str(invalid.errors)
            [applied] = service.refunds()
            assert applied["result"] == "applied" and applied["key"].startswith(f"session-{body['session_id']}/")

            # The backend's program; a person approves its refund meanwhile. A-1 is refunded in
            # full by now, so the service refuses the second refund and the model reads why.
            sid = await asyncio.wait_for(backend_approves_then_reads(harness, service, queue), 120)
            assert sid
        assert [r["result"] for r in service.refunds()] == ["applied", "refused"]
        assert (await service.order("A-1"))["refunded_cents"] == 1250


async def backend_approves_then_reads(harness: Harness, service: OrdersService, queue: str) -> str:
    env = {
        **os.environ, "AGENTRT_TEMPORAL_ADDRESS": harness.server.address, "AGENTRT_TASK_QUEUE": queue,
        "AGENTRT_DATABASE_URL": harness.config.database_url or "", "ORDERS_URL": service.url,
    }
    env.pop("AGENTRT_CONFIG", None)
    program = await asyncio.create_subprocess_exec(
        sys.executable, "service.py", PROMPT, cwd=EXAMPLE, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    assert program.stderr is not None
    said = (await program.stderr.readline()).decode()
    found = re.match(r"session (\w+): approve", said)
    assert found, said
    sid = found[1]
    harness.session_ids.append(sid)
    backend = AgentClient(harness.temporal, task_queue=queue, principal="shop-backend")
    requested = await wait_for_event(backend, sid, lambda e: isinstance(e, PermissionRequested), timeout=90)
    assert isinstance(requested, PermissionRequested) and requested.request.tool == "refund"
    await backend.approve(sid, requested.request.request_id)
    out, err = await program.communicate()
    assert program.returncode == 0, err.decode()
    triage = json.loads(out)
    assert triage["category"] == "refund" and triage["refunded_cents"] == 1250
    return sid


async def test_a_worker_killed_while_the_refund_is_in_flight_leaves_one_refund_at_the_service(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """The first worker dies after the service made the refund and before it answered. The next
    worker finds the effect claimed with no outcome and asks a person; told `not_applied`, it
    calls again under the same Idempotency-Key, and the service answers the refund it made."""
    queue = harness.task_queue + "-support-kill"
    client = harness.client_on(queue)
    sid = harness.new_session_id()
    config = session_config(client, sid, workspace, str(EXAMPLE / "script.yaml"), agent="support")
    async with orders_service(tmp_path, refund_seconds=600) as service:
        with support_worker(harness, service, tmp_path / "worker-1.log", queue) as first:
            started = await client.start(config, PROMPT)
            requested = await wait_for_event(client, sid, lambda e: isinstance(e, PermissionRequested), timeout=90)
            await client.approve(sid, requested.request.request_id)
            for _ in range(900):
                if service.refunds():
                    break
                await asyncio.sleep(0.1)
            kill_hard(first)  # the refund is made at the service; its answer never came
        [made] = service.refunds()
        assert made["result"] == "applied", (tmp_path / "worker-1.log").read_text()

        with support_worker(harness, service, tmp_path / "worker-2.log", queue):
            reconcile = await wait_for_event(
                client, sid, lambda e: isinstance(e, PermissionRequested) and e.request.kind == "reconcile", timeout=120
            )
            await client.reconcile(sid, reconcile.request.request_id, "not_applied", note="the service dedups by Idempotency-Key")
            outcome = await client.wait(sid, started.turn_id, timeout_seconds=120)

        assert outcome.status == "completed", outcome
        assert outcome.output is not None and outcome.output["refunded_cents"] == 1250
        assert [(r["key"], r["result"]) for r in service.refunds()] == [(made["key"], "applied"), (made["key"], "replayed")]
        assert (await service.order("A-1"))["refunded_cents"] == 1250  # one refund, not two
