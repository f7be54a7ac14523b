"""`agentrt run`, `demo` and `dev` as a newcomer runs them, in real processes: with the usual
ports (7233, 8233) held by other programs, and against a server `agentrt dev` runs in another
shell. Each process gets its own AGENTRT_HOME and no other agentrt setting."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentrt.worker import free_port
from tests.cli._serving import serving
from tests.e2e._support import write_script


def user_env(home: Path, **settings: str) -> dict[str, str]:
    """A user's environment: no agentrt setting but AGENTRT_HOME, the principal and ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTRT_")}
    return {**env, "AGENTRT_HOME": str(home), "AGENTRT_PRINCIPAL": "alice", **settings}


async def agentrt(*args: str, env: dict[str, str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentrt.cli", *args, cwd=cwd, env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout)
    return subprocess.CompletedProcess(list(args), process.returncode or 0, stdout.decode(), stderr.decode())


@contextmanager
def held_by_another_program(port: int) -> Iterator[None]:
    """An HTTP server that is not Temporal on 127.0.0.1:``port``, as ``python -m http.server PORT``
    would be; the test is skipped when something here holds the port already."""
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), BaseHTTPRequestHandler)
    except OSError as err:
        pytest.skip(f"port {port} is in use here already ({err})")
    with serving(server):
        yield


async def get_json(url: str) -> Any:
    """``url``'s JSON, asked again while nothing listens there yet (a server still starting)."""
    def get() -> Any:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())

    while True:
        try:
            return await asyncio.to_thread(get)
        except urllib.error.URLError as err:
            if not isinstance(err.reason, ConnectionRefusedError):
                raise
        await asyncio.sleep(0.2)


async def line_with(stream: asyncio.StreamReader, text: str, seen: list[str]) -> str:
    """The first line of ``stream`` holding ``text`` (lines read are appended to ``seen``)."""
    while True:
        line = (await stream.readline()).decode()
        if not line:
            raise AssertionError(f"the process ended before printing {text!r}:\n{''.join(seen)}")
        seen.append(line)
        if text in line:
            return line


async def test_run_with_7233_and_8233_taken_starts_its_server_on_free_ports_and_prints_them(
    workspace: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "x.txt", "content": "x"}}]},
        {"text": "wrote x.txt"},
    ])
    session_id = f"ports-{uuid.uuid4().hex[:8]}"
    with held_by_another_program(7233), held_by_another_program(8233):
        run = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentrt.cli", "run", "write x", "-w", str(workspace), "--script", script,
            "--approve", "ask", "--session-id", session_id, cwd=tmp_path, env=user_env(home),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert run.stderr is not None
            notice = await asyncio.wait_for(line_with(run.stderr, "started an embedded one at", []), 120)
            found = re.search(r"started an embedded one at (\S+) for this run \(history in memory, UI (http://\S+)\)", notice)
            assert found, notice
            address, ui_url = found.groups()
            assert not address.endswith(":7233") and not ui_url.endswith(":8233"), notice

            # The UI printed is the one that answers, and another shell reaches the server at the
            # address printed: it decides the approval the run waits for (no terminal input).
            settings = await asyncio.wait_for(get_json(f"{ui_url}/api/v1/settings"), 60)
            assert "Version" in settings

            async def approved() -> None:
                while (await agentrt(
                    "session", "approve", session_id, "req-1", env=user_env(home, AGENTRT_TEMPORAL_ADDRESS=address), cwd=tmp_path
                )).returncode != 0:
                    await asyncio.sleep(0.5)

            await asyncio.wait_for(approved(), 120)
            stdout, _ = await asyncio.wait_for(run.communicate(), 120)
        finally:
            if run.returncode is None:
                run.kill()
                await run.wait()

    assert run.returncode == 0
    assert "wrote x.txt" in stdout.decode()
    assert (workspace / "x.txt").read_text() == "x"


@dataclass
class Dev:
    """An `agentrt dev` process: its home, the address and UI it serves, what it printed up to
    "worker polling"."""

    home: Path
    address: str
    ui_url: str
    printed: str


@asynccontextmanager
async def agentrt_dev(home: Path) -> AsyncIterator[tuple[str, str, str]]:
    """`agentrt dev` as a process in ``home`` (its AGENTRT_HOME and working directory), on free ports,
    until its worker polls: its Temporal address, its UI's URL and what it printed by then. Stopped
    with SIGTERM, as Ctrl-C would, when the block ends."""
    # An explicit UI port, not --port + 1000: only agentrt dev itself can tell where it is.
    port, ui_port = free_port(), free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agentrt.cli", "dev", "--port", str(port), "--ui-port", str(ui_port),
        cwd=home, env=user_env(home), stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE, start_new_session=True,
    )
    assert process.stderr is not None
    seen: list[str] = []
    drain: asyncio.Task[bytes] | None = None
    try:
        await asyncio.wait_for(line_with(process.stderr, "worker polling", seen), 120)
        drain = asyncio.ensure_future(process.stderr.read())  # its log goes on: keep the pipe from filling
        yield f"127.0.0.1:{port}", f"http://localhost:{ui_port}", "".join(seen)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 60)
        if drain is not None:
            await drain


@pytest.fixture(scope="module")
async def dev(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Dev]:
    home = tmp_path_factory.mktemp("dev-home")
    async with agentrt_dev(home) as (address, ui_url, printed):
        yield Dev(home, address, ui_url, printed)


async def test_dev_on_another_port_prints_the_export_line_another_shell_needs(dev: Dev, tmp_path: Path) -> None:
    found = re.search(r"^\s*export AGENTRT_TEMPORAL_ADDRESS=(\S+)$", dev.printed, re.M)
    assert found, dev.printed
    assert found.group(1) == dev.address

    listed = await agentrt("session", "list", env=user_env(dev.home, AGENTRT_TEMPORAL_ADDRESS=found.group(1)), cwd=tmp_path)

    assert listed.returncode == 0, listed.stderr


async def test_demo_against_a_server_agentrt_dev_started_prints_that_server_s_ui(dev: Dev, workspace: Path, tmp_path: Path) -> None:
    result = await agentrt(
        "demo", "--source", str(workspace), env=user_env(dev.home, AGENTRT_TEMPORAL_ADDRESS=dev.address), cwd=tmp_path
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Temporal UI: {dev.ui_url}/namespaces/default/workflows/session-" in result.stdout
    assert "embedded" not in result.stdout


async def test_demo_copies_a_source_that_holds_a_link_to_its_own_parent(dev: Dev, workspace: Path, tmp_path: Path) -> None:
    # `make typecheck` links build/pyright/agentrt to the repository root: followed, the copy never ends.
    (workspace / "build").mkdir()
    (workspace / "build" / "root").symlink_to("..", target_is_directory=True)

    result = await agentrt(
        "demo", "--source", str(workspace), env=user_env(dev.home, AGENTRT_TEMPORAL_ADDRESS=dev.address), cwd=tmp_path
    )

    assert result.returncode == 0, result.stdout + result.stderr


async def test_dev_on_a_taken_port_refuses_before_it_starts_a_codec_server(tmp_path: Path) -> None:
    port, ui_port = free_port(), free_port()
    with held_by_another_program(port):
        done = await agentrt("dev", "--port", str(port), "--ui-port", str(ui_port), env=user_env(tmp_path / "home"), cwd=tmp_path, timeout=60)

    assert done.returncode == 2, done.stderr
    assert f"error: port {port} is already in use" in done.stderr
    assert "codec server" not in done.stderr and "temporal server at" not in done.stderr
    assert not (tmp_path / "home" / "codec-keys.toml").exists()  # nothing made for a server that cannot start
