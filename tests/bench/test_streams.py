"""bench.streams at a small size: both systems deliver the model call to every subscriber, and
only agentrt's stream lets a client drop the abandoned attempt's text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agentrt.store import Store
from agentrt.worker import DevServer
from bench import streams

LINE = re.compile(
    r"streams p50_ms=\d+\.\d p95_ms=\d+\.\d baseline_p50_ms=\d+\.\d baseline_p95_ms=\d+\.\d "
    r"p50_ratio=\d+\.\d\d p95_ratio=\d+\.\d\d duplicates=\d+ baseline_duplicates=\d+"
)


async def test_a_retried_call_leaves_no_duplicate_in_agentrt_s_stream_and_some_in_the_baseline(
    temporal_server: DevServer, tmp_path: Path
) -> None:
    settings = streams.Settings(chunks=6, interval_ms=5, subscribers=2, repeats=1, poll_seconds=0.02)
    with Store.open(f"sqlite:///{tmp_path / 'bench.db'}") as store:
        report = await streams.measure(temporal_server.address, store, settings)

    assert report.ok
    # Per subscriber: 5 events, 3 chunks of attempt 1, 6 of attempt 2; the baseline also has the late one.
    assert len(report.agentrt.latencies()) == 2 * (5 + 3 + 6)
    assert len(report.baseline.latencies()) == 2 * (5 + 3 + 1 + 6)
    assert report.agentrt.late(settings) == 0 and report.baseline.late(settings) == 2
    assert report.agentrt.duplicates(settings) == 0
    assert report.baseline.duplicates(settings) == 2 * (3 + 1)
    assert LINE.fullmatch(report.line())
    assert "ratios (agentrt / workflow_streams, same run)" in report.table()


@pytest.mark.parametrize("argv", [["--chunks", "3"], ["--subscribers", "0"], ["--poll-seconds", "0"]])
def test_parameters_the_benchmark_cannot_run_with_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        streams.main(argv)
    assert caught.value.code == 2
