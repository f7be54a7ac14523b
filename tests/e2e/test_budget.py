"""Session budgets end to end: spend counted from model calls, tool calls, a profile's price and
wall time; a turn stopped at a crossed limit; ``raise_budget``; a session that starts with its
prompt and ends after its turn (as an autonomous task's sessions do)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import CancelledError

from agentrt.schemas import (
    PROVIDER_COMPLETE,
    AssistantMessageCompleted,
    Budget,
    BudgetExceededEvent,
    BudgetRaised,
    ModelCallInput,
    ModelPrice,
    ModelProfile,
    ModelRequestStarted,
    OperatorActed,
    RaiseBudgetInput,
    RequestRejected,
    SessionArchived,
    SessionInput,
    SessionParent,
    SessionResult,
    SessionStateView,
    ToolInvocationFailed,
    ToolInvocationStarted,
    TurnEnded,
    Usage,
    UserMessageAdded,
)
from agentrt.workflows.session import SessionWorkflow
from tests.conftest import OWNER, Harness
from tests.e2e._support import ALLOW_ALL, session_config, write_script

LIST = {"tool_calls": [{"name": "fs.list", "arguments": {"path": "."}}]}
OUTPUT_PRICE = ModelPrice(input_usd_per_mtok=0.0, output_usd_per_mtok=15.0)


async def _raise(harness: Harness, session_id: str, principal: str, budget: Budget, reason: str | None = None) -> SessionStateView:
    return await harness.handle(session_id).execute_update(
        SessionWorkflow.raise_budget, RaiseBudgetInput(principal=principal, budget=budget, reason=reason)
    )


async def _model_inputs(harness: Harness, session_id: str) -> list[dict[str, Any]]:
    """The inputs of the session's model calls, as its history holds them."""
    history = await harness.handle(session_id).fetch_history()
    inputs = []
    for event in history.events:
        if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            continue
        attributes = event.activity_task_scheduled_event_attributes
        if attributes.activity_type.name == PROVIDER_COMPLETE:
            inputs.append(json.loads(attributes.input.payloads[0].data))
    return inputs


async def test_a_turn_that_reaches_its_output_token_budget_ends_budget_exceeded_until_the_budget_is_raised(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [LIST, {"text": "listed"}])
    sid = harness.new_session_id()
    # An output limit: a prompt cannot pass it before the call (test_budget_before_call.py), the answer does.
    config = session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL, budget=Budget(max_output_tokens=3))
    started = await harness.client.start(config, "list the files")

    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "budget_exceeded" and outcome.error_type == "BudgetExceeded"
    assert outcome.error is not None and outcome.error.startswith("output_tokens budget of 3 output tokens reached")
    events = (await harness.client.events(sid)).events
    exceeded = [e for e in events if isinstance(e, BudgetExceededEvent)]
    assert len(exceeded) == 1 and exceeded[0].turn_id == started.turn_id
    assert exceeded[0].crossing.dimension == "output_tokens" and exceeded[0].crossing.limit == 3
    assert not [e for e in events if isinstance(e, ToolInvocationStarted)]
    failed = [e for e in events if isinstance(e, ToolInvocationFailed)]
    assert [(e.call_id, e.reason) for e in failed] == [("call_0_0", "cancelled")]
    ended = [e for e in events if isinstance(e, TurnEnded)]
    assert [(e.status, e.error_type) for e in ended] == [("budget_exceeded", "BudgetExceeded")]
    transcript = [m for _, m in harness.store.messages(sid)]
    assert [m.role for m in transcript] == ["user", "assistant", "tool", "assistant"]
    assert "budget is spent" in transcript[-1].text and outcome.error in transcript[-1].text

    # Spent: the next message ends at once, without a model call.
    second = await harness.client.send(sid, "go on")
    blocked = await harness.client.wait(sid, second.turn_id)
    assert blocked.status == "budget_exceeded" and blocked.rounds == 0
    events = (await harness.client.events(sid)).events
    assert not [e for e in events if isinstance(e, ModelRequestStarted) and e.turn_id == second.turn_id]

    view = await _raise(harness, sid, OWNER, Budget(max_output_tokens=1_000_000))
    assert view.budget == Budget(max_output_tokens=1_000_000)
    assert view.spend is not None and view.spend.usage == view.usage
    assert view.remaining is not None and view.remaining.max_output_tokens == 1_000_000 - view.usage.output_tokens
    third = await harness.client.send(sid, "go on now")
    completed = await harness.client.wait(sid, third.turn_id)
    assert completed.status == "completed" and completed.answer == "listed"
    raised = [e for e in (await harness.client.events(sid)).events if isinstance(e, BudgetRaised)]
    assert [(e.principal, e.budget.max_output_tokens) for e in raised] == [(OWNER, 1_000_000)]


async def test_a_strangers_raise_budget_is_rejected_and_changes_nothing(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": "hello"}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, budget=Budget(max_tokens=50_000), operators=["ops"])
    started = await harness.client.start(config, "hi")
    await harness.client.wait(sid, started.turn_id)

    with pytest.raises(WorkflowUpdateFailedError):
        await _raise(harness, sid, "mallory", Budget(max_tokens=10_000_000))
    with pytest.raises(WorkflowUpdateFailedError):
        await _raise(harness, sid, "ops", Budget(max_tokens=10_000_000))  # an operator gives a reason

    state = await harness.client.state(sid)
    assert state.budget == Budget(max_tokens=50_000)
    events = (await harness.client.events(sid)).events
    assert not [e for e in events if isinstance(e, (BudgetRaised, OperatorActed))]
    view = await _raise(harness, sid, "ops", Budget(max_tool_calls=5), reason="owner away")
    assert view.budget == Budget(max_tokens=50_000, max_tool_calls=5)
    events = (await harness.client.events(sid)).events
    assert [(e.action, e.reason) for e in events if isinstance(e, OperatorActed)] == [("raise_budget", "owner away")]


async def test_a_raise_budget_that_lowers_a_limit_is_rejected_and_leaves_the_budget_as_it_was(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "hello"}])
    sid = harness.new_session_id()
    budget = Budget(max_tokens=50_000, max_tool_calls=10)
    config = session_config(harness.client, sid, workspace, script, budget=budget)
    started = await harness.client.start(config, "hi")
    await harness.client.wait(sid, started.turn_id)

    with pytest.raises(RequestRejected, match=r"cannot lower a limit of session .*max_tokens 50,000 -> 1,000"):
        await harness.client.raise_budget(sid, Budget(max_tokens=1_000))
    with pytest.raises(RequestRejected, match=r"max_tool_calls 10 -> 2"):
        await harness.client.raise_budget(sid, Budget(max_tokens=100_000, max_tool_calls=2))

    assert (await harness.client.state(sid)).budget == budget
    assert not [e for e in (await harness.client.events(sid)).events if isinstance(e, BudgetRaised)]


async def test_a_tool_call_budget_stops_before_the_batch_that_would_pass_it(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        LIST,
        {"tool_calls": [
            {"name": "fs.read", "arguments": {"path": "README.md"}},
            {"name": "fs.read", "arguments": {"path": "src/main.py"}},
        ]},
        {"text": "never reached"},
    ])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL, budget=Budget(max_tool_calls=2))
    started = await harness.client.start(config, "read everything")

    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "budget_exceeded" and outcome.rounds == 2 and outcome.tool_calls == 3
    events = (await harness.client.events(sid)).events
    assert [e.call_id for e in events if isinstance(e, ToolInvocationStarted)] == ["call_0_0"]
    assert [(e.call_id, e.reason) for e in events if isinstance(e, ToolInvocationFailed)] == [
        ("call_1_0", "cancelled"), ("call_1_1", "cancelled"),
    ]
    (exceeded,) = [e for e in events if isinstance(e, BudgetExceededEvent)]
    assert (exceeded.crossing.dimension, exceeded.crossing.limit, exceeded.crossing.used) == ("tool_calls", 2, 3)
    state = await harness.client.state(sid)
    assert state.spend is not None and state.spend.tool_calls == 3
    assert state.remaining is not None and state.remaining.max_tool_calls == 0


async def test_cost_is_priced_by_the_profile_and_bounded_by_max_cost(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    # Input is free here, so the prompt alone passes no cost limit and the call is sent; its answer crosses it.
    harness.config.profiles["priced"] = ModelProfile(
        name="priced", provider="scripted", model="scripted", context_window=200_000, price=OUTPUT_PRICE
    )
    script = write_script(tmp_path, [LIST, {"text": "listed"}])
    sid = harness.new_session_id()
    config = session_config(
        harness.client, sid, workspace, script, profile="priced", approval=ALLOW_ALL, budget=Budget(max_cost_usd=0.000001)
    )
    started = await harness.client.start(config, "list the files")

    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "budget_exceeded"
    state = await harness.client.state(sid)
    assert state.spend is not None and state.spend.cost_usd == pytest.approx(OUTPUT_PRICE.cost(outcome.usage))
    assert state.spend.cost_usd > 0
    (exceeded,) = [e for e in (await harness.client.events(sid)).events if isinstance(e, BudgetExceededEvent)]
    assert exceeded.crossing.dimension == "cost_usd"
    assert exceeded.crossing.used == pytest.approx(OUTPUT_PRICE.cost(outcome.usage))


async def test_the_model_call_carries_the_remaining_budget_and_the_task_session_number(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [LIST, {"text": "listed"}])
    sid = harness.new_session_id()
    config = session_config(
        harness.client, sid, workspace, script, approval=ALLOW_ALL, budget=Budget(max_tokens=1_000_000, max_tool_calls=10),
    )
    started = await harness.client.start(config, "list the files")
    outcome = await harness.client.wait(sid, started.turn_id)
    assert outcome.status == "completed"

    first, second = [ModelCallInput.model_validate(i) for i in await _model_inputs(harness, sid)]
    assert first.budget_note == "Remaining budget: 1,000,000 tokens, 10 tool calls"
    assert second.budget_note is not None and second.budget_note.startswith("Remaining budget: ")
    assert second.budget_note.endswith(", 9 tool calls") and "1,000,000 tokens" not in second.budget_note
    assert first.script_session is None


async def test_a_session_without_a_budget_sends_no_budget_note(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": "hello"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "hi")
    await harness.client.wait(sid, started.turn_id)
    (raw,) = await _model_inputs(harness, sid)
    assert "budget_note" not in raw and "script_session" not in raw
    state = await harness.client.state(sid)
    assert state.budget is None and state.spend is None and state.remaining is None


async def test_a_session_with_a_prompt_that_ends_after_its_turn_returns_the_outcome_and_spend(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [LIST, {"text": "listed them"}])
    sid = harness.new_session_id()
    config = session_config(
        harness.client, sid, workspace, script, approval=ALLOW_ALL, interactive=False,
        prompt="list the files", ends_after_turn=True, parent=SessionParent(id="t-1", number=2),
        budget=Budget(max_tokens=1_000_000), max_rounds_per_turn=5,
    )

    result = await harness.temporal.execute_workflow(
        SessionWorkflow.run, SessionInput(config=config), id=f"session-{sid}", task_queue=harness.task_queue
    )

    assert isinstance(result, SessionResult)
    assert result.status == "archived" and result.turns == 1
    assert result.outcome is not None and result.outcome.status == "completed"
    assert result.outcome.answer == "listed them" and result.outcome.turn_id == "turn-1"
    assert result.spend is not None and result.spend.tool_calls == 1
    assert result.spend.usage == result.usage and result.usage != Usage()
    assert result.spend.wall_seconds >= 0
    events = harness.store.events(sid)
    (added,) = [e for e in events if isinstance(e, UserMessageAdded)]
    assert (added.principal, added.text) == (OWNER, "list the files")
    (archived,) = [e for e in events if isinstance(e, SessionArchived)]
    assert (archived.principal, archived.reason) == (OWNER, "ended after its turn")
    assert [e.type for e in events][-1] == "SessionArchived"
    inputs = [ModelCallInput.model_validate(i) for i in await _model_inputs(harness, sid)]
    assert [i.script_session for i in inputs] == [2, 2]
    assert all(i.budget_note is not None for i in inputs)


async def test_a_cancelled_session_that_ends_after_its_turn_ends_cancelled(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": "slow", "delay_seconds": 30}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, prompt="go", ends_after_turn=True)
    handle = await harness.temporal.start_workflow(
        SessionWorkflow.run, SessionInput(config=config), id=f"session-{sid}", task_queue=harness.task_queue
    )
    while not [e for e in (await harness.client.events(sid)).events if isinstance(e, ModelRequestStarted)]:
        await asyncio.sleep(0.1)

    await handle.cancel()

    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    assert isinstance(failure.value.cause, CancelledError)
    events = harness.store.events(sid)
    assert [e.status for e in events if isinstance(e, TurnEnded)] == ["cancelled"]
    (archived,) = [e for e in events if isinstance(e, SessionArchived)]
    assert archived.principal == "temporal"
    assert not [e for e in events if isinstance(e, AssistantMessageCompleted)]


async def test_a_wall_time_budget_stops_the_turn_after_a_slow_reply(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{**LIST, "delay_seconds": 1.5}, {"text": "never reached"}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, approval=ALLOW_ALL, budget=Budget(max_wall_seconds=1.0))
    started = await harness.client.start(config, "list slowly")

    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "budget_exceeded" and outcome.rounds == 1
    (exceeded,) = [e for e in (await harness.client.events(sid)).events if isinstance(e, BudgetExceededEvent)]
    assert exceeded.crossing.dimension == "wall_seconds" and exceeded.crossing.used >= 1.5


async def test_a_final_answer_that_passes_the_budget_completes_its_turn(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": "answered"}, {"text": "never reached"}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, budget=Budget(max_output_tokens=1))
    started = await harness.client.start(config, "hi")

    outcome = await harness.client.wait(sid, started.turn_id)

    assert outcome.status == "completed" and outcome.answer == "answered"
    second = await harness.client.send(sid, "again")
    assert (await harness.client.wait(sid, second.turn_id)).status == "budget_exceeded"


async def test_a_budget_given_to_agentrt_run_stops_the_turn_and_session_raise_budget_lets_the_next_one_run(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    from tests.cli.test_cli import agentrt

    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}]},
        {"text": "read it"},
        {"text": "carried on"},
    ])
    ran = await agentrt(
        harness, "run", "read the readme", "-w", str(workspace), "--script", script, "--budget-tool-calls", "1",
        "--budget-tokens", "5", "--json", cwd=tmp_path,
    )
    body = json.loads(ran.stdout)
    assert ran.returncode == 1, ran.stderr
    assert body["outcome"] == "budget_exceeded" and body["error_type"] == "BudgetExceeded"
    session_id = body["session_id"]

    refused = await agentrt(harness, "session", "raise-budget", session_id, cwd=tmp_path)
    assert refused.returncode == 2 and "at least one of --budget-tokens" in refused.stderr

    raised = await agentrt(harness, "session", "raise-budget", session_id, "--budget-tokens", "1000000", "--json", cwd=tmp_path)
    assert raised.returncode == 0, raised.stderr
    view = json.loads(raised.stdout)
    assert view["budget"]["max_tokens"] == 1_000_000 and view["budget"]["max_tool_calls"] == 1

    state = await agentrt(harness, "session", "state", session_id, cwd=tmp_path)
    assert "budget    1,000,000 tokens, 1 tool calls" in state.stdout

    sent = await agentrt(harness, "session", "send", session_id, "go on", "--json", cwd=tmp_path)
    assert sent.returncode == 0, sent.stdout + sent.stderr
    assert json.loads(sent.stdout)["outcome"] == "completed"


async def test_a_message_to_a_session_that_runs_one_turn_is_refused_not_dropped(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    from agentrt.schemas import RequestRejected

    script = write_script(tmp_path, [{"text": "slow", "delay_seconds": 3}])
    sid = harness.new_session_id()
    config = session_config(
        harness.client, sid, workspace, script, prompt="go", ends_after_turn=True, parent=SessionParent(id="t-9", number=1)
    )
    handle = await harness.temporal.start_workflow(
        SessionWorkflow.run, SessionInput(config=config), id=f"session-{sid}", task_queue=harness.task_queue
    )

    with pytest.raises(RequestRejected, match="runs one turn and ends: it takes no messages; steer task t-9"):
        await harness.client.send(sid, "please also write X")

    result = await handle.result()
    assert result.turns == 1 and result.outcome is not None and result.outcome.answer == "slow"
    assert [e.text for e in harness.store.events(sid) if isinstance(e, UserMessageAdded)] == ["go"]
