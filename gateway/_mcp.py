"""The gateway's MCP server routes (scope ``admin``, operators only): the servers as workers see
them, and operators' changes at run time (add, change, trust, revoke), each recorded in the store
with who and why and followed by every worker from its next listing or call, without a restart
(``AgentClient.add_mcp_server`` and its siblings; ``agentrt mcp add|change|trust|revoke``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path
from pydantic import BaseModel, Field

from agentrt.client import McpServerView
from agentrt.gateway._auth import Caller, caller_for
from agentrt.gateway._errors import Problem
from agentrt.schemas import SERVER_NAME_PATTERN, McpServerChange, McpTrustDecision

__all__ = ["mcp_routes"]

AdminCaller = Annotated[Caller, Depends(caller_for("admin"))]
ServerName = Annotated[str, Path(pattern=SERVER_NAME_PATTERN)]
# The longest reason a request may carry (characters): what a decision keeps.
MAX_REASON_CHARS = 2_000


class McpServerRequest(BaseModel):
    """``POST /v1/mcp/servers`` and ``PUT /v1/mcp/servers/{name}``: ``config``, the server's
    ``[mcp.servers.NAME]`` table as JSON with its ``name`` (``{"name": "search", "url": "https://…",
    "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"}}``), and why."""

    config: dict[str, Any]
    reason: str = Field(max_length=MAX_REASON_CHARS)


class McpTrustRequest(BaseModel):
    """``POST /v1/mcp/servers/{name}/trust``: ``trusted`` or ``untrusted``, and why."""

    trust: str = Field(max_length=16)
    reason: str = Field(max_length=MAX_REASON_CHARS)


class McpRevokeRequest(BaseModel):
    """``POST /v1/mcp/servers/{name}/revoke``: why."""

    reason: str = Field(max_length=MAX_REASON_CHARS)


def mcp_routes() -> APIRouter:
    router = APIRouter(prefix="/v1/mcp/servers", tags=["mcp"])
    who = "Operators only (scope `admin` and `[principals] operators`; anyone else 409 `request-rejected`)."

    @router.get("", response_model=list[McpServerView], summary="List the MCP servers as workers see them now",
                description="The gateway's agentrt.toml servers and those operators added or changed at run time, each with "
                "its change and the trust decision in force (`revoked`: no worker lists or calls it). Scope `admin`.")
    async def servers(caller: AdminCaller) -> list[McpServerView]:
        return await caller.client.mcp_server_views()

    @router.post("", response_model=McpServerChange, status_code=201, summary="Add an MCP server for every worker",
                 description="Workers list its tools from their next turn on, without a restart. 422 `invalid-request` for a "
                 "table that is not valid (or `sandbox = \"none\"`), 409 for a name a server has already. " + who)
    async def add(body: McpServerRequest, caller: AdminCaller) -> McpServerChange:
        return await caller.client.add_mcp_server(body.config, reason=body.reason)

    @router.put("/{name}", response_model=McpServerChange, summary="Replace an MCP server's configuration for every worker",
                description="Each worker starts the server anew on next use; its old process ends once its calls in flight "
                "have. The body's `config.name` is the path's. 404 for a server neither agentrt.toml nor the store has. " + who)
    async def change(name: ServerName, body: McpServerRequest, caller: AdminCaller) -> McpServerChange:
        if body.config.get("name", name) != name:
            raise Problem(422, "invalid-request", "config.name is not the server the path names")
        return await caller.client.change_mcp_server({**body.config, "name": name}, reason=body.reason)

    @router.post("/{name}/trust", response_model=McpTrustDecision, summary="Decide how far an MCP server is trusted",
                 description="`trusted` (the policy decides by risk class) or `untrusted` (every call needs an approval), from "
                 "every worker's next listing on; it also lifts a revocation. " + who)
    async def trust(name: ServerName, body: McpTrustRequest, caller: AdminCaller) -> McpTrustDecision:
        return await caller.client.trust_mcp_server(name, body.trust, reason=body.reason)

    @router.post("/{name}/revoke", response_model=McpTrustDecision, summary="Revoke an MCP server",
                 description="No worker lists or calls its tools from now on, and workers stop it, until a trust decision. "
                 "404 for a server neither agentrt.toml nor the store has. " + who)
    async def revoke(name: ServerName, body: McpRevokeRequest, caller: AdminCaller) -> McpTrustDecision:
        return await caller.client.revoke_mcp_server(name, reason=body.reason)

    return router
