"""bench.idle's pure parts: its parameters, which sessions it wakes, what it reads from SQLite and how it reports."""

from __future__ import annotations

import random
import re
import sqlite3
from pathlib import Path

import pytest

from bench import idle

LINE = re.compile(
    r"idle sessions=\d+ cache=\d+( rss_mib_at_\d+=\d+)+ wake_first_token_p95_ms=(\d+|n/a) wake_end_p95_ms=(\d+|n/a) "
    r"cached_first_token_p95_ms=(\d+|n/a) server_db_bytes_per_session=(\d+|n/a) store_bytes_per_session=(\d+|n/a)"
)


def _footprint(rss: float, db: int, store: int) -> idle.Footprint:
    return idle.Footprint(worker_rss_mib=rss, worker_peak_mib=rss + 5, server_rss_mib=300, server_db_bytes=db, store_bytes=store)


def _report() -> idle.IdleReport:
    report = idle.IdleReport(idle.WorkerSettings(max_cached_workflows=100, database_url="sqlite:///x.db"), 1000, 50, load_before="1.00 1.00 1.00")
    report.baseline = _footprint(150, 1_000_000, 300_000)
    report.checkpoints = [
        idle.Checkpoint(100, 0, 10, _footprint(170, 5_000_000, 1_000_000), "2.00 1.00 1.00"),
        idle.Checkpoint(1000, 0, 70, _footprint(179, 45_000_000, 7_800_000), "3.00 2.00 1.00"),
    ]
    report.wakes = [
        idle.Wake("evicted", i, "completed", accepted=0.03, first_token=0.05 + i / 100, end=0.08 + i / 100, queue=0.001, run=0.02)
        for i in range(20)
    ] + [idle.Wake("cached", i, "completed", accepted=0.01, first_token=0.03, end=0.06) for i in range(20)]
    report.replays = [idle.Replays(100, 200, 8, 149, 183), idle.Replays(10, 200, 3, 149, 161)]
    report.load_after = "3.00 2.00 1.00"
    return report


def test_a_report_gives_growth_per_session_percentiles_and_the_exact_last_line() -> None:
    report = _report()

    assert report.per_session("server_db_bytes") == pytest.approx(44_000)
    assert report.per_session("store_bytes") == pytest.approx(7_500)
    filling, beyond = report.rss_growth_kib()
    assert filling == pytest.approx(20 * 1024 / 100) and beyond == pytest.approx(9 * 1024 / 900)
    assert report.wake_ms("evicted", "first_token", 95) == pytest.approx(1000 * (0.05 + 18 / 100))
    assert report.passed
    assert LINE.fullmatch(report.line())
    assert "rss_mib_at_100=170 rss_mib_at_1000=179" in report.line()
    assert "RSS per cached idle session (the two replay workers' difference): 250 KiB" in report.table()
    table = report.table()
    assert re.search(r"^evicted +20/20 +30/30 +140/230 +170/260 +1 +20$", table, re.M)
    assert re.search(r"^cached +20/20 .* n/a +n/a$", table, re.M)
    assert "cache 10: 200 idle sessions" in table and "3.00 2.00 1.00" in table


def test_a_report_without_wakes_says_n_a_and_a_failed_wake_fails_it() -> None:
    report = _report()
    report.wakes = []
    assert "wake_first_token_p95_ms=n/a" in report.line() and LINE.fullmatch(report.line())
    report.wakes = [idle.Wake("evicted", 3, "error", detail="RPCError: gone")]
    assert not report.passed and "1 wake(s) not completed, e.g. error: RPCError: gone" in report.table()


def test_wakes_alternate_between_sessions_evicted_long_ago_and_the_last_ones_started() -> None:
    picks = idle.wake_candidates(10_000, 1000, 50, random.Random(1))

    assert [group for group, _ in picks] == ["evicted", "cached"] * 50
    evicted = [i for group, i in picks if group == "evicted"]
    cached = [i for group, i in picks if group == "cached"]
    assert len(set(evicted)) == len(set(cached)) == 50
    assert max(evicted) < 8000 and min(cached) >= 9500


def test_parameters_the_benchmark_cannot_run_with_are_refused() -> None:
    idle.check_parameters(1000, [200, 500, 1000], idle.default_cache(1000), 20, 50)
    with pytest.raises(ValueError, match="last checkpoint"):
        idle.check_parameters(1000, [200, 500], 100, 20, 50)
    with pytest.raises(ValueError, match="increasing"):
        idle.check_parameters(1000, [500, 200, 1000], 100, 20, 50)
    with pytest.raises(ValueError, match="wakes need"):
        idle.check_parameters(1000, [1000], 1000, 20, 50)
    assert (idle.default_cache(10_000), idle.default_cache(1000), idle.default_cache(5)) == (1000, 100, 1)


def test_database_bytes_are_the_pages_in_use_whatever_the_file_holds(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite"
    assert idle.sqlite_bytes(path) == 0
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("CREATE TABLE t (x BLOB)")
        conn.executemany("INSERT INTO t VALUES (?)", [(b"x" * 4000,)] * 50)
    full = idle.sqlite_bytes(path)
    assert full >= 50 * 4000
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM t")
    assert idle.sqlite_bytes(path) < full / 10
