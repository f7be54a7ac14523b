"""What a failed MCP server reads as: a stdio server's exit status and the tail of its stderr,
one line per exception, and a bounded log of the SDK's complaints about a server's stdout.

A stdio server runs under a shell that reports its exit status on stderr (no transport of the
SDK exposes the process, and bwrap's status fd would take the server's stderr); the
diagnostic takes that line out of the text it quotes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from pathlib import Path
from typing import Any

from mcp import MCPError

from agentrt.schemas import McpServerUnavailable

logger = logging.getLogger(__name__)


class _BoundedLog(logging.Filter):
    """Lets through at most ``limit`` records per ``window`` seconds (each with its traceback),
    then one line saying how many were left out: the SDK logs a traceback for every line a
    stdio server writes to stdout that is not JSON-RPC, and a server may write millions."""

    def __init__(self, limit: int = 10, window: float = 60.0) -> None:
        super().__init__()
        self.limit, self.window = limit, window
        self.started, self.count, self.dropped = 0.0, 0, 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.created - self.started >= self.window:
            if self.dropped:
                logger.warning("%d more log records of %s left out in %g s", self.dropped, record.name, self.window)
            self.started, self.count, self.dropped = record.created, 0, 0
        self.count += 1
        if self.count <= self.limit:
            return True
        self.dropped += 1
        return False


STDIO_LOG_FILTER = _BoundedLog()
logging.getLogger("mcp.client.stdio").addFilter(STDIO_LOG_FILTER)

# Bytes of a stdio server's stderr kept (the latest), and characters of it in a diagnostic.
STDERR_TAIL_BYTES = 64 * 1024
DIAGNOSTIC_STDERR_CHARS = 2000
# How long the end of a connection waits for the rest of the server's stderr (seconds).
STDERR_DRAIN_SECONDS = 1.0
# The line the shell around a stdio server writes to its stderr when the server exits.
_EXIT_LINE = "agentrt-mcp: exit status"
_EXIT_STATUS = re.compile(rf"^{re.escape(_EXIT_LINE)} (\d+)$")
# ``/bin/sh -c STATUS_WRAPPER NAME COMMAND ARGS...`` runs COMMAND and reports its exit status.
STATUS_WRAPPER = f'"$@"; status=$?; echo "{_EXIT_LINE} $status" >&2; exit $status'

# Exit status 126/127 in the sandbox: the program (or its interpreter, through a symlink) is not
# among what the sandbox mounts.
SANDBOX_NOT_FOUND_HINT = (
    "a sandboxed server sees only /usr, /bin, /lib*, its cwd and read_paths: add to read_paths the real "
    "location of its program and what it loads (for a virtualenv's python, the venv and the interpreter's "
    "installation, e.g. the prefix `python -c 'import sys; print(sys.base_prefix)'` prints)"
)


class StderrTail(asyncio.Protocol):
    """A stdio server's stderr: a pipe whose latest ``STDERR_TAIL_BYTES`` are kept in memory.

    Create with ``await StderrTail.open()`` (raises ``OSError`` when no pipe can be made); give
    ``writer`` to the server, call ``close_writer()`` once the server holds its copy, and
    ``aclose()`` when the connection ends."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._eof = asyncio.Event()
        self._transport: asyncio.BaseTransport | None = None
        self.writer: Any = None

    @classmethod
    async def open(cls) -> StderrTail:
        read_fd, write_fd = os.pipe()
        tail = cls()
        try:
            reader = os.fdopen(read_fd, "rb", buffering=0)
        except BaseException:
            os.close(read_fd)
            os.close(write_fd)
            raise
        try:
            tail._transport, _ = await asyncio.get_running_loop().connect_read_pipe(lambda: tail, reader)
        except BaseException:
            reader.close()
            os.close(write_fd)
            raise
        tail.writer = os.fdopen(write_fd, "w")
        return tail

    def data_received(self, data: bytes) -> None:
        self._data += data
        if len(self._data) > STDERR_TAIL_BYTES:
            del self._data[: len(self._data) - STDERR_TAIL_BYTES]

    def eof_received(self) -> bool | None:
        self._eof.set()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof.set()

    def close_writer(self) -> None:
        """Close this process's copy of the pipe's write end (the server holds its own)."""
        if self.writer is not None and not self.writer.closed:
            self.writer.close()

    async def aclose(self) -> None:
        """Close the write end and wait at most ``STDERR_DRAIN_SECONDS`` for the rest of the text."""
        self.close_writer()
        try:  # asyncio.timeout: wait_for can drop a cancel that meets the set event (CPython gh-86296)
            async with asyncio.timeout(STDERR_DRAIN_SECONDS):
                await self._eof.wait()
        except TimeoutError:
            pass
        if self._transport is not None:
            self._transport.close()

    def data(self) -> bytes:
        """The bytes kept, exit status line included."""
        return bytes(self._data)

    def report(self) -> tuple[int | None, str]:
        """``(exit status, stderr text)``: the wrapper's exit status line taken out of the text."""
        exit_code: int | None = None
        kept = []
        for line in self._data.decode(errors="replace").splitlines():
            if match := _EXIT_STATUS.match(line):
                exit_code = int(match.group(1))
                continue
            kept.append(line)
        return exit_code, "\n".join(kept).strip()


def server_diagnostic(reason: str, stderr: StderrTail | None) -> str:
    """``reason``, then the exit status (with its signal, and a hint for 126/127) and the last
    ``DIAGNOSTIC_STDERR_CHARS`` characters of stderr, when ``stderr`` has them; ``"; "``-joined."""
    parts = [reason]
    if stderr is not None:
        exit_code, text = stderr.report()
        if exit_code is not None:
            parts.append(f"exit status {exit_code}" + (f" (signal {exit_code - 128})" if exit_code > 128 else ""))
            if exit_code in (126, 127):
                parts.append(SANDBOX_NOT_FOUND_HINT)
        if text:
            if len(text) > DIAGNOSTIC_STDERR_CHARS:
                text = "…" + text[-DIAGNOSTIC_STDERR_CHARS:]
            parts.append(f"stderr: {text}")
    return "; ".join(parts)


def describe(err: BaseException) -> str:
    """One line for an exception, exception groups flattened."""
    if isinstance(err, BaseExceptionGroup):
        return "; ".join(describe(e) for e in err.exceptions)
    if isinstance(err, MCPError):
        return f"{err.error.message} (code {err.code})"
    if isinstance(err, McpServerUnavailable):
        return err.diagnostic
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def only(err: BaseException) -> BaseException:
    """The one exception inside nested single-exception groups (anyio task groups), else ``err``."""
    while isinstance(err, BaseExceptionGroup) and len(err.exceptions) == 1:
        err = err.exceptions[0]
    return err


def first_line(text: str) -> str:
    """The first line of ``text`` once stripped, or ``text`` when it is blank."""
    return text.strip().splitlines()[0] if text.strip() else text


def write_log(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (parents created); a failure is logged, never raised."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError:
        logger.warning("could not write %s", path, exc_info=True)
