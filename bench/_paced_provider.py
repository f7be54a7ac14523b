"""The benchmarks' model: a loopback HTTP server speaking OpenAI Chat Completions that streams every
answer as small chunks at a steady pace, as a real model streams its tokens (``bench.first_token``,
``bench.long_stream``).

    python -m bench._paced_provider --port-file PATH [--chunks 20] [--chunk-ms 10]

Every ``POST .../chat/completions`` is answered with a ``text/event-stream`` sent with
``Transfer-Encoding: chunked``. A request for model ``paced-<ms>`` waits ``<ms>`` milliseconds
first (a model thinking before its first token; any other model name: none). Then ``--chunks``
``chat.completion.chunk`` objects whose contents are ``t<T>c<i> `` (``T`` the number of user
messages in the request, so the session's turn; ``i`` from 0), the first prefixed with
``[<unix time the request arrived>] `` (so a client can tell the time before the request reached
the model from the time after), one every ``--chunk-ms`` milliseconds on a fixed schedule from the
first (the pace does not drift), each written and flushed on its own; then the ``finish_reason``
chunk, a usage chunk and ``data: [DONE]``. The port is written to ``--port-file`` once the server
listens. Runs in a process of its own, so its sleeps and threads do not compete with the
benchmark's clients for one interpreter.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_PACE = {"chunks": 20, "seconds": 0.01}
_PACED = re.compile(r"paced-(\d+)$")


def first_token_seconds(model: str) -> float:
    """The delay (seconds) model ``paced-<ms>`` waits before its first token; 0 for another name."""
    match = _PACED.search(model)
    return int(match.group(1)) / 1000 if match else 0.0


def chunk_texts(request: dict[str, Any], chunks: int) -> list[str]:
    """The answer to ``request`` as the texts of its ``chunks`` chunks (see the module docstring),
    without the arrival stamp."""
    turn = sum(1 for message in request.get("messages") or [] if message.get("role") == "user")
    return [f"t{turn}c{i} " for i in range(chunks)]


def chunk(model: str, delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
    """One ``chat.completion.chunk`` of ``model`` as an SSE event: a choice with ``delta`` (and
    ``finish``), or, with ``usage``, no choice and that usage."""
    body: dict[str, Any] = {
        "id": "chatcmpl-paced", "object": "chat.completion.chunk", "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if usage is None else [],
    }
    if usage is not None:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send(self, event: bytes) -> None:
        self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
        self.wfile.flush()

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        arrived = time.time()
        length = int(self.headers.get("Content-Length") or 0)
        request = json.loads(self.rfile.read(length) or b"{}")
        model = str(request.get("model", "paced"))
        texts = chunk_texts(request, _PACE["chunks"])
        texts[0] = f"[{arrived:.6f}] {texts[0]}"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        time.sleep(first_token_seconds(model))
        began = time.monotonic()
        for i, text in enumerate(texts):
            wait = began + i * _PACE["seconds"] - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            self._send(chunk(model, {"role": "assistant", "content": text} if i == 0 else {"content": text}))
        prompt = max(1, length // 4)
        completion = sum(len(t) for t in texts) // 4
        self._send(chunk(model, {}, finish="stop"))
        self._send(chunk(model, {}, usage={"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}))
        self._send(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def log_message(self, *args: object) -> None:
        pass


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench._paced_provider", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--chunk-ms", type=float, default=10.0)
    args = parser.parse_args(argv)
    _PACE.update(chunks=max(1, args.chunks), seconds=args.chunk_ms / 1000)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    args.port_file.write_text(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
