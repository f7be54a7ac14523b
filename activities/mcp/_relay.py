"""A stdio MCP server's stdout, passed on one line (one JSON-RPC message) at a time with a bound
on each line, while it is read.

The MCP SDK's stdio transport reads a server's stdout into memory until a newline comes: a server
that answers with 200 MiB on one line, or a line that never ends, grows the worker's memory
without bound before anything can look at the answer. The launcher runs every stdio server as
``python -I _relay.py LIMIT -- ARGV...`` (this file run as a script: standard library only, no
``agentrt`` import), which starts ``ARGV`` with this process's stdin and stderr and reads its
stdout in pieces: a line of at most ``LIMIT`` bytes is passed on whole. As soon as a line passes
``LIMIT`` (never more than ``LIMIT`` bytes of it held, a line that never ends not waited for), it
is dropped and, when its first bytes name a JSON-RPC ``id``, an error answer to that request
(``code`` -32600, the message naming the bound) is passed on instead, so the call fails with a
typed error; then the server, which may still be writing, is stopped and the relay ends, which
ends the connection (the manager starts the server anew for the next call). The relay and the
server share a process group, which the SDK ends as one when it closes the connection.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

# Bytes of a line looked at for its JSON-RPC id once the line is known to be too long.
ID_WINDOW_BYTES = 4096
# The error code of the answer that stands for a line too long (JSON-RPC "Invalid Request": the
# server's message was not one the client can take).
TOO_LONG_CODE = -32600
_CHUNK_BYTES = 64 * 1024
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,256}")')


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: _relay.py LIMIT -- COMMAND [ARGS...]\n")
        return 2
    limit = int(argv[1])
    child = subprocess.Popen(argv[3:], stdin=None, stdout=subprocess.PIPE, stderr=None, bufsize=0)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda s, _f: _forward(child, s))
    assert child.stdout is not None
    source, out = child.stdout.fileno(), sys.stdout.fileno()
    line = bytearray()
    while True:
        chunk = os.read(source, _CHUNK_BYTES)
        if not chunk:
            break
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if len(line) + len(piece) > limit:
                # Too long: answered now (a line that never ends is not waited for), and the
                # server, which may still be writing it, is stopped; the manager starts it anew.
                _answer_too_long(out, bytes((line + piece)[:ID_WINDOW_BYTES]), limit)
                _forward(child, signal.SIGTERM)
                return 1
            line += piece
            if end < 0:
                break
            _write(out, bytes(line) + b"\n")
            line.clear()
            start = end + 1
    if line:
        _write(out, bytes(line))
    return child.wait()


def _answer_too_long(out: int, head: bytes, limit: int) -> None:
    """Write the error answer for a line too long whose first bytes are ``head``; nothing when no
    id is found there (a request or notification of the server's, or an id past the window)."""
    found = _ID.search(head)
    if found is None or b'"method"' in head:
        return
    request_id = json.loads(found.group(1))
    message = f"the server's answer was longer than {limit:,} bytes, the most one message may hold; it was dropped"
    answer = {"jsonrpc": "2.0", "id": request_id, "error": {"code": TOO_LONG_CODE, "message": message}}
    _write(out, json.dumps(answer).encode() + b"\n")


def _write(out: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(out, view):]


def _forward(child: subprocess.Popen[bytes], signum: int) -> None:
    try:
        child.send_signal(signum)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except BrokenPipeError:  # the client went away
        sys.exit(0)
