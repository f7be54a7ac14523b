"""`agentrt quota ...`: a tenant's quotas, today's use and the operators' raises (`show`), and an
operator's raise of a quota with a reason (`raise`), recorded in the store."""

from __future__ import annotations

import json
from typing import Optional

import typer

from agentrt.cli._common import load_config, run_command
from agentrt.cli._runtime import runtime
from agentrt.schemas import QuotaView

quota_app = typer.Typer(
    help="Tenant quotas: concurrent sessions, and tokens, dollars and tool calls per UTC day.", no_args_is_help=True
)


def _limit(value: float | None) -> str:
    return "unbounded" if value is None else f"{value:,.6g}"


def _print_view(view: QuotaView) -> None:
    limits, usage = view.limits, view.usage
    typer.echo(f"tenant {view.tenant} (owners: {', '.join(view.owners)})")
    rows: list[tuple[str, float | None, float | None]] = [
        ("concurrent_sessions", limits.concurrent_sessions, usage.sessions),
        ("tokens_per_day", limits.tokens_per_day, usage.tokens),
        ("cost_usd_per_day", limits.cost_usd_per_day, usage.cost_usd),
        ("tool_calls_per_day", limits.tool_calls_per_day, usage.tool_calls),
    ]
    for name, limit, used in rows:
        shown = "?" if used is None else f"{used:,.6g}"
        typer.echo(f"  {name:<20} used {shown:>12} of {_limit(limit)}")
    typer.echo(f"  daily quotas reset at {view.resets_at.strftime('%Y-%m-%dT%H:%M:%SZ')} (UTC midnight)")
    for r in view.raises:
        typer.echo(f"  raised {r.quota} to {r.limit:,.6g} by {r.principal} at {r.at.strftime('%Y-%m-%dT%H:%M:%SZ')}: {r.reason}")


@quota_app.command("show")
def quota_show(
    tenant: Optional[str] = typer.Argument(None, help="A tenant (default: yours, from $AGENTRT_PRINCIPAL and \\[tenants])."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object: limits, usage, resets_at, raises."),
) -> None:
    """Show a tenant's quotas: limits after raises, what it used today (UTC), when they reset and who raised them."""
    config = load_config()

    async def go() -> None:
        async with runtime(config, embed_if_missing=False, ensure_worker=False) as rt:
            view = await rt.client.quotas.show(tenant)
        if as_json:
            typer.echo(json.dumps(view.model_dump(mode="json")))
            return
        _print_view(view)

    run_command(go)


@quota_app.command("raise")
def quota_raise(
    tenant: str = typer.Argument(..., help="The tenant (\\[tenants] maps owners to tenants; an owner not mapped is its own)."),
    reason: str = typer.Option(..., "--reason", help="Why (recorded with who and when)."),
    tokens_per_day: Optional[int] = typer.Option(None, "--tokens-per-day", min=0, help="Input plus output tokens per UTC day."),
    cost_usd_per_day: Optional[float] = typer.Option(None, "--cost-usd-per-day", min=0, help="US dollars per UTC day."),
    tool_calls_per_day: Optional[int] = typer.Option(None, "--tool-calls-per-day", min=0, help="Tool calls per UTC day."),
    concurrent_sessions: Optional[int] = typer.Option(None, "--concurrent-sessions", min=0, help="Sessions open at once."),
    as_json: bool = typer.Option(False, "--json", help="Print the tenant's quotas after the raise as JSON."),
) -> None:
    """Raise a tenant's quota (operators only, as $AGENTRT_PRINCIPAL): the new limit holds from now on, recorded with a reason."""
    config = load_config()

    async def go() -> None:
        async with runtime(config, embed_if_missing=False, ensure_worker=False) as rt:
            view = await rt.client.quotas.raise_quota(
                tenant, reason=reason, tokens_per_day=tokens_per_day, cost_usd_per_day=cost_usd_per_day,
                tool_calls_per_day=tool_calls_per_day, concurrent_sessions=concurrent_sessions,
            )
        if as_json:
            typer.echo(json.dumps(view.model_dump(mode="json")))
            return
        _print_view(view)

    run_command(go)
