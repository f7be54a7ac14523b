"""bench.gateway_load: its short form end to end (a dev server, the paced model, a worker and the
gateway as processes; a few clients for a few seconds), and its accounting."""

from __future__ import annotations

import asyncio
import re

import pytest

from bench import gateway_load
from bench.gateway_load import Reference, Report, Settings, TimedTally

pytestmark = pytest.mark.runs_first  # long: handed out first (tests/conftest.py)

LINE = re.compile(
    r"gateway_load clients=3 sends_per_s=2 minutes=0\.05 errors=0 send_accepted_p50=\d+\.\d{3} p95=\d+\.\d{3} "
    r"delta_to_client_p50=\d+\.\d{3} p95=\d+\.\d{3} gateway_rss_mb=\d+->\d+"
)


def test_the_short_form_runs_with_no_error_and_gives_every_figure() -> None:
    settings = Settings(clients=3, sends_per_s=2, minutes=0.05, chunks=5, chunk_ms=10, drain_seconds=60)
    report = asyncio.run(gateway_load.run_benchmark(settings, progress=lambda _: None))

    assert LINE.fullmatch(report.line()), report.table()
    assert report.ok and report.errors() == 0
    assert report.sends == 6 and len(report.send_seconds) == 6
    assert report.turn_statuses() == {"completed": 9}  # each session's first turn and the six sends
    assert all(t.ended and t.latencies for t in report.tallies)


def test_a_delta_is_timed_from_the_model_s_schedule_of_its_chunk() -> None:
    tally = TimedTally("sse-001", "sse", chunk_seconds=0.025, since=99.0)
    call = ("turn-2", 1, 1)
    tally.time_delta(100.1, call, "[100.000000] t2c0 ")
    tally.time_delta(100.3, call, "t2c4 ")
    tally.time_delta(100.3, ("turn-3", 1, 1), "t3c4 ")  # no stamp seen for that call: not timed
    tally.time_delta(100.3, ("turn-1", 1, 1), "[98.000000] t1c0 ")  # a call from before the window: not timed
    assert tally.latencies == pytest.approx([0.1, 0.2])


def test_every_fault_of_a_stream_or_a_request_is_an_error() -> None:
    report = Report(Settings(clients=1))
    tally = TimedTally("sse-001", "sse", ended=True)
    report.tallies, report.sessions = [tally], {"sse-001": "s1"}
    report.references["s1"] = Reference({1, 2}, set(), set(), 0)
    tally.event_seqs = {1, 2}
    assert report.errors() == 0

    tally.breaks = 1  # the stream ended before SessionArchived, and was resumed
    tally.event_seqs = {1}  # one item never came
    report.http_errors["send 503"] = 2
    assert report.errors() == 1 + 1 + 2
    tally.ended = False
    assert report.errors() == 5 and not report.ok


@pytest.mark.parametrize("argv", [["--clients", "0"], ["--sends-per-s", "0"], ["--minutes", "0"], ["--chunks", "0"]])
def test_parameters_the_benchmark_cannot_run_with_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        gateway_load.main(argv)
    assert caught.value.code == 2
