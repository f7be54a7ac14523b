"""One rule for who sees a session, task or graph, on every call of the client (and so of the CLI
and the gateway, which act through it): its owner (``AgentOwner``, set at its start) and the
configuration's operators. Anyone else gets exactly what a missing id gets, from reads, waits,
updates and signals; lists show them nothing of it; a start under an id another owner has used
is refused as a taken id is, without naming that owner."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from temporalio.service import RPCError, RPCStatusCode

from agentrt.client._connection import Connection
from agentrt.schemas import SESSION_OWNER
from agentrt.store import Store

# How long a running workflow found visible is believed so without asking again (seconds): far
# below Temporal's shortest retention (1 day), after which alone an id could pass to a new owner.
VISIBLE_SECONDS = 600.0

__all__ = ["VISIBLE_SECONDS", "check_visible", "claim_id", "forget_visible", "may_read", "may_see", "taken_reason"]


def may_see(connection: Connection, owner: str | None) -> bool:
    """True when the connection's principal owns ``owner``'s work or is one of its operators."""
    return connection.principal == owner or connection.principal in connection.operators


async def check_visible(
    connection: Connection, workflow_id: str, not_found: Callable[[], Exception],
    translate: Callable[[RPCError], Exception],
) -> None:
    """Return when workflow ``workflow_id`` exists and the connection's principal may see it (``may_see``);
    raise ``not_found()`` otherwise, the same error for another owner's workflow as for a missing one
    (``translate``: what any other RPC failure of the describe becomes). A positive answer for a
    running workflow is kept ``VISIBLE_SECONDS`` (one describe per id per client meanwhile), or
    until a call finds the workflow closed or gone (``forget_visible``); a closed workflow is
    described on every call. Only a closed workflow's id can pass to a new workflow, whose owner
    may differ, and not before Temporal forgets the closed one (a retention of 1 day at least):
    no kept answer outlives an owner change."""
    if connection.readable.get(workflow_id, 0.0) > time.monotonic():
        return
    try:
        description = await connection.temporal.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
            raise not_found() from err
        raise translate(err) from err
    owner = description.typed_search_attributes.get(SESSION_OWNER)
    if owner is None:
        # Started straight through Temporal (namespace access: see docs/security.md), before its
        # first workflow task wrote its owner: nothing of another owner's is in it yet. Asked again.
        return
    if not may_see(connection, owner):
        raise not_found()
    if description.close_time is None:
        connection.readable[workflow_id] = time.monotonic() + VISIBLE_SECONDS


def forget_visible(connection: Connection, workflow_id: str) -> None:
    """Drop the kept answer for ``workflow_id`` (its workflow was found closed or gone): the next call asks again."""
    connection.readable.pop(workflow_id, None)


def taken_reason(noun: str) -> str:
    """How a start under a taken id is refused, whoever took it: ``a session with this id exists or
    existed (session ids are never reused); choose another id``."""
    return f"a {noun} with this id exists or existed ({noun} ids are never reused); choose another id"


async def claim_id(store: Store | None, workflow_id: str, principal: str) -> bool:
    """Record ``principal`` as the owner of ``workflow_id`` in ``store`` (``claim_owner``) unless
    another owner has it; True when the id is (now) the principal's, False when another owner's.
    Without a store, True (the workflow's own start rules still hold)."""
    if store is None:
        return True
    owner = await asyncio.to_thread(store.claim_owner, workflow_id, principal)
    return owner == principal


class _Unseen(Exception):
    """What ``may_read`` turns into False."""


async def may_read(connection: Connection, workflow_id: str) -> bool:
    """True when workflow ``workflow_id`` exists and the connection's principal may see it
    (``check_visible``); False for a missing one and another owner's alike. Other RPC failures raise."""
    try:
        await check_visible(connection, workflow_id, _Unseen, lambda err: err)
    except _Unseen:
        return False
    return True
