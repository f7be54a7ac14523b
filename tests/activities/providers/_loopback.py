"""A real HTTP server on 127.0.0.1 that plays canned provider replies, so wire tests run the whole httpx + SSE stack."""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One canned response.

    ``chunks`` are written and flushed one by one. ``content_length`` declares a length
    (set it larger than the chunks to cut the stream mid-body); without it the response is
    HTTP/1.0 ended by closing the connection. ``hang`` stops after the headers until the
    server shuts down (a provider that never answers); ``stall_after`` stops after that many
    chunks, the connection open (a stream that goes idle mid-answer).
    """

    status: int = 200
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "text/event-stream"})
    chunks: list[bytes] = field(default_factory=list)
    content_length: int | None = None
    hang: bool = False
    stall_after: int | None = None


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def sse_data(*payloads: dict[str, Any] | str) -> list[bytes]:
    """OpenAI-style events: ``data: <json>`` each, blank-line separated."""
    return [f"data: {p if isinstance(p, str) else json.dumps(p)}\n\n".encode() for p in payloads]


def sse_typed(*payloads: dict[str, Any]) -> list[bytes]:
    """Anthropic-style events: ``event: <type>`` then ``data: <json>``."""
    return [f"event: {p['type']}\ndata: {json.dumps(p)}\n\n".encode() for p in payloads]


def json_reply(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> Reply:
    return Reply(
        status=status,
        headers={"Content-Type": "application/json", **(headers or {})},
        chunks=[json.dumps(body).encode()],
    )


class LoopbackServer:
    """Serves queued ``Reply`` objects in order and records every request it receives."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self._replies: deque[Reply] = deque()
        self._release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                server.requests.append(
                    Recorded("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                reply = server._replies.popleft() if server._replies else json_reply(599, {"error": "no reply queued"})
                self.send_response(reply.status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                if reply.content_length is not None:
                    self.send_header("Content-Length", str(reply.content_length))
                self.end_headers()
                self.wfile.flush()
                if reply.hang:
                    server._release.wait()
                    return
                for n, chunk in enumerate(reply.chunks):
                    if n == reply.stall_after:
                        server._release.wait()
                        return
                    self.wfile.write(chunk)
                    self.wfile.flush()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        host, port = self._httpd.server_address[:2]
        self.url = f"http://{host}:{port}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, name="loopback-provider", daemon=True
        )

    def reply(self, *replies: Reply) -> None:
        self._replies.extend(replies)

    @property
    def last(self) -> Recorded:
        return self.requests[-1]

    def start(self) -> "LoopbackServer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()
