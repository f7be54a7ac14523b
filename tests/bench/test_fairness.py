"""bench.fairness at a small size: its three phases run, every B turn completes, the last line is exact."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from agentrt.worker import DevServer
from bench import fairness

pytestmark = pytest.mark.runs_first  # long: handed out first (tests/conftest.py)

LINE = re.compile(r"fairness no_lanes_p95_vs_unloaded=\d+\.\d\d lanes_p95_vs_unloaded=\d+\.\d\d")


async def test_a_small_flood_and_a_few_turns_of_the_other_tenant_run_in_the_three_phases(
    temporal_server: DevServer, tmp_path: Path
) -> None:
    report = await fairness.measure(
        temporal_server.address, tmp_path, flood=4, turns=2, interval=0.2, model_seconds=0.3,
        settings=dataclasses.replace(fairness.DEFAULT_SETTINGS, max_concurrent_activities=1),
    )

    assert [p.name for p in report.phases] == list(fairness.PHASES)
    assert all(p.b_completed == 2 for p in report.phases)
    flood = report.phase("flood, lanes")
    assert flood is not None and len(flood.a_turns) == 4 and flood.a_left_at_b_start > 0
    assert report.passed and LINE.fullmatch(report.line())
    assert "A queued in s" in report.table() and "max_concurrent_activities=1" in report.settings_text()


def test_parameters_the_benchmark_cannot_run_with_are_refused() -> None:
    with pytest.raises(ValueError, match="flood"):
        fairness.check_parameters(0, 20, 2.0, 2.0, 50)
    with pytest.raises(ValueError, match="interval"):
        fairness.check_parameters(500, 20, 0, 2.0, 50)
