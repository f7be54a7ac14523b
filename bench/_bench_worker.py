"""A benchmark's worker in a process of its own, so its memory and CPU can be read from /proc/<pid>.

    python -m bench._bench_worker agentrt|floor --address HOST:PORT --task-queue Q
        [--database-url URL] [--max-concurrent-activities 32] [--max-cached-workflows 1000]
        [--sticky-timeout 3] [--max-concurrent-workflow-tasks N] [--ready-file PATH]

``agentrt``: the agentrt worker as ``agentrt worker`` builds it (``worker.build_worker``: the
session workflow, every activity, the default tool registry, a client connected with
``AgentrtPlugin`` on the store at ``--database-url``). ``floor``: a plain Temporal worker
for ``bench._floor`` (``FloorAgentWorkflow`` and ``FLOOR_ACTIVITIES``, default data
converter and sandbox), with the same activity slots and sticky cache. One module for both,
so the two systems are started, configured and measured the same way.

``--ready-file`` is created once the worker polls. The parent (``WorkerProcess``) starts the
process in a session of its own and stops it with SIGKILL on its process group. SIGUSR1 makes the
worker run a full garbage collection (``WorkerProcess.collect_garbage``), so a reading of its
memory does not count cycles the collector has not reached yet.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from datetime import timedelta
from pathlib import Path

from agentrt.worker import STICKY_SCHEDULE_TO_START

if TYPE_CHECKING:
    from temporalio.client import Client

    from agentrt.store import Store

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MAX_CONCURRENT_ACTIVITIES = 32  # build_worker's default
DEFAULT_MAX_CACHED_WORKFLOWS = 1000  # the SDK's default
DEFAULT_STICKY_TIMEOUT_SECONDS = STICKY_SCHEDULE_TO_START.total_seconds()  # agentrt's build_worker default
SYSTEMS = ("agentrt", "floor")
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class WorkerSettings:
    """What a benchmark worker runs with.

    - ``max_concurrent_activities``: activity slots; agentrt's synchronous activities (tools)
      run on a thread pool of this size.
    - ``max_cached_workflows``: the sticky cache; an evicted workflow replays its history on
      its next workflow task.
    - ``sticky_timeout_seconds``: the sticky queue's schedule-to-start timeout; after a crash
      a workflow task pending on the dead worker's sticky queue waits this long.
    - ``database_url``: agentrt's store (SQLite or PostgreSQL); the floor keeps nothing outside
      history.
    - ``max_concurrent_workflow_tasks``: workflow task slots (None: the SDK's default).
    """

    max_concurrent_activities: int = DEFAULT_MAX_CONCURRENT_ACTIVITIES
    max_cached_workflows: int = DEFAULT_MAX_CACHED_WORKFLOWS
    database_url: str = ""
    sticky_timeout_seconds: float = DEFAULT_STICKY_TIMEOUT_SECONDS
    max_concurrent_workflow_tasks: int | None = None

    def describe(self) -> str:
        return (
            f"max_concurrent_activities={self.max_concurrent_activities} "
            f"(agentrt: also its activity threads), max_cached_workflows={self.max_cached_workflows} (sticky cache), "
            f"sticky_queue_schedule_to_start_timeout={self.sticky_timeout_seconds:g} s; "
            + ("SDK defaults otherwise: max_concurrent_workflow_tasks, " if self.max_concurrent_workflow_tasks is None
               else f"max_concurrent_workflow_tasks={self.max_concurrent_workflow_tasks}; SDK defaults otherwise: ")
            + "5 workflow and 5 activity pollers"
        )


async def agentrt_connection(address: str, database_url: str) -> tuple[Store, Client]:
    """The store at ``database_url`` and a client of the server at ``address`` connected with
    ``AgentrtPlugin`` on it, as a benchmark's driver uses them; the caller closes the store (closed
    here when the connection fails)."""
    from agentrt.client import connect
    from agentrt.store import Store
    from agentrt.worker import AgentrtConfig, AgentrtPlugin

    store = await asyncio.to_thread(Store.open, database_url)
    try:
        config = AgentrtConfig(temporal_address=address, database_url=database_url)
        return store, await connect(address, plugin=AgentrtPlugin(config, store))
    except BaseException:
        store.close()
        raise


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads) so far, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # after the ")": state is field 3, utime field 14, stime field 15
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set size (``VmHWM``, MiB) so far, from /proc/<pid>/status."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def rss_mb(pid: int) -> float:
    """The process's resident set size now (``VmRSS``, MiB), from /proc/<pid>/status."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class WorkerProcess:
    """One ``python -m bench._bench_worker`` child: started, read from /proc, SIGKILLed."""

    def __init__(self, system: str, address: str, task_queue: str, settings: WorkerSettings, log: Path) -> None:
        if system not in SYSTEMS:
            raise ValueError(f"system must be one of {SYSTEMS}, not {system!r}")
        self.system = system
        self.address = address
        self.task_queue = task_queue
        self.settings = settings
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.spawned_at = 0.0  # time.monotonic() just before the process was spawned
        self.ready_at = 0.0

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def command(self, ready_file: Path) -> list[str]:
        return [
            sys.executable, "-m", "bench._bench_worker", self.system,
            "--address", self.address, "--task-queue", self.task_queue,
            "--database-url", self.settings.database_url,
            "--max-concurrent-activities", str(self.settings.max_concurrent_activities),
            "--max-cached-workflows", str(self.settings.max_cached_workflows),
            "--sticky-timeout", str(self.settings.sticky_timeout_seconds),
            "--ready-file", str(ready_file),
        ] + ([] if self.settings.max_concurrent_workflow_tasks is None
             else ["--max-concurrent-workflow-tasks", str(self.settings.max_concurrent_workflow_tasks)])

    async def start(self, timeout: float = 60.0) -> WorkerProcess:
        """Spawn the process and return once it polls; raises ``RuntimeError`` if it dies or hangs first."""
        ready = self.log.with_suffix(f".{time.monotonic_ns()}.ready")
        self._spawn(ready)
        deadline = self.spawned_at + timeout
        while not ready.exists():
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.system} worker exited with {self.process.returncode}; see {self.log}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"{self.system} worker not polling after {timeout:g} s; see {self.log}")
            await asyncio.sleep(0.02)
        self.ready_at = time.monotonic()
        ready.unlink(missing_ok=True)
        return self

    def _spawn(self, ready: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        env.pop("AGENTRT_CONFIG", None)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.spawned_at = time.monotonic()
            self.process = subprocess.Popen(
                self.command(ready), cwd=self.log.parent, env=env, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.pid)

    def peak_rss_mb(self) -> float:
        return peak_rss_mb(self.pid)

    def rss_mb(self) -> float:
        return rss_mb(self.pid)

    def collect_garbage(self) -> None:
        """Ask the worker for a full garbage collection (SIGUSR1); it runs at the event loop's next turn."""
        os.kill(self.pid, signal.SIGUSR1)

    def kill(self) -> None:
        """SIGKILL the process group, as a crash would, and reap it."""
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()


# ---------------------------------------------------------------------------- the child


async def _agentrt_worker(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from agentrt.activities.tools import default_registry
    from agentrt.client import connect
    from agentrt.store import Store
    from agentrt.worker import AgentrtConfig, AgentrtPlugin, build_worker

    config = AgentrtConfig(temporal_address=args.address, task_queue=args.task_queue, database_url=args.database_url or None)
    store = Store.open(config.database_url)
    client = await connect(args.address, plugin=AgentrtPlugin(config, store))
    return build_worker(
        client, config, store, default_registry(),
        max_concurrent_activities=args.max_concurrent_activities,
        max_concurrent_workflow_tasks=args.max_concurrent_workflow_tasks,
        max_cached_workflows=args.max_cached_workflows,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=args.sticky_timeout),
    )


async def _floor_worker(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from temporalio.client import Client
    from temporalio.worker import Worker

    from bench._floor import FLOOR_ACTIVITIES, FloorAgentWorkflow

    client = await Client.connect(args.address)
    return Worker(
        client,
        task_queue=args.task_queue,
        workflows=[FloorAgentWorkflow],
        activities=FLOOR_ACTIVITIES,
        max_concurrent_activities=args.max_concurrent_activities,
        max_concurrent_workflow_tasks=args.max_concurrent_workflow_tasks,
        max_cached_workflows=args.max_cached_workflows,
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=args.sticky_timeout),
    )


async def _main(args: argparse.Namespace) -> None:
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, gc.collect)
    worker = await (_agentrt_worker(args) if args.system == "agentrt" else _floor_worker(args))
    running = asyncio.create_task(worker.run())
    await asyncio.sleep(0.3)  # validation (a namespace describe) and the first polls
    if not running.done():
        if args.ready_file:
            Path(args.ready_file).write_text(str(os.getpid()))
        print(f"{args.system} worker {os.getpid()} polling {args.task_queue!r} at {args.address}", flush=True)
    await running


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench._bench_worker", description=__doc__.split("\n\n")[0])
    parser.add_argument("system", choices=SYSTEMS)
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--database-url", default="", help="agentrt's store (ignored by the floor)")
    parser.add_argument("--max-concurrent-activities", type=int, default=DEFAULT_MAX_CONCURRENT_ACTIVITIES)
    parser.add_argument("--max-cached-workflows", type=int, default=DEFAULT_MAX_CACHED_WORKFLOWS)
    parser.add_argument("--sticky-timeout", type=float, default=DEFAULT_STICKY_TIMEOUT_SECONDS)
    parser.add_argument("--max-concurrent-workflow-tasks", type=int, default=None)
    parser.add_argument("--ready-file", default="")
    args = parser.parse_args(argv)
    try:
        asyncio.run(_main(args))
    except BaseException as err:  # noqa: BLE001 - report and exit without CPython finalization
        print(f"{args.system} worker {os.getpid()} exiting: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)


if __name__ == "__main__":
    main()
