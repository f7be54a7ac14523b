"""bench.soak's accounting and options: its samples' processes, what fails a soak, its last line.
The soak itself runs for minutes to an hour (`make soak`) and is not run here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bench import soak
from bench.soak import Tally


def sample(minute: float, worker_rss: float, children: int = 0) -> soak.Sample:
    return soak.Sample(minute, 10, worker_rss, 140.0, 25, 28, children, 4.0, 9.0)


def test_descendants_finds_grandchildren_and_nothing_else() -> None:
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, time; subprocess.Popen(['sleep', '30']); time.sleep(30)"])
    try:
        for _ in range(100):
            found = soak.descendants(parent.pid)
            if found:
                break
            subprocess.run(["sleep", "0.05"])
        assert len(found) == 1 and open(f"/proc/{found[0]}/comm").read().strip() == "sleep"
        assert soak.descendants(found[0]) == []
    finally:
        for pid in soak.descendants(parent.pid):
            subprocess.run(["kill", str(pid)])
        parent.kill()
        parent.wait()


def test_the_last_line_compares_the_sample_after_warm_up_with_the_last() -> None:
    report = soak.Report(minutes=10, sessions=2, samples=[sample(0, 150), sample(1, 240, 2), sample(10, 246)], turns=500, kills=2)
    report.tallies = [Tally("sse-a", "sse", ended=True), Tally("sse-b", "sse", ended=True)]
    line = report.line()
    assert line.startswith("soak minutes=10 turns=500 failed=0 lost=0 duplicated=0 kills=2 reconciles=0 worker_rss_mb=240->246 ")
    assert "children_max=2 leaked_processes=0" in line and line.endswith("followers_ended=2/2 task_timeouts=0")
    assert report.ok


@pytest.mark.parametrize("spoil", ["failed", "lost", "duplicated", "leaked", "stream duplicate", "follower still open"])
def test_any_failure_lost_effect_leak_or_stream_fault_fails_the_soak(spoil: str) -> None:
    report = soak.Report(minutes=1, sessions=1, samples=[sample(0, 150), sample(1, 150)])
    report.tallies = [Tally("sse-a", "sse", ended=True)]
    if spoil == "stream duplicate":
        report.tallies[0].duplicates = 1
    elif spoil == "follower still open":
        report.tallies[0].ended = False
    else:
        setattr(report, spoil, 1)
    assert not report.ok


@pytest.mark.parametrize("args", [["--minutes", "0"], ["--sessions", "0"], ["--kill-every", "-1"], ["--think", "-2"]])
def test_options_out_of_range_are_refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        soak.parse(args)
    assert exit.value.code == 2 and "must be > 0" in capsys.readouterr().err


def test_task_timeouts_are_the_workflow_tasks_the_worker_finished_too_late(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    log.write_text(
        "INFO worker polling\n"
        "WARN temporalio_sdk_core::worker::workflow: Task not found when completing error=...\n"
        "WARN [TMPRL1104] Workflow task duration exceeded 5 seconds.\n"
        "WARN temporalio_sdk_core::worker::workflow: Task not found when completing error=...\n"
    )
    assert soak.task_timeouts(log) == 2
    assert soak.task_timeouts(tmp_path / "missing.log") == 0
