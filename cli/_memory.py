"""`agentrt memory ...`: the principal's memories, and accepting or rejecting what sessions propose."""

from __future__ import annotations

import asyncio
import json
from enum import Enum
from typing import Any, Callable, Optional

import typer

from agentrt.cli._common import load_config, run_command
from agentrt.client import default_principal
from agentrt.cli._render import printable
from agentrt.cli._runtime import runtime
from agentrt.schemas import MemoryNotFound, MemoryRecord
from agentrt.worker import open_store

memory_app = typer.Typer(
    help="Memories your sessions wrote: list them, accept or reject the proposed ones.", no_args_is_help=True
)


class StatusFilter(str, Enum):
    live = "live"
    proposed = "proposed"
    accepted = "accepted"
    rejected = "rejected"
    superseded = "superseded"
    all = "all"


class ScopeFilter(str, Enum):
    session = "session"
    workspace = "workspace"
    user = "user"


def _record_json(record: MemoryRecord) -> dict[str, Any]:
    return record.model_dump(mode="json")


@memory_app.command("list")
def memory_list(
    status: StatusFilter = typer.Option(
        StatusFilter.live, "--status", help="Only memories with this status (live: proposed and accepted; all: any)."
    ),
    scope: Optional[ScopeFilter] = typer.Option(None, "--scope", help="Only memories of this scope."),
    limit: int = typer.Option(200, "--limit", min=1, max=10_000, help="Show at most this many memories."),
    as_json: bool = typer.Option(False, "--json", help="One JSON array of the memories."),
) -> None:
    """List your memories (as $AGENTRT_PRINCIPAL): proposed ones wait for `agentrt memory accept|reject ID`."""
    config = load_config()

    async def go() -> None:
        # The store alone: listing needs no server.
        with open_store(config) as store:
            records = await asyncio.to_thread(
                store.memories,
                default_principal(),
                status=None if status is StatusFilter.all else ("proposed", "accepted") if status is StatusFilter.live else status.value,
                scope=scope.value if scope else None,
                limit=limit,
            )
        if as_json:
            typer.echo(json.dumps([_record_json(r) for r in records]))
            return
        if not records:
            typer.echo("no memories")
        for r in records:
            text = printable(" ".join(r.text.split()))
            text = text if len(text) <= 80 else text[:79] + "…"
            typer.echo(f"{r.memory_id:<14} {r.status:<10} {r.scope:<9} {r.key:<24} {r.session_id:<14} {text}")

    run_command(go)


def _decision_command(decision: str) -> Callable[..., None]:
    def command(
        memory_id: str = typer.Argument(..., help="A memory id (`agentrt memory list --status proposed`)."),
        reason: Optional[str] = typer.Option(None, "--reason", help="Recorded with the decision."),
        as_json: bool = typer.Option(False, "--json", help="Print the memory as stored after the decision."),
    ) -> None:
        config = load_config()

        async def go() -> None:
            async with runtime(config, embed_if_missing=False, ensure_worker=False) as rt:
                record = await rt.client.decide_memory(memory_id, decision, reason)
            if as_json:
                typer.echo(json.dumps(_record_json(record)))
                return
            typer.echo(f"memory {record.memory_id} ({record.scope} {record.key}) is {record.status}")

        run_command(go)

    verb = "Accept" if decision == "accept" else "Reject"
    reach = "from then on your sessions in its scope see it" if decision == "accept" else "it never reaches a context"
    command.__doc__ = (
        f"{verb} a memory a session proposed; {reach}. The proposing session records the decision "
        "(an archived session's memory is decided in the store, with no session event)."
    )
    return command


@memory_app.command("show")
def memory_show(
    memory_id: str = typer.Argument(..., help="A memory id (`agentrt memory list`)."),
    as_json: bool = typer.Option(False, "--json", help="Print the memory as one JSON object."),
) -> None:
    """Show one of your memories whole (its text with invisible and control characters escaped): read it before you accept it."""
    config = load_config()

    async def go() -> None:
        with open_store(config) as store:
            record = await asyncio.to_thread(store.memory, memory_id)
        if record is None or record.owner != default_principal():
            raise MemoryNotFound(memory_id)
        if as_json:
            typer.echo(json.dumps(_record_json(record)))
            return
        typer.echo(
            f"memory {record.memory_id} · {record.status} · {record.scope} · key {record.key}\n"
            f"written by session {record.session_id} in {printable(record.workspace)} at {record.created_at.isoformat()}\n"
            + (f"decided by {record.decided_by} at {record.decided_at.isoformat() if record.decided_at else '?'}: {printable(record.reason or '')}\n" if record.decided_by else "")
            + "---\n" + printable(record.text, keep_newlines=True)
        )

    run_command(go)


@memory_app.command("forget")
def memory_forget(
    memory_id: str = typer.Argument(..., help="A memory id (`agentrt memory list`)."),
    as_json: bool = typer.Option(False, "--json", help="Print the forgotten memory as one JSON object."),
) -> None:
    """Delete one of your memories (any status): no session sees it from then on, and it no longer counts toward your limits."""
    config = load_config()

    async def go() -> None:
        with open_store(config) as store:
            record = await asyncio.to_thread(store.forget_memory, memory_id, default_principal())
        if as_json:
            typer.echo(json.dumps(_record_json(record)))
        else:
            typer.echo(f"memory {record.memory_id} ({record.scope} {record.key}) is forgotten")

    run_command(go)


memory_app.command("accept")(_decision_command("accept"))
memory_app.command("reject")(_decision_command("reject"))
