"""A client whose payload storage the worker cannot read is refused before it sends a big message.

Reproduces the lost-message bug: a client configured with another SQLite store than the
worker's sent a 400 KB message; its payload went to the client's own database, the worker
could not resolve it and the session sat idle with the message lost. Now the client
compares its storage fingerprint with the ones the workers advertise and refuses, naming
both; the session goes on and nothing was accepted.

The client asks the server what the workers advertise at most once per task queue and cache
period (``ADVERTISED_TTL_SECONDS``), counted here on its workflow service with its clock held.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agentrt.client import AgentClient, connect
from agentrt.client._workers import ADVERTISED_TTL_SECONDS, advertised_fingerprints, workflow_pollers
from agentrt.schemas import PayloadStorageMismatch, SessionNotFound, UserMessageAdded
from agentrt.worker import AgentrtConfig, AgentrtPlugin, driver_fingerprint, payload_fingerprints_of, plugin_of
from tests.conftest import OWNER, Harness
from tests.e2e._support import session_config, write_script

BIG = 400_000  # characters: a message of ~400 KB, above the 256 KiB external-storage threshold


async def client_with_store(harness: Harness, database_url: str) -> AgentClient:
    """A client of the harness's task queue whose payloads go to the store at ``database_url``,
    once the server lists the harness's worker among the task queue's pollers (a client can
    compare storage only with workers that have polled)."""
    temporal = await connect(harness.server.address, plugin=AgentrtPlugin(AgentrtConfig(database_url=database_url)))
    client = AgentClient(temporal, task_queue=harness.task_queue, principal=OWNER)
    for _ in range(100):
        if await client.has_worker():
            break
        await asyncio.sleep(0.1)
    return client


async def test_a_big_message_to_storage_the_worker_cannot_read_is_refused_and_the_session_goes_on(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    other_url = f"sqlite:///{tmp_path / 'elsewhere' / 'agentrt.db'}"
    stranger = await client_with_store(harness, other_url)
    script = write_script(tmp_path, [{"text": "first"}, {"text": "second"}])
    sid = harness.new_session_id()
    started = await stranger.start(session_config(stranger, sid, workspace, script), "a small message")
    assert (await stranger.wait(sid, started.turn_id, timeout_seconds=60)).answer == "first"

    with pytest.raises(PayloadStorageMismatch) as raised:
        await stranger.send(sid, "x" * BIG)

    error = raised.value
    assert error.session_id == sid and error.task_queue == harness.task_queue
    assert error.size_bytes > BIG and error.threshold_bytes == 256 * 1024
    assert error.client_storage == f"agentrt.store at {other_url}"
    worker_prints = next(iter(error.worker_fingerprints.values()))
    assert error.client_fingerprint not in worker_prints
    message = str(error)
    print(message)
    assert f"session {sid}: message not sent" in message
    assert other_url in message and worker_prints[0] in message
    assert "the same AGENTRT_HOME" in message and "[store] url" in message and "[payloads] path" in message

    # Nothing was accepted, nothing is lost: the session takes the next message as usual.
    after = await harness.client.send(sid, "a small message again")
    outcome = await harness.client.wait(sid, after.turn_id, timeout_seconds=60)
    assert (outcome.status, outcome.answer) == ("completed", "second")
    texts = [e.text for e in (await harness.client.events(sid)).events if isinstance(e, UserMessageAdded)]
    assert texts == ["a small message", "a small message again"]


async def test_a_session_whose_first_message_would_go_to_unreadable_storage_is_not_started(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    stranger = await client_with_store(harness, f"sqlite:///{tmp_path / 'elsewhere.db'}")
    script = write_script(tmp_path, [{"text": "never"}])
    sid = harness.new_session_id()
    with pytest.raises(PayloadStorageMismatch):
        await stranger.start(session_config(stranger, sid, workspace, script), "y" * BIG)
    with pytest.raises(SessionNotFound):
        await harness.client.state(sid)


async def test_a_big_message_from_a_client_with_the_workers_storage_is_sent_and_answered(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    same = await client_with_store(harness, harness.config.database_url or "")
    script = write_script(tmp_path, [{"text": "got it"}])
    sid = harness.new_session_id()
    started = await same.start(session_config(same, sid, workspace, script), "z" * BIG)
    outcome = await same.wait(sid, started.turn_id, timeout_seconds=60)
    assert (outcome.status, outcome.answer) == ("completed", "got it")


async def test_small_messages_are_sent_whatever_the_clients_payload_storage(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    stranger = await client_with_store(harness, f"sqlite:///{tmp_path / 'elsewhere.db'}")
    script = write_script(tmp_path, [{"text": "fine"}])
    sid = harness.new_session_id()
    started = await stranger.start(session_config(stranger, sid, workspace, script), "w" * 100_000)
    assert (await stranger.wait(sid, started.turn_id, timeout_seconds=60)).answer == "fine"


async def test_a_client_connected_from_another_agentrt_home_is_refused_a_big_message(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "first"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "hello")
    await harness.client.wait(sid, started.turn_id, timeout_seconds=60)
    other_home = tmp_path / "other-user" / ".agentrt"
    config = AgentrtConfig.load(env={
        "AGENTRT_HOME": str(other_home),
        "AGENTRT_TEMPORAL_ADDRESS": harness.server.address,
        "AGENTRT_TASK_QUEUE": harness.task_queue,
    })
    elsewhere = await AgentClient.connect(config, principal=OWNER)
    with pytest.raises(PayloadStorageMismatch, match=str(other_home / "agentrt.db")):
        await elsewhere.send(sid, "v" * BIG)
    assert (await harness.client.state(sid)).turns_completed == 1


async def test_a_worker_identity_advertises_the_fingerprints_of_the_payload_storage_it_reads(harness: Harness) -> None:
    plugin = plugin_of(harness.temporal)
    assert plugin is not None
    identities: list[str] = []
    for _ in range(100):  # the server lists a poller once its first poll arrives
        identities = [p.identity for p in await workflow_pollers(harness.temporal, harness.task_queue)]
        if identities:
            break
        await asyncio.sleep(0.1)
    assert identities
    advertised = payload_fingerprints_of(identities[0])
    assert advertised == plugin.payload_storage.reader_fingerprints
    assert advertised[0] == driver_fingerprint(plugin.payload_storage.readers[0])  # the writer (store driver) first
    assert not any("sqlite" in identity or "/" in identity.split(" ", 1)[1] for identity in identities)


@dataclass
class Counted:
    """A client with its DescribeTaskQueue calls counted (``asked``: the task queue of each) and the
    clock of its cached worker fingerprints held at ``now`` (seconds)."""

    client: AgentClient
    asked: list[str] = field(default_factory=list)
    now: float = 0.0


@pytest.fixture
async def counted(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> Counted:
    """A new client without codec keys (its own Temporal connection, so its own cache) of the
    harness's task queue, whose worker has no keys either, once the server lists that worker."""
    result = Counted(await client_with_store(harness, harness.config.database_url or ""))
    service = result.client.temporal.workflow_service
    describe = service.describe_task_queue

    async def counting(request: Any, **kwargs: Any) -> Any:
        result.asked.append(request.task_queue.name)
        return await describe(request, **kwargs)

    monkeypatch.setattr(service, "describe_task_queue", counting)
    monkeypatch.setattr(advertised_fingerprints(result.client.temporal), "clock", lambda: result.now)
    return result


async def test_a_client_without_keys_starts_and_sends_to_workers_without_keys_asking_the_server_once(
    counted: Counted, harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    client = counted.client
    script = write_script(tmp_path, [{"text": "first"}, {"text": "second"}, {"text": "third"}])
    sid = harness.new_session_id()

    started = await client.start(session_config(client, sid, workspace, script), "one")
    first = await client.wait(sid, started.turn_id, timeout_seconds=60)
    sent = await client.send(sid, "two")
    second = await client.wait(sid, sent.turn_id, timeout_seconds=60)
    third = await client.send_and_wait(sid, "three")

    assert [first.answer, second.answer, third.answer] == ["first", "second", "third"]
    assert counted.asked == [harness.task_queue]


async def test_a_client_asks_the_server_again_once_the_cache_period_has_passed(
    counted: Counted, harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    client = counted.client
    script = write_script(tmp_path, [{"text": "first"}, {"text": "second"}])
    sid = harness.new_session_id()
    started = await client.start(session_config(client, sid, workspace, script), "one")
    await client.wait(sid, started.turn_id, timeout_seconds=60)

    counted.now += ADVERTISED_TTL_SECONDS
    outcome = await client.send_and_wait(sid, "two")

    assert outcome.answer == "second"
    assert counted.asked == [harness.task_queue, harness.task_queue]


async def test_starts_at_the_same_moment_share_one_question_to_the_server(
    counted: Counted, harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    client = counted.client
    script = write_script(tmp_path, [{"text": "fine"}])
    sids = [harness.new_session_id() for _ in range(3)]

    started = await asyncio.gather(*(client.start(session_config(client, sid, workspace, script), "go") for sid in sids))

    assert [s.session_id for s in started] == sids
    assert counted.asked == [harness.task_queue]


async def test_a_describe_the_server_cancels_is_asked_again_and_another_error_is_not() -> None:
    """A loaded dev server answered DescribeTaskQueue "operation was canceled" under a client's start
    (a clean-clone test run): the read is asked again; an error that is not transient is raised at once."""
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueResponse
    from temporalio.service import RPCError, RPCStatusCode

    class Service:
        def __init__(self, errors: list[tuple[RPCStatusCode, str]]) -> None:
            self.errors, self.calls = errors, 0

        async def describe_task_queue(self, request: object, retry: bool = False) -> DescribeTaskQueueResponse:
            self.calls += 1
            if self.errors:
                status, message = self.errors.pop(0)
                raise RPCError(message, status, b"")
            return DescribeTaskQueueResponse()

    class Temporal:
        namespace = "default"

        def __init__(self, service: Service) -> None:
            self.workflow_service = service

    cancelled = Service([(RPCStatusCode.CANCELLED, "operation was canceled")] * 2)
    assert await workflow_pollers(Temporal(cancelled), "q") == [] and cancelled.calls == 3  # type: ignore[arg-type]
    denied = Service([(RPCStatusCode.PERMISSION_DENIED, "Request unauthorized.")])
    with pytest.raises(RPCError):
        await workflow_pollers(Temporal(denied), "q")  # type: ignore[arg-type]
    assert denied.calls == 1
