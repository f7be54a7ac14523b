"""MCP servers as a tool source, end to end: real servers (mcp-server-time from PyPI,
@modelcontextprotocol/server-everything from npm, installed by the test setup), a real Temporal
dev server, the scripted model calling `<server>.<tool>`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from agentrt.activities.tools import default_registry
from agentrt.client import AgentClient
from agentrt.schemas import (
    MCP_CALL_TOOL,
    MCP_LIST_TOOLS,
    ElicitationAnswer,
    ElicitationAnswered,
    McpServerConfig,
    McpToolsListed,
    ModelRequestStarted,
    PermissionDecisionIgnored,
    PermissionRequested,
    RequestRejected,
    SessionNotFound,
    ToolInvocationCompleted,
    ToolInvocationFailed,
    ToolInvocationStarted,
)
from agentrt.worker import AgentrtConfig, AgentrtPlugin, build_worker
from agentrt.workflows.context import estimate_tokens
from agentrt.workflows.session import SessionWorkflow
from tests.cli.test_cli import agentrt
from tests.conftest import OWNER, Harness
from tests.e2e._support import ALLOW_ALL, session_config, wait_for_event, write_script
from tests.mcp_servers import everything_stdio, probe_stdio, server_processes, time_stdio

# An effectful tool that writes a line and sleeps, marking its phase (the chaos bench's MCP server).
CHAOS_MCP_SERVER = Path(__file__).resolve().parents[2] / "bench" / "_chaos_mcp_server.py"


@asynccontextmanager
async def mcp_worker(harness: Harness, servers: dict[str, McpServerConfig], queue: str | None = None) -> AsyncIterator[AgentClient]:
    """A worker on a task queue of its own (``queue``, default a fresh one) whose configuration has
    ``servers``; yields a client for it."""
    queue = queue or f"mcp-{uuid.uuid4().hex[:8]}"
    config = AgentrtConfig(
        temporal_address=harness.server.address, task_queue=queue, database_url=harness.config.database_url,
        mcp_servers=servers,
    )
    async with build_worker(harness.temporal, config, harness.store, default_registry(), task_queue=queue):
        yield AgentClient(harness.temporal, task_queue=queue, principal=OWNER, store=harness.store, mcp_servers=sorted(servers))


async def test_a_scripted_model_calls_an_mcp_tool(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "time.get_current_time", "arguments": {"timezone": "Europe/Paris"}}]},
        {"text": "done"},
    ])
    async with mcp_worker(harness, {"time": time_stdio(tmp_path)}) as client:
        sid = harness.new_session_id()
        started = await client.start(session_config(client, sid, workspace, script, approval=ALLOW_ALL), "what time is it?")
        outcome = await client.wait(sid, started.turn_id)
    assert outcome.status == "completed", outcome.error
    events = harness.store.events(sid, 0, 1000)
    [listed] = [e for e in events if isinstance(e, McpToolsListed)]
    assert (listed.servers, listed.tools, listed.failures) == (["time"], 2, {})
    [done] = [e for e in events if isinstance(e, ToolInvocationCompleted)]
    assert done.tool == "time.get_current_time" and "Europe/Paris" in done.preview
    tool_messages = [m for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert '"timezone": "Europe/Paris"' in tool_messages[0].text


async def _run(client: AgentClient, harness: Harness, workspace: Path, script: str, text: str = "go", **fields: object) -> tuple[str, str]:
    sid = harness.new_session_id()
    fields.setdefault("approval", ALLOW_ALL)
    started = await client.start(session_config(client, sid, workspace, script, **fields), text)
    return sid, started.turn_id


@asynccontextmanager
async def asking_for_a_name(
    harness: Harness, workspace: Path, tmp_path: Path
) -> AsyncIterator[tuple[AgentClient, str, str, PermissionRequested]]:
    """A session whose model called ``probe.ask_name``, waiting for the question's answer:
    (client, session id, turn id, the ``PermissionRequested`` of kind elicitation)."""
    script = write_script(tmp_path, [{"tool_calls": [{"name": "probe.ask_name", "arguments": {}}]}, {"text": "ok"}])
    async with mcp_worker(harness, {"probe": probe_stdio(tmp_path)}) as client:
        sid, turn = await _run(client, harness, workspace, script)
        asked = await wait_for_event(client, sid, lambda e: isinstance(e, PermissionRequested))
        assert isinstance(asked, PermissionRequested) and asked.request.kind == "elicitation"
        yield client, sid, turn, asked


def _scheduled(history: object, activity_type: str) -> int:
    return sum(
        1 for e in history.events  # type: ignore[attr-defined]
        if e.HasField("activity_task_scheduled_event_attributes")
        and e.activity_task_scheduled_event_attributes.activity_type.name == activity_type
    )


async def test_a_turn_of_ten_calls_lists_the_server_s_tools_once(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    calls = [{"tool_calls": [{"name": "everything.echo", "arguments": {"message": f"m{i}"}}]} for i in range(10)]
    script = write_script(tmp_path, [*calls, {"text": "echoed"}, {"text": "again"}])
    async with mcp_worker(harness, {"everything": everything_stdio(tmp_path)}) as client:
        sid, turn = await _run(client, harness, workspace, script)
        assert (await client.wait(sid, turn)).status == "completed"
        second = await client.send(sid, "once more")
        assert (await client.wait(sid, second.turn_id)).status == "completed"
        history = await harness.handle(sid).fetch_history()
    events = harness.store.events(sid, 0, 10_000)
    assert [e.turn_id for e in events if isinstance(e, McpToolsListed)] == [turn, second.turn_id]  # once per turn
    assert _scheduled(history, MCP_LIST_TOOLS) == 2
    assert _scheduled(history, MCP_CALL_TOOL) == 10
    done = [e for e in events if isinstance(e, ToolInvocationCompleted)]
    assert [e.preview for e in done] == [f"Echo: m{i}" for i in range(10)]
    # A fresh worker replays the history without any server or cache: the listing is in it.
    await Replayer(workflows=[SessionWorkflow], plugins=[AgentrtPlugin(harness.config, harness.store)]).replay_workflow(
        WorkflowHistory.from_json(f"session-{sid}", history.to_json())
    )


async def test_an_is_error_result_reaches_the_model_as_the_call_s_error(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"tool_calls": [{"name": "probe.fail", "arguments": {}}]}, {"text": "it failed"}])
    async with mcp_worker(harness, {"probe": probe_stdio(tmp_path)}) as client:
        sid, turn = await _run(client, harness, workspace, script)
        assert (await client.wait(sid, turn)).status == "completed"
    [failed] = [e for e in harness.store.events(sid, 0, 1000) if isinstance(e, ToolInvocationFailed)]
    assert (failed.tool, failed.reason) == ("probe.fail", "tool_error")
    assert "this tool always fails" in failed.error
    [message] = [m for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert message.is_error and "this tool always fails" in message.text


async def test_a_server_killed_mid_call_fails_that_call_and_the_next_call_works(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "probe" / "sleeping"
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "probe.sleep", "arguments": {"seconds": 60, "marker": str(marker)}}]},
        {"tool_calls": [{"name": "probe.read_file", "arguments": {"path": str(marker)}}]},
        {"text": "recovered"},
    ])
    async with mcp_worker(harness, {"probe": probe_stdio(tmp_path)}) as client:
        sid, turn = await _run(client, harness, workspace, script)
        await wait_for_event(client, sid, lambda e: isinstance(e, ToolInvocationStarted) and e.tool == "probe.sleep")
        for _ in range(200):
            if marker.exists():
                break
            await asyncio.sleep(0.05)
        pids = server_processes("mcp_probe_server.py")
        assert pids
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # one that ended between listing and kill
                os.kill(pid, signal.SIGKILL)
        outcome = await client.wait(sid, turn)
    assert outcome.status == "completed", outcome.error
    events = harness.store.events(sid, 0, 1000)
    [failed] = [e for e in events if isinstance(e, ToolInvocationFailed)]
    assert failed.tool == "probe.sleep" and "McpServerUnavailable" not in failed.error and "unavailable" in failed.error
    [done] = [e for e in events if isinstance(e, ToolInvocationCompleted)]
    assert done.tool == "probe.read_file" and "started" in done.preview  # the restarted server answered
    states = [e.type for e in harness.store.mcp_server_events("probe")]
    assert "McpServerFailed" in states and states.count("McpServerReady") >= 2


async def test_an_effectful_call_whose_server_dies_after_its_effect_asks_for_a_reconcile_not_a_failure(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    # The server wrote the line, then died before answering: the call's outcome is unknown. A
    # failed call would have the model call again under a new key, and the line would be written
    # twice; the claim stays open instead and an operator says what happened.
    marks = tmp_path / "marks"
    out = tmp_path / "effects.txt"
    server = McpServerConfig(
        name="chaosmcp", command=sys.executable, args=[str(CHAOS_MCP_SERVER), str(marks)], cwd=str(tmp_path / "cwd"),
        sandbox="none",
    )
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "chaosmcp.append", "arguments": {"path": str(out), "line": "once", "pause_after_seconds": 60}}]},
        {"text": "done"},
    ])
    async with mcp_worker(harness, {"chaosmcp": server}) as client:
        sid, turn = await _run(client, harness, workspace, script)
        for _ in range(600):
            if any(m.read_text() == "after" for m in (marks / "inflight").glob("*")):
                break
            await asyncio.sleep(0.05)
        pids = server_processes(str(CHAOS_MCP_SERVER))
        assert pids and out.read_text() == "once\n"
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        asked = await wait_for_event(
            client, sid, lambda e: isinstance(e, PermissionRequested) and e.request.kind == "reconcile", timeout=30
        )
        assert isinstance(asked, PermissionRequested)
        await client.reconcile(sid, asked.request.request_id, "applied", note="the line is in the file")
        outcome = await client.wait(sid, turn)
    assert outcome.status == "completed", outcome.error
    assert out.read_text() == "once\n"
    events = harness.store.events(sid, 0, 1000)
    [failed] = [e for e in events if isinstance(e, ToolInvocationFailed)]
    assert failed.reason == "outcome_unknown" and "chaosmcp.append" in failed.error
    [done] = [e for e in events if isinstance(e, ToolInvocationCompleted)]
    assert done.tool == "chaosmcp.append" and "applied" in done.preview


@pytest.mark.parametrize(
    ("server", "tool", "content", "expect"),
    [
        ("everything", "trigger-elicitation-request", {"name": "Ada Lovelace"}, "Ada Lovelace"),  # elicitation/create
        ("probe", "ask_name", {"name": "Ada"}, "hello Ada"),  # the 2026-07-28 InputRequiredResult
    ],
)
async def test_an_elicitation_is_answered_after_a_worker_restart(
    harness: Harness, workspace: Path, tmp_path: Path, server: str, tool: str, content: dict[str, str], expect: str
) -> None:
    config = everything_stdio(tmp_path) if server == "everything" else probe_stdio(tmp_path)
    script = write_script(tmp_path, [{"tool_calls": [{"name": f"{server}.{tool}", "arguments": {}}]}, {"text": "thanks"}])
    queue = f"mcp-{uuid.uuid4().hex[:8]}"
    async with mcp_worker(harness, {server: config}, queue=queue) as client:
        sid, turn = await _run(client, harness, workspace, script)
        asked = await wait_for_event(
            client, sid, lambda e: isinstance(e, PermissionRequested) and e.request.kind == "elicitation"
        )
        assert isinstance(asked, PermissionRequested)
        request = asked.request
        assert request.tool == f"{server}.{tool}" and request.requested_schema and request.message
        with pytest.raises(RequestRejected, match="does not match the schema"):
            await client.answer(sid, request.request_id, {"name": 42})  # nothing changes
    # No worker runs now: the question waits in the workflow, and a new worker process picks it up.
    async with mcp_worker(harness, {server: config}, queue=queue) as client:
        await client.answer(sid, request.request_id, content)
        outcome = await client.wait(sid, turn)
    assert outcome.status == "completed", outcome.error
    events = harness.store.events(sid, 0, 1000)
    [answered] = [e for e in events if isinstance(e, ElicitationAnswered)]
    assert (answered.principal, answered.action, answered.content) == (OWNER, "accept", content)
    [done] = [e for e in events if isinstance(e, ToolInvocationCompleted)]
    [message] = [m for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert done.tool == f"{server}.{tool}" and expect in message.text


async def test_a_stranger_cannot_answer_and_a_decline_reaches_the_server(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    async with asking_for_a_name(harness, workspace, tmp_path) as (client, sid, turn, asked):
        stranger = AgentClient(harness.temporal, task_queue=client.task_queue, principal="mallory")
        with pytest.raises(SessionNotFound):  # another owner's session answers as a missing one
            await stranger.answer(sid, asked.request.request_id, {"name": "Mallory"})
        await client.answer(sid, asked.request.request_id, action="decline")
        assert (await client.wait(sid, turn)).status == "completed"
    [message] = [m for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert "no name: decline" in message.text


def _toml(config: McpServerConfig) -> str:
    lines = [f"[mcp.servers.{config.name}]", f"command = {json.dumps(config.command)}", f"args = {json.dumps(config.args)}"]
    lines += [f"cwd = {json.dumps(config.cwd)}", f"read_paths = {json.dumps(config.read_paths)}"]
    return "\n".join(lines) + "\n"


async def test_the_cli_offers_the_configured_servers_and_asks_their_questions_at_the_prompt(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    (tmp_path / "agentrt.toml").write_text(_toml(probe_stdio(tmp_path)))
    script = write_script(tmp_path, [{"tool_calls": [{"name": "probe.ask_name", "arguments": {}}]}, {"text": "greeted"}])
    queue = {"AGENTRT_TASK_QUEUE": f"cli-mcp-{uuid.uuid4().hex[:8]}"}  # no worker there: run starts one with the config

    tools = await agentrt(harness, "mcp", "tools", "probe", "--json", cwd=tmp_path, env=queue)
    assert tools.returncode == 0, tools.stderr
    listed = {t["qualified_name"]: t for t in json.loads(tools.stdout)["tools"]}
    assert listed["probe.ask_name"]["risk"] == "effectful" and listed["probe.read_file"]["risk"] == "read_only"
    assert listed["probe.read_file"]["input_schema"]["required"] == ["path"]
    assert listed["probe." + "t" * 60]["skipped"]

    run = await agentrt(
        harness, "run", "ask my name", "-w", str(workspace), "--script", script, "--approve", "auto", "--json",
        cwd=tmp_path, env=queue, input='{"nom": "Ada"}\nnot json\n{"name": "Ada"}\n',  # two answers refused: asked again
    )
    assert run.returncode == 0, run.stderr
    sid = json.loads(run.stdout)["session_id"]
    assert "probe.ask_name asks: What is your name?" in run.stderr and "required: name" in run.stderr
    assert "does not match the schema" in run.stderr and "not JSON" in run.stderr
    [message] = [m for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert message.text == "hello Ada"

    servers = await agentrt(harness, "mcp", "list", "--json", cwd=tmp_path, env=queue)
    assert servers.returncode == 0, servers.stderr
    [probe] = [s for s in json.loads(servers.stdout)["servers"] if s["name"] == "probe"]
    assert (probe["name"], probe["state"]) == ("probe", "stopped")  # run's worker stopped it when the run ended
    missing = await agentrt(harness, "mcp", "tools", "nope", cwd=tmp_path, env=queue)
    assert missing.returncode == 2 and "no MCP server 'nope'" in missing.stderr and "configured: probe" in missing.stderr


async def test_session_answer_from_another_process(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    async with asking_for_a_name(harness, workspace, tmp_path) as (client, sid, turn, asked):
        assert [q.request_id for q in await client.questions(sid)] == [asked.request.request_id]
        queue = {"AGENTRT_TASK_QUEUE": client.task_queue}
        state = await agentrt(harness, "session", "state", sid, cwd=tmp_path, env=queue)
        assert f'question  {asked.request.request_id}: probe.ask_name asks "What is your name?"' in state.stdout
        bad = await agentrt(harness, "session", "answer", sid, asked.request.request_id, "[1]", cwd=tmp_path, env=queue)
        assert bad.returncode == 2 and "must be a JSON object" in bad.stderr
        off = await agentrt(harness, "session", "answer", sid, asked.request.request_id, '{"nom": "x"}', cwd=tmp_path, env=queue)
        assert off.returncode == 2 and "does not match the schema" in off.stderr
        ok = await agentrt(harness, "session", "answer", sid, asked.request.request_id, '{"name": "Grace"}', cwd=tmp_path, env=queue)
        assert ok.returncode == 0, ok.stderr
        assert (await client.wait(sid, turn)).status == "completed"
    [message] = [m for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert message.text == "hello Grace"


async def test_cancelling_the_turn_cancels_the_call_at_the_server(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    marker = tmp_path / "probe" / "sleeping"
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "probe.sleep", "arguments": {"seconds": 60, "marker": str(marker)}}]}, {"text": "-"},
    ])
    async with mcp_worker(harness, {"probe": probe_stdio(tmp_path)}) as client:
        sid, turn = await _run(client, harness, workspace, script)
        for _ in range(400):
            if marker.exists() and marker.read_text() == "started":
                break
            await asyncio.sleep(0.05)
        await client.cancel(sid, turn, "enough")
        assert (await client.wait(sid, turn)).status == "cancelled"
        for _ in range(200):
            if marker.read_text() == "cancelled":
                break
            await asyncio.sleep(0.05)
    assert marker.read_text() == "cancelled"  # the server saw the request cancelled


async def test_a_server_that_cannot_start_leaves_its_tools_out_of_the_turn(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    broken = McpServerConfig(name="broken", command=str(tmp_path / "no-such-server"), sandbox="none")
    script = write_script(tmp_path, [{"tool_calls": [{"name": "broken.anything", "arguments": {}}]}, {"text": "went on"}])
    async with mcp_worker(harness, {"broken": broken}) as client:
        sid = harness.new_session_id()
        config = session_config(client, sid, workspace, script, approval=ALLOW_ALL, mcp_servers=["broken", "unknown"])
        started = await client.start(config, "go")
        assert (await client.wait(sid, started.turn_id)).status == "completed"
    events = harness.store.events(sid, 0, 1000)
    [listed] = [e for e in events if isinstance(e, McpToolsListed)]
    assert listed.tools == 0 and set(listed.failures) == {"broken", "unknown"}
    assert "no-such-server" in listed.failures["broken"]
    assert "this worker has no [mcp.servers.unknown]" in listed.failures["unknown"]
    [failed] = [e for e in events if isinstance(e, ToolInvocationFailed)]
    assert failed.reason == "unknown_tool"  # the model called a tool this turn does not offer, and reads why
    assert failed.error.startswith("broken.anything is not available this turn: MCP server 'broken' could not be listed")
    assert harness.store.latest_mcp_server_events()["broken"].type == "McpServerFailed"


async def test_an_answer_by_signal_counts_and_one_off_the_schema_is_recorded_as_ignored(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    async with asking_for_a_name(harness, workspace, tmp_path) as (client, sid, turn, asked):
        rid = asked.request.request_id
        handle = harness.handle(sid)
        await handle.signal(SessionWorkflow.elicitation_answer, ElicitationAnswer(request_id=rid, principal=OWNER, content={"x": 1}))
        ignored = await wait_for_event(client, sid, lambda e: isinstance(e, PermissionDecisionIgnored))
        assert isinstance(ignored, PermissionDecisionIgnored) and ignored.why == "invalid_answer"
        await handle.signal(SessionWorkflow.elicitation_answer, ElicitationAnswer(request_id=rid, principal=OWNER, content={"name": "Lin"}))
        assert (await client.wait(sid, turn)).status == "completed"
    [message] = [m for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert message.text == "hello Lin"


async def test_the_context_plan_counts_the_turn_s_mcp_tool_specs(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": "hi"}])
    planned: dict[bool, int] = {}
    async with mcp_worker(harness, {"time": time_stdio(tmp_path)}) as client:
        for with_mcp in (True, False):
            sid = harness.new_session_id()
            config = session_config(client, sid, workspace, script, mcp_servers=["time"] if with_mcp else [])
            started = await client.start(config, "hello")
            assert (await client.wait(sid, started.turn_id)).status == "completed"
            events = harness.store.events(sid, 0, 100)
            [request] = [e for e in events if isinstance(e, ModelRequestStarted)]
            planned[with_mcp] = request.context_tokens or 0
            if with_mcp:
                [listed] = [e for e in events if isinstance(e, McpToolsListed)]
                specs = harness.store.tool_listing(listed.digest or "") or []
    encoded = json.dumps([spec.model_dump(mode="json") for spec in specs], sort_keys=True).encode()
    assert len(specs) == 2 and planned[True] - planned[False] == estimate_tokens(len(encoded))
