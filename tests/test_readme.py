"""The README's Python examples run as written.

`worker.py` and `client.py` run as their own processes, as a reader would run them, sharing
nothing but an AGENTRT_HOME and the environment; the S3 example needs AWS and a bucket,
so it is only compiled and checked to use the plugin.
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
BLOCKS = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)


def example(first_line: str) -> str:
    [block] = [b for b in BLOCKS if b.startswith(f'"""{first_line}')]
    return block


def test_every_python_example_in_the_readme_compiles() -> None:
    assert len(BLOCKS) >= 3
    for number, block in enumerate(BLOCKS):
        compile(block, f"README.md python block {number + 1}", "exec")


def test_the_readme_s3_example_gives_the_s3_driver_to_the_plugin() -> None:
    s3 = example("s3.py")
    assert "AgentrtPlugin(config, store, driver=s3_driver)" in s3 and "plugin=plugin" in s3


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
