"""Waiting on a turn through a Temporal server restart and lost updates: ``wait``,
``send_and_wait``, ``start_and_wait``, the gateway's ``turns/{id}?wait=`` and the CLI's following
of a turn return the turn's outcome or a typed error, never a raw ``RPCError``; a wait on a
session whose workflow task keeps failing warns, naming the session.

The server here is this module's own (restarted on the same ports and database file; it
suggests continue-as-new after ``SUGGEST_AFTER_EVENTS`` events, a dozen turns); the clients that
wait give up on an unanswered RPC within a fraction of a second (a short ``RetryConfig``), so a
restart of a few seconds is an outage they meet instead of one the Temporal client's own retries
hide.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.service import RetryConfig, RPCError, RPCStatusCode
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from agentrt.client import AgentClient, connect
from agentrt.client import _patience as patience
from agentrt.client._outcomes import LOST_MESSAGE, REFUSED_MESSAGE, update_result
from agentrt.schemas import (
    RequestRejected,
    SendMessageInput,
    ServerUnavailable,
    SessionConfig,
    TurnStarted,
    UserMessageAdded,
)
from agentrt.gateway import create_app
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, DevServer, build_worker
from agentrt.workflows.session import SessionWorkflow
from tests.gateway.test_gateway import auth, gateway_config, serving
from tests.e2e._support import session_config, write_script

OWNER = "alice"
# A client that gives up on an unanswered RPC after about 0.3 s (the default retries for 10 s).
IMPATIENT = RetryConfig(initial_interval_millis=50, max_interval_millis=100, max_elapsed_time_millis=300, max_retries=2)
# How long a test lets a wait run before calling it hung (seconds): a guard, not a measurement.
HANG = 120
SUGGEST_AFTER_EVENTS = 60


@dataclass
class Restartable:
    server: DevServer
    store: Store
    store_url: str

    async def restart(self) -> None:
        """Stop the server, then start it on the same ports and database file."""
        await asyncio.to_thread(self.server.stop)
        await self.server.start()


@pytest.fixture(scope="module")
async def restartable(
    tmp_path_factory: pytest.TempPathFactory, store: Store, store_url: str
) -> AsyncIterator[Restartable]:
    limit = f"limit.historyCount.suggestContinueAsNew={SUGGEST_AFTER_EVENTS}"
    server = DevServer.on_free_ports(tmp_path_factory.mktemp("restart-server"), ["--dynamic-config-value", limit])
    await server.start()
    yield Restartable(server, store, store_url)
    server.stop()


@dataclass
class Rig:
    """A worker's client and config on a fresh task queue of the restartable server, and a
    ``waiter``: an ``AgentClient`` on an impatient client of its own."""

    env: Restartable
    temporal: Client
    config: AgentrtConfig
    waiter: AgentClient
    scripts: Path

    def worker(self) -> Any:
        return build_worker(self.temporal, self.config, self.env.store, task_queue=self.config.task_queue)

    def client(self) -> AgentClient:
        return AgentClient(self.temporal, task_queue=self.config.task_queue, principal=OWNER, store=self.env.store)

    def session(self, session_id: str, workspace: Path, *answers: str, delay: float = 0) -> SessionConfig:
        """A scripted session answering ``answers`` in turn, each after ``delay`` seconds."""
        turns = [{"text": a, "delay_seconds": delay} for a in answers]
        script = write_script(self.scripts, turns, f"{session_id}.json")
        return session_config(self.client(), session_id, workspace, script)

    async def messages(self, session_id: str) -> list[str]:
        """The session's messages, as the store has them."""
        events = await asyncio.to_thread(self.env.store.events, session_id, 0, 1000)
        return [e.text for e in events if isinstance(e, UserMessageAdded)]


@pytest.fixture
async def rig(restartable: Restartable, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Rig:
    # A wait that meets trouble says so within a fraction of a second (the tests wait for that).
    monkeypatch.setattr(patience, "WARN_EVERY_SECONDS", 0.2)
    address = restartable.server.address
    task_queue = f"rs-{uuid.uuid4().hex[:8]}"
    config = AgentrtConfig(temporal_address=address, task_queue=task_queue, database_url=restartable.store_url)
    plugin = AgentrtPlugin(config, restartable.store)
    temporal = await connect(address, plugin=plugin)
    impatient = await Client.connect(address, plugins=[plugin], retry_config=IMPATIENT)
    waiter = AgentClient(impatient, task_queue=task_queue, principal=OWNER, store=restartable.store)
    return Rig(restartable, temporal, config, waiter, tmp_path)


@contextlib.contextmanager
def warnings_naming(session_id: str, saying: str = "") -> Iterator[asyncio.Event]:
    """An event set once agentrt's client logs a warning naming ``session_id`` (and ``saying``)."""
    seen = asyncio.Event()

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if session_id in record.getMessage() and saying in record.getMessage():
                seen.set()

    handler = Seen(logging.WARNING)
    logger = logging.getLogger("agentrt.client")
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)


async def turn_started(rig: Rig, session_id: str, turn_id: str) -> None:
    """Return once the store has the turn's start."""
    while True:
        events = await asyncio.to_thread(rig.env.store.events, session_id, 0, 1000)
        if any(isinstance(e, TurnStarted) and e.turn_id == turn_id for e in events):
            return
        await asyncio.sleep(0.05)


async def through_a_restart(
    rig: Rig, session_id: str, start_waiting: Callable[[], Awaitable[Any]], *, once: Awaitable[None] | None = None
) -> Any:
    """Start the wait ``start_waiting()`` and stop the server (first, or ``once`` the wait is under
    way); let the wait meet the outage (it warns, naming the session), start the server again and
    return what the wait returns."""
    with warnings_naming(session_id) as seen:
        if once is None:
            await asyncio.to_thread(rig.env.server.stop)
            waiting = asyncio.ensure_future(start_waiting())
        else:
            waiting = asyncio.ensure_future(start_waiting())
            await asyncio.wait_for(once, HANG)
            await asyncio.to_thread(rig.env.server.stop)
        met = asyncio.ensure_future(seen.wait())
        await asyncio.wait({waiting, met}, timeout=HANG, return_when=asyncio.FIRST_COMPLETED)
        met.cancel()
        await rig.env.server.start()
        return await asyncio.wait_for(waiting, HANG)


async def test_wait_begun_while_the_server_restarts_returns_the_turns_outcome(rig: Rig, workspace: Path) -> None:
    sid = uuid.uuid4().hex[:12]
    async with rig.worker():
        started = await rig.client().start(rig.session(sid, workspace, "done", delay=2), "go")

        outcome = await through_a_restart(rig, sid, lambda: rig.waiter.wait(sid, started.turn_id))

    assert (outcome.turn_id, outcome.status, outcome.answer) == (started.turn_id, "completed", "done")


async def test_a_bounded_wait_while_no_server_answers_ends_at_its_timeout_in_server_unavailable(
    rig: Rig, workspace: Path
) -> None:
    sid = uuid.uuid4().hex[:12]
    async with rig.worker():
        started = await rig.client().start(rig.session(sid, workspace, "done"), "go")
        await asyncio.to_thread(rig.env.server.stop)
        try:
            with pytest.raises(ServerUnavailable) as caught:
                await rig.waiter.wait(sid, started.turn_id, timeout_seconds=1)
        finally:
            await rig.env.server.start()

    assert caught.value.address == rig.env.server.address
    assert isinstance(caught.value.__cause__, RPCError)


async def test_send_and_wait_returns_the_turns_outcome_across_a_server_restart(rig: Rig, workspace: Path) -> None:
    sid = uuid.uuid4().hex[:12]
    async with rig.worker():
        await rig.client().start_and_wait(rig.session(sid, workspace, "first", "second", delay=1), "one")

        outcome = await through_a_restart(
            rig, sid, lambda: rig.waiter.send_and_wait(sid, "two"), once=turn_started(rig, sid, "turn-2")
        )

        assert (outcome.turn_id, outcome.status, outcome.answer) == ("turn-2", "completed", "second")
        assert await rig.messages(sid) == ["one", "two"]


async def test_start_and_wait_returns_the_turns_outcome_across_a_server_restart(rig: Rig, workspace: Path) -> None:
    sid = uuid.uuid4().hex[:12]
    accepted = asyncio.Event()
    async with rig.worker():

        async def start_and_wait() -> Any:
            return await rig.waiter.start_and_wait(
                rig.session(sid, workspace, "started", delay=2), "go", on_accepted=accepted.set
            )

        # Accepted: the server stops while the call waits for the turn's outcome.
        started, outcome = await through_a_restart(rig, sid, start_and_wait, once=accepted.wait())

    assert started.turn_id == outcome.turn_id == "turn-1"
    assert (outcome.status, outcome.answer) == ("completed", "started")


async def test_an_update_the_server_does_not_have_is_a_typed_error_with_the_rpc_error_as_its_cause(
    rig: Rig, workspace: Path
) -> None:
    sid = uuid.uuid4().hex[:12]
    async with rig.worker():
        await rig.client().start_and_wait(rig.session(sid, workspace, "x"), "hi")

        with pytest.raises(RequestRejected) as caught:
            await update_result(rig.waiter.temporal, sid, "send_and_wait-never-sent")

        assert caught.value.reason == LOST_MESSAGE
        assert isinstance(caught.value.__cause__, RPCError)
        assert caught.value.__cause__.status == RPCStatusCode.NOT_FOUND
        assert await rig.messages(sid) == ["hi"]  # nothing was queued


async def test_an_update_answered_in_a_run_the_session_has_since_continued_from_is_found_there(
    rig: Rig, workspace: Path
) -> None:
    """The server keeps an update with the run it went to; asked by workflow id alone, it answers
    from the current run, which after a continue-as-new does not have it (NOT_FOUND)."""
    sid = uuid.uuid4().hex[:12]
    async with rig.worker():
        client = rig.client()
        await client.start_and_wait(rig.session(sid, workspace, *(f"answer {n}" for n in range(1, 41))), "message 1")
        message = SendMessageInput(text="message 2", principal=OWNER)
        handle = rig.temporal.get_workflow_handle(f"session-{sid}")
        await handle.execute_update(SessionWorkflow.send_and_wait, message, id="send_and_wait-two")
        for n in range(3, 41):
            await client.send_and_wait(sid, f"message {n}")
            if (await client.state(sid)).run > 1:
                break
        assert (await client.state(sid)).run > 1, "the session did not continue as new: the test tests nothing"

        outcome = await update_result(rig.waiter.temporal, sid, "send_and_wait-two")

    assert (outcome.turn_id, outcome.status, outcome.answer) == ("turn-2", "completed", "answer 2")


@workflow.defn(name="NotASession")
class NotASession:
    """The only workflow a broken worker knows: every session workflow task it takes fails."""

    @workflow.run
    async def run(self) -> None:
        return None


@contextlib.asynccontextmanager
async def broken_worker(rig: Rig) -> AsyncIterator[None]:
    """A worker on the rig's task queue that fails every session workflow task (it lacks the workflow)."""
    plain = await Client.connect(rig.env.server.address)
    runner = UnsandboxedWorkflowRunner()
    async with Worker(plain, task_queue=rig.config.task_queue, workflows=[NotASession], workflow_runner=runner):
        yield


async def failing_attempts(rig: Rig, session_id: str, at_least: int) -> None:
    """Return once the session's workflow task has failed ``at_least - 1`` times in a row."""
    handle = rig.temporal.get_workflow_handle(f"session-{session_id}")
    while True:
        task = (await handle.describe()).raw_description.pending_workflow_task
        if task.attempt >= at_least:
            return
        await asyncio.sleep(0.1)


@contextlib.asynccontextmanager
async def failing_session(rig: Rig, session_id: str) -> AsyncIterator[None]:
    """The session's workflow task fails again and again (a message sent to it is its first task)
    until the block ends; the server then refuses updates to it."""
    async with broken_worker(rig):
        trigger = asyncio.ensure_future(rig.client().send(session_id, "while failing"))
        try:
            await asyncio.wait_for(failing_attempts(rig, session_id, 2), HANG)
            yield
        finally:
            trigger.cancel()
            with contextlib.suppress(BaseException):
                await trigger


async def test_a_keyed_send_and_wait_whose_update_the_restart_lost_is_sent_again_and_queues_once(
    rig: Rig, workspace: Path
) -> None:
    """The server admits the update, the session's workflow task fails (no worker can run it), the
    server restarts: the update is gone. The message has a key, so it is sent again."""
    sid = uuid.uuid4().hex[:12]
    async with rig.worker():
        await rig.client().start_and_wait(rig.session(sid, workspace, "first", "second"), "one")
    with warnings_naming(sid) as seen:
        async with broken_worker(rig):
            waiting = asyncio.ensure_future(rig.waiter.send_and_wait(sid, "two", idempotency_key="msg-2"))
            await asyncio.wait_for(failing_attempts(rig, sid, 2), HANG)
        await rig.env.restart()
        await asyncio.wait_for(seen.wait(), HANG)  # the wait met the restart
    async with rig.worker():
        outcome = await asyncio.wait_for(waiting, HANG)

        assert (outcome.turn_id, outcome.status, outcome.answer) == ("turn-2", "completed", "second")
        assert await rig.messages(sid) == ["one", "two"]


async def test_a_wait_on_a_session_whose_workflow_task_keeps_failing_warns_naming_the_session_until_cancelled(
    rig: Rig, workspace: Path
) -> None:
    sid = uuid.uuid4().hex[:12]
    async with rig.worker():
        await rig.client().start_and_wait(rig.session(sid, workspace, "first", "second"), "one")
    with warnings_naming(sid, "workflow task keeps failing") as seen:
        async with broken_worker(rig):
            waiting = asyncio.ensure_future(rig.waiter.send_and_wait(sid, "two"))
            await asyncio.wait_for(seen.wait(), HANG)
            waiting.cancel()

            with pytest.raises(asyncio.CancelledError):
                await waiting


async def test_a_keyless_send_and_wait_refused_while_the_session_s_task_fails_is_a_typed_error(
    rig: Rig, workspace: Path
) -> None:
    sid = uuid.uuid4().hex[:12]
    async with rig.worker():
        await rig.client().start_and_wait(rig.session(sid, workspace, "first", "x"), "one")
    async with failing_session(rig, sid):

        with pytest.raises(RequestRejected) as caught:
            await asyncio.wait_for(rig.waiter.send_and_wait(sid, "two"), HANG)

    assert caught.value.reason == REFUSED_MESSAGE
    assert isinstance(caught.value.__cause__, RPCError)
    assert caught.value.__cause__.status == RPCStatusCode.FAILED_PRECONDITION


async def test_a_keyed_send_and_wait_refused_while_the_session_s_task_fails_waits_and_queues_once_it_runs(
    rig: Rig, workspace: Path
) -> None:
    sid = uuid.uuid4().hex[:12]
    async with rig.worker():
        await rig.client().start_and_wait(rig.session(sid, workspace, "first", "next", "next"), "one")
    with warnings_naming(sid, "workflow task keeps failing") as seen:
        async with failing_session(rig, sid):
            waiting = asyncio.ensure_future(rig.waiter.send_and_wait(sid, "two", idempotency_key="msg-2"))
            await asyncio.wait_for(seen.wait(), HANG)
    async with rig.worker():
        outcome = await asyncio.wait_for(waiting, HANG)

        assert (outcome.status, outcome.answer) == ("completed", "next")
        assert (await rig.messages(sid)).count("two") == 1


async def test_the_gateway_s_turn_wait_returns_the_outcome_across_a_server_restart(rig: Rig, workspace: Path) -> None:
    sid = uuid.uuid4().hex[:12]
    app = create_app(rig.waiter, gateway_config(), workspace_root=workspace.parent)
    async with rig.worker(), serving(app) as http:
        started = await rig.client().start(rig.session(sid, workspace, "done", delay=2), "go")
        url = f"/v1/sessions/{sid}/turns/{started.turn_id}?wait=60"

        response = await through_a_restart(rig, sid, lambda: http.get(url, headers=auth(OWNER)))

    assert response.status_code == 200, response.text
    assert (response.json()["status"], response.json()["answer"]) == ("completed", "done")


async def test_a_cancel_sent_while_the_server_restarts_is_applied_once_it_is_back(rig: Rig, workspace: Path) -> None:
    sid = uuid.uuid4().hex[:12]
    async with rig.worker():
        started = await rig.client().start(rig.session(sid, workspace, "never seen", delay=30), "go")
        await turn_started(rig, sid, started.turn_id)

        await through_a_restart(rig, sid, lambda: rig.waiter.cancel(sid, reason="while the server restarts"))

        outcome = await rig.client().wait(sid, started.turn_id, timeout_seconds=HANG)
    assert (outcome.turn_id, outcome.status) == (started.turn_id, "cancelled")
