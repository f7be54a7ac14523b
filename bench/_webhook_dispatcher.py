"""A webhook dispatcher in a process of its own, for ``bench.webhook_chaos`` to SIGKILL and start again.

    python -m bench._webhook_dispatcher --address HOST:PORT --database-url URL --task-queue Q
        --target URL --secret SECRET --ready-file PATH

The ``WebhookDispatcher`` the gateway runs (``agentrt serve``), on the store and Temporal server
given, posting to one target, with retries tuned for a receiver that is down for seconds at a time
(``DISPATCHER_OPTIONS``). It watches nothing itself: the watches are in the store. ``--ready-file``
is written once it runs; SIGTERM stops it cleanly (a SIGKILL is the point of the benchmark).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

from agentrt.client import AgentClient
from agentrt.gateway import WebhookDispatcher
from agentrt.store import Store
from agentrt.worker import AgentrtClientPlugin, AgentrtConfig, connect_when_ready

# Polled often, retried soon and often: a receiver outage (seconds) never exhausts a delivery's
# attempts, so every notification owed must arrive (a ``failed`` delivery would count as missing).
DISPATCHER_OPTIONS: dict[str, float] = {
    "poll_seconds": 0.25,
    "request_timeout_seconds": 2.0,
    "max_attempts": 1_000,
    "retry_base_seconds": 0.2,
    "retry_max_seconds": 1.0,
    "log_wait_seconds": 5.0,
}


@dataclass(frozen=True)
class Target:
    url: str
    secret: str
    events: tuple[str, ...] = ("turn.ended", "approval.requested", "run.status")


async def _serve(args: argparse.Namespace) -> None:
    config = AgentrtConfig(temporal_address=args.address, database_url=args.database_url, task_queue=args.task_queue)
    store = Store.open(config.database_url)
    temporal = await connect_when_ready(config.temporal_address, config.namespace, [AgentrtClientPlugin(config, store)])
    client = AgentClient.for_config(temporal, config, store=store)
    options = dict(DISPATCHER_OPTIONS)
    max_attempts = int(options.pop("max_attempts"))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with WebhookDispatcher(store, client, [Target(args.target, args.secret)], max_attempts=max_attempts, **options):
        args.ready_file.write_text(str(os.getpid()))
        await stop.wait()
    store.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench._webhook_dispatcher", description=__doc__.split("\n")[0])
    parser.add_argument("--address", required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--ready-file", type=Path, required=True)
    asyncio.run(_serve(parser.parse_args(argv)))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
