"""Operators add, change and revoke MCP servers at run time (``AgentClient.add_mcp_server``,
``change_mcp_server``, ``revoke_mcp_server``, ``agentrt mcp add|change|revoke``): a running worker
follows each from its next listing of the server's tools, without a restart; each is in the audit
log with who and why; a stranger, an invalid table, a name collision and an unknown server are
refused with a typed error and nothing recorded."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from agentrt.activities.mcp import McpManager
from agentrt.activities.tools import default_registry
from agentrt.client import AgentClient
from agentrt.schemas import (
    InvalidMcpServer,
    McpServerConfig,
    McpServerExists,
    McpServerNotFound,
    McpToolsListed,
    RequestRejected,
    ToolInvocationCompleted,
)
from agentrt.store import agentrt_home
from agentrt.worker import AgentrtConfig, build_worker
from tests.cli.test_cli import agentrt
from tests.conftest import OWNER, Harness
from tests.e2e._support import ALLOW_ALL, session_config, wait_for_event, write_script
from tests.mcp_servers import probe_stdio, time_stdio

OPS = "ops"


@asynccontextmanager
async def running_worker(harness: Harness, servers: dict[str, McpServerConfig], **options: float) -> AsyncIterator[str]:
    """A worker on a task queue of its own with ``servers`` in its agentrt.toml, reading the store's
    registry at each use (no cache); yields its task queue. ``options``: more of ``McpManager``'s."""
    queue = f"mcpreg-{uuid.uuid4().hex[:8]}"
    config = AgentrtConfig(
        temporal_address=harness.server.address, task_queue=queue, database_url=harness.config.database_url, mcp_servers=servers,
    )
    manager = McpManager(servers, store=harness.store, worker="test-worker", home=agentrt_home(), registry_ttl_seconds=0, **options)
    async with build_worker(harness.temporal, config, harness.store, default_registry(), task_queue=queue, mcp=manager):
        yield queue


def clients(harness: Harness, queue: str, servers: list[str], configured: list[str]) -> tuple[AgentClient, AgentClient]:
    """The session owner's client (its sessions use ``servers``) and an operator's (its agentrt.toml
    has ``configured``)."""
    owner = AgentClient(harness.temporal, task_queue=queue, principal=OWNER, store=harness.store, mcp_servers=servers)
    ops = AgentClient(harness.temporal, task_queue=queue, principal=OPS, store=harness.store, operators=[OPS], mcp_servers=configured)
    return owner, ops


async def listed_turn(client: AgentClient, harness: Harness, workspace: Path, tmp_path: Path, call: str | None = None) -> McpToolsListed:
    """A session whose model calls ``call`` once (or answers at once); the listing its turn made."""
    steps = [{"tool_calls": [{"name": call, "arguments": {"timezone": "UTC"}}]}] if call else []
    script = write_script(tmp_path, [*steps, {"text": "done"}], name=f"{uuid.uuid4().hex[:6]}.json")
    sid = harness.new_session_id()
    await client.start(session_config(client, sid, workspace, script, approval=ALLOW_ALL), "go")
    if call:
        await wait_for_event(client, sid, lambda e: isinstance(e, ToolInvocationCompleted))
    listed = await wait_for_event(client, sid, lambda e: isinstance(e, McpToolsListed))
    assert isinstance(listed, McpToolsListed)
    return listed


async def test_a_server_an_operator_adds_is_offered_and_called_by_a_running_worker(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    server = f"a{uuid.uuid4().hex[:8]}"
    async with running_worker(harness, {}) as queue:
        owner, ops = clients(harness, queue, [server], [])
        before = await listed_turn(owner, harness, workspace, tmp_path)
        assert server in before.failures and "no operator added it" in before.failures[server]

        change = await ops.add_mcp_server(time_stdio(tmp_path, name=server).model_dump(), reason="the time team's server")
        assert (change.action, change.principal, change.config.transport) == ("add", OPS, "stdio")
        after = await listed_turn(owner, harness, workspace, tmp_path, call=f"{server}.get_current_time")
    assert (after.tools, after.failures) == (2, {})
    [act] = await ops.audit(target=server)
    assert (act.action, act.principal, act.reason) == ("add_mcp_server", OPS, "the time team's server")


async def test_a_server_an_operator_changes_is_started_anew_with_its_new_configuration(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    server = f"c{uuid.uuid4().hex[:8]}"
    async with running_worker(harness, {server: time_stdio(tmp_path, name=server)}) as queue:
        owner, ops = clients(harness, queue, [server], [server])
        assert (await listed_turn(owner, harness, workspace, tmp_path)).tools == 2  # mcp-server-time's two tools
        await ops.change_mcp_server(probe_stdio(tmp_path, name=server), reason="moved to the probe build")
        probe = await listed_turn(owner, harness, workspace, tmp_path)
    assert probe.failures == {} and probe.tools != 2
    kinds = [e.type for e in harness.store.mcp_server_events(server)]
    assert kinds.count("McpServerStarting") == 2 and kinds[:2] == ["McpServerStarting", "McpServerReady"]


async def test_a_server_an_operator_revokes_is_not_listed_until_it_is_trusted_again(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    server = f"r{uuid.uuid4().hex[:8]}"
    async with running_worker(harness, {server: time_stdio(tmp_path, name=server)}) as queue:
        owner, ops = clients(harness, queue, [server], [server])
        decision = await ops.revoke_mcp_server(server, reason="it exfiltrated a token")
        assert (decision.trust, decision.principal) == ("revoked", OPS)
        revoked = await listed_turn(owner, harness, workspace, tmp_path)
        assert revoked.tools == 0 and f"revoked by {OPS}" in revoked.failures[server]
        assert "it exfiltrated a token" in revoked.failures[server]

        await ops.trust_mcp_server(server, "trusted", reason="rotated and reviewed")
        assert (await listed_turn(owner, harness, workspace, tmp_path, call=f"{server}.get_current_time")).tools == 2
    assert [a.action for a in await ops.audit(target=server)] == ["trust_mcp_server", "revoke_mcp_server"]


async def test_a_running_server_an_operator_revokes_is_stopped_though_no_session_uses_it_again(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    server = f"s{uuid.uuid4().hex[:8]}"
    async with running_worker(harness, {server: time_stdio(tmp_path, name=server)}, revocation_check_seconds=0.2) as queue:
        owner, ops = clients(harness, queue, [server], [server])
        await listed_turn(owner, harness, workspace, tmp_path, call=f"{server}.get_current_time")  # it runs now
        assert harness.store.latest_mcp_server_events()[server].type == "McpServerReady"

        await ops.revoke_mcp_server(server, reason="it exfiltrated a token")
        for _ in range(300):  # no turn lists or calls it: the worker's own check stops it
            if harness.store.latest_mcp_server_events()[server].type == "McpServerStopped":
                break
            await asyncio.sleep(0.1)
        latest = harness.store.latest_mcp_server_events()[server]
    assert latest.type == "McpServerStopped" and latest.worker == "test-worker"


@pytest.mark.parametrize(
    ("principal", "table", "error", "problem"),
    [
        (OWNER, {"command": "true"}, RequestRejected, f"{OWNER} is not an operator"),
        (OPS, {"command": "true", "url": "http://127.0.0.1:1/mcp"}, InvalidMcpServer, "either command"),
        (OPS, {"url": "file:///etc/passwd"}, InvalidMcpServer, "url must start with http"),
        (OPS, {"command": "sh", "sandbox": "none"}, InvalidMcpServer, 'sandbox = "none"'),
        (OPS, {"command": "true", "env": {"K": "${oops"}}, InvalidMcpServer, "variable reference"),
        (OPS, {"command": "true", "name": "shell"}, InvalidMcpServer, "built-in tools"),
        (OPS, {"command": "true", "name": "../../etc"}, InvalidMcpServer, "name"),
        (OPS, {"command": "true", "bogus": 1}, InvalidMcpServer, "bogus"),
    ],
)
async def test_an_added_server_from_a_stranger_or_with_an_invalid_table_is_refused_and_nothing_is_recorded(
    harness: Harness, principal: str, table: dict[str, object], error: type[Exception], problem: str
) -> None:
    server = f"x{uuid.uuid4().hex[:8]}"
    client = AgentClient(harness.temporal, task_queue="q", principal=principal, store=harness.store, operators=[OPS])
    with pytest.raises(error) as refused:
        await client.add_mcp_server({"name": server, **table}, reason="why not")
    assert problem in str(refused.value) and len(str(refused.value)) < 600
    assert server not in harness.store.mcp_server_changes() and harness.store.audit(target=server) == []
    assert server not in client.mcp_servers


async def test_adding_a_name_that_exists_and_changing_or_revoking_an_unknown_one_are_refused(harness: Harness, tmp_path: Path) -> None:
    configured, added, unknown = (f"{p}{uuid.uuid4().hex[:8]}" for p in "tau")
    ops = AgentClient(harness.temporal, task_queue="q", principal=OPS, store=harness.store, operators=[OPS], mcp_servers=[configured])
    first = await ops.add_mcp_server(time_stdio(tmp_path, name=added), reason="first")
    with pytest.raises(McpServerExists, match="agentrt.toml"):
        await ops.add_mcp_server(time_stdio(tmp_path, name=configured), reason="shadow it")
    with pytest.raises(McpServerExists, match="the store"):
        await ops.add_mcp_server(probe_stdio(tmp_path, name=added), reason="replace it")
    with pytest.raises(McpServerNotFound):
        await ops.change_mcp_server(time_stdio(tmp_path, name=unknown), reason="typo")
    with pytest.raises(McpServerNotFound):
        await ops.revoke_mcp_server(unknown, reason="typo")
    assert harness.store.mcp_server_changes()[added] == first  # the first configuration stands
    assert configured not in harness.store.mcp_server_changes() and unknown not in harness.store.mcp_server_changes()
    assert harness.store.mcp_trust(unknown) is None


async def test_the_cli_adds_changes_lists_and_revokes_a_server_for_operators_only(harness: Harness, tmp_path: Path) -> None:
    server = f"l{uuid.uuid4().hex[:8]}"
    (tmp_path / "agentrt.toml").write_text(f'[principals]\noperators = ["{OPS}"]\n')
    as_ops = {"AGENTRT_PRINCIPAL": OPS}
    add = ("mcp", "add", server, "--url", "http://127.0.0.1:9/mcp", "--header", "Authorization=Bearer ${TOKEN}")
    stranger = await agentrt(harness, *add, "--reason", "mine", cwd=tmp_path)
    assert stranger.returncode == 2 and "alice is not an operator" in stranger.stderr
    bad = await agentrt(harness, "mcp", "add", server, "--url", "ftp://x", "--reason", "r", cwd=tmp_path, env=as_ops)
    assert bad.returncode == 2 and "url must start with http" in bad.stderr
    assert server not in harness.store.mcp_server_changes()

    added = await agentrt(harness, *add, "--reason", "search", "--json", cwd=tmp_path, env=as_ops)
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["config"]["headers"] == {"Authorization": "Bearer ${TOKEN}"}
    again = await agentrt(harness, *add, "--reason", "twice", cwd=tmp_path, env=as_ops)
    assert again.returncode == 2 and "exists already" in again.stderr
    changed = await agentrt(harness, "mcp", "change", server, "--url", "https://mcp.example/mcp", "--trust", "untrusted",
                            "--reason", "moved", cwd=tmp_path, env=as_ops)
    assert changed.returncode == 0, changed.stderr
    revoked = await agentrt(harness, "mcp", "revoke", server, "--reason", "leaked", cwd=tmp_path, env=as_ops)
    assert revoked.returncode == 0, revoked.stderr

    listed = json.loads((await agentrt(harness, "mcp", "list", "--json", cwd=tmp_path)).stdout)["servers"]
    [row] = [r for r in listed if r["name"] == server]
    assert (row["source"], row["target"], row["trust"]) == ("store", "https://mcp.example/mcp", "revoked")
    assert (row["change"]["action"], row["change"]["principal"]) == ("change", OPS)
