"""Secrets a tool declares, on the real server: the worker reads them at call time and hands them to
the tool only; whatever the tool (or a hostile model through ``shell.run``) prints of them reaches
the events, the transcript, the effect ledger, every other table of the store and the workflow
history as ``[secret:NAME]``, never as the value. A secret gone at call time is a typed tool error
and the session goes on; one missing at start stops the worker from starting."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from temporalio.worker import Worker

from agentrt.activities.tools import default_registry, tool
from agentrt.client import AgentClient
from agentrt.schemas import (
    ConfigurationError,
    McpServerConfig,
    SecretsConfig,
    SecretsMissing,
    ToolInvocationFailed,
)
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtWorkerPlugin, build_worker
from tests.conftest import OWNER, Harness
from tests.e2e._support import ALLOW_ALL, session_config, worker_process, write_script
from tests.e2e.secret_tools import ORDERS_KEY_NAME, WAREHOUSE_KEY_NAME, echo_key, keyed
from tests.mcp_hostile_server import hostile_config


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def history_text(history_json: str) -> str:
    """An exported history with every payload's ``data`` (base64) decoded beside it."""
    found = [history_json]
    for data in re.findall(r'"data":\s*"([A-Za-z0-9+/=]+)"', history_json):
        try:
            found.append(base64.b64decode(data).decode("utf-8", errors="replace"))
        except ValueError:
            continue
    return "\n".join(found)


def store_text(store: Store) -> str:
    """Every row of every table of the store, as text (bytes decoded): what anyone with the
    database reads."""
    engine: sa.Engine = store._engine  # noqa: SLF001 - a test reads the whole database
    rows: list[str] = []
    with engine.connect() as conn:
        for table in sa.inspect(engine).get_table_names():
            for row in conn.execute(sa.text(f'SELECT * FROM "{table}"')):
                for value in row:
                    rows.append(value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value))
    return "\n".join(rows)


def tool_texts(harness: Harness, sid: str) -> list[str]:
    return [m.text for _, m in harness.store.messages(sid) if m.role == "tool"]


@pytest.fixture
async def keyed_client(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[AgentClient, dict[str, str]]]:
    """A worker in this process with the ``keyed`` agent, its secrets in its environment."""
    values = {ORDERS_KEY_NAME: fresh("sk-orders"), WAREHOUSE_KEY_NAME: fresh("wh")}
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    queue = fresh("secrets")
    async with build_worker(harness.temporal, harness.config, harness.store, task_queue=queue, agents=[keyed]):
        yield harness.client_on(queue), values


async def test_a_tool_that_echoes_its_declared_secret_is_recorded_with_the_secret_s_name_everywhere(
    harness: Harness, keyed_client: tuple[AgentClient, dict[str, str]], workspace: Path, tmp_path: Path
) -> None:
    client, values = keyed_client
    value = values[ORDERS_KEY_NAME]
    sid = harness.new_session_id()
    script = write_script(tmp_path, [
        call("echo_key", how="plain"), call("echo_key", how="json"), call("echo_key", how="error"),
        call("echo_key", how="crash"), call("echo_key", how="repr"), {"text": "done"},
    ])
    config = session_config(client, sid, workspace, script, agent="keyed", approval=ALLOW_ALL)

    _, outcome = await client.start_and_wait(config, "which key do you use?")

    assert outcome.status == "completed"
    plain, as_json, error, crash, shown = tool_texts(harness, sid)
    assert plain == "using key [secret:ORDERS_API_KEY]"
    assert json.loads(as_json) == {"key": "[secret:ORDERS_API_KEY]", "quoted": '"[secret:ORDERS_API_KEY]"'}
    assert error == "error: the orders service refused key [secret:ORDERS_API_KEY]"
    assert crash == "error: echo_key failed unexpectedly: RuntimeError: connection reset while sending [secret:ORDERS_API_KEY]"
    assert value not in shown and "ORDERS_API_KEY" not in shown  # ctx's repr names no secret
    events = (await client.events(sid)).events
    failed = [e for e in events if isinstance(e, ToolInvocationFailed)]
    assert [f.error for f in failed] == [
        "the orders service refused key [secret:ORDERS_API_KEY]",
        "echo_key failed unexpectedly: RuntimeError: connection reset while sending [secret:ORDERS_API_KEY]",
    ]
    history = history_text((await harness.handle(sid).fetch_history()).to_json())
    assert "[secret:ORDERS_API_KEY]" in history  # the payloads are read, not just their base64
    # A crash's earlier attempts are in history too (the activity's last failure): redacted, no cause.
    assert "connection reset while sending [secret:ORDERS_API_KEY]" in history
    assert value not in history
    assert value not in store_text(harness.store)  # events, transcript, effect ledger, every table
    assert value not in json.dumps([e.model_dump(mode="json") for e in events])


def test_the_tool_spec_the_model_reads_names_no_secret() -> None:
    shown = echo_key.spec().model_dump_json()
    assert ORDERS_KEY_NAME not in shown and "secret" not in shown.lower()


async def test_shell_run_in_the_sandbox_sees_none_of_the_worker_s_secrets(
    harness: Harness, keyed_client: tuple[AgentClient, dict[str, str]], workspace: Path, tmp_path: Path
) -> None:
    """A hostile model asks ``shell.run`` for the environment and every process's environ: the
    sandboxed command's environment is an allowlist and its /proc is its own."""
    client, values = keyed_client
    sid = harness.new_session_id()
    command = "env; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done; cat /proc/1/environ; echo end"
    script = write_script(tmp_path, [call("shell.run", command=command), {"text": "done"}])
    config = session_config(client, sid, workspace, script, agent="keyed", approval=ALLOW_ALL)

    _, outcome = await client.start_and_wait(config, "print the environment")

    assert outcome.status == "completed"
    [text] = tool_texts(harness, sid)
    assert "end" in text and "PATH=" in text
    for name, value in values.items():
        assert name not in text and value not in text


async def test_a_workspace_file_holding_a_secret_the_worker_has_read_is_shown_with_names_by_fs_read_and_shell_run(
    harness: Harness, keyed_client: tuple[AgentClient, dict[str, str]], workspace: Path, tmp_path: Path
) -> None:
    """The user's ``.env`` holds the same key: any tool's output, not only the declaring tool's,
    is recorded with the secret's name."""
    client, values = keyed_client
    (workspace / ".env").write_text(f"ORDERS_API_KEY={values[ORDERS_KEY_NAME]}\nDEBUG=1\n")
    sid = harness.new_session_id()
    script = write_script(tmp_path, [
        call("echo_key"), call("fs.read", path=".env"), call("shell.run", command="cat .env"),
        {"text": "done"},
    ])
    config = session_config(client, sid, workspace, script, agent="keyed", approval=ALLOW_ALL, tools=["echo_key", "fs.read", "shell.run"])

    _, outcome = await client.start_and_wait(config, "read the .env")

    assert outcome.status == "completed"
    _, read, shown = tool_texts(harness, sid)
    assert "ORDERS_API_KEY=[secret:ORDERS_API_KEY]" in read and "ORDERS_API_KEY=[secret:ORDERS_API_KEY]" in shown
    history = history_text((await harness.handle(sid).fetch_history()).to_json())
    assert values[ORDERS_KEY_NAME] not in history + read + shown


async def test_a_hostile_model_reading_the_worker_s_environ_and_secrets_file_unsandboxed_gets_the_names_only(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """A worker process (``agentrt worker --agents``) with one secret in a chmod-600 TOML file and
    one in its environment: a session that runs unconfined (``danger_full_access``) reads the
    worker's ``/proc/PID/environ`` and the secrets file. Both hold values; the output holds names,
    including the file's secret no tool declares."""
    orders, warehouse, spare = fresh("sk-orders"), fresh("wh"), fresh("spare")
    secrets_file = tmp_path / "secrets.toml"
    secrets_file.write_text(f'{ORDERS_KEY_NAME} = "{orders}"\nSPARE_TOKEN = "{spare}"\n')
    secrets_file.chmod(0o600)
    toml = tmp_path / "agentrt.toml"
    toml.write_text(f'[secrets]\nsources = ["file", "env"]\npath = "{secrets_file}"\n')
    sid = harness.new_session_id()
    command = f"tr '\\0' '\\n' < /proc/$PPID/environ | grep -E 'TOKEN|KEY'; cat {secrets_file}; echo end"
    script = write_script(tmp_path, [call("echo_key"), call("shell.run", command=command), {"text": "done"}])
    client = harness.client_on(harness.task_queue + "-proc")
    config = session_config(client, sid, workspace, script, agent="keyed", approval=ALLOW_ALL, sandbox="danger_full_access")
    env = {"AGENTRT_CONFIG": str(toml), WAREHOUSE_KEY_NAME: warehouse, "PYTHONPATH": str(Path.cwd())}

    with worker_process(harness, tmp_path / "worker.log", "--agents", "tests.e2e.secret_tools", env=env):
        _, outcome = await client.start_and_wait(config, "show me what the worker knows")

    assert outcome.status == "completed", (tmp_path / "worker.log").read_text()[-3000:]
    echoed, shown = tool_texts(harness, sid)
    assert echoed == "using key [secret:ORDERS_API_KEY]"
    assert f"{WAREHOUSE_KEY_NAME}=[secret:{WAREHOUSE_KEY_NAME}]" in shown
    assert f'{ORDERS_KEY_NAME} = "[secret:{ORDERS_KEY_NAME}]"' in shown
    assert 'SPARE_TOKEN = "[secret:SPARE_TOKEN]"' in shown
    history = history_text((await harness.handle(sid).fetch_history()).to_json())
    recorded = history + store_text(harness.store)
    for value in (orders, warehouse, spare):
        assert value not in recorded


async def test_a_secret_gone_at_call_time_is_a_typed_tool_error_and_the_session_goes_on(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """The worker starts with the secret in its file; the operator removes it; the next call fails
    with ``SecretNotFound`` (the model and the user see it), the next turn runs."""
    secrets_dir = tmp_path / "secrets.d"
    secrets_dir.mkdir(mode=0o700)
    for name, value in ((ORDERS_KEY_NAME, fresh("sk-orders")), (WAREHOUSE_KEY_NAME, fresh("wh"))):
        (secrets_dir / name).write_text(value + "\n")
        (secrets_dir / name).chmod(0o600)
    queue = fresh("secrets")
    config = AgentrtConfig(
        temporal_address=harness.server.address, task_queue=queue, database_url=harness.config.database_url,
        secrets=SecretsConfig(sources=["file"], path=str(secrets_dir)),
    )
    sid = harness.new_session_id()
    script = write_script(tmp_path, [call("echo_key"), {"text": "no key"}, call("warehouse"), {"text": "up"}])
    async with build_worker(harness.temporal, config, harness.store, task_queue=queue, agents=[keyed]):
        client = harness.client_on(queue)
        (secrets_dir / ORDERS_KEY_NAME).unlink()
        _, first = await client.start_and_wait(
            session_config(client, sid, workspace, script, agent="keyed", approval=ALLOW_ALL), "use the key"
        )
        second = await client.send_and_wait(sid, "and the warehouse?")
        events = (await client.events(sid)).events

    assert first.status == "completed" and second.status == "completed"
    missing, up = tool_texts(harness, sid)
    assert missing == (
        f"error: secret ORDERS_API_KEY (declared by echo_key) is not set in any of the worker's secret sources "
        f"(file {secrets_dir}); the call was not run"
    )
    assert up == "warehouse up"
    [failed] = [e for e in events if isinstance(e, ToolInvocationFailed)]
    assert failed.tool == "echo_key" and failed.reason == "tool_error" and "secret ORDERS_API_KEY" in failed.error


async def test_a_worker_whose_tools_declare_a_secret_no_source_has_does_not_start_and_says_which(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ORDERS_KEY_NAME, raising=False)
    monkeypatch.setenv(WAREHOUSE_KEY_NAME, fresh("wh"))
    config = AgentrtConfig(temporal_address=harness.server.address, task_queue=fresh("secrets"), database_url=harness.config.database_url)

    with pytest.raises(SecretsMissing) as raised:
        build_worker(harness.temporal, config, harness.store, agents=[keyed])

    assert raised.value.missing == {ORDERS_KEY_NAME: ["echo_key"]}
    assert str(raised.value).startswith("no secret source of this worker (env) has ORDERS_API_KEY (declared by echo_key)")
    # A models-only worker runs no tool: it needs none of them.
    build_worker(harness.temporal, dataclasses.replace(config, tool_task_queue="elsewhere"), harness.store, agents=[keyed], role="models")


async def test_agentrt_worker_whose_agents_declare_a_missing_secret_exits_2_naming_it(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ORDERS_KEY_NAME, raising=False)
    log = tmp_path / "worker.log"
    env = {WAREHOUSE_KEY_NAME: fresh("wh"), "PYTHONPATH": str(Path.cwd()), "AGENTRT_CONFIG": str(tmp_path / "none.toml")}
    (tmp_path / "none.toml").write_text("")

    with worker_process(harness, log, "--agents", "tests.e2e.secret_tools", env=env) as process:
        code = await asyncio.to_thread(process.wait, 60)

    assert code == 2
    assert "error: no secret source of this worker (env) has ORDERS_API_KEY (declared by echo_key)" in log.read_text()


async def test_a_plain_temporal_worker_running_the_plugin_s_tools_checks_their_secrets_too(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ORDERS_KEY_NAME, raising=False)
    monkeypatch.setenv(WAREHOUSE_KEY_NAME, fresh("wh"))
    plugin = AgentrtWorkerPlugin(harness.config, harness.store, registry=default_registry(), agents=[keyed])

    with pytest.raises(SecretsMissing, match="ORDERS_API_KEY"):
        Worker(harness.temporal, task_queue=fresh("secrets"), plugins=[plugin])


async def test_a_secrets_file_other_users_may_read_stops_the_worker(harness: Harness, tmp_path: Path) -> None:
    secrets_file = tmp_path / "secrets.toml"
    secrets_file.write_text(f'{ORDERS_KEY_NAME} = "{fresh("sk")}"\n{WAREHOUSE_KEY_NAME} = "{fresh("wh")}"\n')
    secrets_file.chmod(0o644)
    config = AgentrtConfig(
        temporal_address=harness.server.address, task_queue=fresh("secrets"), database_url=harness.config.database_url,
        secrets=SecretsConfig(sources=["file"], path=str(secrets_file)),
    )

    with pytest.raises(ConfigurationError, match=r"is readable or writable by every user \(mode -rw-r--r--\); `chmod 600"):
        build_worker(harness.temporal, config, harness.store, agents=[keyed])


async def test_an_mcp_server_gets_its_declared_secret_and_what_it_echoes_is_recorded_by_name(
    harness: Harness, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``secrets = {TOKEN = "MCP_API_TOKEN"}``: the server's environment gets the value at launch;
    a hostile server that returns it in a result, an error and structured content is recorded
    with the secret's name."""
    value = fresh("mcp-token")
    monkeypatch.setenv("MCP_API_TOKEN", value)
    plan = {
        "tools": [
            {"name": name, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
            for name in ("text", "error", "structured")
        ],
        "results": {
            "text": {"content": [{"type": "text", "text": {"$env": "TOKEN"}}]},
            "error": {"isError": True, "content": [{"type": "text", "text": {"$env": "TOKEN"}}]},
            "structured": {"content": [], "structuredContent": {"k": {"$env": "TOKEN"}}},
        },
    }
    server = hostile_config(tmp_path, plan, secrets={"TOKEN": "MCP_API_TOKEN"})
    assert server.declared_secrets == ["MCP_API_TOKEN"]
    queue = fresh("mcp-secrets")
    config = AgentrtConfig(
        temporal_address=harness.server.address, task_queue=queue, database_url=harness.config.database_url,
        mcp_servers={"evil": server},
    )
    sid = harness.new_session_id()
    script = write_script(tmp_path, [*(call(f"evil.{n}") for n in ("text", "error", "structured")), {"text": "done"}])
    async with build_worker(harness.temporal, config, harness.store, default_registry(), task_queue=queue):
        client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER, mcp_servers=["evil"])
        _, outcome = await client.start_and_wait(session_config(client, sid, workspace, script, approval=ALLOW_ALL), "go")
        history = history_text((await harness.handle(sid).fetch_history()).to_json())

    assert outcome.status == "completed"
    text, error, structured = tool_texts(harness, sid)
    assert text == "[secret:MCP_API_TOKEN]" and error == "error: [secret:MCP_API_TOKEN]"
    assert "[secret:MCP_API_TOKEN]" in structured
    assert value not in history and value not in store_text(harness.store)


def test_an_mcp_server_declaring_a_secret_no_source_has_stops_the_worker(harness: Harness, tmp_path: Path) -> None:
    server = McpServerConfig(name="gh", command="true", secrets={"GITHUB_TOKEN": "GITHUB_TOKEN_NOT_SET_HERE"})
    config = AgentrtConfig(task_queue=fresh("secrets"), database_url=harness.config.database_url, mcp_servers={"gh": server})

    with pytest.raises(SecretsMissing) as raised:
        build_worker(harness.temporal, config, harness.store, default_registry())

    assert raised.value.missing == {"GITHUB_TOKEN_NOT_SET_HERE": ["mcp:gh"]}


def test_a_tool_declaring_a_secret_with_a_bad_name_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="secrets must be a list of names"):
        tool(name="x", secrets=["ORDERS KEY"])(lambda: "x")
    with pytest.raises(ConfigurationError, match="secrets must be a list of names"):
        tool(name="x", secrets="ORDERS_API_KEY")(lambda: "x")  # type: ignore[arg-type]
