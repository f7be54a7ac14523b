"""The ``agentrt`` command line as forked processes, for the tests that run many commands.

One process per test process (the *zygote*) imports the command line and every module its
commands load, once; each command is then a child forked from it: a process of its own, with its
own environment, working directory, standard streams and exit code, that skips the second or so
of CPU the imports cost a fresh interpreter. tests/cli/test_cli_process.py and tests/test_wheel.py
still start the console script the way a user does.

The zygote is single-threaded (it refuses to start otherwise: a fork copies no other thread). It
reads requests as JSON lines on its standard input and answers ``started ID PID`` and
``exited PID CODE`` lines on its standard output; a test-side thread routes the answers.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path

# Every module an agentrt command loads: the commands themselves, the in-process worker of
# `agentrt run` and what it runs.
PRELOAD = (
    "agentrt.cli",
    "agentrt.cli._common",
    "agentrt.cli._codec",
    "agentrt.cli._doctor",
    "agentrt.cli._graph",
    "agentrt.cli._mcp",
    "agentrt.cli._memory",
    "agentrt.cli._process",
    "agentrt.cli._demo",
    "agentrt.cli._serve",
    "agentrt.cli._session",
    "agentrt.cli._skills",
    "agentrt.cli._task",
    "agentrt.cli._trajectory",
    "agentrt.worker._worker",
    "agentrt.worker._plugin",
    "agentrt.gateway",
)

ZYGOTE = r"""
import importlib, json, os, random, selectors, signal, sys, threading

for name in sys.argv[1:]:
    importlib.import_module(name)
if threading.active_count() != 1:
    sys.exit(f"importing the command line started threads: {threading.enumerate()}")

wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *_: None)
selector = selectors.DefaultSelector()
selector.register(0, selectors.EVENT_READ, "requests")
selector.register(wake_r, selectors.EVENT_READ, "children")
os.write(1, b"ready\n")
pending = b""


def child(request):
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.close(wake_r)
    os.close(wake_w)
    random.seed()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in (
        (0, request["stdin"] or os.devnull, os.O_RDONLY),
        (1, request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
    ):
        opened = os.open(path, flags, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    sys.argv = ["agentrt", *request["args"]]
    from agentrt.cli import main

    main()  # exits with os._exit


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
        data = os.read(0, 65536)
        if not data:
            sys.exit(0)
        pending += data
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                try:
                    child(request)
                finally:
                    os._exit(70)
            os.write(1, f"started {request['id']} {pid}\n".encode())
"""


class CliProcesses:
    """Runs ``agentrt`` commands as children of one zygote process (see the module docstring)."""

    def __init__(self) -> None:
        self._log = tempfile.NamedTemporaryFile(prefix="agentrt-cli-zygote-", suffix=".log", delete=False)
        self._process = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE, *PRELOAD],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, start_new_session=True,
        )
        assert self._process.stdout is not None and self._process.stdin is not None
        if self._process.stdout.readline() != b"ready\n":
            raise RuntimeError(f"the command-line zygote did not start: {Path(self._log.name).read_text()}")
        self._lock = threading.Lock()
        self._next_id = 0
        self._started: dict[int, Future[int]] = {}
        self._exited: dict[int, Future[int]] = {}
        self._early_exits: dict[int, int] = {}
        threading.Thread(target=self._route, name="cli-zygote-answers", daemon=True).start()

    def _route(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            kind, first, second = line.decode().split()
            with self._lock:
                if kind == "started":
                    self._started.pop(int(first)).set_result(int(second))
                elif int(first) in self._exited:
                    self._exited.pop(int(first)).set_result(int(second))
                else:
                    self._early_exits[int(first)] = int(second)
        with self._lock:
            for future in [*self._started.values(), *self._exited.values()]:
                future.set_exception(RuntimeError(f"the command-line zygote ended: {Path(self._log.name).read_text()}"))

    async def run(
        self, args: list[str], *, env: dict[str, str], cwd: Path, input: str | None = None, timeout: float = 120,
        stdout: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``agentrt *args`` in a forked child; its output once it exits (``TimeoutError`` after
        ``timeout`` seconds, the child killed). ``stdout``: the file its standard output goes to, for a
        test that reads it while the command runs."""
        with tempfile.TemporaryDirectory(prefix="agentrt-cli-") as scratch:
            streams = {name: Path(scratch) / name for name in ("stdin", "stdout", "stderr")}
            streams["stdout"] = stdout or streams["stdout"]
            if input is not None:
                streams["stdin"].write_text(input)
            with self._lock:
                self._next_id += 1
                started: Future[int] = Future()
                self._started[self._next_id] = started
                request = {
                    "id": self._next_id, "args": list(args), "env": env, "cwd": str(cwd),
                    "stdin": str(streams["stdin"]) if input is not None else None,
                    "stdout": str(streams["stdout"]), "stderr": str(streams["stderr"]),
                }
                assert self._process.stdin is not None
                self._process.stdin.write((json.dumps(request) + "\n").encode())
                self._process.stdin.flush()
            pid = await asyncio.wrap_future(started)
            with self._lock:
                exited: Future[int] = Future()
                if pid in self._early_exits:
                    exited.set_result(self._early_exits.pop(pid))
                else:
                    self._exited[pid] = exited
            try:
                code = await asyncio.wait_for(asyncio.wrap_future(exited), timeout)
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                raise
            return subprocess.CompletedProcess(
                list(args), code, streams["stdout"].read_text(errors="replace"), streams["stderr"].read_text(errors="replace")
            )

    def close(self) -> None:
        self._process.kill()
        self._process.wait()
        os.unlink(self._log.name)


_processes: CliProcesses | None = None
_processes_lock = threading.Lock()


def cli_processes() -> CliProcesses:
    """This test process's zygote, started on first use and killed at exit."""
    global _processes
    with _processes_lock:
        if _processes is None:
            _processes = CliProcesses()
            atexit.register(_processes.close)
        return _processes
