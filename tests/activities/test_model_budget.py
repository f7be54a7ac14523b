"""What the model activities carry for budgets and autonomous tasks: the "Budget" section of the
system prompt (``ModelCallInput.budget_note``), a task session's script section
(``script_session``) and the profile's price (``profiles.describe``, ``session.prepare``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

import agentrt.activities._model as model
from agentrt.activities import ModelActivities
from agentrt.activities._system_prompt import BUDGET_HEADING, MAX_BUDGET_NOTE_CHARS, budget_section
from agentrt.activities.tools import default_registry
from agentrt.schemas import (
    DescribeProfileInput,
    Message,
    ModelCallInput,
    ModelPrice,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    PositionedMessage,
    PrepareSessionInput,
    SessionConfig,
    StoreAppendInput,
    Usage,
)
from agentrt.store import Store
from agentrt.worker import AgentrtConfig

PRICE = ModelPrice(input_usd_per_mtok=3.0, output_usd_per_mtok=15.0, cache_read_usd_per_mtok=0.3)
NOTE = "Left of this session's budget: 8,200 tokens, $0.31."


@dataclass
class Profiles:
    profiles: dict[str, ModelProfile] = field(default_factory=dict)


class Recording:
    """A provider that keeps the requests it was sent and answers "ok"."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest, on_delta=None) -> ModelResponse:  # type: ignore[no-untyped-def]
        self.requests.append(request)
        return ModelResponse(text="ok", usage=Usage(input_tokens=10, output_tokens=1), stop_reason="end_turn")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(f"sqlite:///{tmp_path / 'agentrt.db'}") as s:
        s.append(
            StoreAppendInput(
                session_id="s1",
                config=SessionConfig(session_id="s1", owner="alice", workspace="/srv/repo"),
                messages=[PositionedMessage(position=0, message=Message(role="user", text="hello"))],
            )
        )
        yield s


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> Recording:
    provider = Recording()
    monkeypatch.setattr(model, "provider_for", lambda profile, **_: provider)
    return provider


def activities(store: Store, **profiles: ModelProfile) -> ModelActivities:
    return ModelActivities(Profiles(dict(profiles)), store, default_registry())


def call(**fields: object) -> ModelCallInput:
    base: dict[str, object] = dict(session_id="s1", turn_id="t1", round=1, profile="p", script="s.json", upto_position=1, reply_position=1)
    return ModelCallInput(**{**base, **fields})  # type: ignore[arg-type]


async def test_the_budget_note_ends_the_system_prompt(store: Store, recording: Recording) -> None:
    await ActivityEnvironment().run(activities(store).complete, call(system_prompt="Be brief.", budget_note=NOTE))

    system = recording.requests[0].system or ""
    assert system.startswith("You are an AI agent") and system.endswith(f"Be brief.\n\n{BUDGET_HEADING}\n{NOTE}")


async def test_a_replaced_system_prompt_still_gets_the_budget_note(store: Store, recording: Recording) -> None:
    await ActivityEnvironment().run(
        activities(store).complete, call(system_prompt="Only this.", system_prompt_mode="replace", budget_note=NOTE)
    )

    assert recording.requests[0].system == f"Only this.\n\n{BUDGET_HEADING}\n{NOTE}"


async def test_without_a_note_there_is_no_budget_section(store: Store, recording: Recording) -> None:
    await ActivityEnvironment().run(activities(store).complete, call(system_prompt="Only this.", system_prompt_mode="replace"))

    assert recording.requests[0].system == "Only this."


async def test_a_task_session_s_number_reaches_the_request(store: Store, recording: Recording) -> None:
    await ActivityEnvironment().run(activities(store).complete, call(script_session=3))
    await ActivityEnvironment().run(activities(store).complete, call(turn_id="t2"))

    assert [r.script_session for r in recording.requests] == [3, None]


def test_a_long_budget_note_is_cut_and_a_blank_one_makes_no_section() -> None:
    assert len(budget_section("x" * 5_000)) == len(BUDGET_HEADING) + 1 + MAX_BUDGET_NOTE_CHARS
    assert budget_section("  \n") == budget_section(None) == ""


def test_describe_and_prepare_give_the_profile_s_price(store: Store) -> None:
    priced = ModelProfile(name="claude", provider="anthropic", model="claude-x", price=PRICE)
    acts = activities(store, claude=priced)

    described = acts.describe(DescribeProfileInput(profile="claude"))
    prepared = acts.prepare(PrepareSessionInput(profile="claude", tools=[]))

    assert described.info is not None and described.info.price == PRICE
    assert prepared.profile.info is not None and prepared.profile.info.price == PRICE


def test_a_scripted_session_keeps_the_named_profile_s_price(store: Store) -> None:
    acts = activities(store, claude=ModelProfile(name="claude", provider="anthropic", model="claude-x", price=PRICE))

    scripted = acts.describe(DescribeProfileInput(profile="claude", script="s.json")).info
    unpriced = activities(store, local=ModelProfile(name="local", provider="openai", model="m")).describe(
        DescribeProfileInput(profile="local")
    ).info

    assert scripted is not None and (scripted.provider, scripted.price) == ("scripted", PRICE)
    assert unpriced is not None and unpriced.price is None
    assert "price" not in unpriced.model_dump()  # left out of history when unset


def test_the_worker_config_reads_a_profile_s_price_table(tmp_path: Path) -> None:
    path = tmp_path / "agentrt.toml"
    path.write_text(
        '[profiles.claude]\nprovider = "anthropic"\nmodel = "claude-x"\n'
        "[profiles.claude.price]\ninput_usd_per_mtok = 3.0\noutput_usd_per_mtok = 15\ncache_read_usd_per_mtok = 0.3\n"
    )

    assert AgentrtConfig.load(path, env={}).profile("claude").price == PRICE


@pytest.mark.parametrize("table", ["input_usd_per_mtok = -1\noutput_usd_per_mtok = 1", "input_usd_per_mtok = 1", "input_usd_per_mtok = 1\noutput_usd_per_mtok = 1\nper_call = 2"])
def test_a_bad_price_table_is_a_configuration_error(tmp_path: Path, table: str) -> None:
    from agentrt.schemas import ConfigurationError

    path = tmp_path / "agentrt.toml"
    path.write_text(f'[profiles.claude]\nprovider = "anthropic"\nmodel = "claude-x"\n[profiles.claude.price]\n{table}\n')

    with pytest.raises(ConfigurationError, match="profile 'claude' is invalid"):
        AgentrtConfig.load(path, env={})
