"""bench.first_token's report and its model, without running the benchmark: the added time is the
path's median over the direct call's of the same store and delay, and the split says where it went."""

from __future__ import annotations

import re

import pytest

from bench.first_token import FirstTokenReport, main, sample

LINE = re.compile(
    r"first_token worst_added_p50_ms=\d+\.\d gateway_added_p50_ms=\d+\.\d client_added_p50_ms=\d+\.\d "
    r"delays_ms=300 stores=sqlite"
)


def test_the_added_time_is_over_the_direct_call_of_the_same_store_and_delay() -> None:
    report = FirstTokenReport([300], 3, ["sqlite"])
    report.samples[("sqlite", "direct", 300)] += [(301.0, 1.0), (302.0, 1.0), (330.0, 2.0)]
    report.samples[("sqlite", "gateway", 300)] += [(360.0, 40.0), (380.0, 50.0), (900.0, 60.0)]
    report.samples[("sqlite", "python client", 300)] += [(340.0, 30.0), (350.0, 35.0), (355.0, 36.0)]
    assert report.added("sqlite", "gateway", 300) == 380.0 - 302.0
    assert report.split(("sqlite", "gateway", 300), 300) == (50.0, 30.0)  # medians: to the model, after its token
    assert LINE.fullmatch(report.line())
    assert "gateway_added_p50_ms=78.0" in report.line() and "client_added_p50_ms=48.0" in report.line()
    assert "worst_added_p50_ms=78.0" in report.line()
    assert "added p50 ms" in report.table()


def test_a_sample_reads_the_model_s_arrival_stamp_from_the_first_token() -> None:
    assert sample(100.0, 100.4, "[100.05] token") == pytest.approx((400.0, 50.0))
    with pytest.raises(RuntimeError, match="carries no arrival time"):
        sample(100.0, 100.4, "token0")


@pytest.mark.parametrize("argv", [["--stores", "mysql"], ["--repeats", "0"], ["--delays-ms", ""]])
def test_parameters_the_benchmark_cannot_run_with_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(argv)
    assert exit.value.code == 2
