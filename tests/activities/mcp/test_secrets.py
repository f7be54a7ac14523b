"""Secrets an MCP server declares (``secrets``, ``${secret:NAME}``): read from the manager's
``SecretVault`` when the server starts, given to a stdio server's environment or an HTTP server's
headers, and recorded as ``[secret:NAME]`` wherever they show."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from pydantic import ValidationError

from agentrt.activities.tools import SecretVault
from agentrt.schemas import McpServerConfig, McpServerUnavailable
from agentrt.store import Store
from tests.activities.mcp.conftest import MakeManager
from tests.mcp_servers import probe_stdio


def fresh(prefix: str = "tok") -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


async def test_a_stdio_server_gets_its_declared_secrets_in_its_environment(tmp_path: Path, managers: MakeManager) -> None:
    token, other = fresh(), fresh()
    config = probe_stdio(tmp_path, secrets={"GITHUB_TOKEN": "GH_TOKEN"}, env={"AUTH": "token ${secret:OTHER_TOKEN}"})
    vault = SecretVault(env={"GH_TOKEN": token, "OTHER_TOKEN": other})

    seen = json.loads((await managers(config, vault=vault).call_tool("probe", "environment", {}, timeout_seconds=10)).text)

    assert seen["GITHUB_TOKEN"] == token and seen["AUTH"] == f"token {other}"
    assert "GH_TOKEN" not in seen and "OTHER_TOKEN" not in seen  # the vault's names are not the server's
    assert config.declared_secrets == ["GH_TOKEN", "OTHER_TOKEN"]


async def test_an_http_server_gets_its_declared_secrets_in_its_headers(probe_http: McpServerConfig, managers: MakeManager) -> None:
    token, key = fresh(), fresh()
    config = probe_http.model_copy(update={
        "headers": {"Authorization": "Bearer ${secret:SEARCH_TOKEN}"}, "secrets": {"X-Api-Key": "SEARCH_KEY"},
    })
    manager = managers(config, vault=SecretVault(env={"SEARCH_TOKEN": token, "SEARCH_KEY": key}))

    bearer = await manager.call_tool("probe_http", "header", {"name": "Authorization"}, timeout_seconds=10)
    api_key = await manager.call_tool("probe_http", "header", {"name": "X-Api-Key"}, timeout_seconds=10)

    assert (bearer.text, api_key.text) == (f"Bearer {token}", key)


async def test_a_declared_secret_no_source_has_makes_the_server_unavailable_naming_it(
    tmp_path: Path, managers: MakeManager, db: Store
) -> None:
    manager = managers(probe_stdio(tmp_path, secrets={"GITHUB_TOKEN": "GH_TOKEN"}), store=db, vault=SecretVault(env={}))

    with pytest.raises(McpServerUnavailable, match=r"secret GH_TOKEN \(declared by mcp:probe\) is not set"):
        await manager.call_tool("probe", "environment", {}, timeout_seconds=10)


async def test_a_server_s_diagnostic_records_a_declared_secret_by_name(tmp_path: Path, managers: MakeManager, db: Store) -> None:
    token = fresh()
    leaky = McpServerConfig(
        name="leaky", command="/bin/sh", args=["-c", 'echo "my token is $TOKEN" >&2; exit 1'],
        secrets={"TOKEN": "LEAKY_TOKEN"}, cwd=str(tmp_path / "leaky"),
    )
    manager = managers(leaky, store=db, vault=SecretVault(env={"LEAKY_TOKEN": token}))

    with pytest.raises(McpServerUnavailable) as caught:
        await manager.list_tools("leaky")
    await manager.close()

    assert "my token is [secret:LEAKY_TOKEN]" in caught.value.diagnostic and token not in caught.value.diagnostic
    assert all(token not in (e.diagnostic or "") for e in db.mcp_server_events("leaky"))


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"command": "x", "secrets": {"NOT AN ENV": "A_KEY"}}, "is not one"),
        ({"url": "https://x.example/mcp", "secrets": {"Bad Header": "A_KEY"}}, "is not a header name"),
        ({"command": "x", "secrets": {"TOKEN": "a-key"}}, "a secret name is letters"),
        ({"command": "x", "env": {"TOKEN": "${secret:}"}}, "not a variable reference"),
    ],
)
def test_a_server_s_secrets_are_checked_when_it_is_configured(fields: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        McpServerConfig(name="s", **fields)  # type: ignore[arg-type]
