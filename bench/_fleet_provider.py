"""The fleet benchmark's model: a loopback HTTP server speaking OpenAI Chat Completions (streamed).

    python -m bench._fleet_provider --port-file PATH [--delay-min 0.1] [--delay-max 0.6] [--seed 1]

It answers every ``POST /chat/completions`` from the request alone, so any worker's call (a
retry on another worker included) gets the same kind of answer:

- the last message is the user's ``... append <line>``: one call of the tool whose wire name
  contains ``append`` (``fleet.append``), arguments ``{"line": <line>, "pause_seconds": p}``
  with ``p`` drawn from 0.1-0.6 s, so tool calls are in flight when a worker dies;
- otherwise (the tool's result came back): the text ``done``.

Each answer waits a delay drawn from ``--delay-min``-``--delay-max`` seconds first (a model
call in flight), then is sent whole as an SSE stream with ``Content-Length``. The port is
written to ``--port-file`` once the server listens. Runs in a process of its own, so its
sleeps and threads do not compete with the benchmark's client for one interpreter.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_APPEND = re.compile(r"append (.+)$")
_RANDOM = random.Random(1)
_LOCK = threading.Lock()
_DELAY = (0.1, 0.6)
PAUSE = (0.1, 0.6)


def _draw(bounds: tuple[float, float]) -> float:
    with _LOCK:
        return round(_RANDOM.uniform(*bounds), 3)


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def answer(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects answering request ``body`` (see the module docstring)."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    found = _APPEND.search(_text_of(last).strip()) if last.get("role") == "user" else None
    wire = next(
        (t["function"]["name"] for t in body.get("tools") or [] if "append" in t.get("function", {}).get("name", "")), None
    )
    base = {"id": "chatcmpl-fleet", "object": "chat.completion.chunk", "model": body.get("model", "fake")}
    usage = {"prompt_tokens": 50 + 10 * len(messages), "completion_tokens": 8, "total_tokens": 58 + 10 * len(messages)}
    if found and wire:
        arguments = json.dumps({"line": found.group(1), "pause_seconds": _draw(PAUSE)})
        call = {"index": 0, "id": f"call_{zlib.crc32(found.group(1).encode())}", "type": "function",
                "function": {"name": wire, "arguments": arguments}}
        return [
            {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            {**base, "choices": [], "usage": usage},
        ]
    return [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": "done"}, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": usage},
    ]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        time.sleep(_draw(_DELAY))
        stream = b"".join(f"data: {json.dumps(chunk)}\n\n".encode() for chunk in answer(body)) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(stream)))
        self.end_headers()
        self.wfile.write(stream)

    def log_message(self, *args: object) -> None:
        pass


def main(argv: list[str] | None = None) -> None:
    global _DELAY
    parser = argparse.ArgumentParser(prog="python -m bench._fleet_provider", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--delay-min", type=float, default=0.1)
    parser.add_argument("--delay-max", type=float, default=0.6)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    _DELAY = (args.delay_min, args.delay_max)
    _RANDOM.seed(args.seed)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    args.port_file.write_text(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
