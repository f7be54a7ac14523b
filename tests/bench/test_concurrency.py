"""bench.concurrency at a small size: every turn of both systems completes, counts add up, the last line is exact."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentrt.worker import DevServer
from bench import concurrency

pytestmark = pytest.mark.runs_first  # long: handed out first (tests/conftest.py)

LINE = re.compile(r"concurrency agentrt_vs_floor_rps=\d+\.\d\d p95_vs_lone=\d+\.\d\d")


async def test_a_small_burst_and_steady_arrivals_complete_every_turn_and_end_with_the_exact_line(
    temporal_server: DevServer, tmp_path: Path
) -> None:
    report = await concurrency.measure(temporal_server.address, tmp_path, sessions=[5], steady_seconds=2, lone_runs=2)

    assert [(b.system, b.sessions, b.completed, len(b.turns)) for b in report.bursts] == [
        ("agentrt", 5, 5, 5),
        ("floor", 5, 5, 5),
    ]
    assert report.steady is not None
    assert [t.status for t in report.steady.lone] == ["completed", "completed"]
    assert report.steady.turns and report.steady.completed == len(report.steady.turns)
    assert report.turns_completed == report.turns_expected == 10 + 2 + len(report.steady.turns)
    assert all(b.worker_peak_rss_mb > 0 and b.worker_cpu_seconds > 0 for b in report.bursts)
    assert LINE.fullmatch(report.line())
    assert report.table().count("\n") >= 4 and "sticky_queue_schedule_to_start_timeout" in report.settings_text()


def test_parameters_the_workload_cannot_have_are_refused() -> None:
    with pytest.raises(ValueError, match="sessions"):
        concurrency.check_parameters([0], 5, 5120, 30, 5, 50, "client")
    with pytest.raises(ValueError, match="wait"):
        concurrency.check_parameters([5], 5, 5120, 30, 5, 50, "sleep")
