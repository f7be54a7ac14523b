"""Real MCP servers for tests, installed by the tests themselves (no manual step).

- ``@modelcontextprotocol/server-everything`` from npm (``EVERYTHING_VERSION``), installed once
  per machine into a cache directory (``$AGENTRT_TEST_CACHE/npm``, else
  ``~/.cache/agentrt-tests/npm``) under a file lock, so parallel test processes share one
  install: ``everything_stdio(tmp_path)`` runs it over stdio in the OS sandbox, the
  session fixture ``everything_http`` over streamable HTTP on 127.0.0.1.
- ``mcp-server-time`` from PyPI (the dev extras): ``time_stdio(tmp_path)``, in the sandbox.
- ``tests/mcp_probe_server.py``, the SDK's ``MCPServer`` with tools that look at the sandbox,
  ask the user, sleep until cancelled: ``probe_stdio(tmp_path)``, and the session fixture
  ``probe_http`` over streamable HTTP on 127.0.0.1.

To use the fixtures, import them into a ``conftest.py`` (``from tests.mcp_servers import
everything_http, probe_http``). ``server_processes`` finds a test's server processes by pid.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrt.schemas import McpServerConfig

EVERYTHING_PACKAGE = "@modelcontextprotocol/server-everything"
EVERYTHING_VERSION = "2026.8.31"
PROBE_SERVER = Path(__file__).resolve().parent / "mcp_probe_server.py"
# The tools server-everything registers for a client with the elicitation capability (as
# agentrt's), and the ones used by tests.
EVERYTHING_TOOL_COUNT = 15
EVERYTHING_ECHO = "echo"
EVERYTHING_ADD = "get-sum"
EVERYTHING_IMAGE = "get-tiny-image"
EVERYTHING_LONG_RUNNING = "trigger-long-running-operation"
EVERYTHING_ELICITATION = "trigger-elicitation-request"
EVERYTHING_ENV = "get-env"
# How long a server started by a fixture may take to listen (seconds).
LISTEN_TIMEOUT = 30.0

# Loaded into node before server-everything's streamable HTTP transport (``node --import``):
# express listens on every interface (PORT only); this binds 127.0.0.1 instead and prints the
# port it got, so PORT=0 picks a free one without a race.
LOOPBACK_PRELOAD = """\
import net from "node:net";
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  if (typeof port === "number" || (typeof port === "string" && /^[0-9]+$/.test(port))) {
    const callbacks = args.slice(1).filter((arg) => typeof arg === "function");
    this.once("listening", () => process.stderr.write(`AGENTRT_LISTENING ${this.address().port}\\n`));
    return listen.call(this, Number(port), "127.0.0.1", ...callbacks);
  }
  return listen.apply(this, args);
};
"""


def cache_dir() -> Path:
    """Where tests keep what they install: ``$AGENTRT_TEST_CACHE``, else ``~/.cache/agentrt-tests``."""
    configured = os.environ.get("AGENTRT_TEST_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "agentrt-tests"


@functools.cache
def everything_entry() -> Path:
    """The entry script (``dist/index.js``) of server-everything ``EVERYTHING_VERSION``, installed
    with ``npm install`` into the cache on first use; a file lock makes concurrent test
    processes wait for one install."""
    prefix = cache_dir() / "npm"
    prefix.mkdir(parents=True, exist_ok=True)
    package = prefix / "node_modules" / EVERYTHING_PACKAGE
    entry = package / "dist" / "index.js"
    with open(prefix / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (entry.is_file() and _installed_version(package) == EVERYTHING_VERSION):
            npm = shutil.which("npm")
            if npm is None:
                pytest.fail("npm is not on PATH: the MCP tests install @modelcontextprotocol/server-everything with it")
            result = subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), f"{EVERYTHING_PACKAGE}@{EVERYTHING_VERSION}"],
                capture_output=True, text=True, timeout=600, check=False,
            )
            if result.returncode != 0 or not entry.is_file():
                pytest.fail(f"npm install of {EVERYTHING_PACKAGE}@{EVERYTHING_VERSION} failed:\n{result.stdout}\n{result.stderr}")
    return entry


def _installed_version(package: Path) -> str | None:
    try:
        return json.loads((package / "package.json").read_text()).get("version")
    except (OSError, ValueError):
        return None


def _python_paths() -> list[str]:
    """What the sandboxed interpreter reads: its virtual environment and its installation."""
    return sorted({sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent.parent)})


def everything_stdio(tmp_path: Path, name: str = "everything", **fields: Any) -> McpServerConfig:
    """server-everything over stdio (``node <entry> stdio``) in the sandbox, its directory
    ``tmp_path/name``; ``fields`` override the configuration's."""
    entry = everything_entry()
    node = _node()
    config: dict[str, Any] = {
        "name": name, "command": str(node), "args": [str(entry), "stdio"], "cwd": str(tmp_path / name),
        # node_modules (the package and its dependencies), and node's installation outside /usr.
        "read_paths": [str(entry.parents[3]), *([] if node.is_relative_to("/usr") else [str(node.parent.parent)])],
    }
    return McpServerConfig(**(config | fields))


def _node() -> Path:
    found = shutil.which("node")
    if found is None:
        pytest.fail("node is not on PATH: the MCP tests run @modelcontextprotocol/server-everything with it")
    return Path(found).resolve()


def time_stdio(tmp_path: Path, name: str = "time", **fields: Any) -> McpServerConfig:
    """mcp-server-time (``python -m mcp_server_time``, this interpreter) in the sandbox."""
    config: dict[str, Any] = {
        "name": name, "command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
        "cwd": str(tmp_path / name), "read_paths": _python_paths(),
    }
    return McpServerConfig(**(config | fields))


def probe_stdio(tmp_path: Path, name: str = "probe", **fields: Any) -> McpServerConfig:
    """``tests/mcp_probe_server.py`` over stdio in the sandbox, its directory ``tmp_path/name``."""
    config: dict[str, Any] = {
        "name": name, "command": sys.executable, "args": [str(PROBE_SERVER)], "cwd": str(tmp_path / name),
        "read_paths": [*_python_paths(), str(PROBE_SERVER)],
    }
    return McpServerConfig(**(config | fields))


@pytest.fixture(scope="session")
def everything_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServerConfig]:
    """server-everything over streamable HTTP, listening on 127.0.0.1 (a free port) for the test
    session: ``McpServerConfig`` named ``everything_http`` with its ``url``."""
    entry = everything_entry()
    folder = tmp_path_factory.mktemp("everything-http")
    preload = folder / "loopback.mjs"
    preload.write_text(LOOPBACK_PRELOAD)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder), "PORT": "0"}
    with _ServerProcess([str(_node()), "--import", preload.as_uri(), str(entry), "streamableHttp"], env, folder) as (process, log):
        port = _wait_for(log, re.compile(r"AGENTRT_LISTENING (\d+)"), process)
        yield McpServerConfig(name="everything_http", url=f"http://127.0.0.1:{port}/mcp")


@pytest.fixture(scope="session")
def probe_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServerConfig]:
    """``tests/mcp_probe_server.py`` over streamable HTTP on 127.0.0.1 for the test session."""
    folder = tmp_path_factory.mktemp("probe-http")
    port = _free_port()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder)}
    with _ServerProcess([sys.executable, str(PROBE_SERVER), "http", str(port)], env, folder) as (process, log):
        _wait_for(log, re.compile(r"Uvicorn running on"), process)
        yield McpServerConfig(name="probe_http", url=f"http://127.0.0.1:{port}/mcp")


class _ServerProcess:
    """A server process for a fixture, its output in ``folder/server.log``; stopped on exit."""

    def __init__(self, argv: list[str], env: dict[str, str], folder: Path) -> None:
        self.argv, self.env, self.folder = argv, env, folder

    def __enter__(self) -> tuple[subprocess.Popen[bytes], Path]:
        self.log = self.folder / "server.log"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                self.argv, cwd=self.folder, env=self.env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )
        return self.process, self.log

    def __exit__(self, *exc_info: object) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def _wait_for(log: Path, pattern: re.Pattern[str], process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + LISTEN_TIMEOUT
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if match := pattern.search(text):
            return match.group(1) if pattern.groups else match.group(0)
        if process.poll() is not None:
            pytest.fail(f"the server exited with status {process.returncode}:\n{text}")
        time.sleep(0.05)
    pytest.fail(f"the server did not listen within {LISTEN_TIMEOUT} s:\n{log.read_text(errors='replace')}")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_processes(marker: str, root: int | None = None) -> list[int]:
    """Pids of the live processes under ``root`` (default: this process) whose command line
    contains ``marker``: a test's MCP server processes (``bwrap``, and the server inside)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":  # a zombie has exited already
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found = []
    pending = list(children.get(os.getpid() if root is None else root, []))
    while pending:
        pid = pending.pop()
        pending.extend(children.get(pid, []))
        try:
            cmdline = (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(pid)
    return sorted(found)
