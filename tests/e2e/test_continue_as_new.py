"""A session of thousands of turns continues as new and loses nothing the user sees.

The dev server here suggests continue-as-new after 300 history events (server default:
4,096), so a session moves to a new run every ~20 turns. ``AGENTRT_CAN_TURNS`` sets the
number of turns (CI: 100; the by-hand run in the README: 10,000).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import AsyncIterator

import pytest
from temporalio.worker import Replayer

from agentrt.client import AgentClient, connect
from agentrt.schemas import (
    SendMessageInput,
    SessionContinuedAsNew,
    TurnEnded,
    TurnOutcome,
    UserMessageAdded,
    WaitTurnInput,
)
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, DevServer, build_worker
from agentrt.workflows.session import SessionWorkflow
from tests.conftest import OWNER
from tests.e2e._support import session_config, write_script

pytestmark = pytest.mark.runs_first  # long: handed out first (tests/conftest.py)

TURNS = int(os.environ.get("AGENTRT_CAN_TURNS", "100"))
BATCH = 25
SUGGEST_AFTER_EVENTS = 300


@pytest.fixture(scope="module")
async def low_limit_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    state = tmp_path_factory.mktemp("can-server")
    server = DevServer.on_free_ports(
        state, ["--dynamic-config-value", f"limit.historyCount.suggestContinueAsNew={SUGGEST_AFTER_EVENTS}"]
    )
    await server.start()
    yield server
    server.stop()


async def test_a_session_of_many_turns_continues_as_new_and_shows_the_whole_session(
    low_limit_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    config = AgentrtConfig(temporal_address=low_limit_server.address, task_queue=f"can-{uuid.uuid4().hex[:8]}", database_url=store_url)
    temporal = await connect(low_limit_server.address, plugin=AgentrtPlugin(config, store))
    client = AgentClient(temporal, task_queue=config.task_queue, principal=OWNER, store=store)
    script = write_script(tmp_path, [{"text": f"answer {i + 1}"} for i in range(TURNS)])
    sid = uuid.uuid4().hex[:12]
    async with build_worker(temporal, config, store, task_queue=config.task_queue):
        started = await client.start(session_config(client, sid, workspace, script), "message 1")
        started_run_id = (await temporal.get_workflow_handle(f"session-{sid}").describe()).run_id
        turn_ids = [started.turn_id]
        for first in range(2, TURNS + 1, BATCH):
            for n in range(first, min(first + BATCH, TURNS + 1)):
                turn_ids.append((await client.send(sid, f"message {n}")).turn_id)
            last = await client.wait(sid, turn_ids[-1], timeout_seconds=300)
            assert last.status == "completed" and last.answer == f"answer {len(turn_ids)}"

        view = await client.state(sid)
        assert view.turns_completed == TURNS and view.last_seq > 0
        assert view.run > TURNS // 40  # many runs: the session continued as new again and again
        # A turn of the first run is answered from the store.
        first_outcome = await client.wait(sid, turn_ids[0], timeout_seconds=10)
        assert first_outcome.status == "completed" and first_outcome.answer == "answer 1"

        events = [event async for event in client.all_events(sid)]
        assert [e.seq for e in events] == list(range(1, view.last_seq + 1))
        assert sum(isinstance(e, TurnEnded) and e.status == "completed" for e in events) == TURNS
        assert [e.text for e in events if isinstance(e, UserMessageAdded)] == [f"message {n}" for n in range(1, TURNS + 1)]
        continued = [e for e in events if isinstance(e, SessionContinuedAsNew)]
        assert [e.run for e in continued] == list(range(2, view.run + 1))
        assert len(store.messages(sid)) == 2 * TURNS

        # The CLI shows the whole session too.
        env = {
            **os.environ,
            "AGENTRT_TEMPORAL_ADDRESS": low_limit_server.address,
            "AGENTRT_TASK_QUEUE": config.task_queue,
            "AGENTRT_DATABASE_URL": store_url,
            "AGENTRT_PRINCIPAL": OWNER,
        }
        env.pop("AGENTRT_CONFIG", None)

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "agentrt.cli", *args], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
            )

        state_out = await asyncio.to_thread(cli, "session", "state", sid, "--json")
        assert state_out.returncode == 0, state_out.stderr
        assert json.loads(state_out.stdout)["turns_completed"] == TURNS
        events_out = await asyncio.to_thread(cli, "session", "events", sid, "--json")
        assert events_out.returncode == 0, events_out.stderr
        lines = events_out.stdout.splitlines()
        assert len(lines) == view.last_seq
        assert json.loads(lines[0])["type"] == "SessionInitialized"
        print(f"{TURNS} turns in {view.run} runs, {view.last_seq} events")

        # The latest run (it started from carried state) and the first run both replay.
        handle = temporal.get_workflow_handle(f"session-{sid}")
        replayer = Replayer(workflows=[], plugins=[AgentrtPlugin(config, store)])
        await replayer.replay_workflow(await handle.fetch_history())
        first_run = temporal.get_workflow_handle(f"session-{sid}", run_id=started_run_id)
        await replayer.replay_workflow(await first_run.fetch_history())


async def test_updates_arriving_when_the_session_continues_as_new_are_never_left_waiting(
    low_limit_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    """Regression: a compact, switch_model or archive that landed while the workflow was about to
    continue as new used to wait forever (or be acknowledged and lost)."""
    config = AgentrtConfig(temporal_address=low_limit_server.address, task_queue=f"can-{uuid.uuid4().hex[:8]}", database_url=store_url)
    temporal = await connect(low_limit_server.address, plugin=AgentrtPlugin(config, store))
    client = AgentClient(temporal, task_queue=config.task_queue, principal=OWNER, store=store)
    script = write_script(tmp_path, [{"text": f"answer {i + 1}"} for i in range(60)])
    sid = uuid.uuid4().hex[:12]
    async with build_worker(temporal, config, store, task_queue=config.task_queue):
        started = await client.start(session_config(client, sid, workspace, script), "message 1")
        await client.wait(sid, started.turn_id, timeout_seconds=60)
        for n in range(2, 26):
            sent = await client.send(sid, f"message {n}")
            # Right behind the turn: these land while the session may be continuing as new.
            if n % 3 == 0:
                await asyncio.wait_for(client.switch_model(sid, "scripted"), 60)
            else:
                await asyncio.wait_for(client.compact(sid), 60)
            outcome = await asyncio.wait_for(client.wait(sid, sent.turn_id), 60)
            assert outcome.status == "completed" and outcome.answer == f"answer {n}"
        view = await client.state(sid)
        # At least one continue-as-new with updates in flight; how many depends on when they land.
        assert view.run >= 2 and view.turns_completed == 25
        archived = await asyncio.wait_for(client.archive(sid), 60)
        assert archived.status == "archived"
        result = await asyncio.wait_for(temporal.get_workflow_handle_for(SessionWorkflow.run, f"session-{sid}").result(), 60)
        assert result.status == "archived" and result.turns == 25


async def test_waiters_held_open_on_every_turn_do_not_keep_the_session_from_continuing_as_new(
    low_limit_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    """Regression: a client that always holds a ``wait_turn`` open (here: on each of the next three
    turns) starved continue-as-new, which waited for every handler to finish. Waiters now answer
    ``pending`` with ``ask_again`` when continue-as-new is due, and asking again reaches the new run."""
    config = AgentrtConfig(temporal_address=low_limit_server.address, task_queue=f"can-{uuid.uuid4().hex[:8]}", database_url=store_url)
    temporal = await connect(low_limit_server.address, plugin=AgentrtPlugin(config, store))
    client = AgentClient(temporal, task_queue=config.task_queue, principal=OWNER, store=store)
    turns = 45
    # Turns slower than the client sends: there is always a queued turn with a waiter on it.
    script = write_script(tmp_path, [{"text": f"answer {i + 1}", "delay_seconds": 0.2} for i in range(turns)])
    sid = uuid.uuid4().hex[:12]
    handle = temporal.get_workflow_handle_for(SessionWorkflow.run, f"session-{sid}")
    asked_again = 0

    async def wait_turn(turn_id: str) -> TurnOutcome:
        nonlocal asked_again
        while True:
            outcome = await handle.execute_update(SessionWorkflow.wait_turn, WaitTurnInput(turn_id=turn_id))
            if outcome.status != "pending":
                return outcome
            assert outcome.ask_again
            asked_again += 1

    async with build_worker(temporal, config, store, task_queue=config.task_queue):
        started = await client.start(session_config(client, sid, workspace, script), "message 1")
        waiters = [asyncio.create_task(wait_turn(started.turn_id))]
        for n in range(2, 4):
            waiters.append(asyncio.create_task(wait_turn((await client.send(sid, f"message {n}")).turn_id)))
        outcomes = []
        for n in range(4, turns + 4):
            outcomes.append(await asyncio.wait_for(waiters.pop(0), 120))
            if n <= turns:
                waiters.append(asyncio.create_task(wait_turn((await client.send(sid, f"message {n}")).turn_id)))
        assert [o.answer for o in outcomes] == [f"answer {n}" for n in range(1, turns + 1)]
        view = await client.state(sid)
        assert view.turns_completed == turns
        assert asked_again > 0
        # Continue-as-new happened while turns were still queued, not only once the session went idle.
        events = [event async for event in client.all_events(sid)]
        first_continue = next(e.seq for e in events if isinstance(e, SessionContinuedAsNew))
        last_turn_end = max(e.seq for e in events if isinstance(e, TurnEnded))
        assert first_continue < last_turn_end


async def test_send_and_wait_calls_on_queued_turns_follow_the_session_across_continue_as_new(
    low_limit_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    """A ``send_and_wait`` whose turn is still queued when continue-as-new is due answers
    ``pending`` with ``ask_again`` (the message travels to the next run); ``AgentClient.send_and_wait``
    then waits for the turn there, so every caller gets its own turn's outcome."""
    config = AgentrtConfig(temporal_address=low_limit_server.address, task_queue=f"can-{uuid.uuid4().hex[:8]}", database_url=store_url)
    temporal = await connect(low_limit_server.address, plugin=AgentrtPlugin(config, store))
    client = AgentClient(temporal, task_queue=config.task_queue, principal=OWNER, store=store)
    turns = 45
    script = write_script(tmp_path, [{"text": f"answer {i + 1}", "delay_seconds": 0.1} for i in range(turns + 1)])
    sid = uuid.uuid4().hex[:12]
    handle = temporal.get_workflow_handle_for(SessionWorkflow.run, f"session-{sid}")
    asked_again: list[str] = []

    async def raw_send_and_wait(text: str) -> TurnOutcome:
        outcome = await handle.execute_update(SessionWorkflow.send_and_wait, SendMessageInput(text=text, principal=OWNER))
        if outcome.status == "pending":
            assert outcome.ask_again
            asked_again.append(outcome.turn_id)
            outcome = await client.wait(sid, outcome.turn_id, timeout_seconds=60)
        return outcome

    async with build_worker(temporal, config, store, task_queue=config.task_queue):
        _, first = await client.start_and_wait(session_config(client, sid, workspace, script), "message 1")
        assert first.answer == "answer 1"
        # Three callers waiting at all times, so every continue-as-new meets queued turns with callers.
        pending = [asyncio.create_task(raw_send_and_wait(f"message {n}")) for n in range(2, 5)]
        outcomes = []
        next_message = 5
        while pending:
            outcomes.append(await asyncio.wait_for(pending.pop(0), 120))
            if next_message <= turns:
                pending.append(asyncio.create_task(raw_send_and_wait(f"message {next_message}")))
                next_message += 1
        answers = [o.answer for o in outcomes]
        assert sorted(answers) == sorted(f"answer {n}" for n in range(2, turns + 1))
        assert all(o.status == "completed" for o in outcomes)
        # The client's own call settles a pending answer the same way.
        last = await asyncio.wait_for(client.send_and_wait(sid, "one more"), 60)
        assert (last.status, last.answer) == ("completed", f"answer {turns + 1}")
        view = await client.state(sid)
        assert view.run > 2
    assert asked_again, "no send_and_wait met a continue-as-new: the test did not test it"
