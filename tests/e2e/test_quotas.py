"""Tenant quotas end to end: a tenant at its daily token quota is refused a new start (typed, the
quota and its reset named) and a turn (not sent: the session keeps its state), an operator's raise
is recorded and lets both go on; starts and children of tasks and graphs count and are refused the
same way."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentrt.client import AgentClient
from agentrt.schemas import BudgetExceededEvent, Quota, QuotaExceeded, QuotaPolicy, RequestRejected, TurnEnded, quota_day
from tests.conftest import Harness
from tests.e2e._support import ALLOW_ALL, session_config, write_script
from tests.e2e._tasks import write_task_script

OPS = "ops"


def _tenant(harness: Harness, quota: Quota) -> tuple[str, list[str]]:
    """A fresh tenant with two owners under ``quota``, set on the worker's configuration."""
    tag = uuid.uuid4().hex[:8]
    tenant, owners = f"acme-{tag}", [f"alice-{tag}", f"bob-{tag}"]
    policy = QuotaPolicy(tenants={tenant: quota}, owners={o: tenant for o in owners})
    harness.config.quotas = policy
    return tenant, owners


def _client(harness: Harness, principal: str) -> AgentClient:
    """A client as ``principal`` with the worker's quotas, the store and ``OPS`` as operator."""
    return AgentClient(
        harness.temporal, task_queue=harness.task_queue, principal=principal, store=harness.store,
        quotas=harness.config.quotas, operators=[OPS],
    )


def _spent(harness: Harness, owners: list[str]) -> int:
    tokens, _, _ = harness.store.tenant_usage(owners, quota_day(datetime.now(UTC))[0])
    return tokens


async def _spend_a_turn(harness: Harness, client: AgentClient, workspace: Path, tmp_path: Path) -> str:
    """One completed turn of a new session of ``client``'s principal; returns the session id."""
    script = write_script(tmp_path, [{"text": "first answer"}, {"text": "second answer"}], name=f"s-{uuid.uuid4().hex[:6]}.json")
    config = session_config(client, harness.new_session_id(), workspace, script, approval=ALLOW_ALL)
    started = await client.start(config, "hello")
    outcome = await client.wait(config.session_id, started.turn_id, timeout_seconds=60)
    assert outcome.status == "completed", outcome.error
    return config.session_id


async def test_a_tenant_at_its_daily_token_quota_is_refused_a_start_and_a_turn_until_an_operator_raises_it(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    tenant, (alice, bob) = _tenant(harness, Quota(tokens_per_day=10_000_000))
    alice_client, bob_client = _client(harness, alice), _client(harness, bob)
    open_session = await _spend_a_turn(harness, alice_client, workspace, tmp_path)
    spent = _spent(harness, [alice, bob])
    assert spent > 0
    # The tenant is now at its quota (an operator lowered it below today's use).
    await _client(harness, OPS).quotas.raise_quota(tenant, tokens_per_day=spent // 2, reason="tighten for the test")

    # A new start by another owner of the same tenant is refused, and nothing starts.
    script = write_script(tmp_path, [{"text": "never"}], name="refused.json")
    config = session_config(bob_client, harness.new_session_id(), workspace, script, approval=ALLOW_ALL)
    with pytest.raises(QuotaExceeded) as refused:
        await bob_client.start(config, "hello")
    err = refused.value
    assert (err.tenant, err.quota, err.limit, err.used) == (tenant, "tokens_per_day", spent // 2, spent)
    midnight = quota_day(datetime.now(UTC))[1]
    assert err.resets_at == midnight and midnight - datetime.now(UTC) <= timedelta(days=1)
    assert "tokens_per_day" in str(err) and midnight.strftime("%Y-%m-%dT%H:%M:%SZ") in str(err)
    assert harness.store.session_config(config.session_id) is None

    # A turn of the session already open: its model call is refused before it is sent.
    turn = await alice_client.send(open_session, "go on")
    stopped = await alice_client.wait(open_session, turn.turn_id, timeout_seconds=60)
    assert stopped.status == "budget_exceeded" and stopped.error_type == "QuotaExceeded"
    assert stopped.error is not None and "tokens_per_day" in stopped.error and "resets at" in stopped.error
    assert stopped.crossing is not None and stopped.crossing.dimension == "tokens_per_day"
    assert _spent(harness, [alice, bob]) == spent  # nothing was spent on it

    # Only an operator raises, with a reason; the raise is recorded with who, when and why.
    with pytest.raises(RequestRejected):
        await bob_client.quotas.raise_quota(tenant, tokens_per_day=10_000_000, reason="mine")
    view = await _client(harness, OPS).quotas.raise_quota(tenant, tokens_per_day=10_000_000, reason="customer upgraded")
    assert view.limits.tokens_per_day == 10_000_000 and view.usage.tokens == spent
    assert [(r.quota, r.limit, r.principal, r.reason) for r in view.raises][-1] == (
        "tokens_per_day", 10_000_000, OPS, "customer upgraded"
    )

    # After the raise: the new start runs, and the refused session goes on with its state.
    started = await bob_client.start(config, "hello")
    done = await bob_client.wait(config.session_id, started.turn_id, timeout_seconds=60)
    assert done.status == "completed" and done.answer == "never"
    again = await alice_client.send(open_session, "go on now")
    resumed = await alice_client.wait(open_session, again.turn_id, timeout_seconds=60)
    assert resumed.status == "completed" and resumed.answer == "second answer"
    ended = [e for e in (await alice_client.events(open_session)).events if isinstance(e, TurnEnded)]
    assert [(e.status, e.error_type) for e in ended] == [("completed", None), ("budget_exceeded", "QuotaExceeded"), ("completed", None)]
    exceeded = [e for e in (await alice_client.events(open_session)).events if isinstance(e, BudgetExceededEvent)]
    assert [e.crossing.dimension for e in exceeded] == ["tokens_per_day"]


async def test_a_tenant_at_its_quota_cannot_start_a_task_or_a_graph(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    tenant, (alice, _) = _tenant(harness, Quota(tokens_per_day=10_000_000))
    client = _client(harness, alice)
    await _spend_a_turn(harness, client, workspace, tmp_path)
    await _client(harness, OPS).quotas.raise_quota(tenant, tokens_per_day=1, reason="at quota")
    script = write_script(tmp_path, [{"text": "never"}], name="never.json")

    with pytest.raises(QuotaExceeded, match="tokens_per_day"):
        await client.start_task("never runs", workspace=str(workspace), script=script)
    with pytest.raises(QuotaExceeded, match="tokens_per_day"):
        await client.start_graph(goal="never runs", workspace=str(workspace), script=script)
    with pytest.raises(QuotaExceeded, match="tokens_per_day"):
        await client.start_and_wait(session_config(client, harness.new_session_id(), workspace, script), "hello")


async def test_a_task_whose_sessions_would_spend_past_the_tenant_s_quota_stops_and_spends_nothing_more(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    tenant, owners = _tenant(harness, Quota(tokens_per_day=10_000_000))
    client = _client(harness, owners[0])
    await _spend_a_turn(harness, client, workspace, tmp_path)
    spent = _spent(harness, owners)
    # Room for the start (used < limit), none for a model call's prompt.
    await _client(harness, OPS).quotas.raise_quota(tenant, tokens_per_day=spent + 5, reason="almost spent")
    script = write_task_script(tmp_path, [[{"text": "never sent"}], [{"text": "never sent"}]])

    task_id = await client.start_task("spend past the quota", workspace=str(workspace), script=script, max_sessions=2)

    async def stopped() -> None:
        while (await client.task_status(task_id)).status != "budget_exceeded":
            await asyncio.sleep(0.1)

    await asyncio.wait_for(stopped(), 60)
    view = await client.task_status(task_id)
    assert view.sessions == 1  # the second session was never started
    assert view.budget_crossing is not None and view.budget_crossing.dimension == "tokens_per_day"
    assert _spent(harness, owners) == spent
    await client.cancel_task(task_id, reason="done")


async def test_concurrent_sessions_are_counted_across_the_tenant_s_owners(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    tenant, (alice, bob) = _tenant(harness, Quota(concurrent_sessions=1))
    await _spend_a_turn(harness, _client(harness, alice), workspace, tmp_path)  # stays open
    bob_client = _client(harness, bob)
    script = write_script(tmp_path, [{"text": "never"}], name="second.json")

    async def refused() -> QuotaExceeded:
        while True:  # visibility may take a moment to list the first session
            try:
                await bob_client.start(session_config(bob_client, harness.new_session_id(), workspace, script), "hi")
            except QuotaExceeded as err:
                return err
            await asyncio.sleep(0.2)

    err = await asyncio.wait_for(refused(), 30)
    assert (err.tenant, err.quota, err.limit, err.resets_at) == (tenant, "concurrent_sessions", 1, None)


async def test_the_cli_refuses_a_start_at_quota_with_the_quota_and_its_reset_and_starts_after_an_operator_raise(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    from tests.cli.test_cli import agentrt

    tag = uuid.uuid4().hex[:8]
    tenant, owner = f"acme-{tag}", f"alice-{tag}"
    (tmp_path / "agentrt.toml").write_text(
        f'[principals]\noperators = ["{OPS}"]\n\n[tenants]\n"{owner}" = "{tenant}"\n\n[quotas.tenants.{tenant}]\ntokens_per_day = 0\n'
    )
    script = write_script(tmp_path, [{"text": "started"}], name="cli.json")
    run = ("run", "hello", "--workspace", str(workspace), "--script", script)

    refused = await agentrt(harness, *run, cwd=tmp_path, env={"AGENTRT_PRINCIPAL": owner})
    assert refused.returncode == 2, refused.stdout + refused.stderr
    midnight = quota_day(datetime.now(UTC))[1].strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f"tenant '{tenant}' is at its tokens_per_day quota of 0 (used 0): it resets at {midnight}" in refused.stderr

    stranger = await agentrt(harness, "quota", "raise", tenant, "--tokens-per-day", "100000", "--reason", "mine", cwd=tmp_path,
                             env={"AGENTRT_PRINCIPAL": owner})
    assert stranger.returncode == 2 and f"{owner} is not an operator" in stranger.stderr
    raised = await agentrt(harness, "quota", "raise", tenant, "--tokens-per-day", "100000", "--reason", "upgraded", "--json",
                           cwd=tmp_path, env={"AGENTRT_PRINCIPAL": OPS})
    assert raised.returncode == 0, raised.stderr
    body = json.loads(raised.stdout)
    assert body["limits"]["tokens_per_day"] == 100000 and body["raises"][-1]["principal"] == OPS
    assert body["raises"][-1]["reason"] == "upgraded"

    started = await agentrt(harness, *run, cwd=tmp_path, env={"AGENTRT_PRINCIPAL": owner})
    assert started.returncode == 0, started.stdout + started.stderr
    assert "started" in started.stdout
    shown = await agentrt(harness, "quota", "show", cwd=tmp_path, env={"AGENTRT_PRINCIPAL": owner})
    assert f"tenant {tenant}" in shown.stdout and "of 100,000" in shown.stdout and "upgraded" in shown.stdout


async def test_tool_calls_per_day_count_the_calls_models_asked_for_and_stop_the_next_model_call(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    _, (alice, _) = _tenant(harness, Quota(tool_calls_per_day=1))
    client = _client(harness, alice)
    script = write_script(tmp_path, [{"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]}, {"text": "listed"}], name="tools.json")
    config = session_config(client, harness.new_session_id(), workspace, script, approval=ALLOW_ALL)

    started = await client.start(config, "list the files")
    outcome = await client.wait(config.session_id, started.turn_id, timeout_seconds=60)

    # The listing ran (the quota was not reached when it was asked for); the model call after it was not sent.
    assert outcome.status == "budget_exceeded" and outcome.error_type == "QuotaExceeded" and outcome.tool_calls == 1
    assert outcome.crossing is not None and (outcome.crossing.dimension, outcome.crossing.used) == ("tool_calls_per_day", 1)
    assert [r.status for r in harness.store.usage_receipts(config.session_id)] == ["completed"]


async def test_the_gateway_answers_a_start_at_quota_with_429_naming_the_quota_and_retry_after(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    from agentrt.client import create_app
    from agentrt.worker import GatewayConfig, GatewayToken, token_sha256
    from tests.e2e.test_gateway import gateway_client
    from tests.gateway.test_gateway import serving

    tag = uuid.uuid4().hex[:8]
    tenant, owner, token = f"acme-{tag}", f"alice-{tag}", f"token-{tag}-0123456789abcdef"
    quotas = QuotaPolicy(tenants={tenant: Quota(tokens_per_day=0)}, owners={owner: tenant})
    client = await gateway_client(harness)
    client.connection.quotas = quotas
    config = GatewayConfig(tokens=[GatewayToken(sha256=token_sha256(token), principal=owner, scopes=("sessions",))])
    script = write_script(tmp_path, [{"text": "never"}], name="gw.json")

    async with serving(create_app(client, config, workspace_root=workspace.parent)) as http:
        response = await http.post(
            "/v1/sessions", json={"text": "hello", "workspace": workspace.name, "script": script},
            headers={"Authorization": f"Bearer {token}"},
        )

    assert response.status_code == 429, response.text
    body = response.json()
    assert body["type"].endswith("quota-exceeded") and "tokens_per_day" in body["detail"] and "resets at" in body["detail"]
    seconds = int(response.headers["Retry-After"])
    assert 0 < seconds <= 86_401
