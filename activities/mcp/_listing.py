"""A server's tools as the worker knows them: ``tools/list`` followed page by page (bounded),
each tool described with its risk class, and the result cached on the server until it is
stale or the server says its tools changed."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcp import MCPError
from mcp.types import CONNECTION_CLOSED, PaginatedRequestParams, Tool
from pydantic import ValidationError

from agentrt.activities.mcp._diagnostics import first_line
from agentrt.activities.mcp._risk import describe_tool
from agentrt.schemas import McpServerConfig, McpServerUnavailable, McpToolInfo, ToolSpec

if TYPE_CHECKING:
    from agentrt.activities.mcp._connections import Connection, Server

# Pages of tools/list followed (next_cursor), and tools kept, per listing.
MAX_LIST_PAGES = 20
MAX_LISTED_TOOLS = 1000


@dataclass
class McpListing:
    """A server's tools: ``tools``, every tool it lists (skipped ones with why), and ``specs``, the
    ones the model may see (``<server>.<tool>``, risk class, ``source="mcp:<server>"``)."""

    tools: list[McpToolInfo]
    specs: list[ToolSpec]


async def list_tools(srv: Server, conn: Connection) -> McpListing:
    """List the tools of ``srv`` on ``conn`` (at most ``MAX_LIST_PAGES`` pages and
    ``MAX_LISTED_TOOLS`` tools) and cache them on ``srv`` (``listing``, ``listed_at``).

    Raises ``McpServerUnavailable`` (the connection closed, which also marks ``conn`` broken;
    a JSON-RPC error; an invalid result)."""
    assert conn.client is not None
    session = conn.client.session
    tools: list[Tool] = []
    cursor: str | None = None
    try:
        for _ in range(MAX_LIST_PAGES):
            page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor or len(tools) >= MAX_LISTED_TOOLS:
                break
    except MCPError as err:
        if err.code == CONNECTION_CLOSED:
            conn.broke("the connection closed while listing tools")
            raise McpServerUnavailable(srv.config.name, "the connection closed while listing its tools") from err
        raise McpServerUnavailable(srv.config.name, f"tools/list failed: {err.error.message} (code {err.code})") from err
    except ValidationError as err:
        raise McpServerUnavailable(
            srv.config.name, f"tools/list answered with an invalid result: {first_line(str(err))}"
        ) from err
    listing = _listing(srv.config, tools[:MAX_LISTED_TOOLS])
    srv.listing = listing
    srv.listed_at = asyncio.get_running_loop().time()
    return listing


def _listing(config: McpServerConfig, tools: list[Tool]) -> McpListing:
    infos: list[McpToolInfo] = []
    specs: list[ToolSpec] = []
    seen: set[str] = set()
    for tool in tools:
        info, spec = describe_tool(config, tool)
        if tool.name in seen:
            info = info.model_copy(update={"skipped": "listed more than once"})
            spec = None
        seen.add(tool.name)
        infos.append(info)
        if spec is not None:
            specs.append(spec)
    return McpListing(tools=infos, specs=specs)
