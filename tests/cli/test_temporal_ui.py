"""Finding the Temporal UI of a server the CLI did not start: the note of a running `agentrt dev`,
else a Temporal UI at the frontend port + 1000 on a loopback address, else not known."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentrt.cli._temporal_ui import dev_note, noted_dev_server, ui_port_for, ui_url_of
from agentrt.worker import free_port
from tests.cli._serving import serving


@contextmanager
def http_server(port: int, body: bytes) -> Iterator[None]:
    """An HTTP server on 127.0.0.1:``port`` answering every GET with ``body``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    with serving(server):
        yield


def frontend_with_free_ui_port() -> tuple[int, int]:
    """A frontend port (nothing listens there) whose port + 1000 is free too."""
    while True:
        ui = free_port()
        if ui > 2000:
            return ui - 1000, ui


def test_the_note_of_a_running_agentrt_dev_gives_its_ui() -> None:
    port, _ = frontend_with_free_ui_port()

    with noted_dev_server(port, f"127.0.0.1:{port}", "http://localhost:9999") as note:
        assert ui_url_of(f"127.0.0.1:{port}") == "http://localhost:9999"
        assert ui_url_of(f"localhost:{port}") == "http://localhost:9999"

    assert not note.exists()


def test_the_note_of_a_process_that_is_gone_is_not_believed() -> None:
    port, _ = frontend_with_free_ui_port()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    dev_note(port).parent.mkdir(parents=True, exist_ok=True)
    dev_note(port).write_text(json.dumps({"address": f"127.0.0.1:{port}", "ui_url": "http://localhost:9999", "pid": int(gone.stdout)}))
    try:
        assert ui_url_of(f"127.0.0.1:{port}") is None
    finally:
        dev_note(port).unlink()


def test_a_temporal_ui_at_the_frontend_port_plus_1000_is_found() -> None:
    port, ui = frontend_with_free_ui_port()
    settings = json.dumps({"Auth": {"Enabled": False}, "DefaultNamespace": "", "Version": "2.54.1"}).encode()

    with http_server(ui, settings):
        assert ui_url_of(f"127.0.0.1:{port}") == f"http://localhost:{ui}"


def test_another_http_server_at_the_frontend_port_plus_1000_is_not_taken_for_the_ui() -> None:
    port, ui = frontend_with_free_ui_port()

    with http_server(ui, b'{"hello": "world"}'):
        assert ui_url_of(f"127.0.0.1:{port}") is None


@pytest.mark.parametrize("address", ["temporal.example:7233", "10.0.0.7:7233", "no-port"])
def test_the_ui_of_a_server_elsewhere_is_not_known(address: str) -> None:
    assert ui_url_of(address) is None


def test_the_ui_port_is_the_frontend_port_plus_1000_unless_that_is_taken() -> None:
    port, ui = frontend_with_free_ui_port()
    assert ui_port_for(port) == ui

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", ui))
        taken.listen()
        other = ui_port_for(port)

    assert other != ui and 0 < other <= 65535
    assert ui_port_for(65000) != 66000
