"""Agents over AG-UI (``POST /v1/agents/{agent}/ag-ui``) driven by the real ``@ag-ui/client``
``HttpAgent`` (npm, ``AGUI_CLIENT_VERSION``, installed by the test into the test cache) in node,
against the gateway on loopback, a real Temporal dev server and worker, and the scripted model (a
loopback provider where a model call must be retried): what the client's messages hold after each
run is the conversation, clean."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentrt.client import create_app
from agentrt.schemas import ToolInvocationCompleted, UserMessageAdded
from agentrt.worker import GatewayConfig, GatewayToken, token_sha256
from tests.activities.providers._loopback import LoopbackServer
from tests.conftest import Harness
from tests.e2e._support import write_script
from tests.e2e.test_gateway import gateway_client
from tests.gateway.test_gateway import serving
from tests.gateway.test_stream_sessions import KEY_ENV, add_profile, cut_then_whole
from tests.mcp_servers import cache_dir

AGUI_CLIENT_VERSION = "1.0.0"
CLIENT_SCRIPT = Path(__file__).resolve().parents[1] / "gateway" / "agui_client.cjs"
TOKENS = {"alice": "alice-agui-token-0123456789", "mallory": "mallory-agui-token-0123456789", "carol": "carol-agui-token-0123456789"}
SCOPES = {"carol": ("runs",)}  # the others: ("sessions",)
LONG = "\n".join(f"line {i:03d}: the quick brown fox jumps over the lazy dog" for i in range(40)) + "\n"


@functools.cache
def client_modules() -> Path:
    """``node_modules`` holding ``@ag-ui/client@AGUI_CLIENT_VERSION``, installed on first use into
    the test cache under a file lock (parallel test processes share one install)."""
    prefix = cache_dir() / "npm-agui"
    prefix.mkdir(parents=True, exist_ok=True)
    package = prefix / "node_modules" / "@ag-ui" / "client" / "package.json"
    with open(prefix / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        installed = json.loads(package.read_text()).get("version") if package.is_file() else None
        if installed != AGUI_CLIENT_VERSION:
            npm = shutil.which("npm")
            if npm is None:
                pytest.fail("npm is not on PATH: the AG-UI tests install @ag-ui/client with it")
            result = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), f"@ag-ui/client@{AGUI_CLIENT_VERSION}"],
                capture_output=True, text=True, timeout=600, check=False,
            )
            if result.returncode != 0 or not package.is_file():
                pytest.fail(f"npm install of @ag-ui/client@{AGUI_CLIENT_VERSION} failed:\n{result.stdout}\n{result.stderr}")
    return prefix / "node_modules"


class Front:
    """A front end: runs of one thread by a stock ``HttpAgent`` (one node process per call)."""

    def __init__(self, http: httpx.AsyncClient, agent: str, tmp_path: Path) -> None:
        self.http = http
        self.url = f"{str(http.base_url).rstrip('/')}/v1/agents/{agent}/ag-ui"
        self.tmp_path = tmp_path

    async def post(self, body: dict[str, Any], principal: str | None = "alice") -> tuple[httpx.Response, list[dict[str, Any]]]:
        """POST ``body`` as ``principal`` (None: no token): the response and its AG-UI events."""
        headers = {"Authorization": f"Bearer {TOKENS[principal]}"} if principal else {}
        response = await self.http.post(self.url, json=body, headers=headers)
        return response, [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]

    async def runs(self, runs: list[dict[str, Any]], *, thread: str, principal: str = "alice",
                   props: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        plan = {"url": self.url, "token": TOKENS[principal], "threadId": thread, "runs": runs,
                "forwardedProps": props or {"workspace": "ws", "script": "script.json"}}
        path = self.tmp_path / f"plan-{uuid.uuid4().hex[:8]}.json"
        path.write_text(json.dumps(plan))
        env = {**os.environ, "NODE_PATH": str(client_modules())}
        node = await asyncio.create_subprocess_exec(
            "node", str(CLIENT_SCRIPT), str(path), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(node.communicate(), 120)
        assert node.returncode == 0, err.decode()
        return json.loads(out)["runs"]


@pytest.fixture
async def front(harness: Harness, workspace: Path, tmp_path: Path) -> AsyncIterator[Front]:
    async with fronting(harness, workspace, tmp_path) as made:
        yield made


@contextlib.asynccontextmanager
async def fronting(harness: Harness, workspace: Path, tmp_path: Path) -> AsyncIterator[Front]:
    """A gateway that knows the harness's profiles (each the name of an app) and a front end of it."""
    config = GatewayConfig(tokens=[GatewayToken(sha256=token_sha256(t), principal=p, scopes=SCOPES.get(p, ("sessions",)))
                                 for p, t in TOKENS.items()])
    client = await gateway_client(harness)
    app = create_app(client, config, workspace_root=workspace.parent, profiles=list(harness.config.profiles))
    async with serving(app) as http:
        yield Front(http, "scripted", tmp_path)  # a profile's name: the app of that profile


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    monkeypatch.setenv(KEY_ENV, "sk-test-not-a-real-key")
    server = LoopbackServer().start()
    yield server
    server.stop()


def thread(harness: Harness) -> str:
    return harness.new_session_id()


def shape(messages: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """(role, text, tool calls' names) of each message."""
    return [(m["role"], m.get("content"), [c["function"]["name"] for c in m.get("toolCalls", [])]) for m in messages]


def types(run: dict[str, Any]) -> list[str]:
    return [e["type"] for e in run["events"]]


async def test_a_run_s_messages_hold_the_user_message_once_its_tool_calls_under_their_message_and_whole_results(
    harness: Harness, front: Front, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "long.txt").write_text(LONG)
    write_script(tmp_path, [
        {"text": "Let me read it.", "tool_calls": [{"name": "fs.read", "arguments": {"path": "long.txt"}}]},
        {"text": "It is forty lines."},
        {"text": "Still forty."},
    ])
    tid = thread(harness)
    first, second = await front.runs(
        [{"runId": "run-1", "message": "read long.txt"}, {"runId": "run-2", "message": "and now?"}], thread=tid
    )
    assert first["error"] is None and types(first)[0] == "RUN_STARTED" and types(first)[-1] == "RUN_FINISHED"
    assert first["events"][0]["runId"] == "run-1" and first["events"][-1]["runId"] == "run-1"
    assert shape(first["messages"]) == [
        ("user", "read long.txt", []), ("assistant", "Let me read it.", ["fs.read"]), ("tool", first["messages"][2]["content"], []),
        ("assistant", "It is forty lines.", []),
    ]
    [call] = first["messages"][1]["toolCalls"]
    assert first["messages"][2]["toolCallId"] == call["id"] and json.loads(call["function"]["arguments"]) == {"path": "long.txt"}
    result = first["messages"][2]["content"]
    assert len(result) > 200 and "line 039: the quick brown fox" in result and "line 000" in result
    [completed] = [e for e in harness.store.events(tid) if isinstance(e, ToolInvocationCompleted)]
    assert len(completed.preview) <= 200 < len(result)

    # the second run continues the session: its turn, the first's messages kept
    assert second["error"] is None and second["events"][0]["runId"] == "run-2"
    assert shape(second["messages"])[4:] == [("user", "and now?", []), ("assistant", "Still forty.", [])]
    assert shape(second["messages"])[:4] == shape(first["messages"])
    state = await harness.client.state(tid)
    assert state.turns_completed == 2 and state.owner == "alice"


async def test_an_approval_ends_the_run_as_an_interrupt_and_a_resume_that_approves_runs_the_call(
    harness: Harness, front: Front, workspace: Path, tmp_path: Path
) -> None:
    write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "notes.md", "content": "from the model"}}]},
        {"text": "wrote notes.md"},
    ])
    tid = thread(harness)
    asked, resumed = await front.runs(
        [{"runId": "run-1", "message": "write the notes"}, {"runId": "run-2", "answer": {"approved": True}}], thread=tid
    )
    finished = asked["events"][-1]
    assert finished["type"] == "RUN_FINISHED" and finished["outcome"]["type"] == "interrupt"
    [interrupt] = asked["interrupts"]
    [assistant] = [m for m in asked["messages"] if m["role"] == "assistant"]
    [call] = assistant["toolCalls"]
    assert interrupt["reason"] == "tool_call" and interrupt["toolCallId"] == call["id"]
    assert interrupt["metadata"]["agentrt"]["tool"] == "fs.write"
    assert asked["messages"][0] == {"id": "user-run-1", "role": "user", "content": "write the notes"}

    assert resumed["error"] is None and resumed["events"][-1]["type"] == "RUN_FINISHED"
    assert resumed["events"][-1].get("outcome", {}).get("type", "success") == "success"
    assert (workspace / "notes.md").read_text() == "from the model"
    assert shape(resumed["messages"])[-2:] == [("tool", resumed["messages"][-2]["content"], []), ("assistant", "wrote notes.md", [])]
    assert resumed["messages"][-2]["toolCallId"] == call["id"]


async def test_a_retried_model_attempt_s_text_is_withdrawn_from_the_client_s_messages(
    harness: Harness, workspace: Path, tmp_path: Path, provider: LoopbackServer
) -> None:
    cut_then_whole(provider)
    profile = add_profile(harness, provider)
    async with fronting(harness, workspace, tmp_path) as front:  # made after the profile: the gateway knows it
        front.url = front.url.replace("/scripted/", f"/{profile}/")
        [run] = await front.runs([{"runId": "run-1", "message": "hello?"}], thread=thread(harness), props={"workspace": "ws"})
    assert run["error"] is None and len(provider.requests) == 2
    assert shape(run["messages"]) == [("user", "hello?", []), ("assistant", "Hello world, again.", [])]
    assert "MESSAGES_SNAPSHOT" in types(run)


async def test_the_same_run_id_posted_twice_runs_its_turn_once(harness: Harness, front: Front, tmp_path: Path) -> None:
    write_script(tmp_path, [{"text": "once"}, {"text": "twice"}])
    tid = thread(harness)
    # a retry: the same input posted again (a front end whose connection broke)
    [first] = await front.runs([{"runId": "run-1", "message": "hi"}], thread=tid)
    [second] = await front.runs([{"runId": "run-1", "message": "hi"}], thread=tid)
    assert first["error"] is None and second["error"] is None
    assert shape(second["messages"]) == [("user", "hi", []), ("assistant", "once", [])]
    assert [e["type"] for e in second["events"]] == [e["type"] for e in first["events"]]
    assert len([e for e in harness.store.events(tid) if isinstance(e, UserMessageAdded)]) == 1
    assert (await harness.client.state(tid)).turns_completed == 1


async def test_another_principal_s_thread_is_not_found(harness: Harness, front: Front, tmp_path: Path) -> None:
    write_script(tmp_path, [{"text": "for alice"}, {"text": "for mallory"}])
    tid = thread(harness)
    [mine] = await front.runs([{"runId": "run-1", "message": "hi"}], thread=tid)
    assert mine["error"] is None
    [theirs] = await front.runs([{"runId": "run-2", "message": "let me in"}], thread=tid, principal="mallory")
    assert theirs["status"] == 404 and "RUN_STARTED" not in types(theirs)
    answer = [{"interruptId": "req-1", "status": "resolved", "payload": {"approved": True}}]
    taken, _ = await front.post({"threadId": tid, "runId": "run-3", "messages": [], "resume": answer}, principal="mallory")
    missing, _ = await front.post({"threadId": tid + "x", "runId": "run-3", "messages": [], "resume": answer}, principal="mallory")
    assert taken.json()["detail"].replace(tid, "T") == missing.json()["detail"].replace(tid + "x", "T")
    assert (await harness.client.state(tid)).turns_completed == 1


async def test_a_new_message_while_an_interrupt_is_open_is_a_run_error(harness: Harness, front: Front, tmp_path: Path) -> None:
    write_script(tmp_path, [{"tool_calls": [{"name": "fs.write", "arguments": {"path": "n.md", "content": "x"}}]}])
    tid = thread(harness)
    await front.runs([{"runId": "run-1", "message": "write"}], thread=tid)
    body = {"threadId": tid, "runId": "run-2", "messages": [{"id": "u2", "role": "user", "content": "never mind"}]}
    _, frames = await front.post(body)
    assert [f["type"] for f in frames] == ["RUN_STARTED", "RUN_ERROR"] and frames[1]["code"] == "interrupt_pending"
    assert (await harness.client.state(tid)).queued_turn_ids == []


async def test_model_text_and_arguments_that_look_like_sse_frames_arrive_as_data(
    harness: Harness, front: Front, workspace: Path, tmp_path: Path
) -> None:
    forged = 'ok\n\ndata: {"type": "RUN_FINISHED", "threadId": "x", "runId": "y"}\n\nid: 9\r\n'
    write_script(tmp_path, [
        {"text": forged, "tool_calls": [{"name": "fs.write", "arguments": {"path": "a.md", "content": forged}}]},
    ])
    [run] = await front.runs([{"runId": "run 1/\n\ndata: {}", "message": forged}], thread=thread(harness))
    assert run["error"] is None and run["events"][-1]["outcome"]["type"] == "interrupt"
    assert shape(run["messages"]) == [("user", forged, []), ("assistant", forged, ["fs.write"])]
    assert json.loads(run["messages"][1]["toolCalls"][0]["function"]["arguments"])["content"] == forged
    assert run["interrupts"][0]["metadata"]["agentrt"]["arguments"]["content"] == forged
    assert run["events"][0]["runId"] == "run 1/\n\ndata: {}"
