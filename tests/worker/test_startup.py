"""`agentrt worker` on a real cluster: it waits for a server that is not up yet, registers the search
attributes sessions write, and refuses to start, with the command that fixes it, when it cannot.

Each test runs the worker as its own process, as an operator does, against a dev server
started without agentrt's search attributes. The refusal is the server's own: a SQL
visibility store holds at most 10 Keyword search attributes per namespace, so on a
namespace that has 10 already, ``AddSearchAttributes`` fails (``INVALID_ARGUMENT``) just as
a namespace without operator rights refuses it (``PERMISSION_DENIED``); the worker takes
the same path for both.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey

from agentrt.client import AgentClient, connect
from agentrt.worker import AgentrtConfig, AgentrtPlugin, DevServer, MissingSearchAttributes, ensure_search_attributes, temporal_binary
from agentrt.worker import _devserver
from tests.conftest import OWNER
from tests.e2e._support import session_config, write_script

OTHER_KEYWORDS = [f"Other{i}" for i in range(10)]


@pytest.fixture(scope="module")
async def bare_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    """A namespace as a fresh cluster has it: no custom search attributes."""
    server = DevServer.on_free_ports(tmp_path_factory.mktemp("bare-server"), search_attributes=False)
    await server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
async def crowded_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    """A namespace whose 10 Keyword search attributes are taken: registering one more is refused."""
    extra = [arg for name in OTHER_KEYWORDS for arg in ("--search-attribute", f"{name}=Keyword")]
    server = DevServer.on_free_ports(tmp_path_factory.mktemp("crowded-server"), extra, search_attributes=False)
    await server.start()
    yield server
    server.stop()


def worker_env(address: str, task_queue: str, database_url: str) -> dict[str, str]:
    env = {
        **os.environ,
        "AGENTRT_TEMPORAL_ADDRESS": address,
        "AGENTRT_TASK_QUEUE": task_queue,
        "AGENTRT_DATABASE_URL": database_url,
    }
    env.pop("AGENTRT_CONFIG", None)
    return env


@contextmanager
def agentrt_worker(address: str, task_queue: str, database_url: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`agentrt worker` as its own process, its output in ``log``; SIGTERMed on exit."""
    process = subprocess.Popen(
        [sys.executable, "-m", "agentrt.cli", "worker"],
        env=worker_env(address, task_queue, database_url),
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)


async def wait_for_line(log: Path, text: str, process: subprocess.Popen[bytes], timeout: float = 60.0) -> str:
    """The first line of ``log`` containing ``text``; fails if the process exits or time runs out first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if text in line:
                return line
        assert process.poll() is None, f"worker exited with {process.returncode}:\n{log.read_text()}"
        await asyncio.sleep(0.1)
    raise AssertionError(f"no line with {text!r} within {timeout:g} s:\n{log.read_text()}")


async def custom_search_attributes(address: str) -> set[str]:
    client = await Client.connect(address)
    response = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace="default"))
    return set(response.custom_attributes)


async def run_one_session(address: str, task_queue: str, database_url: str, workspace: Path, tmp_path: Path) -> str:
    """Start a session on the worker of ``task_queue``; its turn must complete. Returns the session id."""
    temporal = await connect(address, plugin=AgentrtPlugin(AgentrtConfig(database_url=database_url)))
    agent = AgentClient(temporal, task_queue=task_queue, principal=OWNER)
    script = write_script(tmp_path, [{"text": "hello from the worker"}], name=f"script-{uuid.uuid4().hex[:6]}.json")
    started = await agent.start(session_config(agent, uuid.uuid4().hex[:12], workspace, script), "hi")
    outcome = await agent.wait(started.session_id, started.turn_id, timeout_seconds=60)
    assert (outcome.status, outcome.answer) == ("completed", "hello from the worker")
    return started.session_id


async def test_a_worker_on_a_namespace_without_the_search_attributes_registers_them_and_a_session_runs(
    bare_server: DevServer, tmp_path: Path, workspace: Path
) -> None:
    assert not {"AgentSessionStatus", "AgentOwner"} & await custom_search_attributes(bare_server.address)
    log = tmp_path / "worker.log"
    task_queue = f"sa-{uuid.uuid4().hex[:8]}"
    database_url = f"sqlite:///{tmp_path / 'agentrt.db'}"
    with agentrt_worker(bare_server.address, task_queue, database_url, log) as process:
        await wait_for_line(log, "worker polling", process)
        session_id = await run_one_session(bare_server.address, task_queue, database_url, workspace, tmp_path)
        temporal = await connect(bare_server.address, plugin=AgentrtPlugin(AgentrtConfig(database_url=database_url)))
        idle = await AgentClient(temporal, task_queue=task_queue, principal=OWNER).list_sessions("AgentSessionStatus = 'idle'")
        assert session_id in [s.session_id for s in idle]
    print(log.read_text())
    assert (
        "registered search attributes AgentSessionStatus (Keyword), AgentOwner (Keyword), AgentKind (Keyword), AgentProfile (Keyword), AgentPendingApprovals (Int), AgentSpendUsd (Double) in namespace 'default'"
    ) in log.read_text()
    assert {"AgentSessionStatus", "AgentOwner"} <= await custom_search_attributes(bare_server.address)


async def test_a_worker_refused_the_search_attributes_exits_with_their_names_and_the_command_that_creates_them(
    crowded_server: DevServer, tmp_path: Path, workspace: Path
) -> None:
    task_queue = f"sa-{uuid.uuid4().hex[:8]}"
    database_url = f"sqlite:///{tmp_path / 'agentrt.db'}"
    refused = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "agentrt.cli", "worker"],
        env=worker_env(crowded_server.address, task_queue, database_url),
        capture_output=True, text=True, timeout=120,
    )
    print(refused.stderr)
    assert refused.returncode == 2
    assert (
        f"error: namespace 'default' at {crowded_server.address} lacks the search attributes agentrt sessions write: "
        "AgentSessionStatus (Keyword), AgentOwner (Keyword), AgentKind (Keyword), AgentProfile (Keyword), "
        "AgentPendingApprovals (Int), AgentSpendUsd (Double). Registering them was refused (INVALID_ARGUMENT: "
        "Unable to create search attributes: cannot have more than 10 search attribute of type Keyword.)"
    ) in refused.stderr
    target = f"--address {crowded_server.address} --namespace default"
    commands = [
        f"temporal operator search-attribute create {target} --name AgentSessionStatus --type Keyword",
        f"temporal operator search-attribute create {target} --name AgentOwner --type Keyword",
        f"temporal operator search-attribute create {target} --name AgentKind --type Keyword",
        f"temporal operator search-attribute create {target} --name AgentProfile --type Keyword",
        f"temporal operator search-attribute create {target} --name AgentPendingApprovals --type Int",
        f"temporal operator search-attribute create {target} --name AgentSpendUsd --type Double",
    ]
    assert "Ask an operator of the namespace to run:\n" + "".join(f"  {c}\n" for c in commands) in refused.stderr
    assert "worker polling" not in refused.stderr

    # The operator makes room and runs the commands as printed; then the worker starts.
    binary = temporal_binary()
    for name in ("Other0", "Other1", "Other2", "Other3"):
        room = [binary, "operator", "search-attribute", "remove", *target.split(), "--name", name, "--yes"]
        assert (await asyncio.to_thread(subprocess.run, room, capture_output=True)).returncode == 0
    for command in commands:
        created = await asyncio.to_thread(subprocess.run, [binary, *command.split()[1:]], capture_output=True, text=True)
        assert created.returncode == 0, created.stderr
    log = tmp_path / "worker.log"
    with agentrt_worker(crowded_server.address, task_queue, database_url, log) as process:
        await wait_for_line(log, "worker polling", process)
        await run_one_session(crowded_server.address, task_queue, database_url, workspace, tmp_path)
    assert "registered search attributes" not in log.read_text()


async def test_a_search_attribute_of_another_type_is_reported_with_the_commands_that_replace_it(
    crowded_server: DevServer,
) -> None:
    client = await Client.connect(crowded_server.address)
    with pytest.raises(MissingSearchAttributes) as raised:
        await ensure_search_attributes(client, [SearchAttributeKey.for_text("Other5")])
    assert raised.value.mistyped == {"Other5": "Keyword"}
    assert "Other5 exists as Keyword" in str(raised.value)
    assert raised.value.commands == [
        f"temporal operator search-attribute remove --address {crowded_server.address} --namespace default --name Other5 --yes",
        f"temporal operator search-attribute create --address {crowded_server.address} --namespace default --name Other5 --type Text",
    ]


async def test_a_worker_started_before_its_server_waits_for_it_and_then_serves_a_session(
    tmp_path: Path, workspace: Path
) -> None:
    server = DevServer.on_free_ports(tmp_path / "late-server")  # ports chosen; started below
    log = tmp_path / "worker.log"
    task_queue = f"late-{uuid.uuid4().hex[:8]}"
    database_url = f"sqlite:///{tmp_path / 'agentrt.db'}"
    try:
        with agentrt_worker(server.address, task_queue, database_url, log) as process:
            second = await wait_for_line(log, f"waiting for Temporal at {server.address} (attempt 2, next in 2s)", process)
            assert re.search(r"WARNING agentrt.worker: waiting for Temporal at \S+ \(attempt 2, next in 2s\): connection refused$", second)
            await server.start()
            await wait_for_line(log, "worker polling", process)
            await run_one_session(server.address, task_queue, database_url, workspace, tmp_path)
        print(log.read_text())
    finally:
        server.stop()


async def test_a_worker_stopped_by_sigterm_shuts_down_gracefully_and_exits_zero(
    temporal_server: DevServer, store_url: str, tmp_path: Path
) -> None:
    """Container runtimes stop a worker with SIGTERM: that is a normal stop, not an error."""
    log = tmp_path / "worker.log"
    with agentrt_worker(temporal_server.address, f"term-{uuid.uuid4().hex[:8]}", store_url, log) as process:
        await wait_for_line(log, "worker polling", process)
        os.killpg(process.pid, signal.SIGTERM)
        assert await asyncio.to_thread(process.wait, 30) == 0
    assert "stopped (SIGTERM)" in log.read_text()


async def test_a_dev_server_that_exits_while_starting_is_started_once_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: the server lost a port beside its own to a worker's dialling and exited with code 2."""
    server = DevServer.on_free_ports(tmp_path / "flaky")
    tries: list[int] = []
    start_once = DevServer._start_once

    async def exits_first(self: DevServer, timeout: float) -> DevServer:
        tries.append(1)
        if len(tries) == 1:
            raise _devserver._ServerExited("temporal server exited with code 2")
        return await start_once(self, timeout)

    monkeypatch.setattr(DevServer, "_start_once", exits_first)
    try:
        assert await server.start() is server
        assert len(tries) == 2
    finally:
        server.stop()
