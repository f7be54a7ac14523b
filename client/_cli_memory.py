"""`agentrt memory ...`: the principal's memories, and accepting or rejecting what sessions propose."""

from __future__ import annotations

import json
from enum import Enum
from typing import Any, Callable, Optional

import typer

from agentrt.client._cli_common import load_config, run_command
from agentrt.client._runtime import runtime
from agentrt.schemas import MemoryRecord

memory_app = typer.Typer(
    help="Memories your sessions wrote: list them, accept or reject the proposed ones.", no_args_is_help=True
)


class StatusFilter(str, Enum):
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
    status: StatusFilter = typer.Option(StatusFilter.all, "--status", help="Only memories with this status."),
    scope: Optional[ScopeFilter] = typer.Option(None, "--scope", help="Only memories of this scope."),
    limit: int = typer.Option(200, "--limit", min=1, max=10_000, help="Show at most this many memories."),
    as_json: bool = typer.Option(False, "--json", help="One JSON array of the memories."),
) -> None:
    """List your memories (as $AGENTRT_PRINCIPAL): proposed ones wait for `agentrt memory accept|reject ID`."""
    config = load_config()

    async def go() -> None:
        async with runtime(config, embed_if_missing=False, ensure_worker=False) as rt:
            records = await rt.client.memories(
                None if status is StatusFilter.all else status.value,  # type: ignore[arg-type]
                scope.value if scope else None,  # type: ignore[arg-type]
                limit=limit,
            )
        if as_json:
            typer.echo(json.dumps([_record_json(r) for r in records]))
            return
        if not records:
            typer.echo("no memories")
        for r in records:
            text = " ".join(r.text.split())
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


memory_app.command("accept")(_decision_command("accept"))
memory_app.command("reject")(_decision_command("reject"))
