"""Big payloads in S3 (``[payloads] driver = "s3"``) against a real S3-compatible server on loopback.

A message above the threshold leaves workflow history for the bucket through the SDK's
``S3StorageDriver``: history holds a reference naming the bucket, the bucket holds the object,
and the worker reads it back, also a worker started after the first was killed (it replays the
history and fetches what the references name). A client writing to another bucket than the
workers read is refused before it sends; a missing bucket or an endpoint that does not answer
is a ``PayloadStorageUnavailable`` saying so, within seconds, with nothing started.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import AsyncIterator

import pytest
from temporalio.api.history.v1 import History
from temporalio.client import Client
from temporalio.worker import Replayer

from agentrt.activities.tools import default_registry
from agentrt.client import AgentClient, connect
from agentrt.schemas import PayloadStorageMismatch, SessionNotFound
from agentrt.worker import AgentrtConfig, AgentrtPlugin, PayloadConfig, PayloadStorageUnavailable, S3PayloadDriver, build_worker, plugin_of
from tests._s3 import S3Server, s3_server  # noqa: F401 (a fixture)
from tests.conftest import OWNER, Harness
from tests.e2e._support import kill_hard, session_config, worker_process, write_script
from tests.e2e.test_encryption import payloads_in

THRESHOLD = 4096


def s3_session_id() -> str:
    """A session id left out of the run's closing replay (tests/test_replay.py), whose replayer
    has no bucket and no S3 server once this module is done: these tests replay their own."""
    return uuid.uuid4().hex[:12]
REFERENCE = b"json/protobuf"


def s3_config(harness: Harness, task_queue: str, bucket: str, endpoint_url: str) -> AgentrtConfig:
    return AgentrtConfig(
        temporal_address=harness.server.address,
        task_queue=task_queue,
        database_url=harness.config.database_url,
        payloads=PayloadConfig(driver="s3", bucket=bucket, endpoint_url=endpoint_url, threshold_bytes=THRESHOLD),
    )


async def s3_client(harness: Harness, config: AgentrtConfig, *, wait_for_worker: bool = True) -> AgentClient:
    """A client whose big payloads go where ``config`` says, once a worker polls its task queue
    (a client compares storage only with workers that have polled)."""
    temporal = await connect(harness.server.address, plugin=AgentrtPlugin(config, harness.store))
    client = AgentClient(temporal, task_queue=config.task_queue, principal=OWNER, store=harness.store)
    for _ in range(200 if wait_for_worker else 0):
        if await client.has_worker():
            break
        await asyncio.sleep(0.1)
    return client


async def raw_history(harness: Harness, session_id: str) -> History:
    """The session's history through a client without agentrt's converter."""
    raw = await Client.connect(harness.server.address)
    return History(events=(await raw.get_workflow_handle(f"session-{session_id}").fetch_history()).events)


async def references(harness: Harness, session_id: str) -> list[dict[str, str]]:
    """The claims of every external-storage reference in the session's history."""
    history = await raw_history(harness, session_id)
    return [json.loads(p.data)["claimData"] for _, p in payloads_in(history) if p.metadata.get("encoding") == REFERENCE]


@pytest.fixture
async def bucket(s3_server: S3Server) -> str:  # noqa: F811
    return s3_server.create_bucket(f"agentrt-{uuid.uuid4().hex[:12]}")


@pytest.fixture
async def s3_worker(harness: Harness, s3_server: S3Server, bucket: str) -> AsyncIterator[AgentClient]:  # noqa: F811
    """An in-process worker and a client on a fresh task queue, both with the s3 driver on ``bucket``."""
    config = s3_config(harness, f"s3-{uuid.uuid4().hex[:8]}", bucket, s3_server.endpoint_url)
    client = await s3_client(harness, config, wait_for_worker=False)
    async with build_worker(client.temporal, config, harness.store, default_registry(), task_queue=config.task_queue):
        yield client


async def test_a_big_message_goes_to_the_bucket_history_keeps_a_reference_and_the_worker_reads_it(
    harness: Harness, s3_worker: AgentClient, s3_server: S3Server, bucket: str, workspace: Path, tmp_path: Path  # noqa: F811
) -> None:
    canary = f"s3-canary-{uuid.uuid4().hex}"
    script = write_script(tmp_path, [{"text": "got it"}])
    sid = s3_session_id()
    big = f"{canary} " + "x" * (4 * THRESHOLD)

    _, outcome = await s3_worker.start_and_wait(session_config(s3_worker, sid, workspace, script), big)

    assert (outcome.status, outcome.answer) == ("completed", "got it")
    assert harness.store.messages(sid)[0][1].text == big  # the worker read the whole message back
    claims = await references(harness, sid)
    assert claims and {c["bucket"] for c in claims} == {bucket}
    keys = s3_server.keys(bucket)
    assert {c["key"] for c in claims} <= set(keys)
    assert any(canary.encode() in s3_server.read(bucket, key) for key in keys)
    assert canary.encode() not in (await raw_history(harness, sid)).SerializeToString()
    # A replayer with the same [payloads] reads the references back from the bucket.
    config = s3_config(harness, "replay", bucket, s3_server.endpoint_url)
    history = await s3_worker.temporal.get_workflow_handle(f"session-{sid}").fetch_history()
    await Replayer(workflows=[], plugins=[AgentrtPlugin(config, harness.store)]).replay_workflow(history)


async def test_a_worker_started_after_one_was_killed_reads_the_payloads_the_history_references(
    harness: Harness, s3_server: S3Server, bucket: str, workspace: Path, tmp_path: Path  # noqa: F811
) -> None:
    task_queue = harness.task_queue + "-proc"
    env = {
        "AGENTRT_PAYLOAD_DRIVER": "s3",
        "AGENTRT_PAYLOAD_BUCKET": bucket,
        "AGENTRT_PAYLOAD_ENDPOINT_URL": s3_server.endpoint_url,
    }
    client = await s3_client(harness, s3_config(harness, task_queue, bucket, s3_server.endpoint_url), wait_for_worker=False)
    script = write_script(tmp_path, [{"text": "first"}, {"text": "after the crash", "delay_seconds": 0}])
    sid = s3_session_id()
    big = "y" * (4 * THRESHOLD)
    log = tmp_path / "worker.log"
    with worker_process(harness, log, env=env) as first:
        _, outcome = await client.start_and_wait(session_config(client, sid, workspace, script), big)
        assert outcome.answer == "first", log.read_text()
        kill_hard(first)
    assert await references(harness, sid)

    with worker_process(harness, log, env=env):
        # The new worker replays the history from the start: the big message comes back from the bucket.
        second = await asyncio.wait_for(client.send_and_wait(sid, "a small one"), timeout=120)

    assert (second.status, second.answer) == ("completed", "after the crash"), log.read_text()
    assert [m.text for _, m in harness.store.messages(sid) if m.role == "user"] == [big, "a small one"]


async def test_a_client_writing_to_another_bucket_than_the_workers_read_is_refused_and_nothing_is_sent(
    harness: Harness, s3_worker: AgentClient, s3_server: S3Server, workspace: Path, tmp_path: Path  # noqa: F811
) -> None:
    other = s3_server.create_bucket(f"agentrt-other-{uuid.uuid4().hex[:8]}")
    stranger = await s3_client(harness, s3_config(harness, s3_worker.task_queue, other, s3_server.endpoint_url))
    script = write_script(tmp_path, [{"text": "small one answered"}])
    sid = s3_session_id()

    with pytest.raises(PayloadStorageMismatch) as raised:
        await stranger.start(session_config(stranger, sid, workspace, script), "z" * (4 * THRESHOLD))

    message = str(raised.value)
    print(message)
    assert raised.value.client_storage == f"aws.s3driver at s3://{other} at {s3_server.endpoint_url}"
    assert "[payloads] bucket" in message and "AGENTRT_PAYLOAD_BUCKET" in message
    assert s3_server.keys(other) == []
    with pytest.raises(SessionNotFound):
        await s3_worker.events(sid)
    # A small message from the same client needs no storage: it goes through.
    _, outcome = await stranger.start_and_wait(session_config(stranger, sid, workspace, script), "hello")
    assert (outcome.status, outcome.answer) == ("completed", "small one answered")


async def test_a_bucket_that_does_not_exist_is_a_typed_error_and_no_session_starts(
    harness: Harness, s3_server: S3Server, workspace: Path, tmp_path: Path  # noqa: F811
) -> None:
    missing = f"agentrt-missing-{uuid.uuid4().hex[:8]}"
    client = await s3_client(harness, s3_config(harness, f"s3-{uuid.uuid4().hex[:8]}", missing, s3_server.endpoint_url), wait_for_worker=False)
    sid = s3_session_id()

    with pytest.raises(PayloadStorageUnavailable) as raised:
        await client.start(session_config(client, sid, workspace, write_script(tmp_path, [])), "w" * (4 * THRESHOLD))

    print(raised.value)
    assert raised.value.location == f"s3://{missing}"
    assert f"bucket {missing!r} does not exist at {s3_server.endpoint_url}" in str(raised.value)
    assert "AGENTRT_PAYLOAD_BUCKET" in str(raised.value)
    with pytest.raises(SessionNotFound):
        await client.events(sid)


async def test_an_endpoint_that_does_not_answer_is_a_typed_error_within_seconds(
    harness: Harness, s3_server: S3Server, closed_port_url: str, workspace: Path, tmp_path: Path  # noqa: F811
) -> None:
    client = await s3_client(harness, s3_config(harness, f"s3-{uuid.uuid4().hex[:8]}", "agentrt-any", closed_port_url), wait_for_worker=False)
    sid = s3_session_id()
    began = time.monotonic()

    with pytest.raises(PayloadStorageUnavailable) as raised:
        await asyncio.wait_for(
            client.start(session_config(client, sid, workspace, write_script(tmp_path, [])), "v" * (4 * THRESHOLD)), timeout=60
        )

    print(raised.value)
    assert time.monotonic() - began < 30
    assert f"cannot reach S3 at {closed_port_url}" in str(raised.value)
    assert "AGENTRT_PAYLOAD_ENDPOINT_URL" in str(raised.value)
    with pytest.raises(SessionNotFound):
        await client.events(sid)


async def test_a_worker_that_stops_closes_the_s3_client_it_opened(
    harness: Harness, s3_server: S3Server, bucket: str, workspace: Path, tmp_path: Path  # noqa: F811
) -> None:
    config = s3_config(harness, f"s3-{uuid.uuid4().hex[:8]}", bucket, s3_server.endpoint_url)
    client = await s3_client(harness, config, wait_for_worker=False)
    plugin = plugin_of(client.temporal)
    assert plugin is not None
    [driver] = [d for d in plugin.payload_storage.readers if isinstance(d, S3PayloadDriver)]
    sid = s3_session_id()
    async with build_worker(client.temporal, config, harness.store, default_registry(), task_queue=config.task_queue):
        _, outcome = await client.start_and_wait(
            session_config(client, sid, workspace, write_script(tmp_path, [{"text": "ok"}])), "z" * (4 * THRESHOLD)
        )
        assert outcome.status == "completed" and driver.client.is_open()
    assert not driver.client.is_open()
