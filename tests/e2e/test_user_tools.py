"""A user's own tools and agents on the real server: `@tool` functions (sync and async) run through
the policy, approvals, the effect ledger and the trajectory like built-ins; a `ToolError` is fed
back, a crash is retried then reported typed, the worker's deps reach `ctx.deps` (and never
history); an agent or tool the worker lacks fails the session at once, naming it and the queue."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError

from agentrt.client import AgentClient, create_app
from agentrt.schemas import (
    AgentNotRegistered,
    PermissionRequested,
    SessionInitialized,
    ToolInvocationFailed,
    ToolNotRegistered,
)
from agentrt.worker import GatewayConfig, GatewayToken, build_worker, token_sha256
from tests.cli.test_cli import agentrt
from tests.conftest import OWNER, Harness
from tests.e2e._support import ALLOW_ALL, kill_hard, session_config, wait_for_event, worker_process, write_script
from tests.e2e.agent_tools import Order, order_desk, support
from tests.e2e.test_gateway import ALL, TOKENS, auth
from tests.gateway.test_gateway import serving

SECRET = "pool-password-7f3a"


def deps() -> dict[str, str]:
    return {"name": "shop-db", "secret": SECRET}


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def key(session_id: str) -> str:
    """The first tool call's idempotency key (tests/e2e/test_effects.py says why)."""
    return f"session-{session_id}/turn-1/2/call_0_0"


@pytest.fixture
async def desk(harness: Harness) -> AsyncIterator[AgentClient]:
    """A client of a worker that registered the ``support`` agent (and deps), on a queue of its own."""
    queue = harness.task_queue + "-agents"
    worker = build_worker(harness.temporal, harness.config, harness.store, task_queue=queue, agents=[support, order_desk], deps=deps)
    async with worker:
        yield harness.client_on(queue)


def tool_messages(harness: Harness, session_id: str) -> list:
    return [m for _, m in harness.store.messages(session_id) if m.role == "tool"]


async def test_a_sync_user_tool_runs_as_the_agent_s_and_its_pydantic_result_reaches_the_model(
    harness: Harness, desk: AgentClient, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    script = write_script(tmp_path, [call("lookup_order", order_id="A-1"), {"text": "it shipped"}])

    started, outcome = await desk.start_and_wait(session_config(desk, sid, workspace, script, agent="support"), "where is A-1?")

    assert outcome.status == "completed"
    [result] = tool_messages(harness, sid)
    assert json.loads(result.text) == {"order_id": "A-1", "status": "shipped", "total_cents": 1250}
    config = harness.store.session_config(sid)
    assert config is not None and config.agent == "support"
    assert config.tools == ["lookup_order", "refund", "whoami", "flaky_charge", "slow_payout"]
    assert (config.system_prompt or "").startswith("You are the support desk")
    events = (await desk.events(sid)).events
    [initialized] = [e for e in events if isinstance(e, SessionInitialized)]
    assert initialized.tools == sorted(["lookup_order", "refund", "whoami", "flaky_charge", "slow_payout"])
    assert (await desk.state(sid)).agent == "support"  # the state names the agent (HTTP's GET, `agentrt session state`)


async def test_an_agent_s_output_type_is_its_sessions_output_spec_and_a_turn_gets_the_typed_result(
    harness: Harness, desk: AgentClient, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    script = write_script(tmp_path, [
        call("lookup_order", order_id="A-1"),
        {"text": "it shipped"},  # not an Order: its problems go back to the model
        {"text": json.dumps({"order_id": "A-1", "status": "shipped", "total_cents": 1250})},
    ])

    _, outcome = await desk.start_and_wait(session_config(desk, sid, workspace, script, agent="order-desk"), "where is A-1?")

    assert outcome.status == "completed", outcome
    assert outcome.output_as(Order) == Order(order_id="A-1", status="shipped", total_cents=1250)
    config = harness.store.session_config(sid)
    assert config is not None and config.output is not None and config.output.json_schema["required"] == [
        "order_id", "status", "total_cents"
    ]
    events = (await desk.events(sid)).events
    assert [e.type for e in events].count("OutputValidationFailed") == 1


async def test_an_effectful_user_tool_asks_approval_goes_through_the_ledger_and_shows_in_the_trajectory(
    harness: Harness, desk: AgentClient, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    script = write_script(tmp_path, [call("refund", order_id="A-1", amount_cents=500), {"text": "refunded"}])
    started = await desk.start(session_config(desk, sid, workspace, script, agent="support"), "refund 5 euros")

    requested = await wait_for_event(desk, sid, lambda e: isinstance(e, PermissionRequested))
    assert isinstance(requested, PermissionRequested) and requested.request.tool == "refund"
    assert not (workspace / "refunds.log").exists()  # nothing runs before the approval
    await desk.approve(sid, requested.request.request_id)
    outcome = await desk.wait(sid, started.turn_id)

    assert outcome.status == "completed"
    [line] = (workspace / "refunds.log").read_text().splitlines()
    assert json.loads(line) == {"key": key(sid), "order": "A-1", "amount": 500}
    record = harness.store.effect(key(sid))
    assert record is not None and record.state == "applied" and record.tool == "refund"
    assert record.result_text == "refunded 500 cents on A-1"
    trajectory = await desk.trajectories.get(sid, started.turn_id)
    steps = [(s.action, s.outcome, s.call_id) for s in trajectory.turns[0].steps]
    assert steps == [("approval", "grant", "call_0_0"), ("refund", "ok", "call_0_0")]


async def test_an_async_user_tool_and_a_context_tool_get_the_call_s_context_and_the_worker_s_deps(
    harness: Harness, desk: AgentClient, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    script = write_script(tmp_path, [
        call("whoami"), call("refund", order_id="B-2", amount_cents=100, hold_seconds=0.2), {"text": "done"},
    ])

    _, outcome = await desk.start_and_wait(
        session_config(desk, sid, workspace, script, agent="support", approval=ALLOW_ALL), "who am I, then refund"
    )

    assert outcome.status == "completed"
    first, second = tool_messages(harness, sid)
    seen = json.loads(first.text)
    assert seen["session_id"] == sid and seen["turn_id"] == "turn-1" and seen["call_id"] == "call_0_0"
    assert seen["principal"] == OWNER and seen["idempotency_key"] == key(sid)
    assert seen["deps"] == "shop-db" and seen["workspace"] == str(workspace)
    assert second.text == "refunded 100 cents on B-2" and not second.is_error
    history = await harness.handle(sid).fetch_history()
    assert SECRET not in json.dumps(history.to_json_dict())  # deps never cross Temporal


async def test_a_tool_error_and_a_bad_argument_are_results_the_model_sees(
    harness: Harness, desk: AgentClient, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    script = write_script(tmp_path, [
        call("lookup_order", order_id="missing"),
        call("refund", order_id="A-1", amount_cents="a lot", admin=True),
        {"text": "sorry"},
    ])

    _, outcome = await desk.start_and_wait(
        session_config(desk, sid, workspace, script, agent="support", approval=ALLOW_ALL), "refund it all"
    )

    assert outcome.status == "completed"
    missing, bad = tool_messages(harness, sid)
    assert missing.is_error and missing.text == "error: no order 'missing'"
    assert bad.is_error and "amount_cents" in bad.text and "admin" in bad.text
    assert not (workspace / "refunds.log").exists()


async def test_a_crashing_effectful_tool_is_retried_by_the_policy_then_fails_typed_and_recorded(
    harness: Harness, desk: AgentClient, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    script = write_script(tmp_path, [call("flaky_charge", order_id="A-1"), {"text": "the service is down"}])

    _, outcome = await desk.start_and_wait(
        session_config(desk, sid, workspace, script, agent="support", approval=ALLOW_ALL), "charge it"
    )

    assert outcome.status == "completed"
    attempts = (workspace / "attempts.log").read_text().splitlines()
    assert len(attempts) == 5 and {a.split()[0] for a in attempts} == {key(sid)}  # TOOL_RETRY's attempts, one key
    [result] = tool_messages(harness, sid)
    assert result.is_error
    assert result.text == "error: flaky_charge failed unexpectedly: ConnectionError: payment service unreachable"
    record = harness.store.effect(key(sid))
    assert record is not None and record.state == "failed"


async def test_an_effectful_async_tool_past_its_time_bound_leaves_its_outcome_to_a_person_not_failed(
    harness: Harness, desk: AgentClient, workspace: Path, tmp_path: Path
) -> None:
    """The service may have paid: recorded ``failed``, the model would call again under a new key."""
    sid = harness.new_session_id()
    script = write_script(tmp_path, [call("slow_payout", order_id="A-1"), {"text": "paid"}])
    config = session_config(desk, sid, workspace, script, agent="support", approval=ALLOW_ALL)
    started = await desk.start(config, "pay it out")

    requested = await wait_for_event(desk, sid, lambda e: isinstance(e, PermissionRequested) and e.request.kind == "reconcile")
    [failed] = [e for e in (await desk.events(sid)).events if isinstance(e, ToolInvocationFailed)]
    assert failed.reason == "outcome_unknown" and "stopped after 1 s: the call's time bound" in failed.error
    record = harness.store.effect(key(sid))
    assert record is not None and record.state == "claimed"  # open, not failed
    await desk.reconcile(sid, requested.request.request_id, "applied", note="the service has it")
    outcome = await desk.wait(sid, started.turn_id, timeout_seconds=60)

    assert outcome.status == "completed"
    assert (workspace / "payouts.log").read_text().splitlines() == [key(sid)]  # run once
    record = harness.store.effect(key(sid))
    assert record is not None and record.state == "applied"


async def test_an_agent_the_worker_lacks_fails_the_session_at_once_naming_it_and_the_task_queue(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    script = write_script(tmp_path, [{"text": "never"}])
    config = session_config(harness.client, sid, workspace, script, agent="billing")

    with pytest.raises(AgentNotRegistered) as raised:
        await asyncio.wait_for(harness.client.start_and_wait(config, "hello"), 30)

    assert raised.value.name == "billing" and raised.value.task_queue == harness.task_queue
    assert str(raised.value).startswith(f"agent 'billing' is not registered on the worker of task queue {harness.task_queue!r}")
    with pytest.raises(WorkflowFailureError) as failed:
        await harness.handle(sid).result()
    cause = failed.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "AgentNotRegistered" and cause.non_retryable
    view = await harness.client.state(sid)  # the closed workflow's state says it failed, and why
    assert view.status == "failed" and (view.error or "").startswith("AgentNotRegistered: agent 'billing' is not registered")


async def test_a_tool_the_worker_lacks_fails_the_session_at_once_naming_it_and_the_task_queue(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    script = write_script(tmp_path, [{"text": "never"}])
    config = session_config(harness.client, sid, workspace, script, tools=["fs.read", "lookup_order"])
    started = await harness.client.start(config, "hello")

    with pytest.raises(ToolNotRegistered) as raised:
        await asyncio.wait_for(harness.client.wait(sid, started.turn_id), 30)

    assert raised.value.names == ["lookup_order"] and raised.value.task_queue == harness.task_queue
    assert str(raised.value).startswith(f"tool 'lookup_order' not registered on the worker of task queue {harness.task_queue!r}")


async def test_a_worker_killed_mid_call_never_runs_the_effect_again_under_its_key(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """`agentrt worker --agents` in a process of its own, killed while the refund is in flight;
    the worker that takes over finds the claim without an outcome and asks to reconcile."""
    client = harness.client_on(harness.task_queue + "-proc")
    sid = harness.new_session_id()
    script = write_script(tmp_path, [call("refund", order_id="A-1", amount_cents=700, hold_seconds=60), {"text": "ok"}])
    config = session_config(client, sid, workspace, script, agent="support", approval=ALLOW_ALL)
    log = workspace / "refunds.log"
    with worker_process(harness, tmp_path / "worker.log", "--agents", "tests.e2e.agent_tools") as first:
        started = await client.start(config, "refund 7 euros")
        for _ in range(600):
            if log.exists():
                break
            await asyncio.sleep(0.1)
        kill_hard(first)  # the refund is in flight: claimed, not recorded
    assert log.exists(), (tmp_path / "worker.log").read_text()
    worker = build_worker(harness.temporal, harness.config, harness.store, task_queue=client.task_queue, agents=[support])
    async with worker:
        requested = await wait_for_event(
            client, sid, lambda e: isinstance(e, PermissionRequested) and e.request.kind == "reconcile", timeout=90
        )
        await client.reconcile(sid, requested.request.request_id, "applied", note="the payment service has it")
        outcome = await client.wait(sid, started.turn_id)

    assert outcome.status == "completed"
    assert len(log.read_text().splitlines()) == 1  # run once, never again under its key
    record = harness.store.effect(key(sid))
    assert record is not None and record.state == "applied"


async def test_agentrt_run_with_agents_registers_them_on_its_in_process_worker(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [call("lookup_order", order_id="C-3"), {"text": "C-3 has shipped"}])
    queue = harness.task_queue + "-cli"  # no worker polls it: `agentrt run` runs one in its process

    result = await agentrt(
        harness, "run", "where is C-3?", "--workspace", str(workspace), "--script", script, "--json",
        "--agents", "tests.e2e.agent_tools", "--agent", "support", cwd=Path.cwd(), env={"AGENTRT_TASK_QUEUE": queue},
    )

    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["outcome"] == "completed" and body["answer"] == "C-3 has shipped"
    [message] = tool_messages(harness, body["session_id"])
    assert json.loads(message.text)["order_id"] == "C-3"


async def test_agentrt_run_of_an_agent_without_agents_says_its_own_worker_needs_the_module(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "never"}])
    queue = harness.task_queue + "-cli-bare"  # no worker polls it: `agentrt run` runs one, without the module

    result = await agentrt(
        harness, "run", "where is C-3?", "--workspace", str(workspace), "--script", script, "--agent", "support",
        cwd=tmp_path, env={"AGENTRT_TASK_QUEUE": queue},
    )

    assert result.returncode == 2, result.stdout + result.stderr
    assert "agent 'support' is not registered" in result.stderr
    assert f"the worker this run started (none polled {queue!r}) has no agents module: give it one with --agents MODULE" in result.stderr


async def test_a_session_created_over_http_by_agent_name_runs_as_that_agent(
    harness: Harness, desk: AgentClient, workspace: Path, tmp_path: Path
) -> None:
    tokens = GatewayConfig(tokens=[GatewayToken(sha256=token_sha256(t), principal=p, scopes=ALL) for p, t in TOKENS.items()])
    client = AgentClient(harness.temporal, task_queue=desk.task_queue, principal="gateway", store=harness.store)
    script = write_script(tmp_path, [call("lookup_order", order_id="D-4"), {"text": "D-4 has shipped"}])
    body = {"text": "where is D-4?", "workspace": workspace.name, "script": script, "agent": "support"}
    for _ in range(300):  # the gateway answers 503 until the desk worker's first poll reaches the server
        if await client.has_worker():
            break
        await asyncio.sleep(0.1)

    async with serving(create_app(client, tokens, workspace_root=workspace.parent)) as http:
        created = await http.post("/v1/sessions", json=body, headers=auth("alice"))
        assert created.status_code == 201, created.text
        sid, turn = created.json()["session_id"], created.json()["turn_id"]
        harness.session_ids.append(sid)
        outcome = (await http.get(f"/v1/sessions/{sid}/turns/{turn}?wait=30", headers=auth("alice"))).json()

    assert outcome["status"] == "completed" and outcome["answer"] == "D-4 has shipped"
    config = harness.store.session_config(sid)
    assert config is not None and config.agent == "support" and "lookup_order" in (config.tools or [])
