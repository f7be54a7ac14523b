"""A real HTTP server on loopback that answers every GET with a fixed body: the destination a
sandboxed command tries to reach (a host service, or one the operator allows)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BODY = b"reached the loopback server\n"


class _Answer(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server name
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def loopback_http() -> Iterator[int]:
    """Serve on ``127.0.0.1`` at a free port (yielded) until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
