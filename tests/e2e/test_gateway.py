"""The HTTP gateway end to end: a real uvicorn server on loopback in front of a client of the real
Temporal dev server and a worker; sessions whose tool calls wait for approvals given over HTTP,
runs (task graphs) approved over HTTP, tasks, and what another principal does not see."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent, aconnect_sse

from agentrt.client import AgentClient, WebhookDispatcher, create_app
from agentrt.schemas import ModelProfile
from agentrt.worker import GatewayConfig, GatewayToken, token_sha256
from tests.gateway.test_gateway import assert_problem, serving
from tests.gateway.test_webhooks import Receiver, Target
from tests.conftest import Harness
from tests.e2e._support import write_script
from tests.e2e.test_graph_cli import write_graph

ALL = ("sessions", "tasks", "runs")
TOKENS = {"alice": "alice-e2e-token-0123456789", "mallory": "mallory-e2e-token-0123456789"}
WRITE_THEN_ANSWER = [
    {"tool_calls": [{"name": "fs.write", "arguments": {"path": "notes.md", "content": "from the model"}}]},
    {"text": "wrote notes.md"},
]


def auth(principal: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[principal]}"}


@pytest.fixture
async def http(harness: Harness, workspace: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway over the harness's task queue and store; its workspace root holds ``ws/``."""
    config = GatewayConfig(tokens=[GatewayToken(sha256=token_sha256(t), principal=p, scopes=ALL) for p, t in TOKENS.items()])
    client = await gateway_client(harness)
    async with serving(create_app(client, config, workspace_root=workspace.parent)) as http:
        yield http


async def gateway_client(harness: Harness) -> AgentClient:
    """The gateway's client, once the server lists the harness's worker as polling (the gateway
    answers 503 to a session update while it lists none)."""
    client = AgentClient(harness.temporal, task_queue=harness.task_queue, principal="gateway", store=harness.store)
    for _ in range(300):
        if await client.has_worker():
            return client
        await asyncio.sleep(0.05)
    raise AssertionError("the harness's worker never showed up as polling")


async def until(http: httpx.AsyncClient, path: str, predicate: Callable[[dict[str, Any]], bool], timeout: float = 60.0) -> dict[str, Any]:
    """``GET path`` as alice until its body satisfies ``predicate`` (bounded by ``timeout`` seconds)."""

    async def poll() -> dict[str, Any]:
        while True:
            response = await http.get(path, headers=auth("alice"))
            if response.status_code == 200 and predicate(response.json()):
                return response.json()
            await asyncio.sleep(0.1)

    return await asyncio.wait_for(poll(), timeout)


async def create_session(
    harness: Harness, http: httpx.AsyncClient, script: str, headers: dict[str, str] | None = None, **fields: Any
) -> dict[str, Any]:
    body = {"text": "write the notes", "workspace": "ws", "script": script, **fields}
    response = await http.post("/v1/sessions", json=body, headers={**auth("alice"), **(headers or {})})
    assert response.status_code == 201, response.text
    created = response.json()
    harness.session_ids.append(created["session_id"])
    return created


def own_workspace(root: Path, principal: str) -> str:
    """A directory of ``principal``'s own under the gateway's root (``ws`` is alice's: a workspace
    belongs to the principal that first started work in it)."""
    (root / f"ws-{principal}").mkdir(exist_ok=True)
    return f"ws-{principal}"


async def pending_request(http: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    state = await until(http, f"/v1/sessions/{session_id}", lambda s: s["status"] == "awaiting_approval")
    [request] = state["pending_approvals"]
    return request


# ---------------------------------------------------------------- sessions


async def test_a_session_s_state_shows_its_model_call_being_retried_with_the_cause(
    harness: Harness, http: httpx.AsyncClient, closed_port_url: str
) -> None:
    harness.config.profiles["down"] = ModelProfile(name="down", provider="openai", model="m", base_url=f"{closed_port_url}/v1")
    body = {"text": "hello?", "workspace": "ws", "profile": "down"}
    response = await http.post("/v1/sessions", json=body, headers=auth("alice"))
    assert response.status_code == 201, response.text
    sid = response.json()["session_id"]
    harness.session_ids.append(sid)

    state = await until(http, f"/v1/sessions/{sid}", lambda s: bool(s.get("waits")), timeout=90)

    [wait] = state["waits"]
    assert (wait["activity"], wait["kind"], wait["maximum_attempts"]) == ("provider.complete", "retrying", 9)
    assert wait["attempt"] >= 2 and "ConnectError" in wait["message"]
    await http.post(f"/v1/sessions/{sid}/cancel", headers=auth("alice"))


async def test_a_session_s_approval_granted_over_http_lets_its_turn_complete(
    harness: Harness, http: httpx.AsyncClient, workspace: Path, tmp_path: Path
) -> None:
    created = await create_session(harness, http, write_script(tmp_path, WRITE_THEN_ANSWER))
    sid, turn = created["session_id"], created["turn_id"]

    request = await pending_request(http, sid)
    assert request["tool"] == "fs.write" and request["arguments"]["path"] == "notes.md"
    pending = await http.get(f"/v1/sessions/{sid}/turns/{turn}?wait=0", headers=auth("alice"))
    assert pending.json()["status"] == "pending"

    decided = await http.post(f"/v1/sessions/{sid}/approvals/{request['request_id']}", json={"decision": "approve"}, headers=auth("alice"))
    assert decided.status_code == 202, decided.text
    outcome = await http.get(f"/v1/sessions/{sid}/turns/{turn}?wait=30", headers=auth("alice"))
    assert outcome.status_code == 200 and outcome.json()["status"] == "completed"
    assert outcome.json()["answer"] == "wrote notes.md"
    assert (workspace / "notes.md").read_text() == "from the model"


async def test_an_edited_approval_runs_the_call_with_the_caller_s_arguments(
    harness: Harness, http: httpx.AsyncClient, workspace: Path, tmp_path: Path
) -> None:
    created = await create_session(harness, http, write_script(tmp_path, WRITE_THEN_ANSWER))
    sid = created["session_id"]
    request = await pending_request(http, sid)

    edit = {"decision": "edit", "arguments": {"path": "notes.md", "content": "from the caller"}, "reason": "tone"}
    decided = await http.post(f"/v1/sessions/{sid}/approvals/{request['request_id']}", json=edit, headers=auth("alice"))
    assert decided.status_code == 202, decided.text
    outcome = await http.get(f"/v1/sessions/{sid}/turns/{created['turn_id']}?wait=30", headers=auth("alice"))
    assert outcome.json()["status"] == "completed"
    assert (workspace / "notes.md").read_text() == "from the caller"


async def test_a_decision_on_a_request_that_is_not_pending_is_a_conflict(
    harness: Harness, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    created = await create_session(harness, http, write_script(tmp_path, WRITE_THEN_ANSWER))
    await pending_request(http, created["session_id"])

    response = await http.post(f"/v1/sessions/{created['session_id']}/approvals/req-99", json={"decision": "deny"}, headers=auth("alice"))
    assert "no pending request req-99" in assert_problem(response, 409)["detail"]


async def test_an_edit_outside_the_workspace_is_accepted_and_the_policy_refuses_the_edited_call(
    harness: Harness, http: httpx.AsyncClient, workspace: Path, tmp_path: Path
) -> None:
    created = await create_session(harness, http, write_script(tmp_path, WRITE_THEN_ANSWER))
    sid = created["session_id"]
    request = await pending_request(http, sid)

    # the arguments fit fs.write's schema; the path is outside the workspace, which the policy refuses when it checks the edited call
    edit = {"decision": "edit", "arguments": {"path": "../escaped.md", "content": "from the caller"}}
    decided = await http.post(f"/v1/sessions/{sid}/approvals/{request['request_id']}", json=edit, headers=auth("alice"))
    assert decided.status_code == 202, decided.text
    outcome = await http.get(f"/v1/sessions/{sid}/turns/{created['turn_id']}?wait=30", headers=auth("alice"))
    assert outcome.json()["status"] == "completed"
    events = (await http.get(f"/v1/sessions/{sid}/events", headers=auth("alice"))).json()["events"]
    assert [e["reason"] for e in events if e["type"] == "ToolInvocationFailed"] == ["denied"]
    assert not (workspace.parent / "escaped.md").exists()


async def test_an_edit_that_does_not_fit_the_tool_s_schema_is_a_conflict(
    harness: Harness, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    created = await create_session(harness, http, write_script(tmp_path, WRITE_THEN_ANSWER))
    sid = created["session_id"]
    request = await pending_request(http, sid)

    edit = {"decision": "edit", "arguments": {"path": "notes.md", "content": "x", "mode": "append-everything"}}
    response = await http.post(f"/v1/sessions/{sid}/approvals/{request['request_id']}", json=edit, headers=auth("alice"))
    assert "not valid for its tool" in assert_problem(response, 409)["detail"]
    assert (await pending_request(http, sid))["request_id"] == request["request_id"]


@pytest.mark.parametrize("wait", [0, 2])
async def test_an_unknown_turn_is_not_found(harness: Harness, http: httpx.AsyncClient, tmp_path: Path, wait: int) -> None:
    created = await create_session(harness, http, write_script(tmp_path, [{"text": "done"}]))
    response = await http.get(f"/v1/sessions/{created['session_id']}/turns/turn-99?wait={wait}", headers=auth("alice"))
    assert "no turn 'turn-99'" in assert_problem(response, 404)["detail"]


async def test_a_reconcile_of_a_tool_call_approval_is_a_conflict(harness: Harness, http: httpx.AsyncClient, tmp_path: Path) -> None:
    created = await create_session(harness, http, write_script(tmp_path, WRITE_THEN_ANSWER))
    request = await pending_request(http, created["session_id"])

    response = await http.post(
        f"/v1/sessions/{created['session_id']}/approvals/{request['request_id']}/reconcile", json={"outcome": "applied"},
        headers=auth("alice"),
    )
    assert "of another kind (tool_call)" in assert_problem(response, 409)["detail"]


async def test_an_answer_to_no_question_is_a_conflict(harness: Harness, http: httpx.AsyncClient, tmp_path: Path) -> None:
    created = await create_session(harness, http, write_script(tmp_path, WRITE_THEN_ANSWER))
    await pending_request(http, created["session_id"])

    response = await http.post(
        f"/v1/sessions/{created['session_id']}/answers/req-7", json={"action": "decline"}, headers=auth("alice")
    )
    assert_problem(response, 409)


async def test_another_principal_finds_no_session_to_read_or_decide(
    harness: Harness, http: httpx.AsyncClient, workspace: Path, tmp_path: Path
) -> None:
    created = await create_session(harness, http, write_script(tmp_path, WRITE_THEN_ANSWER))
    sid = created["session_id"]
    request = await pending_request(http, sid)

    for method, path, body in (
        ("GET", f"/v1/sessions/{sid}", None),
        ("GET", f"/v1/sessions/{sid}/events", None),
        ("GET", f"/v1/sessions/{sid}/turns/{created['turn_id']}", None),
        ("POST", f"/v1/sessions/{sid}/messages", {"text": "ignore the owner"}),
        ("POST", f"/v1/sessions/{sid}/approvals/{request['request_id']}", {"decision": "approve"}),
        ("POST", f"/v1/sessions/{sid}/cancel", {}),
        ("POST", f"/v1/sessions/{sid}/archive", {}),
    ):
        response = await http.request(method, path, json=body, headers=auth("mallory"))
        assert_problem(response, 404)
    state = (await http.get(f"/v1/sessions/{sid}", headers=auth("alice"))).json()
    assert state["status"] == "awaiting_approval" and state["turns_completed"] == 0
    assert not (workspace / "notes.md").exists()


async def test_a_message_sent_over_http_runs_as_its_own_turn(harness: Harness, http: httpx.AsyncClient, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": "first answer"}, {"text": "second answer"}])
    created = await create_session(harness, http, script)
    sid = created["session_id"]

    sent = await http.post(f"/v1/sessions/{sid}/messages", json={"text": "and again"}, headers=auth("alice"))
    assert sent.status_code == 202, sent.text
    second = sent.json()["turn_id"]
    assert second != created["turn_id"]
    outcome = await http.get(f"/v1/sessions/{sid}/turns/{second}?wait=30", headers=auth("alice"))
    assert outcome.json()["status"] == "completed" and outcome.json()["answer"] == "second answer"
    events = (await http.get(f"/v1/sessions/{sid}/events", headers=auth("alice"))).json()["events"]
    assert [e["type"] for e in events].count("UserMessageAdded") == 2
    later = (await http.get(f"/v1/sessions/{sid}/events?since_seq={events[-2]['seq']}", headers=auth("alice"))).json()["events"]
    assert [e["seq"] for e in later] == [events[-1]["seq"]]


async def test_a_create_repeated_with_the_same_idempotency_key_starts_one_session(
    harness: Harness, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "only once"}, {"text": "a second turn that must not run"}])
    key = {"Idempotency-Key": f"order-{uuid.uuid4().hex}"}
    first = await create_session(harness, http, script, headers=key)
    again = await create_session(harness, http, script, headers=key)

    assert again == first
    outcome = await http.get(f"/v1/sessions/{first['session_id']}/turns/{first['turn_id']}?wait=30", headers=auth("alice"))
    assert outcome.json()["answer"] == "only once"
    state = (await http.get(f"/v1/sessions/{first['session_id']}", headers=auth("alice"))).json()
    assert state["turns_completed"] == 1 and state["queued_turn_ids"] == []


async def test_a_create_under_a_session_id_in_use_is_a_conflict(harness: Harness, http: httpx.AsyncClient, tmp_path: Path) -> None:
    created = await create_session(harness, http, write_script(tmp_path, WRITE_THEN_ANSWER))
    response = await http.post(
        "/v1/sessions", json={"text": "hi", "workspace": own_workspace(tmp_path, "mallory"), "session_id": created["session_id"]},
        headers=auth("mallory"),
    )
    assert_problem(response, 409)
    assert (await http.get(f"/v1/sessions/{created['session_id']}", headers=auth("alice"))).json()["owner"] == "alice"


async def test_an_archived_session_refuses_messages(harness: Harness, http: httpx.AsyncClient, tmp_path: Path) -> None:
    created = await create_session(harness, http, write_script(tmp_path, [{"text": "done"}]))
    sid = created["session_id"]
    await http.get(f"/v1/sessions/{sid}/turns/{created['turn_id']}?wait=30", headers=auth("alice"))

    archived = await http.post(f"/v1/sessions/{sid}/archive", json={"reason": "finished"}, headers=auth("alice"))
    assert archived.status_code == 200 and archived.json()["status"] == "archived"
    refused = await http.post(f"/v1/sessions/{sid}/messages", json={"text": "more"}, headers=auth("alice"))
    assert "archived" in assert_problem(refused, 409)["detail"]


# ---------------------------------------------------------------- runs


async def created_run(http: httpx.AsyncClient, tmp_path: Path) -> str:
    """The id of a graph run alice created (the gateway's answer in the failure when it did not)."""
    created = await http.post("/v1/runs", json=graph_body(tmp_path), headers=auth("alice"))
    assert created.status_code == 201, created.text
    return created.json()["run_id"]


def graph_body(tmp_path: Path, **fields: Any) -> dict[str, Any]:
    """A run of the three-node graph of the graph CLI's tests (scripts named relative to the workspace root)."""
    graph = json.loads(write_graph(tmp_path).read_text())
    return {"graph": graph, "workspace": "ws", "tools": ["fs.read", "fs.write"], **fields}


async def test_a_run_waits_for_its_plan_to_be_approved_over_http_and_then_completes(
    http: httpx.AsyncClient, workspace: Path, tmp_path: Path
) -> None:
    created = await http.post("/v1/runs", json=graph_body(tmp_path), headers=auth("alice"))
    assert created.status_code == 201, created.text
    run_id = created.json()["run_id"]
    assert created.json()["status"] == "planning"

    pending = await until(http, f"/v1/runs/{run_id}", lambda r: r["status"] == "pending_approval")
    assert [n["id"] for n in pending["nodes"]] == ["a", "b", "c"] and pending["owner"] == "alice"
    approved = await http.post(f"/v1/runs/{run_id}/approve", json={"reason": "looks right"}, headers=auth("alice"))
    assert approved.status_code == 200, approved.text
    assert approved.json()["status"] in ("running", "completed") and approved.json()["approved_by"] == "alice"

    done = await until(http, f"/v1/runs/{run_id}", lambda r: r["status"] in ("completed", "failed", "cancelled"), timeout=120)
    assert done["status"] == "completed" and done["graph_status"] == "completed"
    assert [(n["id"], n["status"]) for n in done["nodes"]] == [("a", "completed"), ("b", "completed"), ("c", "completed")]
    assert (workspace / "facts.md").read_text() == "the facts"


async def test_a_rejected_run_ends_cancelled(http: httpx.AsyncClient, tmp_path: Path) -> None:
    run_id = await created_run(http, tmp_path)
    await until(http, f"/v1/runs/{run_id}", lambda r: r["status"] == "pending_approval")

    rejected = await http.post(f"/v1/runs/{run_id}/reject", json={"reason": "not now"}, headers=auth("alice"))
    assert rejected.status_code == 200, rejected.text
    done = await until(http, f"/v1/runs/{run_id}", lambda r: r["graph_status"] == "rejected")
    assert done["status"] == "cancelled"
    again = await http.post(f"/v1/runs/{run_id}/approve", headers=auth("alice"))
    assert_problem(again, 409)


async def test_another_principal_finds_no_run_to_read_or_approve(http: httpx.AsyncClient, tmp_path: Path) -> None:
    run_id = await created_run(http, tmp_path)
    await until(http, f"/v1/runs/{run_id}", lambda r: r["status"] == "pending_approval")

    for method, path in (("GET", f"/v1/runs/{run_id}"), ("POST", f"/v1/runs/{run_id}/approve"), ("POST", f"/v1/runs/{run_id}/cancel")):
        assert_problem(await http.request(method, path, headers=auth("mallory")), 404)
    assert (await http.get(f"/v1/runs/{run_id}", headers=auth("alice"))).json()["status"] == "pending_approval"


async def test_a_run_created_under_an_app_reaches_approval_and_is_read_there(http: httpx.AsyncClient, tmp_path: Path) -> None:
    created = await http.post("/apps/scripted/runs", json=graph_body(tmp_path), headers=auth("alice"))
    assert created.status_code == 201, created.text
    run_id = created.json()["run_id"]

    pending = await until(http, f"/apps/scripted/runs/{run_id}", lambda r: r["status"] == "pending_approval")
    assert pending["run_id"] == run_id
    cancelled = await http.post(f"/apps/scripted/runs/{run_id}/cancel", json={}, headers=auth("alice"))
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"


async def test_a_graph_created_under_an_app_with_its_graph_id_is_read_there_by_graph_id(
    http: httpx.AsyncClient, tmp_path: Path
) -> None:
    graph_id = f"g{uuid.uuid4().hex[:10]}"
    created = await http.post("/apps/scripted/graphs", json={**graph_body(tmp_path), "graph_id": graph_id}, headers=auth("alice"))
    assert created.status_code == 201, created.text
    assert created.json()["graph_id"] == created.json()["run_id"] == graph_id

    pending = await until(http, f"/apps/scripted/graphs/{graph_id}", lambda r: r["status"] == "pending_approval")
    assert pending["graph_id"] == graph_id
    listed = (await http.get("/v1/graphs", headers=auth("alice"))).json()["runs"]
    assert graph_id in {r["graph_id"] for r in listed}
    clash = await http.post("/v1/graphs", json={**graph_body(tmp_path), "graph_id": "ga", "run_id": "gb"}, headers=auth("alice"))
    assert "name one id" in str(assert_problem(clash, 422))
    cancelled = await http.post(f"/apps/scripted/runs/{graph_id}/cancel", json={}, headers=auth("alice"))
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"


async def test_a_run_under_an_app_naming_another_profile_is_invalid(http: httpx.AsyncClient, tmp_path: Path) -> None:
    response = await http.post("/apps/scripted/runs", json=graph_body(tmp_path, profile="gpt"), headers=auth("alice"))
    assert "the app 'scripted'" in assert_problem(response, 422)["detail"]


# ---------------------------------------------------------------- tasks


async def test_a_task_started_over_http_is_cancelled_over_http(http: httpx.AsyncClient, tmp_path: Path) -> None:
    script = tmp_path / "task.json"
    script.write_text(json.dumps({"sessions": [{"turns": [{"text": "not yet", "delay_seconds": 30}]}], "reviews": []}))
    created = await http.post(
        "/v1/tasks", json={"goal": "write the release notes", "workspace": "ws", "script": "task.json", "every_seconds": 3600},
        headers=auth("alice"),
    )
    assert created.status_code == 201, created.text
    task_id = created.json()["task_id"]
    await until(http, f"/v1/tasks/{task_id}", lambda t: t["status"] in ("running", "waiting"))

    assert_problem(await http.get(f"/v1/tasks/{task_id}", headers=auth("mallory")), 404)
    cancelled = await http.post(f"/v1/tasks/{task_id}/cancel", json={"reason": "changed plans"}, headers=auth("alice"))
    assert cancelled.status_code == 200, cancelled.text
    done = await until(http, f"/v1/tasks/{task_id}", lambda t: t["status"] == "cancelled")
    assert done["owner"] == "alice" and done["goal"] == "write the release notes"


# ---------------------------------------------------------------- webhooks


async def test_a_session_created_over_http_is_watched_by_the_webhook_dispatcher(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    receiver = Receiver()
    config = GatewayConfig(tokens=[GatewayToken(sha256=token_sha256(TOKENS["alice"]), principal="alice", scopes=ALL)])
    client = await gateway_client(harness)
    webhooks = WebhookDispatcher(harness.store, client, [Target(receiver.url)], poll_seconds=0.05)
    app = create_app(client, config, webhooks=webhooks, workspace_root=workspace.parent)
    try:
        async with serving(app) as http:
            created = await create_session(harness, http, write_script(tmp_path, [{"text": "done"}]))
            [note] = await receiver.wait_for(1)
    finally:
        receiver.stop()

    assert note.json["type"] == "turn.ended"
    assert note.json["data"]["session_id"] == created["session_id"] and note.json["data"]["turn_id"] == created["turn_id"]


# ---------------------------------------------------------------- agentrt serve


async def test_agentrt_serve_serves_the_gateway_until_sigterm(
    harness: Harness, workspace: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = {  # its home beside the workspace root, not in it (serve refuses a root that holds it)
        **os.environ, "AGENTRT_HOME": str(tmp_path_factory.mktemp("home")), "AGENTRT_TEMPORAL_ADDRESS": harness.server.address,
        "AGENTRT_TASK_QUEUE": harness.task_queue, "AGENTRT_DATABASE_URL": harness.config.database_url or "",
        "AGENTRT_GATEWAY_TOKEN": TOKENS["alice"], "AGENTRT_GATEWAY_PRINCIPAL": "alice",
    }
    env.pop("AGENTRT_CONFIG", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentrt.cli", "serve", "--port", "0", "--workspace-root", str(workspace.parent),
        cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        url = await asyncio.wait_for(_listening_url(process), 60)
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            assert (await http.get("/healthz")).json() == {"status": "ok"}
            created = await create_session(harness, http, write_script(tmp_path, [{"text": "served"}]))
            outcome = await http.get(f"/v1/sessions/{created['session_id']}/turns/{created['turn_id']}?wait=30", headers=auth("alice"))
            assert outcome.json()["answer"] == "served"
    finally:
        process.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(process.wait(), 30)
    assert code == 0


async def test_a_sigterm_lets_agentrt_serve_finish_its_open_requests_and_exit_without_a_traceback(
    harness: Harness, workspace: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    env = {
        **os.environ, "AGENTRT_HOME": str(tmp_path_factory.mktemp("home")), "AGENTRT_TEMPORAL_ADDRESS": harness.server.address,
        "AGENTRT_TASK_QUEUE": harness.task_queue, "AGENTRT_DATABASE_URL": harness.config.database_url or "",
        "AGENTRT_GATEWAY_TOKEN": TOKENS["alice"], "AGENTRT_GATEWAY_PRINCIPAL": "alice",
    }
    env.pop("AGENTRT_CONFIG", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentrt.cli", "serve", "--port", "0", "--workspace-root", str(workspace.parent),
        cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        url = await asyncio.wait_for(_listening_url(process), 60)
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            created = await create_session(harness, http, write_script(tmp_path, [{"text": "drained", "delay_seconds": 4}]))
            sid, turn = created["session_id"], created["turn_id"]
            opened = asyncio.Event()

            async def follow() -> list[ServerSentEvent]:
                received: list[ServerSentEvent] = []
                async with aconnect_sse(http, "GET", f"/v1/sessions/{sid}/stream", headers=auth("alice")) as source:
                    async for sse in source.aiter_sse():
                        if sse.data:
                            received.append(sse)
                            opened.set()
                return received

            stream = asyncio.create_task(follow())
            await asyncio.wait_for(opened.wait(), 30)
            waiting = asyncio.create_task(http.get(f"/v1/sessions/{sid}/turns/{turn}?wait=30", headers=auth("alice")))
            await asyncio.sleep(1)  # the long poll reaches the gateway
            process.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.3)
            process.send_signal(signal.SIGTERM)  # a second one (an impatient supervisor) changes nothing
            outcome = await waiting
            received = await asyncio.wait_for(stream, 30)
        code = await asyncio.wait_for(process.wait(), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.stderr is not None
    stderr = (await process.stderr.read()).decode(errors="replace")
    assert outcome.status_code == 200 and outcome.json()["answer"] == "drained"
    assert code == 0
    assert "Traceback" not in stderr and "CancelledError" not in stderr, stderr
    assert "stopped (SIGTERM)" in stderr and "timeout graceful shutdown exceeded" not in stderr  # nothing was cut
    assert received and all(sse.id for sse in received)  # it ended cleanly; a client resumes it with Last-Event-ID


async def _listening_url(process: asyncio.subprocess.Process) -> str:
    """The URL in the line ``agentrt serve`` prints once it listens."""
    assert process.stderr is not None
    while True:
        line = (await process.stderr.readline()).decode()
        assert line, "agentrt serve ended before it listened"
        if match := re.search(r"listening on (http://\S+) ", line):
            return match.group(1)


# ---------------------------------------------------------------- streams


async def stream_until(http: httpx.AsyncClient, path: str, last: str, headers: dict[str, str] | None = None) -> list[ServerSentEvent]:
    """The server-sent events of ``path`` up to the first named ``last``."""
    received: list[ServerSentEvent] = []
    async with aconnect_sse(http, "GET", path, headers={**auth("alice"), **(headers or {})}) as source:
        assert source.response.status_code == 200, await source.response.aread()
        async for sse in source.aiter_sse():
            received.append(sse)
            if sse.event == last:
                break
    return received


async def test_a_session_s_stream_carries_its_events_and_resumes_after_a_position(
    harness: Harness, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    created = await create_session(harness, http, write_script(tmp_path, [{"text": "streamed answer"}]))
    sid = created["session_id"]
    await http.get(f"/v1/sessions/{sid}/turns/{created['turn_id']}?wait=30", headers=auth("alice"))

    events = [e for e in await stream_until(http, f"/v1/sessions/{sid}/stream", "TurnEnded") if e.data]
    names = [e.event for e in events]
    assert names[0] == "SessionInitialized" and "UserMessageAdded" in names and names[-1] == "TurnEnded"
    answer = next(e for e in events if e.event == "AssistantMessageCompleted")
    assert "streamed answer" in answer.data

    middle = events[len(events) // 2]
    resumed = [e for e in await stream_until(http, f"/v1/sessions/{sid}/stream", "TurnEnded", {"Last-Event-ID": middle.id}) if e.data]
    assert [e.id for e in resumed] == [e.id for e in events[len(events) // 2 + 1:]]


async def test_a_stream_in_the_ag_ui_encoding_ends_its_run(harness: Harness, http: httpx.AsyncClient, tmp_path: Path) -> None:
    created = await create_session(harness, http, write_script(tmp_path, [{"text": "hello there"}]))
    await http.get(f"/v1/sessions/{created['session_id']}/turns/{created['turn_id']}?wait=30", headers=auth("alice"))

    received: list[dict[str, Any]] = []
    async with aconnect_sse(http, "GET", f"/v1/sessions/{created['session_id']}/stream?encoding=ag-ui", headers=auth("alice")) as source:
        async for sse in source.aiter_sse():
            if sse.data:
                received.append(sse.json())
            if received and received[-1]["type"] == "RUN_FINISHED":
                break
    types = [r["type"] for r in received]
    assert types[0] == "RUN_STARTED" and "TEXT_MESSAGE_CONTENT" in types and types[-1] == "RUN_FINISHED"


async def test_a_stream_position_that_names_nothing_is_a_bad_request(harness: Harness, http: httpx.AsyncClient, tmp_path: Path) -> None:
    created = await create_session(harness, http, write_script(tmp_path, [{"text": "done"}]))
    response = await http.get(f"/v1/sessions/{created['session_id']}/stream", headers={**auth("alice"), "Last-Event-ID": "not-a-position"})
    assert_problem(response, 400)


async def test_another_principal_finds_no_session_to_stream(harness: Harness, http: httpx.AsyncClient, tmp_path: Path) -> None:
    created = await create_session(harness, http, write_script(tmp_path, [{"text": "done"}]))
    assert_problem(await http.get(f"/v1/sessions/{created['session_id']}/stream", headers=auth("mallory")), 404)



@contextlib.asynccontextmanager
async def gateway_with(harness: Harness, workspace: Path, **limits: int) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway of the ``http`` fixture, with ``limits`` for ``create_app``."""
    config = GatewayConfig(tokens=[GatewayToken(sha256=token_sha256(t), principal=p, scopes=ALL) for p, t in TOKENS.items()])
    client = await gateway_client(harness)
    async with serving(create_app(client, config, workspace_root=workspace.parent, **limits)) as http:
        yield http


async def open_stream(stack: contextlib.AsyncExitStack, http: httpx.AsyncClient, session_id: str, principal: str) -> httpx.Response:
    """A stream of the session opened as ``principal`` and held open by ``stack`` (a refusal's body read)."""
    response = await stack.enter_async_context(http.stream("GET", f"/v1/sessions/{session_id}/stream", headers=auth(principal)))
    if response.status_code != 200:
        await response.aread()
    return response


async def test_a_principal_s_seventeenth_open_stream_is_too_many(harness: Harness, http: httpx.AsyncClient, tmp_path: Path) -> None:
    sid = (await create_session(harness, http, write_script(tmp_path, [{"text": "done"}])))["session_id"]
    async with contextlib.AsyncExitStack() as stack:
        opened = [await open_stream(stack, http, sid, "alice") for _ in range(16)]
        assert [r.status_code for r in opened] == [200] * 16
        refused = await open_stream(stack, http, sid, "alice")
        assert assert_problem(refused, 429)["type"] == "urn:agentrt:problem:too-many-streams"
        assert refused.headers["retry-after"] == "5"


async def test_another_principal_streams_while_one_holds_its_most_streams_open(
    harness: Harness, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    alice_sid = (await create_session(harness, http, write_script(tmp_path, [{"text": "done"}])))["session_id"]
    mallory_sid = (await create_session(
            harness, http, write_script(tmp_path, [{"text": "mine"}], "m.json"), auth("mallory"), workspace=own_workspace(tmp_path, "mallory")
        ))["session_id"]
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(16):
            assert (await open_stream(stack, http, alice_sid, "alice")).status_code == 200
        assert_problem(await open_stream(stack, http, alice_sid, "alice"), 429)
        assert (await open_stream(stack, http, mallory_sid, "mallory")).status_code == 200


async def test_a_stream_s_client_leaving_frees_its_place(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    async with gateway_with(harness, workspace, max_streams_per_principal=1) as http:
        sid = (await create_session(harness, http, write_script(tmp_path, [{"text": "done"}])))["session_id"]
        async with contextlib.AsyncExitStack() as first:
            assert (await open_stream(first, http, sid, "alice")).status_code == 200
            async with contextlib.AsyncExitStack() as second:
                assert_problem(await open_stream(second, http, sid, "alice"), 429)

        async def reopen() -> None:
            while True:
                async with contextlib.AsyncExitStack() as again:
                    if (await open_stream(again, http, sid, "alice")).status_code == 200:
                        return
                await asyncio.sleep(0.05)

        await asyncio.wait_for(reopen(), 30)


async def test_a_stream_past_the_gateway_s_most_open_streams_is_unavailable(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    async with gateway_with(harness, workspace, max_streams=2) as http:
        alice_sid = (await create_session(harness, http, write_script(tmp_path, [{"text": "done"}])))["session_id"]
        mallory_sid = (await create_session(
            harness, http, write_script(tmp_path, [{"text": "mine"}], "m.json"), auth("mallory"), workspace=own_workspace(tmp_path, "mallory")
        ))["session_id"]
        async with contextlib.AsyncExitStack() as stack:
            for _ in range(2):
                assert (await open_stream(stack, http, alice_sid, "alice")).status_code == 200
            refused = await open_stream(stack, http, mallory_sid, "mallory")
            assert "streams open" in assert_problem(refused, 503)["detail"] and refused.headers["retry-after"] == "5"


async def test_a_session_created_over_http_keeps_its_compaction_threshold(
    harness: Harness, http: httpx.AsyncClient, workspace: Path, tmp_path: Path
) -> None:
    created = await create_session(harness, http, write_script(tmp_path, [{"text": "ok"}]), compact_threshold=0.5)
    await harness.client.wait(created["session_id"], created["turn_id"])

    assert harness.store.session_config(created["session_id"]).compact_threshold == 0.5
    refused = await http.post("/v1/sessions", json={"text": "hi", "workspace": "ws", "compact_threshold": 0}, headers=auth("alice"))
    assert refused.status_code == 422 and "compact_threshold" in refused.text
