"""bench.recovery at a small size: a SIGKILLed worker's turn goes on on a new worker and completes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentrt.worker import DevServer
from bench import recovery

pytestmark = pytest.mark.runs_first  # long: handed out first (tests/conftest.py)

LINE = re.compile(r"recovery resume_p50=\d+\.\d\d resume_p95=\d+\.\d\d resume_max=\d+\.\d\d")


async def test_a_turn_interrupted_by_a_worker_kill_resumes_on_the_new_worker_and_completes(
    temporal_server: DevServer, tmp_path: Path
) -> None:
    # Short timeouts keep the test quick; the benchmark itself runs with the defaults.
    report = await recovery.measure(
        temporal_server.address, tmp_path, kills=1, seed=3, heartbeat_timeout_seconds=2, sticky_timeout_seconds=2
    )

    [kill] = report.kills
    assert kill.status == "completed"
    assert kill.resume_seconds is not None and kill.resume_seconds > 0
    # The new worker's first write for the session comes no later than the next event.
    assert kill.work_seconds is not None and 0 < kill.work_seconds <= kill.resume_seconds
    assert "work resumed: median" in report.table()
    assert kill.next_event
    assert kill.ready_at >= kill.spawned_at
    assert LINE.fullmatch(report.line())
    assert "waited for" in report.table()


def test_parameters_the_benchmark_cannot_run_with_are_refused() -> None:
    with pytest.raises(ValueError, match="kills"):
        recovery.check_parameters(0, 15, None, 10)
    with pytest.raises(ValueError, match="heartbeat"):
        recovery.check_parameters(1, 15, 0, 10)
