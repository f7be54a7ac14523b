"""What every benchmark's ``main`` does after parsing its arguments: quiet SDK logs, run, print, exit."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn


def counts(text: str) -> list[int]:
    """An argparse ``type``: comma-separated integers (``"100,300,1000"``)."""
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from err


def print_progress(text: str) -> None:
    print(text, flush=True)


def quiet_sdk_logs() -> None:
    """Keep the SDK's warnings (history-size warnings, retries while a server restarts) out of a
    benchmark's output: its core logs errors only. Call before any client or worker exists."""
    from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter

    quiet = LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))
    Runtime.set_default(Runtime(telemetry=TelemetryConfig(logging=quiet)))


def run_and_exit(
    benchmark: Callable[[], Awaitable[Any]], passed: Callable[[Any], bool], *, settings: bool = False
) -> NoReturn:
    """Run ``benchmark()`` with the SDK's warnings silenced, print its report (``settings_text()``
    when ``settings``, ``table()``, then ``line()`` last) and exit 0 if ``passed(report)``, else 1
    (1 with the traceback when it raised). Exits with ``os._exit``: the client's core threads can
    abort CPython's finalization (temporalio/sdk-python#300)."""
    quiet_sdk_logs()
    code = 0
    try:
        report = asyncio.run(benchmark())  # type: ignore[arg-type]
        if settings:
            print(report.settings_text())
        print(report.table())
        print(report.line())
        code = 0 if passed(report) else 1
    except Exception:  # noqa: BLE001 - reported, then the process exits without the SDK's finalizer crash
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
