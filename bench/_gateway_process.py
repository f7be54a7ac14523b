"""A benchmark's HTTP gateway in a process of its own, so its memory and CPU can be read from /proc/<pid>.

    AGENTRT_CONFIG=agentrt.toml AGENTRT_GATEWAY_TOKEN=... python -m bench._gateway_process
        --port-file PATH --workspace-root DIR [--port 0] [--max-streams-per-principal 16]

The gateway ``agentrt serve`` runs (``create_app`` on an ``AgentClient`` of the configuration's
server, task queue and store, under uvicorn on 127.0.0.1, on ``--port``: 0, the default, is any free port; a fixed one lets a
gateway started again after a kill answer its clients where the last one did), with two differences:
its ``StreamHub`` is made here and handed to ``create_app``, so ``GET /bench/hub`` (no
authentication, loopback only) can answer what it costs (``store_reads``, ``pollers``); and
``--max-streams-per-principal`` is a parameter (``agentrt serve`` keeps ``create_app``'s default).
The port is written to ``--port-file`` once it listens. SIGTERM stops it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

import uvicorn

from agentrt.client import AgentClient
from agentrt.gateway import StreamHub, create_app
from agentrt.worker import AgentrtClientPlugin, AgentrtConfig, connect_when_ready, open_store


async def _serve(args: argparse.Namespace) -> None:
    config = AgentrtConfig.load()
    store = open_store(config)
    temporal = await connect_when_ready(config.temporal_address, config.namespace, [AgentrtClientPlugin(config, store)])
    client = AgentClient.for_config(temporal, config, store=store)
    hub = StreamHub(store)
    app = create_app(
        client, config.gateway, hub=hub, workspace_root=args.workspace_root, profiles=config.profiles,
        max_streams_per_principal=args.max_streams_per_principal,
    )

    @app.get("/bench/hub", include_in_schema=False)
    async def hub_counters() -> dict[str, int]:
        return {"store_reads": hub.store_reads, "pollers": hub.pollers}

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning", server_header=False))
    serving = asyncio.ensure_future(server.serve())
    while not server.started and not serving.done():
        await asyncio.sleep(0.05)
    if server.started:
        port = server.servers[0].sockets[0].getsockname()[1]
        ready = args.port_file.with_suffix(".tmp")
        ready.write_text(str(port))
        ready.rename(args.port_file)
        print(f"gateway {os.getpid()} listening on http://127.0.0.1:{port}", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await asyncio.wait([serving, asyncio.ensure_future(stop.wait())], return_when=asyncio.FIRST_COMPLETED)
    server.should_exit = True
    await serving
    await hub.aclose()
    store.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench._gateway_process", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--workspace-root", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--max-streams-per-principal", type=int, default=16)
    args = parser.parse_args(argv)
    code = 0
    try:
        asyncio.run(_serve(args))
    except BaseException as err:  # noqa: BLE001 - report and exit without CPython finalization
        print(f"gateway {os.getpid()} exiting: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
