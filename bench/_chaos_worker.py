"""The chaos worker: the normal agentrt worker plus one effectful tool, ``chaos.append``.

Run as ``python -m bench._chaos_worker`` (with the repository on ``PYTHONPATH``), or as ``run()`` in a
child of ``bench._chaos_zygote`` that has these modules imported already. Configuration
comes from ``AgentrtConfig.load()``: ``AGENTRT_TEMPORAL_ADDRESS``, ``AGENTRT_TASK_QUEUE``,
``AGENTRT_DATABASE_URL``. When ``CHAOS_READY_FILE`` is set, the file is created once the
worker is polling, so the harness can time its kills from that moment. ``CHAOS_APPEND_RISK``
(default ``effectful``) overrides the tool's risk class: ``idempotent`` takes it out of the
effect ledger, which shows the harness catching the duplicates that come back.

``chaos.append`` sleeps in this process before and after its effect (one ``O_APPEND``
write of ``line + "\\n"``), so a SIGKILL of the worker can land before, during or after
the effect: the claimed-without-record windows the effect ledger has to survive. It
prints ``@chaos <phase> <line>`` to stdout at each phase (``before``, ``applying``,
``after``, ``done``) so the harness can aim some kills at those windows.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import NoReturn

from pydantic import Field

from agentrt.activities.tools import (
    Tool,
    ToolArgs,
    ToolContext,
    ToolOutput,
    ToolRegistry,
    default_registry,
    resolve_in_workspace,
)
from agentrt.client import connect
from agentrt.schemas import ToolError
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, build_worker

_STEP_SECONDS = 0.1
MARK = "@chaos"


def _pause(seconds: float, ctx: ToolContext) -> None:
    """Sleep ``seconds`` in short steps, heartbeating, so a dead worker's attempt times out fast."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        ctx.heartbeat()
        time.sleep(min(_STEP_SECONDS, left))
    ctx.heartbeat()


def _mark(phase: str, line: str) -> None:
    """Tell the harness (reading stdout) where the effect is: before, applying, after, done."""
    print(f"{MARK} {phase} {line}", flush=True)


class ChaosAppend(Tool):
    name = "chaos.append"
    description = "Append one line to a file in the workspace (pausing before and after, for chaos testing)."
    risk = "effectful"

    class Args(ToolArgs):
        path: str = Field(description="File to append to, relative to the workspace.")
        line: str = Field(min_length=1, description="The line to append (a newline is added).")
        pause_before_seconds: float = Field(0.0, ge=0, le=60, description="Sleep this long before appending.")
        pause_after_seconds: float = Field(0.0, ge=0, le=60, description="Sleep this long after appending.")

    def run(self, args: Args, ctx: ToolContext) -> ToolOutput:
        path = resolve_in_workspace(ctx.workspace, args.path)
        if path.is_dir():
            raise ToolError(f"{args.path!r} is a directory")
        _mark("before", args.line)
        _pause(args.pause_before_seconds, ctx)
        _mark("applying", args.line)
        data = (args.line + "\n").encode("utf-8")
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)  # one write(2) with O_APPEND: the line lands whole or not at all
        finally:
            os.close(fd)
        _mark("after", args.line)
        _pause(args.pause_after_seconds, ctx)
        _mark("done", args.line)
        return ToolOutput(text="appended")


def chaos_registry(risk: str | None = None) -> ToolRegistry:
    """``default_registry()`` plus ``chaos.append`` (its risk class overridden by ``risk``)."""
    registry = default_registry()
    tool = ChaosAppend()
    if risk:
        tool.risk = risk  # type: ignore[misc] - e.g. "idempotent" takes it out of the effect ledger
    registry.register(tool)
    return registry


def _core_log_level() -> None:
    """``CHAOS_CORE_LOG`` (e.g. ``DEBUG``): the SDK core's log level for its workflow machinery, to
    see which jobs each activation carried when a history will not replay."""
    level = os.environ.get("CHAOS_CORE_LOG")
    if not level:
        return
    from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

    class _WorkflowMachinery(TelemetryFilter):
        def formatted(self) -> str:
            return f"WARN,temporalio_sdk_core=WARN,temporalio_sdk_core::worker::workflow={level}"

    logging = LoggingConfig(filter=_WorkflowMachinery(core_level=level, other_level="WARN"))
    Runtime.set_default(Runtime(telemetry=TelemetryConfig(logging=logging)))


async def main() -> None:
    _core_log_level()
    config = AgentrtConfig.load()
    store = Store.open(config.database_url)
    client = await connect(config.temporal_address, config.namespace, plugin=AgentrtPlugin(config, store))
    worker = build_worker(client, config, store, chaos_registry(os.environ.get("CHAOS_APPEND_RISK") or None))
    running = asyncio.create_task(worker.run())
    await asyncio.sleep(0.3)  # validation (a namespace describe) and the first polls
    if not running.done():
        ready = os.environ.get("CHAOS_READY_FILE")
        if ready:
            Path(ready).write_text(str(os.getpid()))
        print(f"chaos worker {os.getpid()} polling {config.task_queue!r} at {config.temporal_address}", flush=True)
    await running


def run() -> NoReturn:
    """Run the worker until it is killed or fails; exits (``os._exit``: 0, or 1 after printing the
    error to stderr) without CPython's finalization, as a killed worker would."""
    try:
        asyncio.run(main())
    except BaseException as err:  # noqa: BLE001 - report and exit without CPython finalization
        print(f"chaos worker {os.getpid()} exiting: {type(err).__name__}: {err}", file=sys.stderr, flush=True)
        sys.stderr.flush()
        os._exit(1)
    os._exit(0)


if __name__ == "__main__":
    run()
