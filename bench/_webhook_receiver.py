"""A webhook receiver on loopback that can be taken down and brought back, for ``bench.webhook_chaos``.

A real HTTP server (``ThreadingHTTPServer``) on one port of 127.0.0.1 for its whole life. Each POST
is checked with ``verify_webhook`` and recorded (``Receipt``), then answered 204 after a short
piece of work (``WORK_SECONDS``) — unless the receiver went down meanwhile: then the connection is
closed without an answer, as a receiver that crashes after it took a request but before it
answered, and the sender must try again. While down the port refuses connections, and a request
that arrives on a connection kept alive from before is closed unread. ``crash_on_next()`` makes the
next request that outage's cause: it is recorded, then the receiver goes down without answering it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentrt.gateway import verify_webhook
from agentrt.schemas import WebhookSignatureInvalid

# Seconds a request is "handled" before its answer: an outage that starts then cuts the answer off.
WORK_SECONDS = 0.02


@dataclass(frozen=True)
class Receipt:
    """One request the receiver took: the notification's ``id``, ``type`` and ``data``; ``answered``:
    whether it was answered 204 (False: the receiver went down before answering)."""

    id: str
    type: str
    data: dict[str, Any]
    answered: bool
    at: float


class FlakyReceiver:
    """The receiver: ``url`` to post to, ``receipts`` in the order taken, ``rejected`` requests
    whose signature did not verify, ``down()`` / ``up()``, ``close()``."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.receipts: list[Receipt] = []
        self.rejected = 0
        self.outages = 0
        self._lock = threading.Lock()
        self._up = False
        self._crash = False
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.up()
        self.url = f"http://127.0.0.1:{self.port}/hooks"

    @property
    def is_up(self) -> bool:
        return self._up

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
                if not receiver.is_up:
                    self.close_connection = True
                    return
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    note = verify_webhook(receiver.secret, body, {k: v for k, v in self.headers.items()})
                except WebhookSignatureInvalid:
                    with receiver._lock:
                        receiver.rejected += 1
                    self._answer(401)
                    return
                time.sleep(WORK_SECONDS)
                with receiver._lock:
                    crash, receiver._crash = receiver._crash, False
                if crash:
                    receiver.down()
                answered = receiver.is_up
                with receiver._lock:
                    receiver.receipts.append(Receipt(note["id"], note["type"], note["data"], answered, time.monotonic()))
                if answered:
                    self._answer(204)
                else:
                    self.close_connection = True

            def _answer(self, status: int) -> None:
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        return Handler

    def crash_on_next(self) -> None:
        """Go down while holding the next request, before answering it (an outage)."""
        self._crash = True

    def up(self) -> None:
        """Listen (again, on the same port) and answer."""
        if self._up:
            return
        server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        self._up = True

    def down(self, *, outage: bool = True) -> None:
        """Stop answering at once: the port refuses connections, requests in hand get no answer
        (``outage``: counted in ``outages``)."""
        with self._lock:
            if not self._up:
                return
            self._up = False
            self._crash = False
            self.outages += int(outage)
            server, self._server = self._server, None
        assert server is not None
        server.shutdown()
        server.server_close()

    def close(self) -> None:
        self.down(outage=False)
