"""An operator's decision on how far an MCP server is trusted, checked and recorded in the store
(``AgentClient.trust_mcp_server``, ``agentrt mcp trust``); workers apply the latest one from
their next listing of the server's tools on (``McpManager.list_tools``)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import get_args

from agentrt.schemas import SERVER_NAME_PATTERN, McpTrust, McpTrustDecision, RequestRejected
from agentrt.store import Store

__all__ = ["TRUST_LEVELS", "decide_mcp_trust"]

TRUST_LEVELS: tuple[str, ...] = get_args(McpTrust)
# The longest reason a decision keeps (characters): what the audit log keeps of any reason.
MAX_TRUST_REASON_CHARS = 2_000


async def decide_mcp_trust(
    store: Store, principal: str, operators: Sequence[str], server: str, trust: str, reason: str
) -> McpTrustDecision:
    """Record ``principal``'s decision that MCP server ``server`` is ``trust`` (``TRUST_LEVELS``)
    because of ``reason`` (``Store.decide_mcp_trust``: a row and an audit entry). Raises
    ``RequestRejected`` (its ``session_id`` field holds the server) when ``principal`` is not one
    of ``operators``, the reason is empty or over ``MAX_TRUST_REASON_CHARS``, ``trust`` is neither level or ``server`` no server name."""
    problem = None
    if principal not in operators:
        problem = f"{principal} is not an operator ([principals] operators)"
    elif trust not in TRUST_LEVELS:
        problem = f"trust is 'trusted' or 'untrusted', not {trust!r}"
    elif not reason.strip():
        problem = "a trust decision needs a reason"
    elif len(reason) > MAX_TRUST_REASON_CHARS:
        problem = f"a reason is at most {MAX_TRUST_REASON_CHARS} characters, not {len(reason)}"
    elif not re.fullmatch(SERVER_NAME_PATTERN, server):
        problem = f"{server[:64]!r} is not a server name ({SERVER_NAME_PATTERN})"
    if problem is not None:
        error = RequestRejected(server, "trust", problem)
        error.args = (f"MCP server {server[:64]!r} rejected trust: {problem}",)
        raise error
    return await asyncio.to_thread(store.decide_mcp_trust, server, trust, principal, reason)
