"""`agentrt replay`: replay recorded histories (files, or the runs of a namespace) against the
workflow code installed here, and fail on any that does not replay: the check before a deploy."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Optional

import typer

from agentrt.cli._common import load_config, run_command
from agentrt.cli._render import printable
from agentrt.schemas import ConfigurationError
from agentrt.worker import (
    DEFAULT_REPLAY_QUERY,
    HistorySource,
    ReplayOutcome,
    histories_in_files,
    histories_in_namespace,
    quiet_runtime,
    replay_histories,
)


def replay(
    paths: Optional[list[Path]] = typer.Argument(
        None, help="History files (`temporal workflow show --output json`, named by workflow id) or directories of them. "
        "None: the runs of the configured namespace that --query finds.",
    ),
    query: str = typer.Option(DEFAULT_REPLAY_QUERY, "--query", "-q", help="The visibility query that picks the runs of the namespace."),
    limit: int = typer.Option(1000, "--limit", min=1, max=100_000, help="Replay at most this many runs of the namespace."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object: replayed, failed, and every outcome."),
) -> None:
    """Replay workflow histories against the workflow code installed here (with the worker's own
    plugin: its converter, codec keys and payload storage) and say which do not replay, naming the
    workflow and the first event and command that differ. Exit status 0 when every history
    replays, 1 when one does not (deploying this code would fail that run), 2 on an error. Put it
    in CI before a deploy, over exported histories or the live namespace (docs/deployment.md)."""
    config = load_config()

    async def go() -> list[ReplayOutcome]:
        from temporalio.worker import Replayer

        from agentrt.worker import AgentrtPlugin, open_store

        with open_store(config) as store:
            replayer = Replayer(workflows=[], plugins=[AgentrtPlugin(config, store)], runtime=quiet_runtime())
            if paths:
                return await replay_histories(_files(paths), replayer)
            from agentrt.cli._runtime import runtime

            async with runtime(config, embed_if_missing=False, ensure_worker=False) as rt:
                return await replay_histories(histories_in_namespace(rt.client.temporal, query, limit), replayer)

    outcomes = run_command(go)
    failed = [o for o in outcomes if not o.replayed]
    if as_json:
        typer.echo(json.dumps({
            "replayed": len(outcomes) - len(failed), "failed": len(failed), "outcomes": [o.as_json() for o in outcomes],
        }))
    else:
        for o in failed:
            kind = "non-determinism" if o.nondeterminism else "failed"
            typer.echo(f"{printable(o.workflow_id)}  {o.workflow_type}  {kind}: {printable(o.error or '')}  ({printable(o.origin)})")
        typer.echo(f"{len(outcomes) - len(failed)} of {len(outcomes)} histories replay" + (f"; {len(failed)} do not" if failed else ""))
    raise typer.Exit(1 if failed else 0)


async def _files(paths: list[Path]) -> AsyncIterator[HistorySource]:
    found = False
    for source in histories_in_files(paths):
        found = True
        yield source
    if not found:  # a check before a deploy that read nothing must not pass
        raise ConfigurationError(
            f"no history in {', '.join(printable(str(p)) for p in paths)}: export some with `temporal workflow show --output json`"
        )
