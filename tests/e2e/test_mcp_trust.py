"""An operator decides how far an MCP server is trusted (``agentrt mcp trust``,
``AgentClient.trust_mcp_server``): every worker applies the latest decision from its next listing
of the server's tools on, over agentrt.toml's ``trust``; the decision is in the audit log, and
anyone else is refused with nothing recorded."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from agentrt.client import AgentClient
from agentrt.schemas import PermissionRequested, RequestRejected, ToolInvocationCompleted
from tests.cli.test_cli import agentrt
from tests.conftest import OWNER, Harness
from tests.e2e._support import ALLOW_ALL, session_config, wait_for_event, write_script
from tests.e2e.test_mcp import mcp_worker
from tests.mcp_servers import time_stdio

OPS = "ops"


async def call_once(client: AgentClient, harness: Harness, workspace: Path, tmp_path: Path, server: str) -> str:
    """A session whose model calls ``<server>.get_current_time`` once (approvals: allow all)."""
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": f"{server}.get_current_time", "arguments": {"timezone": "UTC"}}]},
        {"text": "done"},
    ], name=f"{uuid.uuid4().hex[:6]}.json")
    sid = harness.new_session_id()
    await client.start(session_config(client, sid, workspace, script, approval=ALLOW_ALL), "what time is it?")
    return sid


async def test_an_operator_marks_a_trusted_server_untrusted_and_its_next_call_asks(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    server = f"t{uuid.uuid4().hex[:8]}"
    ops = AgentClient(harness.temporal, task_queue=harness.task_queue, principal=OPS, store=harness.store, operators=[OPS])
    async with mcp_worker(harness, {server: time_stdio(tmp_path, name=server)}) as client:
        trusted = await call_once(client, harness, workspace, tmp_path, server)
        done = await wait_for_event(client, trusted, lambda e: isinstance(e, ToolInvocationCompleted))
        assert isinstance(done, ToolInvocationCompleted)  # agentrt.toml: trusted, and the policy allows all

        decision = await ops.trust_mcp_server(server, "untrusted", reason="it answered with instructions")
        assert (decision.trust, decision.principal) == ("untrusted", OPS)
        untrusted = await call_once(client, harness, workspace, tmp_path, server)
        asked = await wait_for_event(client, untrusted, lambda e: isinstance(e, PermissionRequested))
        assert isinstance(asked, PermissionRequested) and asked.request.tool == f"{server}.get_current_time"
        assert "untrusted" in asked.request.reason
        await client.approve(untrusted, asked.request.request_id)
        await wait_for_event(client, untrusted, lambda e: isinstance(e, ToolInvocationCompleted))

        await ops.trust_mcp_server(server, "trusted", reason="reviewed")
        again = await call_once(client, harness, workspace, tmp_path, server)
        await wait_for_event(client, again, lambda e: isinstance(e, ToolInvocationCompleted))
        assert not [e for e in harness.store.events(again) if isinstance(e, PermissionRequested)]

    acts = await ops.audit(target=server)
    assert [(a.action, a.principal, a.detail["trust"], a.reason) for a in acts] == [
        ("trust_mcp_server", OPS, "trusted", "reviewed"),
        ("trust_mcp_server", OPS, "untrusted", "it answered with instructions"),
    ]


@pytest.mark.parametrize(
    ("principal", "server", "trust", "reason", "problem"),
    [
        (OWNER, "docs-{u}", "untrusted", "mine now", f"{OWNER} is not an operator"),
        (OPS, "docs-{u}", "sort-of", "why not", "trust is 'trusted' or 'untrusted', not 'sort-of'"),
        (OPS, "docs-{u}", "trusted", "   ", "a trust decision needs a reason"),
        (OPS, "docs-{u}", "trusted", "x" * 10_000_000, "a reason is at most 2000 characters, not 10000000"),
        (OPS, "../etc/{u}" + "x" * 500, "trusted", "path", "is not a server name"),
    ],
)
async def test_a_trust_decision_that_is_not_an_operator_s_or_is_malformed_is_refused_and_nothing_is_recorded(
    harness: Harness, principal: str, server: str, trust: str, reason: str, problem: str
) -> None:
    server = server.format(u=uuid.uuid4().hex[:8])
    client = AgentClient(harness.temporal, task_queue=harness.task_queue, principal=principal, store=harness.store, operators=[OPS])
    with pytest.raises(RequestRejected, match="rejected trust") as refused:
        await client.trust_mcp_server(server, trust, reason=reason)
    assert problem in str(refused.value) and len(str(refused.value)) < 300
    assert harness.store.mcp_trust(server) is None
    assert harness.store.audit(target=server) == []


async def test_the_cli_records_an_operator_s_decision_and_lists_it_and_refuses_anyone_else(harness: Harness, tmp_path: Path) -> None:
    server = f"c{uuid.uuid4().hex[:8]}"
    (tmp_path / "agentrt.toml").write_text(
        f'[principals]\noperators = ["{OPS}"]\n\n[mcp.servers.{server}]\ncommand = "true"\n'
    )
    stranger = await agentrt(harness, "mcp", "trust", server, "untrusted", "--reason", "mine", cwd=tmp_path)
    assert stranger.returncode == 2 and "alice is not an operator" in stranger.stderr
    assert harness.store.mcp_trust(server) is None

    decided = await agentrt(harness, "mcp", "trust", server, "untrusted", "--reason", "wrote outside its dir", "--json",
                            cwd=tmp_path, env={"AGENTRT_PRINCIPAL": OPS})
    assert decided.returncode == 0, decided.stderr
    assert json.loads(decided.stdout) | {"at": None} == {
        "server": server, "trust": "untrusted", "principal": OPS, "reason": "wrote outside its dir", "at": None,
    }
    listed = await agentrt(harness, "mcp", "list", "--json", cwd=tmp_path)
    # Other tests' servers added at run time share the store: this test's server by name.
    [row] = [r for r in json.loads(listed.stdout)["servers"] if r["name"] == server]
    assert row["trust"] == "untrusted" and row["trust_decision"]["principal"] == OPS
    shown = await agentrt(harness, "mcp", "list", cwd=tmp_path)
    assert f"untrusted by {OPS}" in shown.stdout and "wrote outside its dir" in shown.stdout
