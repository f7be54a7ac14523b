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
