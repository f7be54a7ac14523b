"""bench.store_outage's accounting and options: its last line, what fails it. The bench itself
stops a PostgreSQL server for 30 s under load (minutes) and is not run here; the outage it drives
is tested in tests/e2e/test_store_outage.py and tests/worker/test_store_outage.py."""

from __future__ import annotations

import pytest

from bench import soak, store_outage
from bench.soak import Tally


def test_the_last_line_gives_the_waits_and_the_resume_from_the_store_s_going_and_coming_back() -> None:
    line = store_outage.Timeline("postgresql", gone=15.0, back=45.0, first_wait=16.5, last_wait=46.0, waiting_max=9, first_turn_after=47.25)
    report = soak.Report(minutes=1.25, sessions=10, turns=120)
    report.tallies = [Tally(f"sse-{i}", "sse", ended=True) for i in range(10)]
    text = store_outage.summary(line, report, store_outage.parse(["--store", "postgresql"]))
    assert text == (
        "store_outage store=postgresql sessions=10 outage_s=30 turns=120 failed=0 lost=0 duplicated=0 "
        "sessions_waiting_max=9 first_wait_s=1.5 last_wait_after_return_s=1.0 first_turn_after_return_s=2.2 "
        "stream_duplicates=0 followers_ended=10/10"
    )


def test_a_store_that_never_went_says_so_with_dashes() -> None:
    line = store_outage.Timeline("sqlite")
    text = store_outage.summary(line, soak.Report(minutes=1, sessions=1), store_outage.parse([]))
    assert "first_wait_s=- last_wait_after_return_s=- first_turn_after_return_s=-" in text


@pytest.mark.parametrize("argv", [["--sessions", "0"], ["--outage", "0"], ["--before", "-1"], ["--store", "mysql"]])
def test_options_out_of_range_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        store_outage.parse(argv)
