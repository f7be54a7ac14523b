"""Finding or starting what a CLI command needs: a Temporal server, a worker, the store."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator, TextIO

from temporalio.client import Client

from agentrt.client import AgentClient, connect
from agentrt.cli._encryption import with_home_keys
from agentrt.cli._temporal_ui import ui_port_for, ui_url_of
from agentrt.schemas import ServerUnavailable
from agentrt.store import Store, agentrt_home
from agentrt.worker import (
    DEFAULT_ADDRESS,
    AgentrtClientPlugin,
    AgentrtConfig,
    DevServer,
    flush_telemetry,
    free_port,
    open_store,
    port_is_open,
)


def state_dir() -> Path:
    """Where the CLI keeps the embedded server's database and the logs: ``$AGENTRT_HOME``."""
    return agentrt_home()


@dataclass
class Runtime:
    """What a command runs with. ``config.temporal_address`` is the server's real address (an
    embedded server may be on another port than the configured one); ``ui_url`` is the embedded
    server's UI, None for a server found running (``temporal_ui_url`` looks that one up);
    ``worker_in_process``: whether this command runs a worker of its own (none polled the queue)."""

    client: AgentClient
    config: AgentrtConfig
    store: Store
    embedded_server: DevServer | None
    ui_url: str | None
    worker_in_process: bool = False

    async def temporal_ui_url(self) -> str | None:
        """The UI of the server this runtime uses, when it can be known (``ui_url_of``)."""
        if self.ui_url is not None:
            return self.ui_url
        return await asyncio.to_thread(ui_url_of, self.config.temporal_address)


def _log_worker_to_file() -> Path:
    """Send the in-process worker's logs (activity retries and their tracebacks) to a file, not the terminal."""
    state_dir().mkdir(parents=True, exist_ok=True)
    path = state_dir() / "worker.log"
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("temporalio", "agentrt"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.propagate = False
    return path


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host or "localhost", int(port)


async def _connect(config: AgentrtConfig, store: Store) -> Client:
    # An in-process worker runs on this client (build_worker adds the worker's part): one set of payload drivers.
    return await connect(config.temporal_address, config.namespace, plugin=AgentrtClientPlugin(config, store))


@asynccontextmanager
async def runtime(
    config: AgentrtConfig,
    *,
    principal: str | None = None,
    embed_if_missing: bool = True,
    ensure_worker: bool = True,
    default_keys: bool = False,
    notice: TextIO = sys.stderr,
) -> AsyncIterator[Runtime]:
    """A connected client, plus an embedded dev server and an in-process worker when none exist.

    The embedded server is started only for the default address (``localhost:7233``): an
    explicitly configured address that does not answer raises ``ServerUnavailable``. When
    something that is not a Temporal server holds the default port, the embedded server runs
    on a free port instead, with its history in memory (the file of the default one may be in
    use). The UI is on the frontend port + 1000, or a free port when that is taken
    (``ui_port_for``); ``notice`` is told the address and the UI.

    ``default_keys``: when this runs the worker itself, encryption is on (``config.encryption``)
    and no codec keys are configured, use the machine's own (``$AGENTRT_HOME/codec-keys.toml``,
    made on first use; ``notice`` is told). With a worker already polling, the configuration
    stays as it is: that deployment decides.
    """
    async with AsyncExitStack() as stack:
        store = open_store(config)
        stack.callback(store.close)
        # Last out: the command's own spans (with [telemetry] on), before `agentrt` exits without atexit handlers.
        stack.push_async_callback(asyncio.to_thread, flush_telemetry)
        host, port = _host_port(config.temporal_address)
        embeddable = embed_if_missing and config.temporal_address == DEFAULT_ADDRESS
        server: DevServer | None = None
        temporal: Client | None = None
        why = ""
        if port_is_open(host if host != "localhost" else "127.0.0.1", port):
            try:
                temporal = await _connect(config, store)
            except RuntimeError as err:
                if not embeddable:
                    raise ServerUnavailable(config.temporal_address, str(err)) from err
                why = f"{config.temporal_address} answers, but not as a Temporal server"
                free = free_port()
                server = DevServer(port=free, ui_port=ui_port_for(free), log_file=state_dir() / "temporal.log")
        elif not embeddable:
            raise ServerUnavailable(config.temporal_address, "connection refused")
        else:
            why = f"no Temporal server at {config.temporal_address}"
            server = DevServer(
                port=port, ui_port=ui_port_for(port), db_file=state_dir() / "temporal.db",
                log_file=state_dir() / "temporal.log",
            )
        if server is not None:
            await server.start()
            stack.callback(server.stop)
            history = f"in {server.db_file}" if server.db_file else "in memory"
            print(
                f"agentrt: {why}; started an embedded one at {server.address} for this run "
                f"(history {history}, UI {server.ui_url})",
                file=notice,
            )
            config = dataclasses.replace(config, temporal_address=server.address)
            try:
                temporal = await _connect(config, store)
            except RuntimeError as err:
                raise ServerUnavailable(config.temporal_address, str(err)) from err
        assert temporal is not None
        client = AgentClient.for_config(temporal, config, principal=principal, store=store)
        worker_in_process = ensure_worker and (server is not None or not await client.has_worker())
        keyed = with_home_keys(config, notice) if worker_in_process and default_keys else config
        if keyed is not config:
            config = keyed
            temporal = await _connect(config, store)  # the plugin gives the store the keys' cipher
            client = AgentClient.for_config(temporal, config, principal=principal, store=store)
        if worker_in_process:
            # Imported here: a command that finds a worker running never loads the activities and workflows.
            from agentrt.worker import running_worker

            log_file = _log_worker_to_file()
            print(
                f"agentrt: no worker polls task queue {config.task_queue!r}; running one in this process (log: {log_file})",
                file=notice,
            )
            await stack.enter_async_context(running_worker(temporal, config, store))
            if config.tool_task_queue and config.tool_task_queue != config.task_queue:
                # Its sessions send tool calls there: serve them too, or they would wait for a tools worker.
                await stack.enter_async_context(running_worker(temporal, config, store, role="tools"))
            if config.model_task_queue and config.model_task_queue != config.task_queue:
                # And model calls there: serve them too.
                await stack.enter_async_context(running_worker(temporal, config, store, role="providers"))
        yield Runtime(
            client=client, config=config, store=store, embedded_server=server, ui_url=server.ui_url if server else None,
            worker_in_process=worker_in_process,
        )


__all__ = ["DEFAULT_ADDRESS", "Runtime", "runtime", "state_dir"]
