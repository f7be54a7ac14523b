"""Encrypted payloads end to end, on the real dev server: a session run with ``[codec]`` keys leaves
only ciphertext in Temporal (history read without the keys, raw and through the ``temporal`` CLI),
in the payload store and in the store's transcript and events, while ``AgentClient``, ``agentrt
session events``, a replayer and the codec server (``agentrt codec-server``, a real uvicorn on loopback) read it in clear; clients
refuse to send what their workers could not decrypt, clients without keys start and send nothing to
workers that encrypt, and a worker without the key says so."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from google.protobuf.message import Message
from sqlalchemy import text
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import History
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import Replayer

from agentrt.activities.tools import default_registry
from agentrt.client import AgentClient, connect
from agentrt.schemas import GraphNotFound, SessionNotFound, TaskNotFound, UserMessageAdded
from agentrt.store import SEALED_PREFIX, Store
from agentrt.worker import (
    AesGcmCodec,
    AgentrtConfig,
    AgentrtPlugin,
    CodecConfig,
    DevServer,
    PayloadCodecMismatch,
    PayloadConfig,
    PayloadDecryptionError,
    build_worker,
    free_port,
    generate_codec_key,
    payload_fingerprints_of,
    port_is_open,
    temporal_binary,
)
from tests.conftest import OWNER
from tests.e2e._support import data_fields, session_config, write_script

KEY = generate_codec_key()
OTHER_KEY = generate_codec_key()
PROMPT = f"prompt-canary-{uuid.uuid4().hex}"
ANSWER = f"answer-canary-{uuid.uuid4().hex}"
LONG = f"long-canary-{uuid.uuid4().hex}"
# Payloads from 4 KiB on leave history: the long message (and what carries it) goes to the store.
THRESHOLD = 4096
TOKEN = "codec-token-" + uuid.uuid4().hex
UI = "http://localhost:8233"
REFERENCE = b"json/protobuf"
CANARIES = (PROMPT, ANSWER, LONG)


def env_keys(**keys: bytes) -> str:
    return ",".join(f"{key_id}:{base64.b64encode(key).decode()}" for key_id, key in keys.items())


def encrypted_config(server: DevServer, state: Path, task_queue: str, **keys: bytes) -> AgentrtConfig:
    return AgentrtConfig(
        temporal_address=server.address,
        task_queue=task_queue,
        database_url=f"sqlite:///{state / 'agentrt.db'}",
        payloads=PayloadConfig(driver="store", path=str(state / "payloads"), threshold_bytes=THRESHOLD),
        codec=CodecConfig(current_key=next(iter(keys)), keys=dict(keys)) if keys else CodecConfig(),
    )


def payloads_in(message: Message, path: str = "") -> Iterator[tuple[str, Payload]]:
    """``(path, payload)`` for every payload in ``message``, at any depth, except search attributes
    (indexed by the server, so never encoded; sessions keep only a status and an owner there) and
    headers (tracing context)."""
    for field, value in message.ListFields():
        if field.message_type is None or field.name in ("search_attributes", "header"):
            continue
        if field.message_type.GetOptions().map_entry:
            items = list(value.items()) if field.message_type.fields_by_name["value"].message_type else []
        elif field.is_repeated:
            items = list(enumerate(value))
        else:
            items = [(None, value)]
        for key, item in items:
            where = f"{path}.{field.name}" + (f"[{key}]" if key is not None else "")
            if isinstance(item, Payload):
                yield where, item
            else:
                yield from payloads_in(item, where)


def encrypted_payloads(history: History) -> list[Payload]:
    return [p for _, p in payloads_in(history) if p.metadata.get("encoding") == b"binary/encrypted"]


# Markers the SDK writes for itself: a patch's id, a local activity's seq, type, attempt and times
# (its result is in details[result], encrypted).
SDK_BOOKKEEPING = re.compile(r"\.marker_recorded_event_attributes\.details\[(patch-data|data)\]\.payloads\[0\]$")


@dataclass
class Encrypted:
    server: DevServer
    config: AgentrtConfig
    store: Store
    client: AgentClient
    session_id: str
    state: Path

    @property
    def workflow_id(self) -> str:
        return f"session-{self.session_id}"

    async def raw_history(self, session_id: str | None = None) -> History:
        """The session's (or ``session_id``'s) history through a client without agentrt's converter or any key."""
        raw = await Client.connect(self.server.address)
        handle = raw.get_workflow_handle(f"session-{session_id}" if session_id else self.workflow_id)
        return History(events=(await handle.fetch_history()).events)

    def cli_env(self, **extra: str) -> dict[str, str]:
        env = {
            **os.environ,
            "AGENTRT_TEMPORAL_ADDRESS": self.server.address,
            "AGENTRT_TASK_QUEUE": self.config.task_queue,
            "AGENTRT_DATABASE_URL": self.config.database_url or "",
            "AGENTRT_PRINCIPAL": OWNER,
            **extra,
        }
        for name in ("AGENTRT_CONFIG", "AGENTRT_CODEC_KEYS", "AGENTRT_CODEC_CURRENT_KEY", "AGENTRT_CODEC_KEYS_FILE"):
            if name not in extra:
                env.pop(name, None)
        return env


@pytest.fixture(scope="module")
async def encrypted(temporal_server: DevServer, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Encrypted]:
    """One session run with encryption on: a short first message, a tool call, an answer, then a
    message long enough to leave history for the store."""
    state = tmp_path_factory.mktemp("encrypted")
    config = encrypted_config(temporal_server, state, f"enc-{uuid.uuid4().hex[:8]}", k1=KEY)
    store = Store.open(config.database_url)
    workspace = state / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("# A project\n")
    script = write_script(state, [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}]},
        {"text": f"read it: {ANSWER}"},
        {"text": "got the long one"},
    ])
    temporal = await connect(temporal_server.address, plugin=AgentrtPlugin(config, store))
    client = AgentClient(temporal, task_queue=config.task_queue, principal=OWNER, store=store)
    session_id = uuid.uuid4().hex[:12]
    async with build_worker(temporal, config, store, default_registry(), task_queue=config.task_queue):
        _, first = await client.start_and_wait(session_config(client, session_id, workspace, script), f"please note {PROMPT}")
        second = await client.send_and_wait(session_id, f"{LONG} " + "x" * (2 * THRESHOLD))
        assert (first.status, second.status) == ("completed", "completed"), (first, second)
        yield Encrypted(temporal_server, config, store, client, session_id, state)
    store.close()


# ---------------------------------------------------------------- what Temporal holds


async def test_history_read_without_the_keys_holds_no_content_in_clear(encrypted: Encrypted) -> None:
    history = await encrypted.raw_history()

    raw = history.SerializeToString()
    assert not [c for c in CANARIES if c.encode() in raw]
    found = list(payloads_in(history))
    in_clear = [path for path, p in found if p.metadata.get("encoding") not in (b"binary/encrypted", REFERENCE)]
    assert in_clear and all(SDK_BOOKKEEPING.search(path) for path in in_clear), in_clear
    assert len(encrypted_payloads(history)) > 10


async def test_payload_references_in_history_point_to_ciphertext_in_the_store(encrypted: Encrypted) -> None:
    history = await encrypted.raw_history()
    keys = [json.loads(p.data)["claimData"]["key"] for _, p in payloads_in(history) if p.metadata.get("encoding") == REFERENCE]
    with encrypted.store.engine.connect() as conn:
        rows = dict(conn.execute(text("select key, data from payloads")).all())

    assert keys and set(keys) <= set(rows)
    stored = [Payload.FromString(bytes(data)) for data in rows.values()]
    assert all(p.metadata["encoding"] == b"binary/encrypted" and p.metadata["encryption-key-id"] == b"k1" for p in stored)
    assert not [c for c in CANARIES for data in rows.values() if c.encode() in bytes(data)]


async def test_the_store_a_worker_was_given_without_a_cipher_seals_the_session_s_content(encrypted: Encrypted) -> None:
    # The fixture opened the store with Store.open(url) alone: the worker's plugin gave it the keys' cipher.
    with encrypted.store.engine.connect() as conn:
        rows = [
            value for query in ("select content_json from messages where session_id = :sid",
                                "select body_json from events where session_id = :sid")
            for (value,) in conn.execute(text(query), {"sid": encrypted.session_id})
        ]

    assert len(rows) > 10 and all(value.startswith(f"{SEALED_PREFIX}k1:") for value in rows)
    assert not [c for c in CANARIES for value in rows if c in value]
    assert PROMPT in encrypted.store.messages(encrypted.session_id)[0][1].text


async def test_temporal_workflow_show_without_the_codec_shows_no_content(encrypted: Encrypted) -> None:
    shown = await run(temporal_binary(), "workflow", "show", "--output", "json",
                      "--address", encrypted.server.address, "--workflow-id", encrypted.workflow_id)

    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert not [c for c in CANARIES if c in shown.stdout]
    assert not [c for c in CANARIES for data in data_fields(document) if c.encode() in data]


async def test_a_failed_turn_reports_its_error_in_clear_while_history_holds_the_failure_encrypted(
    encrypted: Encrypted, tmp_path: Path, workspace: Path
) -> None:
    marker = f"path-canary-{uuid.uuid4().hex}"
    script = write_script(tmp_path, [{"text": "one"}], name=f"{marker}.json")  # its path is in the error
    client, session_id = encrypted.client, uuid.uuid4().hex[:12]
    await client.start_and_wait(session_config(client, session_id, workspace, script), "hi")

    outcome = await client.send_and_wait(session_id, "again")

    assert outcome.status == "failed" and outcome.error_type == "script_exhausted" and marker in (outcome.error or "")
    history = await encrypted.raw_history(session_id)
    assert marker.encode() not in history.SerializeToString()
    failures = [e.activity_task_failed_event_attributes.failure for e in history.events
                if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED]
    assert failures and all(f.message == "Encoded failure" and f.encoded_attributes.metadata["encoding"] == b"binary/encrypted"
                            for f in failures)


# ---------------------------------------------------------------- who reads it in clear


async def test_agent_client_reads_the_session_in_clear(encrypted: Encrypted) -> None:
    texts = [e.text for e in (await encrypted.client.events(encrypted.session_id)).events if isinstance(e, UserMessageAdded)]

    assert texts[0] == f"please note {PROMPT}" and texts[1].startswith(LONG)


async def test_agentrt_session_events_with_the_keys_prints_the_session_in_clear(encrypted: Encrypted) -> None:
    shown = await run(sys.executable, "-m", "agentrt.cli", "session", "events", encrypted.session_id, "--json",
                      env=encrypted.cli_env(AGENTRT_CODEC_KEYS=env_keys(k1=KEY)), cwd=encrypted.state)

    assert shown.returncode == 0, shown.stderr
    assert PROMPT in shown.stdout and ANSWER in shown.stdout and LONG in shown.stdout


async def test_agentrt_session_events_without_the_keys_exits_2_naming_the_key(encrypted: Encrypted) -> None:
    shown = await run(sys.executable, "-m", "agentrt.cli", "session", "events", encrypted.session_id,
                      env=encrypted.cli_env(), cwd=encrypted.state)

    assert shown.returncode == 2
    assert "payload encrypted with key 'k1' cannot be decrypted: this process has no codec keys" in shown.stderr
    assert PROMPT not in shown.stdout + shown.stderr


async def test_a_client_without_the_keys_gets_a_typed_error(encrypted: Encrypted) -> None:
    keyless = encrypted_config(encrypted.server, encrypted.state, encrypted.config.task_queue)
    temporal = await connect(encrypted.server.address, plugin=AgentrtPlugin(keyless, encrypted.store))

    with pytest.raises(PayloadDecryptionError) as caught:
        await AgentClient(temporal, task_queue=keyless.task_queue, principal=OWNER).events(encrypted.session_id)
    assert caught.value.key_id == "k1"


async def test_the_encrypted_history_replays_with_the_keys(encrypted: Encrypted) -> None:
    history = await encrypted.client.temporal.get_workflow_handle(encrypted.workflow_id).fetch_history()

    result = await Replayer(workflows=[], plugins=[AgentrtPlugin(encrypted.config, encrypted.store)]).replay_workflow(history)

    assert result.replay_failure is None


# ---------------------------------------------------------------- the codec server


@pytest.fixture(scope="module")
async def codec_server(encrypted: Encrypted) -> AsyncIterator[str]:
    """`agentrt codec-server` as an operator runs it, on a free loopback port; yields its URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "agentrt.cli", "codec-server", "--port", str(port), "--ui-origin", UI],
        env=encrypted.cli_env(AGENTRT_CODEC_KEYS=env_keys(k1=KEY), AGENTRT_CODEC_TOKEN=TOKEN),
        cwd=encrypted.state, stdout=subprocess.DEVNULL, stderr=(encrypted.state / "codec-server.log").open("ab"),
        start_new_session=True,
    )
    try:
        for _ in range(300):
            if port_is_open("127.0.0.1", port) or process.poll() is not None:
                break
            await asyncio.sleep(0.1)
        assert process.poll() is None, (encrypted.state / "codec-server.log").read_text()
        yield f"http://127.0.0.1:{port}"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)


async def test_the_codec_server_decodes_payloads_fetched_from_history(encrypted: Encrypted, codec_server: str) -> None:
    from_history = encrypted_payloads(await encrypted.raw_history())
    body = {"payloads": [json_format.MessageToDict(p) for p in from_history]}

    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(
            f"{codec_server}/decode", json=body,
            headers={"Authorization": f"Bearer {TOKEN}", "X-Namespace": "default", "Origin": UI},
        )

    assert response.status_code == 200, response.text
    decoded = [json_format.ParseDict(p, Payload()) for p in response.json()["payloads"]]
    assert len(decoded) == len(from_history)
    assert not [p for p in decoded if p.metadata.get("encoding") == b"binary/encrypted"]
    assert any(PROMPT.encode() in p.data for p in decoded) and any(ANSWER.encode() in p.data for p in decoded)
    assert response.headers["access-control-allow-origin"] == UI


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token-wrong-token"], ids=["missing", "wrong"])
async def test_the_codec_server_refuses_a_call_without_its_token(
    encrypted: Encrypted, codec_server: str, authorization: str | None
) -> None:
    payload = encrypted_payloads(await encrypted.raw_history())[0]
    headers = {"X-Namespace": "default"} | ({"Authorization": authorization} if authorization else {})

    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(f"{codec_server}/decode", json={"payloads": [json_format.MessageToDict(payload)]}, headers=headers)

    assert response.status_code == 401
    assert PROMPT not in response.text


async def test_the_codec_server_answers_a_preflight_for_the_ui_origin_only(codec_server: str) -> None:
    preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type,x-namespace"}

    async with httpx.AsyncClient(timeout=30) as http:
        ui = await http.options(f"{codec_server}/decode", headers={"Origin": UI, **preflight})
        other = await http.options(f"{codec_server}/decode", headers={"Origin": "http://attacker.example", **preflight})

    assert ui.status_code == 200 and ui.headers["access-control-allow-origin"] == UI
    assert ui.headers["access-control-allow-credentials"] == "true"
    assert "authorization" in ui.headers["access-control-allow-headers"].lower()
    assert other.status_code != 200 and "access-control-allow-origin" not in other.headers


async def test_temporal_workflow_show_with_the_codec_server_shows_the_session_in_clear(
    encrypted: Encrypted, codec_server: str
) -> None:
    shown = await run(temporal_binary(), "workflow", "show", "--output", "json",
                      "--address", encrypted.server.address, "--workflow-id", encrypted.workflow_id,
                      "--codec-endpoint", codec_server, "--codec-auth", f"Bearer {TOKEN}")

    assert shown.returncode == 0, shown.stderr
    decoded = list(data_fields(json.loads(shown.stdout)))
    assert any(PROMPT.encode() in data for data in decoded) and any(ANSWER.encode() in data for data in decoded)


# ---------------------------------------------------------------- clients and workers with other keys


@asynccontextmanager
async def worker_with(server: DevServer, state: Path, task_queue: str, **keys: bytes) -> AsyncIterator[None]:
    config = encrypted_config(server, state, task_queue, **keys)
    store = Store.open(config.database_url)
    temporal = await connect(server.address, plugin=AgentrtPlugin(config, store))
    try:
        async with build_worker(temporal, config, store, default_registry(), task_queue=task_queue):
            yield
    finally:
        store.close()


async def client_with(server: DevServer, state: Path, task_queue: str, current: str, **keys: bytes) -> AgentClient:
    config = encrypted_config(server, state, task_queue, **keys)
    config.codec.current_key = current
    temporal = await connect(server.address, plugin=AgentrtPlugin(config))  # the store driver opens on first use
    return AgentClient(temporal, task_queue=task_queue, principal=OWNER)


async def until_a_worker_is_listed(client: AgentClient) -> None:
    """The server lists a poller (with the identity the check reads) once its first poll arrives."""
    for _ in range(300):
        if await client.has_worker():
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"no worker listed on {client.task_queue}")


async def test_a_client_encrypting_with_a_key_its_workers_lack_is_refused_before_anything_is_sent(
    temporal_server: DevServer, tmp_path: Path, workspace: Path
) -> None:
    task_queue = f"enc-{uuid.uuid4().hex[:8]}"
    script = write_script(tmp_path, [{"text": "hi"}])
    async with worker_with(temporal_server, tmp_path, task_queue, k1=KEY):
        client = await client_with(temporal_server, tmp_path, task_queue, "k2", k1=KEY, k2=OTHER_KEY)
        await until_a_worker_is_listed(client)
        session_id = uuid.uuid4().hex[:12]

        with pytest.raises(PayloadCodecMismatch, match="codec key 'k2'.*holds aes-gcm:k1@") as caught:
            await client.start(session_config(client, session_id, workspace, script), PROMPT)

        assert caught.value.key_id == "k2" and task_queue in str(caught.value)
        with pytest.raises(SessionNotFound):
            await client.state(session_id)


async def test_a_client_is_refused_when_its_workers_have_no_keys(
    temporal_server: DevServer, tmp_path: Path, workspace: Path
) -> None:
    task_queue = f"enc-{uuid.uuid4().hex[:8]}"
    script = write_script(tmp_path, [{"text": "hi"}])
    async with worker_with(temporal_server, tmp_path, task_queue):
        client = await client_with(temporal_server, tmp_path, task_queue, "k1", k1=KEY)
        await until_a_worker_is_listed(client)

        with pytest.raises(PayloadCodecMismatch, match="holds no codec keys"):
            await client.start(session_config(client, uuid.uuid4().hex[:12], workspace, script), PROMPT)


async def test_a_worker_without_the_key_fails_the_workflow_task_naming_it_and_a_worker_with_it_then_runs_the_turn(
    temporal_server: DevServer, tmp_path: Path, workspace: Path
) -> None:
    task_queue = f"enc-{uuid.uuid4().hex[:8]}"
    script = write_script(tmp_path, [{"text": "done"}])
    client = await client_with(temporal_server, tmp_path, task_queue, "k1", k1=KEY)
    session_id = uuid.uuid4().hex[:12]
    # No worker polls yet, so the client cannot tell and sends; the session waits for a worker.
    started = asyncio.create_task(client.start_and_wait(session_config(client, session_id, workspace, script), PROMPT))
    raw = await Client.connect(temporal_server.address)
    handle = raw.get_workflow_handle(f"session-{session_id}")
    await asyncio.wait_for(until_started(handle), 60)  # sent before the worker below polls

    async with worker_with(temporal_server, tmp_path, task_queue):
        failure = await asyncio.wait_for(first_workflow_task_failure(handle), 60)
    assert "payload encrypted with key 'k1' cannot be decrypted: this process has no codec keys" in failure
    assert not started.done()

    async with worker_with(temporal_server, tmp_path, task_queue, k1=KEY):
        _, outcome = await asyncio.wait_for(started, 120)
    assert outcome.status == "completed" and outcome.answer == "done"


async def test_a_refused_client_is_served_as_soon_as_a_worker_with_its_key_polls(
    temporal_server: DevServer, tmp_path: Path, workspace: Path
) -> None:
    task_queue = f"enc-{uuid.uuid4().hex[:8]}"
    script = write_script(tmp_path, [{"text": "hi"}])
    session_id = uuid.uuid4().hex[:12]
    async with worker_with(temporal_server, tmp_path, task_queue):
        client = await client_with(temporal_server, tmp_path, task_queue, "k1", k1=KEY)
        await until_a_worker_is_listed(client)
        with pytest.raises(PayloadCodecMismatch):
            await client.start(session_config(client, uuid.uuid4().hex[:12], workspace, script), PROMPT)

        async with worker_with(temporal_server, tmp_path, task_queue, k1=KEY):
            await until_listed_holding(client, AesGcmCodec({"k1": KEY}, "k1").current_fingerprint)
            started = await client.start(session_config(client, session_id, workspace, script), PROMPT)

    assert started.session_id == session_id


async def until_listed_holding(client: AgentClient, fingerprint: str) -> None:
    """Until the server lists a worker of the client's task queue that advertises ``fingerprint``."""
    request = DescribeTaskQueueRequest(namespace=client.temporal.namespace, task_queue=TaskQueue(name=client.task_queue))
    for _ in range(300):
        pollers = (await client.temporal.workflow_service.describe_task_queue(request)).pollers
        if any(fingerprint in (payload_fingerprints_of(p.identity) or []) for p in pollers):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"no worker holding {fingerprint} listed on {client.task_queue}")


# ---------------------------------------------------------------- a client without keys, workers that encrypt


@pytest.fixture
async def keyless(encrypted: Encrypted) -> AgentClient:
    """A client of the encrypting workers' task queue without codec keys (no [codec]), once the
    server lists those workers."""
    config = encrypted_config(encrypted.server, encrypted.state, encrypted.config.task_queue)
    temporal = await connect(encrypted.server.address, plugin=AgentrtPlugin(config))
    client = AgentClient(temporal, task_queue=config.task_queue, principal=OWNER)
    await until_a_worker_is_listed(client)
    return client


def says_to_give_the_keys(error: PayloadCodecMismatch, refused: str) -> bool:
    message = str(error)
    return (
        message.startswith(refused) and "this client has no codec keys" in message and "aes-gcm:k1@" in message
        and "Give this client the workers' keys" in message and error.key_id is None and error.client_fingerprint is None
    )


@pytest.mark.parametrize("method", ["start", "start_and_wait"])
async def test_a_client_without_keys_starts_no_session_on_workers_that_encrypt(
    encrypted: Encrypted, keyless: AgentClient, tmp_path: Path, workspace: Path, method: str
) -> None:
    session_id = uuid.uuid4().hex[:12]
    script = write_script(tmp_path, [{"text": "hi"}])

    with pytest.raises(PayloadCodecMismatch) as caught:
        await getattr(keyless, method)(session_config(keyless, session_id, workspace, script), PROMPT)

    assert says_to_give_the_keys(caught.value, f"session {session_id}: message not sent."), caught.value
    assert caught.value.task_queue == keyless.task_queue
    with pytest.raises(SessionNotFound):
        await encrypted.client.state(session_id)


@pytest.mark.parametrize("method", ["send", "send_and_wait"])
async def test_a_client_without_keys_sends_nothing_to_a_session_whose_workers_encrypt(
    encrypted: Encrypted, keyless: AgentClient, method: str
) -> None:
    canary = f"clear-canary-{uuid.uuid4().hex}"
    before = await encrypted.client.events(encrypted.session_id)

    with pytest.raises(PayloadCodecMismatch) as caught:
        await getattr(keyless, method)(encrypted.session_id, canary)

    assert says_to_give_the_keys(caught.value, f"session {encrypted.session_id}: message not sent."), caught.value
    assert (await encrypted.client.events(encrypted.session_id)).last_seq == before.last_seq
    assert canary.encode() not in (await encrypted.raw_history()).SerializeToString()


async def test_a_client_without_keys_starts_no_task_on_workers_that_encrypt(
    encrypted: Encrypted, keyless: AgentClient, tmp_path: Path, workspace: Path
) -> None:
    task_id = uuid.uuid4().hex[:12]
    script = write_script(tmp_path, [{"text": "done"}])

    with pytest.raises(PayloadCodecMismatch) as caught:
        await keyless.start_task(f"note {PROMPT}", workspace=str(workspace), task_id=task_id, script=script)

    assert says_to_give_the_keys(caught.value, f"task {task_id}: not started."), caught.value
    with pytest.raises(TaskNotFound):
        await encrypted.client.task_status(task_id)


async def test_a_client_without_keys_starts_no_graph_on_workers_that_encrypt(
    encrypted: Encrypted, keyless: AgentClient, tmp_path: Path, workspace: Path
) -> None:
    graph_id = uuid.uuid4().hex[:12]
    script = write_script(tmp_path, [{"text": "done"}])

    with pytest.raises(PayloadCodecMismatch) as caught:
        await keyless.start_graph(goal=f"note {PROMPT}", workspace=str(workspace), graph_id=graph_id, script=script)

    assert says_to_give_the_keys(caught.value, f"graph {graph_id}: not started."), caught.value
    with pytest.raises(GraphNotFound):
        await encrypted.client.graph_status(graph_id)


async def test_agentrt_run_without_keys_exits_2_and_starts_nothing_on_workers_that_encrypt(
    encrypted: Encrypted, keyless: AgentClient, tmp_path: Path, workspace: Path
) -> None:
    session_id = uuid.uuid4().hex[:12]
    script = write_script(tmp_path, [{"text": "hi"}])

    shown = await run(sys.executable, "-m", "agentrt.cli", "run", "hi", "-w", str(workspace), "--script", script,
                      "--approve", "auto", "--json", "--session-id", session_id, env=encrypted.cli_env(), cwd=encrypted.state)

    assert shown.returncode == 2, shown.stderr
    assert f"error: session {session_id}: message not sent." in shown.stderr
    assert "this client has no codec keys" in shown.stderr and "Give this client the workers' keys" in shown.stderr
    with pytest.raises(SessionNotFound):
        await encrypted.client.state(session_id)


async def until_started(handle: Any) -> None:
    """Until the server knows the workflow (its start has been sent and taken)."""
    while True:
        try:
            await handle.describe()
            return
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
        await asyncio.sleep(0.1)


async def first_workflow_task_failure(handle: Any) -> str:
    while True:
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                return event.workflow_task_failed_event_attributes.failure.message
        await asyncio.sleep(0.2)


async def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """A process run without blocking the event loop the module's worker runs on."""
    process = await asyncio.create_subprocess_exec(
        *args, env=env, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 120)
    return subprocess.CompletedProcess(list(args), process.returncode or 0, stdout.decode(), stderr.decode())

