"""The README's Python examples run as written, and its links lead somewhere.

`worker.py` and `client.py` run as their own processes, as a reader would run them, sharing
nothing but an AGENTRT_HOME and the environment. The docs pages show the same two programs
(tests/test_docs.py holds them to the README's) and their own examples, which
tests/test_docs.py runs.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from agentrt.worker import DevServer

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)
MOST_BYTES = 20 * 1024  # a front door: the rest lives in docs/


def example(first_line: str) -> str:
    [block] = [b for b in BLOCKS if b.startswith(f'"""{first_line}')]
    return block


def test_every_python_example_in_the_readme_compiles() -> None:
    assert len(BLOCKS) >= 2
    for number, block in enumerate(BLOCKS):
        compile(block, f"README.md python block {number + 1}", "exec")


def test_the_readme_is_a_front_door_whose_links_all_resolve() -> None:
    assert len(README.encode()) <= MOST_BYTES
    assert "make demo" in README and "make test" in README
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if not re.match(r"[a-z]+:", t)]
    assert "docs/quickstart.md" in local
    assert [t for t in local if not (REPO / t).exists()] == []


async def test_the_readme_worker_and_client_examples_run_a_session_as_written(
    temporal_server: DevServer, tmp_path: Path
) -> None:
    for name in ("worker.py", "client.py"):
        (tmp_path / name).write_text(example(name))
    workspace = tmp_path / "repo"
    workspace.mkdir()
    shutil.copy(REPO / "README.md", workspace / "README.md")
    env = {
        **os.environ,
        "AGENTRT_HOME": str(tmp_path / "home"),  # one home: both find the same store and payloads
        "AGENTRT_TEMPORAL_ADDRESS": temporal_server.address,
        "AGENTRT_TASK_QUEUE": f"readme-{uuid.uuid4().hex[:8]}",
    }
    worker = subprocess.Popen(
        [sys.executable, "worker.py"], cwd=tmp_path, env=env, start_new_session=True,
        stdout=(tmp_path / "worker.log").open("wb"), stderr=subprocess.STDOUT,
    )
    try:
        client = await asyncio.create_subprocess_exec(
            sys.executable, "client.py", str(workspace), str(REPO / "cli" / "demo" / "script.yaml"),
            cwd=tmp_path, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(client.communicate(), 180)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=30)
    output = stdout.decode()
    assert client.returncode == 0, stderr.decode() + (tmp_path / "worker.log").read_text()
    assert output.startswith("completed Done. I listed the repository")
    assert "PermissionGranted" in output and output.rstrip().endswith("TurnEnded")
    assert (workspace / "NOTES.md").read_text().startswith("# Notes on this repository")
    assert (tmp_path / "home" / "agentrt.db").is_file()
