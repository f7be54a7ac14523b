"""``send_and_wait``: a message and its turn's outcome in one update, and ``start_and_wait``:
a session's start, first message and outcome in one call (update-with-start)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.service import RPCError

from agentrt.schemas import RequestRejected, SendMessageInput, SessionNotFound, TurnEnded, TurnOutcome
from agentrt.workflows.session import SessionWorkflow
from tests.conftest import OWNER, Harness
from tests.e2e._support import session_config, write_script


async def test_start_and_wait_starts_the_session_and_answers_with_the_turns_outcome(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}]},
        {"text": "it is a demo project"},
    ])
    sid = harness.new_session_id()
    accepted: list[bool] = []

    started, outcome = await harness.client.start_and_wait(
        session_config(harness.client, sid, workspace, script), "what is this?", on_accepted=lambda: accepted.append(True)
    )

    assert accepted == [True]
    assert started.session_id == sid and started.turn_id == "turn-1" and started.workflow_id == f"session-{sid}"
    assert outcome.status == "completed" and outcome.answer == "it is a demo project"
    assert outcome.turn_id == "turn-1" and outcome.rounds == 2 and outcome.tool_calls == 1
    # The turn's end is in the store before its outcome is published.
    ended = [e for e in harness.store.events(sid) if isinstance(e, TurnEnded)]
    assert [e.turn_id for e in ended] == ["turn-1"]
    # Only the one update: no wait_turn was needed.
    history = await harness.handle(sid).fetch_history()
    updates = [e for e in history.events if e.HasField("workflow_execution_update_accepted_event_attributes")]
    assert [u.workflow_execution_update_accepted_event_attributes.accepted_request.input.name for u in updates] == [
        "send_and_wait"
    ]


async def test_send_and_wait_queues_behind_running_turns_and_answers_for_its_own(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"text": "first", "delay_seconds": 0.5},
        {"text": "second"},
        {"text": "third"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "one")

    second, third = await asyncio.gather(
        harness.client.send_and_wait(sid, "two"), harness.client.send_and_wait(sid, "three")
    )

    first = await harness.client.wait(sid, started.turn_id)
    assert (first.turn_id, first.answer) == ("turn-1", "first")
    assert {(o.turn_id, o.answer) for o in (second, third)} == {("turn-2", "second"), ("turn-3", "third")}
    assert second.status == third.status == "completed"
    assert (await harness.client.state(sid)).turns_completed == 3


async def test_start_and_wait_with_an_empty_message_is_rejected_before_anything_starts(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, write_script(tmp_path, [{"text": "x"}]))

    with pytest.raises(RequestRejected, match="message text is empty") as caught:
        await harness.client.start_and_wait(config, "   ")

    assert caught.value.session_id == sid
    with pytest.raises(RPCError):
        await harness.handle(sid).describe()  # no workflow was started


async def test_send_and_wait_from_a_stranger_or_with_no_text_is_rejected_and_the_session_goes_on(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "hello"}, {"text": "again"}])
    sid = harness.new_session_id()
    _, first = await harness.client.start_and_wait(session_config(harness.client, sid, workspace, script), "hi")
    assert first.status == "completed"

    with pytest.raises(RequestRejected, match="message text is empty"):
        await harness.client.send_and_wait(sid, "")
    with pytest.raises(SessionNotFound):  # another owner's session answers as a missing one
        await harness.as_principal("mallory").send_and_wait(sid, "let me in")
    # The raw update rejects the same way (any Temporal client).
    with pytest.raises(WorkflowUpdateFailedError) as raw:
        await harness.handle(sid).execute_update(SessionWorkflow.send_and_wait, SendMessageInput(text=" ", principal=OWNER))
    assert "message text is empty" in str(raw.value.cause)

    again = await harness.client.send_and_wait(sid, "once more")
    assert (again.turn_id, again.answer) == ("turn-2", "again")
    view = await harness.client.state(sid)
    assert view.turns_completed == 2


async def test_send_and_wait_to_an_archived_session_says_it_ended(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    sid = harness.new_session_id()
    _, first = await harness.client.start_and_wait(
        session_config(harness.client, sid, workspace, write_script(tmp_path, [{"text": "hello"}])), "hi"
    )
    assert first.status == "completed"
    await harness.client.archive(sid)
    assert (await harness.handle(sid).describe()).status == WorkflowExecutionStatus.COMPLETED

    with pytest.raises(RequestRejected, match="archived"):
        await harness.client.send_and_wait(sid, "are you there?")
    with pytest.raises(RequestRejected, match="has ended"):
        await harness.client.start_and_wait(
            session_config(harness.client, sid, workspace, write_script(tmp_path, [{"text": "x"}])), "restart?"
        )


async def test_send_and_wait_cancelled_by_its_caller_leaves_the_turn_running(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "hello"}, {"text": "slow answer", "delay_seconds": 1.0}])
    sid = harness.new_session_id()
    await harness.client.start_and_wait(session_config(harness.client, sid, workspace, script), "hi")

    waiting = asyncio.create_task(harness.client.send_and_wait(sid, "take your time"))
    await asyncio.sleep(0.3)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting

    outcome: TurnOutcome = await harness.client.wait(sid, "turn-2", timeout_seconds=30)
    assert (outcome.status, outcome.answer) == ("completed", "slow answer")


async def test_send_and_wait_on_a_queued_turn_answers_cancelled_when_the_session_is_archived(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "slow", "delay_seconds": 1.0}, {"text": "never"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "one")
    waiting = asyncio.create_task(harness.client.send_and_wait(sid, "two"))
    await asyncio.sleep(0.3)

    await harness.client.archive(sid, reason="done for today")

    queued = await asyncio.wait_for(waiting, 30)
    assert (queued.turn_id, queued.status) == ("turn-2", "cancelled")
    assert (await harness.client.wait(sid, started.turn_id)).status == "cancelled"


async def test_a_session_id_too_long_for_a_workflow_id_is_rejected_before_anything_starts(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    # Regression: the server refused the start with a bare RPCError ("WorkflowId exceeds maximum allowed length").
    sid = "y" * 3000
    config = session_config(harness.client, sid, workspace, write_script(tmp_path, [{"text": "x"}]))

    for start in (harness.client.start(config, "hi"), harness.client.start_and_wait(config, "hi")):
        with pytest.raises(RequestRejected, match="a session id may have at most 992 characters .* this one has 3000"):
            await start
    longest = "z" * 992
    _, outcome = await harness.client.start_and_wait(
        session_config(harness.client, longest, workspace, write_script(tmp_path, [{"text": "fits"}])), "hi"
    )
    assert (outcome.status, outcome.answer) == ("completed", "fits")
