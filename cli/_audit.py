"""`agentrt audit`: the audit log, every act of a principal (approve, deny, edit, cancel, pause,
reconcile, raise a budget, decide a memory ...): who, what, on what, when, with which reason.
Read from the store alone: no server is needed."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime, timedelta, timezone
from typing import Optional

import typer

from agentrt.cli._common import load_config, run_command
from agentrt.cli._render import printable
from agentrt.client import default_principal
from agentrt.schemas import AuditEntry
from agentrt.store import MAX_AUDIT_LIMIT
from agentrt.worker import open_store

_AGO = re.compile(r"(\d{1,9})([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(value: str, now: datetime) -> datetime:
    """``--since``: an ISO 8601 time (UTC when it names no zone) or a span before ``now``
    (``90s``, ``30m``, ``12h``, ``7d``). Raises ``typer.BadParameter`` for anything else."""
    ago = _AGO.fullmatch(value.strip())
    if ago is not None:
        return now - timedelta(**{_UNITS[ago.group(2)]: int(ago.group(1))})
    try:
        at = datetime.fromisoformat(value.strip())
    except ValueError:
        raise typer.BadParameter(f"{value!r} is neither an ISO 8601 time nor a span such as 30m, 12h or 7d") from None
    return at if at.tzinfo is not None else at.replace(tzinfo=timezone.utc)


def audit_line(entry: AuditEntry) -> str:
    """``2026-12-06 09:00:00 UTC  ops  approve  session s1 req-1  (operator)  reason: looks fine``"""
    at = entry.at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    about = entry.detail.get("request_id") or entry.detail.get("turn_id") or entry.detail.get("node_id")
    target = f"{entry.target_kind} {entry.target_id}" + (f" {about}" if isinstance(about, str) else "")
    standing = f"  ({entry.detail['as']})" if entry.detail.get("as") in ("operator", "temporal") else ""
    reason = f"  reason: {' '.join(entry.reason.split())[:300]}" if entry.reason else ""
    return printable(f"{at}  {entry.principal}  {entry.action}  {target}{standing}{reason}")


def audit(
    principal: Optional[str] = typer.Option(None, "--principal", help="Only acts of this principal."),
    target: Optional[str] = typer.Option(None, "--target", help="Only acts on this session, task, graph or memory id."),
    action: Optional[str] = typer.Option(None, "--action", help="Only this act (approve, deny, edit, cancel, ...)."),
    since: Optional[str] = typer.Option(
        None, "--since", help="Only acts at or after this time: ISO 8601 (UTC unless it says) or a span (30m, 12h, 7d)."
    ),
    limit: int = typer.Option(100, "--limit", min=1, max=MAX_AUDIT_LIMIT, help="Show at most this many acts."),
    as_json: bool = typer.Option(False, "--json", help="One JSON array of the acts."),
) -> None:
    """List the audit log, newest first: every act of a principal on a session, task, graph or memory
    (approve, deny, edit, cancel, archive, reconcile, raise a budget, pause, decide a memory, ...),
    with who, when and the reason given, whatever carried it (client, CLI, HTTP or the Temporal UI).

    An operator (\\[principals] operators) reads every act; any other principal (AGENTRT_PRINCIPAL, or
    the user's name) only the acts on what it owns, as AgentClient.audit answers."""
    config = load_config()
    reader = default_principal()
    owner = None if reader in config.operators else reader
    after = parse_since(since, datetime.now(timezone.utc)) if since is not None else None

    async def go() -> list[AuditEntry]:
        with open_store(config) as store:
            return await asyncio.to_thread(
                store.audit, principal=principal, target=target, action=action, owner=owner, since=after, limit=limit
            )

    entries = run_command(go)
    if as_json:
        typer.echo(json.dumps([e.model_dump(mode="json") for e in entries]))
    elif not entries:
        typer.echo("no acts recorded")
    else:
        for entry in entries:
            typer.echo(audit_line(entry))
