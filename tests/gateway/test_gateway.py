"""The HTTP gateway's perimeter, over a real uvicorn server on loopback and httpx: bearer tokens
(401, 403), bounded bodies (413), hostile input (4xx problem bodies, never a stack trace), paths
kept under the workspace root, the OpenAPI schema, and `agentrt serve` refusing to start open."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from temporalio.client import Client

from agentrt.client import AgentClient
from agentrt.gateway import create_app
from agentrt.gateway._errors import problem_for
from agentrt.schemas import (
    ConfigurationError,
    GraphNotFound,
    InvalidGraph,
    PauseNotAllowed,
    QuotaExceeded,
    RequestRejected,
    ServerUnavailable,
    SessionNotFound,
    SessionStuck,
    StoreFileChanged,
    TaskNotFound,
    UnknownProfileError,
    WorkerUnavailable,
)
from agentrt.worker import AgentrtConfig, GatewayConfig, GatewayToken, PayloadCodecMismatch, token_sha256

TOKENS = {
    "alice": ("alice-token-0123456789", ("sessions", "tasks", "runs")),
    "bob": ("bob-token-0123456789", ("sessions",)),
    "carol": ("carol-token-0123456789", ("sessions", "tasks", "runs", "network")),
    "root": ("root-token-0123456789", ("admin",)),
}
ROUTES = {
    ("/healthz", "get"),
    ("/v1/sessions", "get"), ("/v1/sessions", "post"), ("/v1/sessions/{session_id}", "get"),
    ("/v1/sessions/{session_id}/messages", "post"), ("/v1/sessions/{session_id}/turns/{turn_id}", "get"),
    ("/v1/sessions/{session_id}/events", "get"), ("/v1/sessions/{session_id}/stream", "get"),
    ("/v1/sessions/{session_id}/cancel", "post"), ("/v1/sessions/{session_id}/archive", "post"),
    ("/v1/sessions/{session_id}/pause", "post"), ("/v1/sessions/{session_id}/resume", "post"),
    ("/v1/sessions/{session_id}/rename", "post"),
    ("/v1/sessions/{session_id}/approvals/{request_id}", "post"),
    ("/v1/sessions/{session_id}/approvals/{request_id}/reconcile", "post"),
    ("/v1/sessions/{session_id}/answers/{request_id}", "post"),
    ("/v1/agents/{agent}/ag-ui", "post"),
    ("/v1/tasks", "get"), ("/v1/tasks", "post"), ("/v1/tasks/{task_id}", "get"), ("/v1/tasks/{task_id}/events", "get"),
    ("/v1/tasks/{task_id}/cancel", "post"), ("/v1/tasks/{task_id}/pause", "post"), ("/v1/tasks/{task_id}/resume", "post"),
    ("/v1/health/stuck", "get"), ("/v1/audit", "get"), ("/v1/pause", "post"), ("/v1/resume", "post"),
    ("/v1/mcp/servers", "get"), ("/v1/mcp/servers", "post"), ("/v1/mcp/servers/{name}", "put"),
    ("/v1/mcp/servers/{name}/trust", "post"), ("/v1/mcp/servers/{name}/revoke", "post"),
    *{
        (f"{prefix}{path}", method)
        for prefix in ("/v1/graphs", "/v1/runs", "/apps/{app}/graphs", "/apps/{app}/runs")
        for path, method in (
            ("", "get"), ("", "post"), ("/{run_id}", "get"), ("/{run_id}/events", "get"),
            ("/{run_id}/approve", "post"), ("/{run_id}/reject", "post"), ("/{run_id}/cancel", "post"),
            ("/{run_id}/pause", "post"), ("/{run_id}/resume", "post"), ("/{run_id}/nodes/{node_id}/retry", "post"),
        )
    },
}


def gateway_config() -> GatewayConfig:
    return GatewayConfig(tokens=[
        GatewayToken(sha256=token_sha256(token), principal=principal, scopes=scopes) for principal, (token, scopes) in TOKENS.items()
    ])


def auth(principal: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[principal][0]}"}


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the test process keeps its own."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """``app`` under uvicorn on a free loopback port, and an httpx client whose base URL is it."""
    server = _Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", timeout_graceful_shutdown=5))
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        assert not task.done(), "the gateway did not start"
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            yield http
    finally:
        server.should_exit = True
        await task


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws-carol").mkdir()
    (tmp_path / "script.json").write_text(json.dumps({"turns": [{"text": "hi"}]}))
    return tmp_path


@pytest.fixture
async def http(temporal_client: Client, root: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A gateway on a task queue no worker polls (the perimeter answers before any work starts)."""
    client = AgentClient(temporal_client, task_queue=f"gw-{uuid.uuid4().hex[:8]}", principal="nobody")
    async with serving(create_app(client, gateway_config(), workspace_root=root)) as http:
        yield http


def assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    """The response is a problem body of ``status`` without a traceback."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert {"type", "title", "status", "detail"} <= set(body) and body["status"] == status
    assert "Traceback" not in response.text and 'File "' not in response.text
    return body


# ---------------------------------------------------------------- authentication


async def test_healthz_answers_without_a_token(http: httpx.AsyncClient) -> None:
    response = await http.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


async def test_a_request_without_a_token_is_unauthenticated(http: httpx.AsyncClient) -> None:
    response = await http.get("/v1/sessions/s1")
    body = assert_problem(response, 401)
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert body["type"] == "urn:agentrt:problem:unauthenticated"


async def test_a_token_the_gateway_does_not_know_is_unauthenticated(http: httpx.AsyncClient) -> None:
    response = await http.get("/v1/sessions/s1", headers={"Authorization": "Bearer alice-token-012345678"})
    assert_problem(response, 401)
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


async def test_another_authorization_scheme_is_unauthenticated(http: httpx.AsyncClient) -> None:
    response = await http.get("/v1/sessions/s1", headers={"Authorization": f"Basic {TOKENS['alice'][0]}"})
    assert_problem(response, 401)


async def test_a_huge_token_is_refused_unread(http: httpx.AsyncClient) -> None:
    response = await http.get("/v1/sessions/s1", headers={"Authorization": "Bearer " + "x" * 8000})
    assert_problem(response, 401)


async def test_a_token_without_the_route_s_scope_is_forbidden(http: httpx.AsyncClient, root: Path) -> None:
    response = await http.post("/v1/runs", json={"goal": "plan a trip"}, headers=auth("bob"))
    body = assert_problem(response, 403)
    assert "'runs'" in body["detail"] and 'error="insufficient_scope"' in response.headers["www-authenticate"]


async def test_a_token_without_the_tasks_scope_cannot_read_a_task(http: httpx.AsyncClient) -> None:
    assert_problem(await http.get("/v1/tasks/t1", headers=auth("bob")), 403)


async def test_a_body_naming_an_owner_is_refused(http: httpx.AsyncClient) -> None:
    response = await http.post("/v1/sessions", json={"text": "hi", "workspace": "ws", "owner": "mallory"}, headers=auth("alice"))
    body = assert_problem(response, 422)
    assert body["errors"][0]["loc"] == ["body", "owner"]


@pytest.mark.parametrize("content_type", [None, "application/x-www-form-urlencoded", "text/plain; charset=utf-8"])
async def test_a_json_body_sent_as_a_form_or_plain_text_is_read_as_json(http: httpx.AsyncClient, content_type: str | None) -> None:
    # what `curl -d '{...}'` sends without -H 'Content-Type: application/json'
    headers = {**auth("alice"), **({"Content-Type": content_type} if content_type else {})}
    response = await http.post("/v1/sessions", content=b'{"text": "hi", "workspace": "ws", "owner": "mallory"}', headers=headers)
    body = assert_problem(response, 422)
    assert body["errors"][0]["loc"] == ["body", "owner"]  # parsed as the JSON object it is


async def test_a_path_with_a_trailing_slash_is_not_redirected(http: httpx.AsyncClient) -> None:
    assert_problem(await http.get("/v1/runs/", headers={"Authorization": "Bearer wrong"}), 404)


async def test_an_unrestricted_sandbox_needs_the_admin_scope(http: httpx.AsyncClient) -> None:
    response = await http.post(
        "/v1/sessions", json={"text": "hi", "workspace": "ws", "sandbox": "danger_full_access"}, headers=auth("alice")
    )
    assert "admin" in assert_problem(response, 403)["detail"]


@pytest.mark.parametrize(
    ("route", "body"),
    [
        ("/v1/sessions", {"text": "hi", "workspace": "ws"}),
        ("/v1/tasks", {"goal": "g", "workspace": "ws"}),
        ("/v1/runs", {"goal": "g", "workspace": "ws"}),
    ],
)
async def test_network_needs_the_network_scope(http: httpx.AsyncClient, route: str, body: dict[str, Any]) -> None:
    # A sessions-scope token asking for network: its commands would reach whatever the egress proxy lets through.
    refused = await http.post(route, json={**body, "network": True}, headers=auth("alice"))
    # carol works in a workspace of her own: "ws" is alice's once her request below claims it.
    granted = await http.post(route, json={**body, "network": True, "workspace": "ws-carol"}, headers=auth("carol"))
    without = await http.post(route, json=body, headers=auth("alice"))

    assert "network scope" in assert_problem(refused, 403)["detail"]
    assert granted.status_code == without.status_code != 403  # past the perimeter (503: no worker polls here)


@pytest.mark.parametrize("widening", [{"sandbox": "danger_full_access"}, {"network": True}])
async def test_an_approval_edit_cannot_raise_the_session_s_sandbox_or_network(http: httpx.AsyncClient, widening: dict[str, Any]) -> None:
    # A session's sandbox and network are fixed at its start: a decision has no field that changes them.
    body = {"decision": "edit", "arguments": {"command": "curl http://127.0.0.1:7233/"}, **widening}
    response = await http.post("/v1/sessions/s1/approvals/r1", json=body, headers=auth("bob"))

    assert assert_problem(response, 422)["status"] == 422


# ---------------------------------------------------------------- hostile input


async def test_a_body_over_a_mebibyte_is_too_large(http: httpx.AsyncClient) -> None:
    response = await http.post("/v1/sessions", json={"text": "x" * (1024 * 1024 + 10), "workspace": "ws"}, headers=auth("alice"))
    assert assert_problem(response, 413)["type"] == "urn:agentrt:problem:body-too-large"


async def test_a_streamed_body_without_a_length_is_cut_at_the_limit(http: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"text": "'
        for _ in range(40):
            yield b"x" * 65_536
        yield b'"}'

    response = await http.post("/v1/sessions", content=chunks(), headers={**auth("alice"), "Content-Type": "application/json"})
    assert_problem(response, 413)


async def test_a_body_that_is_not_json_is_invalid(http: httpx.AsyncClient) -> None:
    response = await http.post("/v1/sessions", content=b"text: hi", headers={**auth("alice"), "Content-Type": "application/json"})
    assert_problem(response, 422)


async def test_a_body_that_is_not_utf8_is_a_bad_request(http: httpx.AsyncClient) -> None:
    response = await http.post("/v1/sessions", content=b"\xff\xfe{", headers={**auth("alice"), "Content-Type": "application/json"})
    assert_problem(response, 400)


async def test_a_json_array_body_is_invalid(http: httpx.AsyncClient) -> None:
    assert_problem(await http.post("/v1/sessions", json=["hi"], headers=auth("alice")), 422)


async def test_a_huge_field_is_invalid_and_not_echoed(http: httpx.AsyncClient) -> None:
    title = "T" * 50_000
    response = await http.post("/v1/sessions", json={"text": "hi", "workspace": "ws", "title": title}, headers=auth("alice"))
    assert_problem(response, 422)
    assert title[:1000] not in response.text and len(response.content) < 5_000


async def test_a_session_without_a_script_or_a_configured_profile_says_how_to_run_offline(temporal_client: Client, root: Path) -> None:
    client = AgentClient(temporal_client, task_queue=f"gw-{uuid.uuid4().hex[:8]}", principal="nobody")
    async with serving(create_app(client, gateway_config(), workspace_root=root, profiles=AgentrtConfig().profiles)) as http:
        response = await http.post("/v1/sessions", json={"text": "hi", "workspace": "ws"}, headers=auth("alice"))
    detail = assert_problem(response, 422)["detail"]
    assert "unknown profile 'default'; configured profiles: scripted" in detail and 'give "script"' in detail


async def test_a_blank_message_is_invalid(http: httpx.AsyncClient) -> None:
    response = await http.post("/v1/sessions", json={"text": "   \n", "workspace": "ws"}, headers=auth("alice"))
    assert "text is empty" in assert_problem(response, 422)["detail"]


@pytest.mark.parametrize(
    "session_id",
    ["..", "..%2F..%2Fetc%2Fpasswd", "a%20b", "%00", "-starts-with-a-dash", "s" * 300, "%E2%80%AEevil", "a;rm -rf"],
    ids=["dots", "encoded-slashes", "space", "nul", "dash", "too-long", "bidi", "shell"],
)
async def test_an_id_that_cannot_name_a_session_is_not_found(http: httpx.AsyncClient, session_id: str) -> None:
    response = await http.get(f"/v1/sessions/{session_id}", headers=auth("alice"))
    assert response.status_code in (404, 422), response.text
    assert_problem(response, response.status_code)


@pytest.mark.parametrize("value", ["abc\n", "abc\r\n", "\nabc"], ids=["trailing-newline", "trailing-crlf", "leading-newline"])
def test_a_path_id_with_a_line_break_names_nothing(value: str) -> None:
    """``$`` also matches before a final newline: the whole id must match."""
    from agentrt.gateway._auth import path_id
    from agentrt.gateway._errors import Problem

    with pytest.raises(Problem) as refused:
        path_id(value, "session")
    assert (refused.value.status, refused.value.kind) == (404, "not-found")
    assert path_id("abc", "session") == "abc"


async def test_a_missing_session_is_not_found(http: httpx.AsyncClient) -> None:
    body = assert_problem(await http.get(f"/v1/sessions/nope-{uuid.uuid4().hex[:8]}", headers=auth("alice")), 404)
    assert body["type"] == "urn:agentrt:problem:not-found"


async def test_a_session_created_while_no_worker_runs_is_unavailable_and_not_started(http: httpx.AsyncClient) -> None:
    session_id = f"s-{uuid.uuid4().hex[:8]}"
    response = await http.post(
        "/v1/sessions", json={"text": "hi", "workspace": "ws", "script": "script.json", "session_id": session_id}, headers=auth("alice")
    )
    assert "no worker" in assert_problem(response, 503)["detail"] and response.headers["retry-after"] == "5"
    assert_problem(await http.get(f"/v1/sessions/{session_id}", headers=auth("alice")), 404)


async def test_a_missing_run_is_not_found(http: httpx.AsyncClient) -> None:
    assert_problem(await http.get(f"/v1/runs/nope-{uuid.uuid4().hex[:8]}", headers=auth("alice")), 404)


async def test_an_unknown_route_is_a_problem(http: httpx.AsyncClient) -> None:
    assert_problem(await http.get("/v1/nothing-here", headers=auth("alice")), 404)


async def test_a_wrong_method_is_a_problem(http: httpx.AsyncClient) -> None:
    assert_problem(await http.delete("/v1/sessions", headers=auth("alice")), 405)


async def test_a_wait_longer_than_a_minute_is_invalid(http: httpx.AsyncClient) -> None:
    assert_problem(await http.get("/v1/sessions/s1/turns/turn-1?wait=3600", headers=auth("alice")), 422)


async def test_an_idempotency_key_with_control_characters_is_a_bad_request(http: httpx.AsyncClient) -> None:
    response = await http.post(
        "/v1/sessions", json={"text": "hi", "workspace": "ws"}, headers={**auth("alice"), "Idempotency-Key": "a b"}
    )
    assert_problem(response, 400)


async def test_an_edit_without_arguments_is_invalid(http: httpx.AsyncClient) -> None:
    response = await http.post("/v1/sessions/s1/approvals/req-1", json={"decision": "edit"}, headers=auth("alice"))
    assert "arguments" in assert_problem(response, 422)["detail"]


async def test_a_run_with_a_goal_and_a_graph_is_invalid(http: httpx.AsyncClient) -> None:
    body = {"goal": "g", "graph": {"nodes": [{"id": "a", "prompt": "p"}]}}
    assert "exactly one" in assert_problem(await http.post("/v1/runs", json=body, headers=auth("alice")), 422)["detail"]


async def test_a_graph_with_a_cycle_is_invalid(http: httpx.AsyncClient) -> None:
    graph = {"nodes": [{"id": "a", "prompt": "p", "depends_on": ["b"]}, {"id": "b", "prompt": "q", "depends_on": ["a"]}]}
    response = await http.post("/v1/runs", json={"graph": graph, "workspace": "ws"}, headers=auth("alice"))
    body = assert_problem(response, 422)
    assert body["type"] == "urn:agentrt:problem:invalid-graph" and body["problems"]


@pytest.mark.parametrize(
    ("error", "status", "kind"),
    [
        (SessionNotFound("s1"), 404, "not-found"),
        (TaskNotFound("t1"), 404, "not-found"),
        (GraphNotFound("g1"), 404, "not-found"),
        (RequestRejected("s1", "send_message", "the session is archived"), 409, "request-rejected"),
        (PauseNotAllowed("mallory", "alice", "pause", "it is neither that owner nor an operator"), 403, "forbidden"),
        (InvalidGraph(["a cycle: a -> b -> a"]), 422, "invalid-graph"),
        (UnknownProfileError("gpt9", ["scripted"]), 422, "invalid-request"),
        (WorkerUnavailable("s1", "no poller seen"), 503, "unavailable"),
        (ServerUnavailable("temporal.internal:7233", "connection refused"), 503, "unavailable"),
        (RuntimeError("secret internals /srv/db"), 500, "internal"),
        (StoreFileChanged("/srv/agentrt.db", "deleted"), 503, "unavailable"),
        (PayloadCodecMismatch("s1", "agentrt", None, None, {"1@host-a agentrt-payloads=aes-gcm:k1@abc": ["aes-gcm:k1@abc"]}), 503, "unavailable"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v),
)
def test_each_error_becomes_its_problem(error: Exception, status: int, kind: str) -> None:
    problem = problem_for(error)
    assert (problem.status, problem.kind) == (status, kind)


def test_a_tenant_over_quota_is_429_with_retry_after_until_the_reset_and_names_the_quota() -> None:
    resets = datetime.now(timezone.utc) + timedelta(hours=2)
    problem = problem_for(QuotaExceeded("acme", "tokens_per_day", 1000, 1200, resets))
    assert (problem.status, problem.kind) == (429, "quota-exceeded") and "tokens_per_day" in problem.detail
    assert 7000 <= int(problem.headers["Retry-After"]) <= 7201
    assert "Retry-After" not in problem_for(QuotaExceeded("acme", "concurrent_sessions", 2, 2, None)).headers


def test_a_store_that_does_not_answer_is_503_with_retry_after_and_says_nothing_of_where_it_is() -> None:
    from sqlalchemy import create_engine, text

    from agentrt.worker import free_port

    engine = create_engine(f"postgresql+psycopg://agentrt:hunter2@127.0.0.1:{free_port()}/secretdb?connect_timeout=5")
    with pytest.raises(Exception) as raised:
        with engine.connect() as conn:  # a real refused connection, as a stopped PostgreSQL gives
            conn.execute(text("SELECT 1"))
    wrapped = RuntimeError("reading the session's events failed")
    wrapped.__cause__ = raised.value
    for err in (raised.value, wrapped):
        problem = problem_for(err)
        assert (problem.status, problem.kind, problem.headers.get("Retry-After")) == (503, "unavailable", "5")
        assert "secretdb" not in problem.detail and "hunter2" not in problem.detail and "127.0.0.1" not in problem.detail


def test_a_server_side_failure_tells_the_caller_nothing_of_the_server() -> None:
    assert "temporal.internal" not in problem_for(ServerUnavailable("temporal.internal:7233", "refused")).detail
    assert "/srv/db" not in problem_for(RuntimeError("secret internals /srv/db")).detail


# ---------------------------------------------------------------- paths under the workspace root


@pytest.mark.parametrize("workspace", ["..", "/etc", "ws/../..", "missing-dir", "script.json"])
async def test_a_workspace_not_under_the_root_is_invalid(http: httpx.AsyncClient, workspace: str) -> None:
    response = await http.post("/v1/sessions", json={"text": "hi", "workspace": workspace}, headers=auth("alice"))
    assert "workspace" in assert_problem(response, 422)["detail"]


async def test_a_symbolic_link_out_of_the_root_is_invalid(http: httpx.AsyncClient, root: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = tmp_path_factory.mktemp("outside")
    (root / "escape").symlink_to(outside)
    response = await http.post("/v1/sessions", json={"text": "hi", "workspace": "escape"}, headers=auth("alice"))
    assert_problem(response, 422)


async def test_a_script_outside_the_root_is_invalid(http: httpx.AsyncClient) -> None:
    response = await http.post("/v1/sessions", json={"text": "hi", "workspace": "ws", "script": "/etc/passwd"}, headers=auth("alice"))
    assert "script" in assert_problem(response, 422)["detail"]


async def test_a_graph_node_script_outside_the_root_is_invalid(http: httpx.AsyncClient) -> None:
    graph = {"nodes": [{"id": "a", "prompt": "p", "script": "../../../etc/passwd"}]}
    response = await http.post("/v1/runs", json={"graph": graph, "workspace": "ws"}, headers=auth("alice"))
    assert "node 'a' script" in assert_problem(response, 422)["detail"]


# ---------------------------------------------------------------- the app and its schema


async def test_the_openapi_schema_lists_every_route_with_bearer_security(http: httpx.AsyncClient) -> None:
    schema = (await http.get("/openapi.json")).json()
    listed = {(path, method) for path, operations in schema["paths"].items() for method in operations}
    assert listed == ROUTES
    assert schema["components"]["securitySchemes"]["bearer"] == {**schema["components"]["securitySchemes"]["bearer"], "type": "http", "scheme": "bearer"}
    secured = [op for path, ops in schema["paths"].items() if path != "/healthz" for op in ops.values()]
    assert all(op["security"] == [{"bearer": []}] and "401" in op["responses"] for op in secured)
    assert {"SessionCreate", "RunCreate", "RunView", "TaskCreate", "ProblemBody"} <= set(schema["components"]["schemas"])


async def test_v1_graphs_is_the_task_graph_route_and_v1_runs_its_alias(http: httpx.AsyncClient) -> None:
    schema = (await http.get("/openapi.json")).json()
    graphs = {path.removeprefix("/v1/graphs"): ops for path, ops in schema["paths"].items() if path.startswith("/v1/graphs")}
    runs = {path.removeprefix("/v1/runs"): ops for path, ops in schema["paths"].items() if path.startswith("/v1/runs")}
    assert graphs.keys() == runs.keys() and len(graphs) == 9
    for path in graphs:
        assert graphs[path].keys() == runs[path].keys()
        for method in graphs[path]:
            assert graphs[path][method]["tags"] == ["graphs"] and runs[path][method]["tags"] == ["runs"]
            assert graphs[path][method]["requestBody" if "requestBody" in graphs[path][method] else "responses"] == (
                runs[path][method]["requestBody" if "requestBody" in runs[path][method] else "responses"]
            )
    missing = f"nope-{uuid.uuid4().hex[:8]}"
    for prefix in ("/v1/graphs", "/v1/runs"):
        assert_problem(await http.get(f"{prefix}/{missing}", headers=auth("alice")), 404)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_the_docs_pages_load_every_file_from_the_gateway_itself(http: httpx.AsyncClient, page: str) -> None:
    # FastAPI's own pages load Swagger UI and ReDoc from a CDN: blank on a machine without internet access.
    response = await http.get(page)

    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    loaded = re.findall(r"""(?:src|href)=["']([^"']+)["']""", response.text)
    assert loaded and all(url.startswith("/") and not url.startswith("//") for url in loaded), loaded
    assert "://" not in response.text  # nor a validator badge (Swagger UI's validatorUrl) or web fonts
    for url in loaded:
        asset = await http.get(url)
        assert asset.status_code == 200 and asset.content, url
    assert (await http.get("/openapi.json")).status_code == 200


def test_an_app_without_tokens_is_refused(temporal_client: Client) -> None:
    client = AgentClient(temporal_client, principal="nobody")
    with pytest.raises(ConfigurationError, match="no bearer tokens"):
        create_app(client, GatewayConfig())


def test_an_app_with_tokens_is_not_also_served_without_authentication(temporal_client: Client) -> None:
    client = AgentClient(temporal_client, principal="nobody")
    with pytest.raises(ConfigurationError, match="would ignore them"):
        create_app(client, gateway_config(), insecure_principal="carol")


@pytest.mark.parametrize("limits", [{"max_streams_per_principal": 0}, {"max_streams": 0}], ids=["per-principal", "in-all"])
def test_an_app_with_a_stream_limit_under_one_is_refused(temporal_client: Client, limits: dict[str, int]) -> None:
    client = AgentClient(temporal_client, principal="nobody")
    with pytest.raises(ConfigurationError, match="stream limits"):
        create_app(client, gateway_config(), **limits)


async def test_an_app_without_authentication_acts_as_its_principal(temporal_client: Client, root: Path) -> None:
    client = AgentClient(temporal_client, task_queue=f"gw-{uuid.uuid4().hex[:8]}", principal="nobody")
    async with serving(create_app(client, GatewayConfig(), workspace_root=root, insecure_principal="carol")) as http:
        response = await http.get("/v1/sessions")
    assert response.status_code == 200 and response.json() == {"sessions": []}


@pytest.fixture
async def local(temporal_client: Client, root: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A gateway without authentication (``--insecure-no-auth``) on a task queue no worker polls."""
    client = AgentClient(temporal_client, task_queue=f"gw-{uuid.uuid4().hex[:8]}", principal="nobody")
    async with serving(create_app(client, GatewayConfig(), workspace_root=root, insecure_principal="carol")) as http:
        yield http


@pytest.mark.parametrize(
    "host", ["attacker.example", "attacker.example:8080", "127.0.0.1.attacker.example", "localhost.attacker.example", "10.0.0.1", ""],
)
async def test_a_gateway_without_authentication_refuses_a_host_that_is_not_loopback(local: httpx.AsyncClient, host: str) -> None:
    # what a browser sends once a page's DNS name is re-pointed at 127.0.0.1 (DNS rebinding)
    body = assert_problem(await local.get("/v1/sessions", headers={"Host": host}), 400)
    assert "Host" in body["detail"]


@pytest.mark.parametrize("host", ["localhost", "localhost:8080", "127.0.0.1:8080", "127.0.0.2", "[::1]:8080", "LOCALHOST"])
async def test_a_gateway_without_authentication_serves_a_loopback_host(local: httpx.AsyncClient, host: str) -> None:
    response = await local.get("/v1/sessions", headers={"Host": host})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "origin",
    [
        "http://attacker.example", "https://attacker.example:8080", "null", "http://localhost.attacker.example",
        "http://127.0.0.1@attacker.example", "file://", "http://localhost:notaport", "http://localhost/path",
    ],
)
async def test_a_gateway_without_authentication_refuses_a_simple_cross_site_post(local: httpx.AsyncClient, origin: str) -> None:
    # a form a page elsewhere submits: a body the gateway reads as JSON, no preflight
    response = await local.post(
        "/v1/sessions", content=b'{"text": "hi", "workspace": "ws", "script": "script.json"}',
        headers={"Origin": origin, "Content-Type": "text/plain"},
    )
    assert "web page" in assert_problem(response, 403)["detail"]
    assert (await local.get("/v1/sessions")).json() == {"sessions": []}


async def test_a_gateway_without_authentication_refuses_a_cross_site_fetch_without_an_origin(local: httpx.AsyncClient) -> None:
    response = await local.post("/v1/tasks/t1/cancel", headers={"Sec-Fetch-Site": "cross-site"})
    assert "cross-site" in assert_problem(response, 403)["detail"]


@pytest.mark.parametrize("origin", ["http://localhost:3000", "http://127.0.0.1:8080", "https://[::1]:5173"])
async def test_a_gateway_without_authentication_serves_a_page_on_a_loopback_origin(local: httpx.AsyncClient, origin: str) -> None:
    response = await local.get("/v1/sessions", headers={"Origin": origin, "Sec-Fetch-Site": "same-site"})
    assert response.status_code == 200, response.text


async def test_a_gateway_with_tokens_serves_any_host_and_origin(http: httpx.AsyncClient) -> None:
    # the bearer token is the check: a page cannot attach it cross-site without a preflight
    response = await http.get("/v1/sessions", headers={**auth("alice"), "Host": "gateway.example", "Origin": "http://elsewhere.example"})
    assert response.status_code == 200, response.text


def test_with_principal_copies_the_client_for_another_principal(temporal_client: Client) -> None:
    client = AgentClient(temporal_client, task_queue="q", principal="alice", operators=["ops"])
    other = client.with_principal("bob")
    assert (other.principal, client.principal) == ("bob", "alice")
    assert other.temporal is client.temporal and other.task_queue == "q" and other.operators == ["ops"]


# ---------------------------------------------------------------- agentrt serve


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "AGENTRT_HOME": str(cwd), **(env or {})}
    for name in ("AGENTRT_CONFIG", "AGENTRT_GATEWAY_TOKEN"):
        environment.pop(name, None)
    return subprocess.run(
        [sys.executable, "-m", "agentrt.cli", *args], cwd=cwd, env=environment, capture_output=True, text=True, timeout=60
    )


def test_serve_help_names_every_option(tmp_path: Path) -> None:
    result = cli("serve", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for option in ("--host", "--port", "--config", "--workspace-root", "--insecure-no-auth", "--principal"):
        assert option in result.stdout


def test_serve_without_tokens_refuses_to_start(tmp_path: Path) -> None:
    result = cli("serve", "--port", "0", cwd=tmp_path)
    assert result.returncode == 2
    assert "the gateway has no bearer tokens" in result.stderr and "--insecure-no-auth" in result.stderr


def test_serve_without_authentication_on_a_public_address_is_refused(tmp_path: Path) -> None:
    result = cli("serve", "--insecure-no-auth", "--host", "0.0.0.0", cwd=tmp_path)
    assert result.returncode == 2 and "loopback address only" in " ".join(result.stderr.split())


def test_serve_with_a_bad_token_table_names_the_mistake(tmp_path: Path) -> None:
    config = tmp_path / "agentrt.toml"
    config.write_text('[[gateway.tokens]]\nsha256 = "abc"\nprincipal = "alice"\n')
    result = cli("serve", "--config", str(config), cwd=tmp_path)
    assert result.returncode == 2 and "sha256 must be 64 hex digits" in result.stderr


def test_a_token_digest_with_a_trailing_newline_is_refused(tmp_path: Path) -> None:
    digest = token_sha256("secret")
    config = tmp_path / "agentrt.toml"
    config.write_text(f'[[gateway.tokens]]\nsha256 = "{digest}\\n"\nprincipal = "alice"\n')
    with pytest.raises(ConfigurationError, match="sha256 must be 64 hex digits"):
        AgentrtConfig.load(config, env={})
    config.write_text(f'[[gateway.tokens]]\nsha256 = "{digest}"\nprincipal = "alice"\n')
    assert AgentrtConfig.load(config, env={}).gateway.tokens


def test_the_gateway_answers_for_a_stuck_session_with_a_stuck_problem() -> None:
    problem = problem_for(SessionStuck("s1", "Workflow Task in failed state"))
    assert (problem.status, problem.kind) == (503, "stuck")
    assert "GET /v1/health/stuck" in problem.detail and problem.headers["Retry-After"] == "60"
