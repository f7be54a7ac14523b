"""Encryption by default, as a newcomer meets it, in real processes on the real dev server: `agentrt
dev` makes the machine's codec keys and runs a codec server for its UI; a session started with
`agentrt run` whose tool reads a `.env` file leaves no secret value in Temporal history (`temporal
workflow show`) nor in the store, while `agentrt session events` shows it to its owner and the codec
server decodes it for the UI; `--no-encryption` writes in clear; an `agentrt worker` without keys
says loudly that history is in clear, and one with the machine's keys does not."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import stat
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload
from temporalio.client import Client

from agentrt.worker import DevServer, ensure_home_keys, temporal_binary
from tests.cli.test_cli_process import agentrt, agentrt_dev, line_with, user_env
from tests.e2e._support import data_fields, write_script

pytestmark = pytest.mark.runs_first  # long: handed out first (tests/conftest.py)

SECRET = f"sk-live-{uuid.uuid4().hex}"


@dataclass
class Dev:
    home: Path
    address: str
    ui_url: str
    printed: str

    def env(self, **extra: str) -> dict[str, str]:
        return user_env(self.home, AGENTRT_TEMPORAL_ADDRESS=self.address, **extra)


@pytest.fixture(scope="module")
async def dev(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Dev]:
    """`agentrt dev` with a home of its own and no agentrt setting, as a newcomer starts it."""
    home = tmp_path_factory.mktemp("dev-home")
    async with agentrt_dev(home) as (address, ui_url, printed):
        yield Dev(home, address, ui_url, printed)


@dataclass
class EnvSession:
    session_id: str
    run: Any  # the `agentrt run` process's CompletedProcess


@pytest.fixture(scope="module")
async def env_session(dev: Dev, tmp_path_factory: pytest.TempPathFactory) -> EnvSession:
    """`agentrt run` against that server: the scripted model runs `cat .env` and repeats the key."""
    root = tmp_path_factory.mktemp("env-session")
    workspace = root / "project"
    workspace.mkdir()
    (workspace / ".env").write_text(f"OPENAI_API_KEY={SECRET}\n")
    script = write_script(root, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "cat .env"}}]},
        {"text": f"Your key is {SECRET}."},
    ])
    session_id = f"env-{uuid.uuid4().hex[:8]}"
    run = await agentrt(
        "run", "what is in .env?", "-w", str(workspace), "--script", script, "--approve", "auto",
        "--session-id", session_id, env=dev.env(), cwd=root,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return EnvSession(session_id, run)


async def test_dev_makes_the_machine_s_keys_with_mode_600_and_says_so(dev: Dev) -> None:
    keys = dev.home / "codec-keys.toml"

    assert keys.is_file() and stat.S_IMODE(keys.stat().st_mode) == 0o600
    assert f"made codec keys {keys}" in dev.printed
    assert "codec server for the UI at http://127.0.0.1:" in dev.printed


async def test_the_session_ran_the_tool_and_the_run_printed_the_answer(env_session: EnvSession) -> None:
    assert f"Your key is {SECRET}." in env_session.run.stdout
    assert "made codec keys" not in env_session.run.stderr  # it found the machine's keys that dev made


async def test_temporal_workflow_show_holds_no_secret_value(dev: Dev, env_session: EnvSession) -> None:
    shown = await asyncio.create_subprocess_exec(
        temporal_binary(), "workflow", "show", "--output", "json", "--address", dev.address,
        "--workflow-id", f"session-{env_session.session_id}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(shown.communicate(), 120)

    assert shown.returncode == 0, stderr.decode()
    document = json.loads(stdout)
    assert len(document["events"]) > 10
    assert stdout.decode().count(SECRET) == 0
    assert not [data for data in data_fields(document) if SECRET.encode() in data]
    assert b"binary/encrypted" in b"".join(data_fields(document)) or "YmluYXJ5L2VuY3J5cHRlZA==" in stdout.decode()


async def test_the_store_holds_no_secret_value(dev: Dev, env_session: EnvSession) -> None:
    with sqlite3.connect(dev.home / "agentrt.db") as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        found = [
            table for table in tables for row in db.execute(f'SELECT * FROM "{table}"')
            for value in row if SECRET.encode() in (value if isinstance(value, bytes) else str(value).encode())
        ]
        sealed = db.execute(
            "SELECT count(*) FROM messages WHERE session_id = ? AND content_json LIKE 'agentrt-sealed:%'",
            (env_session.session_id,),
        ).fetchone()[0]

    assert found == []
    assert sealed >= 3  # the prompt, the tool call and its result, the answer


async def test_agentrt_session_events_shows_the_owner_the_session_in_clear(dev: Dev, env_session: EnvSession, tmp_path: Path) -> None:
    shown = await agentrt("session", "events", env_session.session_id, "--json", env=dev.env(), cwd=tmp_path)

    assert shown.returncode == 0, shown.stderr
    events = [json.loads(line) for line in shown.stdout.splitlines()]
    tool_output = [e for e in events if f"OPENAI_API_KEY={SECRET}" in json.dumps(e) and e["type"].startswith("Tool")]
    assert tool_output, shown.stdout  # what `cat .env` printed
    assert any(f"Your key is {SECRET}." in json.dumps(e) for e in events)


async def test_agentrt_session_trajectory_reads_the_sealed_events(dev: Dev, env_session: EnvSession, tmp_path: Path) -> None:
    shown = await agentrt("session", "trajectory", env_session.session_id, env=dev.env(), cwd=tmp_path)

    assert shown.returncode == 0, shown.stderr
    steps = [step for turn in json.loads(shown.stdout)["turns"] for step in turn["steps"]]
    assert any("shell.run" in json.dumps(step) for step in steps), shown.stdout


async def test_the_dev_ui_s_codec_server_decodes_the_history_for_the_ui(dev: Dev, env_session: EnvSession) -> None:
    endpoint = dev.printed.split("codec server for the UI at ")[1].split()[0]
    raw = await Client.connect(dev.address)
    history = await raw.get_workflow_handle(f"session-{env_session.session_id}").fetch_history()
    encrypted = [
        p for e in history.events if e.HasField("activity_task_completed_event_attributes")
        for p in e.activity_task_completed_event_attributes.result.payloads
    ]

    async with httpx.AsyncClient(timeout=30) as http:
        settings = (await http.get(f"http://127.0.0.1:{dev.ui_url.rsplit(':', 1)[1]}/api/v1/settings")).json()
        decoded = await http.post(
            f"{endpoint}/decode", json={"payloads": [json_format.MessageToDict(p) for p in encrypted]},
            headers={"X-Namespace": "default", "Origin": dev.ui_url},
        )

    assert settings["Codec"]["Endpoint"] == endpoint
    assert decoded.status_code == 200, decoded.text
    payloads = [json_format.ParseDict(p, Payload()) for p in decoded.json()["payloads"]]
    assert encrypted and all(p.metadata["encoding"] == b"binary/encrypted" for p in encrypted)
    assert any(SECRET.encode() in p.data for p in payloads)
    assert decoded.headers["access-control-allow-origin"] == dev.ui_url


async def test_run_with_no_encryption_writes_in_clear_and_what_it_wrote_stays_readable_once_keys_exist(workspace: Path, tmp_path: Path, temporal_server: DevServer) -> None:
    home = tmp_path / "home"
    script = write_script(tmp_path, [{"text": f"clear {SECRET}"}])
    env = user_env(home, AGENTRT_TEMPORAL_ADDRESS=temporal_server.address, AGENTRT_TASK_QUEUE=f"clear-{uuid.uuid4().hex[:8]}")

    run = await agentrt("run", "hi", "-w", str(workspace), "--script", script, "--no-encryption", env=env, cwd=tmp_path)

    assert run.returncode == 0, run.stdout + run.stderr
    assert not (home / "codec-keys.toml").exists()
    with sqlite3.connect(home / "agentrt.db") as db:
        assert db.execute("SELECT count(*) FROM messages WHERE content_json LIKE ?", (f"%{SECRET}%",)).fetchone()[0] == 1

    # Encryption turned on afterwards: a worker and the CLI with the machine's keys read what was written in clear.
    ensure_home_keys({"AGENTRT_HOME": str(home)})
    async with worker(home, temporal_server, env["AGENTRT_TASK_QUEUE"]) as printed:
        assert "history is in clear" not in printed
        session_id = json.loads((await agentrt("session", "list", "--json", env=env, cwd=tmp_path)).stdout)[0]["session_id"]
        shown = await agentrt("session", "events", session_id, "--json", env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"clear {SECRET}" in shown.stdout


@asynccontextmanager
async def worker(home: Path, server: DevServer, task_queue: str | None = None) -> AsyncIterator[str]:
    """`agentrt worker` with ``home`` (and nothing else of agentrt's) polling ``task_queue`` (default
    a new one); yields what it printed up to the line saying it polls; stopped on exit."""
    queue = task_queue or f"warn-{uuid.uuid4().hex[:8]}"
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentrt.cli", "worker", cwd=home,
        env=user_env(home, AGENTRT_TEMPORAL_ADDRESS=server.address, AGENTRT_TASK_QUEUE=queue),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stderr is not None
    seen: list[str] = []
    drain: asyncio.Task[bytes] | None = None
    try:
        await asyncio.wait_for(line_with(process.stderr, "worker polling", seen), 120)
        drain = asyncio.ensure_future(process.stderr.read())  # its log goes on: keep the pipe from filling
        yield "".join(seen)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 60)
        if drain is not None:
            await drain


async def worker_lines(home: Path, server: DevServer) -> str:
    """What `agentrt worker` with ``home`` prints up to the line saying it polls; then it is stopped."""
    async with worker(home, server) as printed:
        return printed


async def test_a_worker_without_keys_warns_that_history_is_in_clear(tmp_path: Path, temporal_server: DevServer) -> None:
    printed = await worker_lines(tmp_path, temporal_server)

    warning = [line for line in printed.splitlines() if "history is in clear" in line]
    assert len(warning) == 1 and " WARNING " in warning[0], printed
    assert "agentrt codec-server --generate-key" in warning[0] and "docs/encryption.md" in warning[0]


async def test_a_worker_with_the_machine_s_keys_does_not_warn(tmp_path: Path, temporal_server: DevServer) -> None:
    ensure_home_keys({"AGENTRT_HOME": str(tmp_path)})

    printed = await worker_lines(tmp_path, temporal_server)

    assert "history is in clear" not in printed


async def test_two_dev_servers_started_at_once_each_show_their_ui_a_codec_server_with_their_own_keys(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # Both want port 8081 for their codec server and make their keys in the same second (one id,
    # two keys): each must print the endpoint of a server that holds its own keys.
    homes = [tmp_path_factory.mktemp(f"dev-{n}") for n in (1, 2)]
    async with contextlib.AsyncExitStack() as stack:
        started = await asyncio.gather(*(stack.enter_async_context(agentrt_dev(home)) for home in homes))
        endpoints = [printed.split("codec server for the UI at ")[1].split()[0] for _, _, printed in started]
        assert endpoints[0] != endpoints[1]
        probe = Payload(metadata={"encoding": b"json/plain"}, data=b'"probe"')
        for home, endpoint in zip(homes, endpoints):
            codec, made = ensure_home_keys({"AGENTRT_HOME": str(home)})
            assert not made and codec.codec() is not None  # the keys that dev made
            async with httpx.AsyncClient(timeout=30) as http:
                answer = await http.post(f"{endpoint}/encode", json={"payloads": [json_format.MessageToDict(probe)]})
            encoded = [json_format.ParseDict(p, Payload()) for p in answer.json()["payloads"]]
            assert [p.data for p in await codec.codec().decode(encoded)] == [probe.data]  # type: ignore[union-attr]
