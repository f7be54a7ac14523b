"""The chaos workers' zygote: a forked worker is a process of its own, as a fresh one is."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentrt.worker import DevServer
from bench.chaos import WorkerForks
from tests._packages import REPO_ROOT


def _env(tmp_path: Path, address: str, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "AGENTRT_TEMPORAL_ADDRESS": address,
        "AGENTRT_TASK_QUEUE": f"zygote-{os.getpid()}",
        "AGENTRT_DATABASE_URL": f"sqlite:///{tmp_path / 'agentrt.db'}",
        **extra,
    }
    env.pop("AGENTRT_CONFIG", None)
    return env


@pytest.fixture(scope="module")
async def forks(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[WorkerForks]:
    folder = tmp_path_factory.mktemp("zygote")
    forks = await WorkerForks.open(_env(folder, "127.0.0.1:1"), folder, folder / "zygote.log")
    yield forks
    await forks.close()


async def test_a_forked_worker_polls_in_its_own_process_group_and_dies_with_it(
    forks: WorkerForks, temporal_server: DevServer, tmp_path: Path
) -> None:
    ready = tmp_path / "ready"
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    worker = await forks.start(_env(tmp_path, temporal_server.address, CHAOS_READY_FILE=str(ready)), cwd)
    for _ in range(600):
        if ready.exists() or worker.returncode is not None:
            break
        await asyncio.sleep(0.1)
    assert ready.read_text() == str(worker.pid)
    assert os.getpgid(worker.pid) == worker.pid and os.getsid(worker.pid) == worker.pid
    if sys.platform == "linux":
        assert Path(os.readlink(f"/proc/{worker.pid}/cwd")) == cwd
    os.killpg(worker.pid, signal.SIGKILL)
    assert await worker.wait() == -signal.SIGKILL
    output = (await worker.stdout.read()).decode()
    assert f"chaos worker {worker.pid} polling" in output


async def test_a_forked_worker_reports_its_exit_and_its_errors_on_its_output(
    forks: WorkerForks, tmp_path: Path
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{probe.getsockname()[1]}"
    worker = await forks.start(_env(tmp_path, closed), tmp_path)
    output = (await worker.stdout.read()).decode()
    assert await worker.wait() == 1
    assert f"chaos worker {worker.pid} exiting" in output
    assert closed in output  # the address of its own environment, not the zygote's


async def test_the_zygote_refuses_to_fork_when_an_import_started_a_thread(tmp_path: Path) -> None:
    (tmp_path / "starts_a_thread.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    )
    env = _env(tmp_path, "127.0.0.1:1")
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env["PYTHONPATH"]
    with pytest.raises(RuntimeError, match="started threads"):
        await WorkerForks.open(env, tmp_path, tmp_path / "zygote.log", preload=("starts_a_thread",))
