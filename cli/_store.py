"""`agentrt store ...`: the application store's schema, migrated on its own (what a deployment's
one-shot runs before the new release's workers and gateway start)."""

from __future__ import annotations

import asyncio
import json

import typer
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError

from agentrt.cli._common import load_config, run_command
from agentrt.schemas import StoreUnavailable
from agentrt.store import Store, database_url, head_revision, schema_revision

store_app = typer.Typer(help="The application store: its schema, migrated on its own.", no_args_is_help=True)


@store_app.command("migrate")
def store_migrate(as_json: bool = typer.Option(False, "--json", help="One JSON object: url, from, to.")) -> None:
    """Bring the store (\\[store] url / AGENTRT_DATABASE_URL) to this release's schema and say from which
    revision. Safe to run again and from several processes at once (migrations take a lock); workers and
    the gateway would migrate it too when they start, so a deployment runs this first to stop a rollout
    on a failed migration instead of crash-looping every pod."""
    config = load_config()
    url = database_url(config.database_url)
    try:
        shown = make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        typer.echo("error: the store URL ([store] url / AGENTRT_DATABASE_URL) is not a database URL", err=True)
        raise typer.Exit(2) from None

    async def go() -> tuple[str | None, str]:
        def migrate() -> tuple[str | None, str]:
            try:
                before = schema_revision(url)
                Store.open(url).close()
                return before, schema_revision(url) or head_revision()
            except DBAPIError as err:
                reason = str(err.orig or err).strip().splitlines()[0][:300]
                raise StoreUnavailable(shown, reason) from None

        return await asyncio.to_thread(migrate)

    before, after = run_command(go)
    if as_json:
        typer.echo(json.dumps({"url": shown, "from": before, "to": after}))
    elif before == after:
        typer.echo(f"agentrt store {shown}: schema is current (revision {after})")
    else:
        typer.echo(f"agentrt store {shown}: schema migrated from revision {before or 'none'} to {after}")
