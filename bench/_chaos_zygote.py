"""Chaos workers forked from one process that has their modules imported (a *zygote*).

A fresh ``python -m bench._chaos_worker`` spends about two seconds of CPU importing agentrt and
temporalio before it polls; a chaos run starts a worker after every kill. ``WorkerForks`` starts
``python -m bench._chaos_zygote`` once per run, which imports the worker's modules (``PRELOAD``)
and then forks one child per worker start. Each child is a process of its own, as the fresh
worker is: its own session and process group (``setsid``: the harness SIGKILLs the group), the
environment and working directory of its start, standard input on ``/dev/null``, standard
output and error on a pipe the harness reads (``ForkedWorker.stdout``), and its exit status
reported back (``ForkedWorker.returncode`` / ``wait()``, as ``asyncio.subprocess.Process``).

What differs from a fresh interpreter: the modules are imported once, before any worker starts,
and not again per worker (a fork copies them, with the state importing them left), with the
zygote's environment (the workers' own but ``CHAOS_READY_FILE``); a child's environment is set
in ``os.environ``, not by ``exec`` (``/proc/PID/environ`` shows the zygote's); ``__main__`` is
the zygote, not ``bench._chaos_worker``. The Temporal runtime, the client, the store, the
event loop and every thread are made in the child, after the fork: the zygote refuses to serve
if importing started a thread (a fork copies only the thread that forks).

The protocol. Requests go over a ``SOCK_SEQPACKET`` Unix socket (the zygote's standard input):
one JSON message ``{"id", "env", "cwd"}`` per start, carrying the write end of the child's
output pipe as ``SCM_RIGHTS``. Answers are lines on the zygote's standard output: ``ready``,
``started ID PID``, ``exited PID CODE`` (``CODE`` as ``asyncio`` reports it: ``-9`` for SIGKILL).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

# What a worker loads before it polls: the worker module and, lazily at its start, the store's
# migrations (Alembic, Mako, SQLite) and the thread pools the SDK runs activities in.
PRELOAD = (
    "bench._chaos_worker",
    "alembic.command",
    "alembic.config",
    "alembic.autogenerate",
    "alembic.runtime.environment",
    "alembic.runtime.migration",
    "mako.template",
    "sqlite3",
    "sqlalchemy.dialects.sqlite",
    "sqlalchemy.ext.compiler",
    "concurrent.futures.process",
    "concurrent.futures.thread",
)
_MAX_REQUEST = 1 << 20


class ForkedWorker:
    """A worker process forked by the zygote: what the harness uses of ``asyncio.subprocess.Process``.

    ``pid`` is also its process group; ``stdout`` carries its standard output and error; ``returncode``
    is ``None`` while it runs, then its exit code (negative: the signal that ended it)."""

    def __init__(self, forks: WorkerForks, stdout: asyncio.StreamReader) -> None:
        self.pid = 0
        self.stdout = stdout
        self.returncode: int | None = None
        self._forks = forks
        self._exited = asyncio.Event()

    async def wait(self) -> int:
        """Wait for the exit; ``RuntimeError`` if the zygote ended first (nothing can tell it then)."""
        await self._exited.wait()
        if self.returncode is None:
            raise RuntimeError(f"the worker zygote ended before worker {self.pid}: {self._forks.log_text()}")
        return self.returncode


class WorkerForks:
    """The harness's side of the zygote: ``start`` forks a worker, ``close`` ends the zygote.

    Use ``await WorkerForks.open(env, cwd, log)``: the zygote runs with ``env`` and in ``cwd`` (the
    workers' own, so ``sys.path`` and anything read from the environment at import time match a
    fresh worker's), imports ``preload`` (module names) and serves; its standard error goes to the
    file ``log``. ``RuntimeError`` (with the log) if it does not serve, e.g. because an import
    started a thread. ``startup_seconds``: wall seconds from starting the zygote to its first
    answer, i.e. what a fresh interpreter spends starting and importing before a worker can poll."""

    def __init__(
        self, process: asyncio.subprocess.Process, requests: socket.socket, log: Path, startup_seconds: float
    ) -> None:
        self.startup_seconds = startup_seconds
        self._process = process
        self._requests = requests
        self._log = log
        self._next_id = 0
        self._starting: dict[int, tuple[asyncio.Future[int], ForkedWorker]] = {}
        self._running: dict[int, ForkedWorker] = {}
        self._router = asyncio.create_task(self._route())

    @classmethod
    async def open(cls, env: dict[str, str], cwd: Path, log: Path, preload: tuple[str, ...] = PRELOAD) -> WorkerForks:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        began = time.monotonic()
        try:
            with open(log, "ab") as err:
                process = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "bench._chaos_zygote", *preload,
                    cwd=cwd, env=env, stdin=theirs.fileno(), stdout=asyncio.subprocess.PIPE, stderr=err,
                    start_new_session=True,
                )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        assert process.stdout is not None
        try:
            line = await asyncio.wait_for(process.stdout.readline(), 120)
        except BaseException:
            process.kill()
            await process.wait()
            ours.close()
            raise
        if line != b"ready\n":
            await process.wait()
            ours.close()
            raise RuntimeError(f"the worker zygote did not start (exit {process.returncode}): {log.read_text()}")
        return cls(process, ours, log, time.monotonic() - began)

    def log_text(self) -> str:
        try:
            return self._log.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no log)"

    async def _route(self) -> None:
        assert self._process.stdout is not None
        while line := await self._process.stdout.readline():
            kind, first, second = line.decode().split()
            if kind == "started":
                future, worker = self._starting.pop(int(first))
                worker.pid = int(second)
                self._running[worker.pid] = worker
                if not future.done():
                    future.set_result(worker.pid)
            else:
                worker = self._running.pop(int(first))
                worker.returncode = int(second)
                worker._exited.set()
        # The zygote ended: nothing will report these exits any more.
        for future, _ in self._starting.values():
            if not future.done():
                future.set_exception(RuntimeError(f"the worker zygote ended: {self.log_text()}"))
        for worker in self._running.values():
            worker._exited.set()

    async def start(self, env: dict[str, str], cwd: Path) -> ForkedWorker:
        """Fork a worker with environment ``env`` in directory ``cwd``; returns once it exists (its pid
        known). ``RuntimeError`` if the zygote has ended."""
        if self._router.done():
            raise RuntimeError(f"the worker zygote ended: {self.log_text()}")
        loop = asyncio.get_running_loop()
        read_end, write_end = os.pipe()
        try:
            stdout = asyncio.StreamReader(loop=loop)
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdout, loop=loop), open(read_end, "rb", 0))
        except BaseException:
            os.close(read_end)
            os.close(write_end)
            raise
        try:
            self._next_id += 1
            started: asyncio.Future[int] = loop.create_future()
            worker = ForkedWorker(self, stdout)
            self._starting[self._next_id] = (started, worker)
            request = json.dumps({"id": self._next_id, "env": env, "cwd": str(cwd)}).encode()
            socket.send_fds(self._requests, [request], [write_end])
        finally:
            os.close(write_end)  # the child holds it now: the pipe ends when the child (and what it forked) does
        await asyncio.wait_for(started, 60)
        return worker

    async def close(self) -> None:
        """End the zygote (it exits when its request socket closes) and wait for it; the workers it
        forked are the caller's to kill first."""
        self._requests.close()
        try:
            await asyncio.wait_for(self._process.wait(), 10)
        except TimeoutError:
            self._process.kill()
            await self._process.wait()
        await asyncio.gather(self._router, return_exceptions=True)


# ---------------------------------------------------------------- the zygote process


def _serve(preload: list[str]) -> None:
    import importlib
    import random
    import selectors
    import signal
    import threading

    for name in preload:
        importlib.import_module(name)
    tasks = os.listdir("/proc/self/task") if os.path.isdir("/proc/self/task") else ["main"]
    if threading.active_count() != 1 or len(tasks) != 1:
        sys.exit(f"importing the worker's modules started threads: {threading.enumerate()}, tasks {tasks}")

    requests = socket.socket(fileno=os.dup(0))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(requests, selectors.EVENT_READ, "requests")
    selector.register(wake_r, selectors.EVENT_READ, "children")
    os.write(1, b"ready\n")

    def child(request: dict[str, Any], output: int) -> None:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        selector.close()
        requests.close()
        os.close(wake_r)
        os.close(wake_w)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(output)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [sys.modules["bench._chaos_worker"].__file__ or "bench._chaos_worker"]
        random.seed()
        from bench._chaos_worker import run

        run()

    while True:
        for key, _ in selector.select():
            if key.data == "children":
                try:
                    os.read(wake_r, 4096)
                except BlockingIOError:
                    pass
                while True:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    os.write(1, f"exited {pid} {os.waitstatus_to_exitcode(status)}\n".encode())
                continue
            message, fds, _flags, _address = socket.recv_fds(requests, _MAX_REQUEST, 1)
            if not message:  # the harness closed its end; it has killed the workers, reap what is left
                while True:
                    try:
                        os.waitpid(-1, 0)
                    except ChildProcessError:
                        return
            request = json.loads(message)
            if len(fds) != 1:
                sys.exit(f"request {request.get('id')} carried {len(fds)} descriptors, not 1")
            pid = os.fork()
            if pid == 0:
                try:
                    child(request, fds[0])
                finally:
                    os._exit(70)
            os.close(fds[0])
            os.write(1, f"started {request['id']} {pid}\n".encode())


if __name__ == "__main__":
    _serve(sys.argv[1:])
