"""Budgets that hold before the call, end to end: a model call whose prompt alone would pass the
session's token or cost budget is not sent (a loopback OpenAI-compatible server sees no request),
the turn ends ``budget_exceeded`` with the crossing, and the session goes on after ``raise_budget``."""

from __future__ import annotations

from pathlib import Path

from agentrt.schemas import Budget, BudgetExceededEvent, ModelPrice, ModelProfile, ModelRequestStarted, RaiseBudgetInput, TurnEnded
from agentrt.workflows.session import SessionWorkflow
from tests.activities.providers._loopback import LoopbackServer, Reply
from tests.conftest import Harness
from tests.e2e.conftest import KEY_ENV
from tests.e2e.test_memory_recall import RECORDED_TEXT

LONG_PROMPT = "Summarise this paragraph for me. " + "The quick brown fox jumps over the lazy dog. " * 200  # ~9 KB: ~2,300 tokens


def _loopback_profile(harness: Harness, server: LoopbackServer, price: ModelPrice | None = None) -> ModelProfile:
    profile = ModelProfile(
        name="loopback-budget", provider="openai", model="gpt-4o-mini", base_url=server.url, api_key_env=KEY_ENV, price=price
    )
    harness.config.profiles[profile.name] = profile
    return profile


async def test_a_call_whose_prompt_alone_passes_the_token_budget_is_not_sent_and_the_session_goes_on_after_raise_budget(
    harness: Harness, workspace: Path, provider_server: LoopbackServer
) -> None:
    profile = _loopback_profile(harness, provider_server)
    provider_server.reply(Reply(chunks=[RECORDED_TEXT.read_bytes()]))
    client = harness.client
    config = client.new_config(
        str(workspace), session_id=harness.new_session_id(), profile=profile.name, budget=Budget(max_tokens=1_000)
    )

    started = await client.start(config, LONG_PROMPT)
    outcome = await client.wait(config.session_id, started.turn_id, timeout_seconds=60)

    assert provider_server.requests == []  # the call was never sent
    assert outcome.status == "budget_exceeded" and outcome.error_type == "BudgetExceeded"
    assert outcome.error is not None and "would be passed by the next model call's prompt alone" in outcome.error
    events = (await client.events(config.session_id)).events
    [exceeded] = [e for e in events if isinstance(e, BudgetExceededEvent)]
    crossing = exceeded.crossing
    assert crossing.dimension == "tokens" and crossing.limit == 1_000 and crossing.used == 0
    assert crossing.estimated is not None and crossing.estimated > 1_000
    [request] = [e for e in events if isinstance(e, ModelRequestStarted)]
    assert request.context_tokens == crossing.estimated  # the context plan's estimate
    transcript = [m for _, m in harness.store.messages(config.session_id)]
    assert [m.role for m in transcript] == ["user", "assistant"] and "raise_budget" in transcript[-1].text
    assert harness.store.usage_receipts(config.session_id) == []  # no attempt was made

    await harness.handle(config.session_id).execute_update(
        SessionWorkflow.raise_budget, RaiseBudgetInput(principal=config.owner, budget=Budget(max_tokens=100_000))
    )
    again = await client.send(config.session_id, "go on")
    resumed = await client.wait(config.session_id, again.turn_id, timeout_seconds=60)

    assert resumed.status == "completed", resumed.error
    [sent] = provider_server.requests
    assert "quick brown fox" in str(sent.json["messages"])  # the state was kept: the long prompt went with it
    ended = [e for e in (await client.events(config.session_id)).events if isinstance(e, TurnEnded)]
    assert [e.status for e in ended] == ["budget_exceeded", "completed"]


async def test_a_call_whose_prompt_alone_passes_the_cost_budget_is_not_sent(
    harness: Harness, workspace: Path, provider_server: LoopbackServer
) -> None:
    profile = _loopback_profile(harness, provider_server, ModelPrice(input_usd_per_mtok=100.0, output_usd_per_mtok=100.0))
    client = harness.client
    config = client.new_config(
        str(workspace), session_id=harness.new_session_id(), profile=profile.name, budget=Budget(max_cost_usd=0.1)
    )

    started = await client.start(config, LONG_PROMPT)
    outcome = await client.wait(config.session_id, started.turn_id, timeout_seconds=60)

    assert provider_server.requests == []
    assert outcome.status == "budget_exceeded" and outcome.error is not None and outcome.error.startswith("cost_usd budget of $0.1")
    [exceeded] = [e for e in (await client.events(config.session_id)).events if isinstance(e, BudgetExceededEvent)]
    assert exceeded.crossing.dimension == "cost_usd" and exceeded.crossing.estimated is not None
    assert exceeded.crossing.estimated > 0.1
