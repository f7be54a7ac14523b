"""The gateway's MCP server routes (``/v1/mcp/servers``, scope ``admin``, operators only) over a
real uvicorn server and a real store: an operator adds, changes, trusts and revokes a server and
the audit log says who and why; a token without the scope, a principal that is no operator, an
invalid table, a name collision and an unknown server are refused with a problem body, and
nothing is recorded."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from temporalio.client import Client

from agentrt.client import AgentClient
from agentrt.gateway import create_app
from agentrt.store import Store
from tests.gateway.test_gateway import assert_problem, auth, gateway_config, serving

CONFIGURED = "docs"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Store]:
    """A migrated SQLite store of this test's own."""
    with Store.open(f"sqlite:///{tmp_path / 'db'}") as store:
        yield store


@pytest.fixture
async def http(temporal_client: Client, root: Path, db: Store) -> AsyncIterator[httpx.AsyncClient]:
    """A gateway whose operator is ``root`` (scope admin) and whose agentrt.toml has server ``docs``."""
    client = AgentClient(temporal_client, task_queue=f"gw-{uuid.uuid4().hex[:8]}", principal="nobody", store=db,
                         operators=["root"], mcp_servers=[CONFIGURED])
    async with serving(create_app(client, gateway_config(), workspace_root=root)) as http:
        yield http


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path


SEARCH = {"name": "search", "url": "https://mcp.example/mcp", "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"}}


async def test_an_operator_adds_changes_and_revokes_a_server_and_the_list_and_audit_log_say_who(
    http: httpx.AsyncClient, db: Store
) -> None:
    added = await http.post("/v1/mcp/servers", json={"config": SEARCH, "reason": "web search"}, headers=auth("root"))
    assert added.status_code == 201, added.text
    assert (added.json()["action"], added.json()["principal"]) == ("add", "root")
    changed = await http.put("/v1/mcp/servers/search", json={"config": {"url": "https://mcp2.example/mcp"}, "reason": "moved"},
                             headers=auth("root"))
    assert changed.status_code == 200 and changed.json()["config"]["url"] == "https://mcp2.example/mcp"
    revoked = await http.post("/v1/mcp/servers/docs/revoke", json={"reason": "leaked a token"}, headers=auth("root"))
    assert revoked.status_code == 200 and revoked.json()["trust"] == "revoked"
    trusted = await http.post("/v1/mcp/servers/search/trust", json={"trust": "untrusted", "reason": "new"}, headers=auth("root"))
    assert trusted.status_code == 200

    listed = {s["name"]: s for s in (await http.get("/v1/mcp/servers", headers=auth("root"))).json()}
    assert (listed["docs"]["source"], listed["docs"]["trust"]) == ("agentrt.toml", "revoked")
    assert (listed["search"]["source"], listed["search"]["trust"]) == ("store", "untrusted")
    assert listed["search"]["change"]["config"]["url"] == "https://mcp2.example/mcp"
    assert [(a.action, a.principal) for a in db.audit(target="search")] == [
        ("trust_mcp_server", "root"), ("change_mcp_server", "root"), ("add_mcp_server", "root"),
    ]


@pytest.mark.parametrize(
    ("who", "method", "path", "body", "status", "detail"),
    [
        ("alice", "post", "/v1/mcp/servers", {"config": SEARCH, "reason": "r"}, 403, "admin"),
        ("alice", "get", "/v1/mcp/servers", None, 403, "admin"),
        ("root", "post", "/v1/mcp/servers", {"config": {**SEARCH, "command": "sh"}, "reason": "r"}, 422, "either command"),
        ("root", "post", "/v1/mcp/servers", {"config": {"name": "x", "command": "sh", "sandbox": "none"}, "reason": "r"}, 422,
         'sandbox = \\"none\\"'),
        ("root", "post", "/v1/mcp/servers", {"config": {**SEARCH, "name": "docs"}, "reason": "r"}, 409, "exists already"),
        ("root", "post", "/v1/mcp/servers", {"config": SEARCH, "reason": "  "}, 409, "needs a reason"),
        ("root", "put", "/v1/mcp/servers/nope", {"config": SEARCH | {"name": "nope"}, "reason": "r"}, 404, "no MCP server 'nope'"),
        ("root", "put", "/v1/mcp/servers/docs", {"config": SEARCH, "reason": "r"}, 422, "config.name"),
        ("root", "post", "/v1/mcp/servers/nope/revoke", {"reason": "r"}, 404, "no MCP server 'nope'"),
        ("root", "post", "/v1/mcp/servers/a.b$(id)/revoke", {"reason": "r"}, 422, "pattern"),
        ("root", "post", "/v1/mcp/servers/docs/trust", {"trust": "root", "reason": "r"}, 409, "trust is 'trusted' or 'untrusted'"),
    ],
)
async def test_a_refused_mcp_server_request_answers_a_problem_and_records_nothing(
    http: httpx.AsyncClient, db: Store, who: str, method: str, path: str, body: dict | None, status: int, detail: str
) -> None:
    response = await http.request(method.upper(), path, json=body, headers=auth(who))
    assert detail in response.text
    assert_problem(response, status)
    assert db.mcp_server_changes() == {} and db.mcp_trust_decisions() == {} and db.audit() == []
