"""The embedded Temporal dev server: ports it refuses before starting."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from agentrt.schemas import ConfigurationError
from agentrt.worker import DevServer, free_port


async def test_a_taken_ui_port_is_refused_before_the_server_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ui_port = taken.getsockname()[1]
        server = DevServer(port=free_port(), ui_port=ui_port, log_file=tmp_path / "temporal.log")

        with pytest.raises(ConfigurationError, match=f"UI port {ui_port} is already in use; pass --ui-port"):
            await server.start()

    assert server.process is None


async def test_a_server_on_free_ports_whose_http_port_was_taken_since_starts_on_other_free_ports(tmp_path: Path) -> None:
    """Another process (another test process's server) took a port between the pick and the start."""
    server = DevServer.on_free_ports(tmp_path / "server", search_attributes=False)
    http_port = int(server.extra_args[server.extra_args.index("--http-port") + 1])
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", http_port))
        taken.listen()
        try:
            await server.start()
            assert server.extra_args[server.extra_args.index("--http-port") + 1] != str(http_port)
            assert "address already in use" in (tmp_path / "server" / "temporal.log").read_text()
        finally:
            server.stop()


def test_an_embedded_server_has_task_queue_fairness_on_unless_told_otherwise(tmp_path: Path) -> None:
    assert "matching.enableFairness=true" in DevServer(port=free_port(), ui_port=None).command()

    command = DevServer(port=free_port(), ui_port=None, extra_args=["--dynamic-config-value", "matching.enableFairness=false"]).command()

    assert "matching.enableFairness=true" not in command and command[-1] == "matching.enableFairness=false"
