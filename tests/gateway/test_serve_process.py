"""`agentrt serve` as a process stopped by SIGTERM (as a container runtime stops it): it stops
accepting, runs the app's shutdown (uvicorn's graceful shutdown, which gives open requests 10 s)
and exits 0, with no traceback."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from agentrt.worker import DevServer


def test_a_sigterm_lets_the_open_request_finish_and_ends_without_a_traceback(temporal_server: DevServer, tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    env = {**os.environ, "AGENTRT_HOME": str(tmp_path / "home"), "AGENTRT_TEMPORAL_ADDRESS": temporal_server.address}
    for name in ("AGENTRT_CONFIG", "AGENTRT_GATEWAY_TOKEN"):
        env.pop(name, None)
    process = subprocess.Popen(
        [sys.executable, "-m", "agentrt.cli", "serve", "--port", "0", "--insecure-no-auth", "--workspace-root", str(tmp_path / "ws")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        for line in process.stdout:
            lines.append(line)
            found = re.search(r"agentrt gateway listening on (http://\S+) ", line)
            if found:
                url = found[1]
                break
        else:
            raise AssertionError("".join(lines))
        process.send_signal(signal.SIGTERM)
        rest, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    output = "".join(lines) + rest
    assert process.returncode == 0, output
    assert "Traceback" not in output and "CancelledError" not in output, output
    assert "Application shutdown complete" in output and "stopped (SIGTERM)" in output
