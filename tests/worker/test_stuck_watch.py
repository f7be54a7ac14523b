"""How a worker words the problems Temporal reports of a stuck workflow (the watch itself runs in tests/client/test_health.py)."""

from __future__ import annotations

import pytest

from agentrt.schemas import ConfigurationError
from agentrt.worker._stuck_watch import StuckWatch, problem_text


@pytest.mark.parametrize(
    ("problems", "text"),
    [
        (["category=WorkflowTaskFailed", "cause=WorkflowTaskFailedCauseNonDeterministicError"],
         "its workflow task keeps failing (non deterministic error)"),
        (["category=WorkflowTaskTimedOut", "cause=WorkflowTaskTimedOutCauseStartToClose"],
         "its workflow task keeps timing out (start to close)"),
        ([], "its workflow task keeps failing"),
    ],
)
def test_the_worker_words_the_problems_temporal_reports(problems: list[str], text: str) -> None:
    assert problem_text(problems) == text


def test_the_watch_lists_only_its_own_task_queue_s_running_flagged_workflows() -> None:
    query = StuckWatch(None, "tq-'a", every_seconds=1).query()  # type: ignore[arg-type]
    assert "TaskQueue = 'tq-\\'a'" in query and "ExecutionStatus = 'Running'" in query
    assert "TemporalReportedProblems IN ('category=WorkflowTaskFailed', 'category=WorkflowTaskTimedOut')" in query


def test_a_task_queue_with_a_backslash_is_refused_not_put_in_a_filter() -> None:
    # 'q\' would escape the closing quote: the query breaks and the watch would go silently dead.
    with pytest.raises(ConfigurationError, match="backslash"):
        StuckWatch(None, "q\\", every_seconds=1).query()  # type: ignore[arg-type]


async def test_the_watch_stops_with_a_warning_on_a_task_queue_it_cannot_name(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="agentrt.worker"):
        await StuckWatch(None, "q\\", every_seconds=0).run()  # type: ignore[arg-type]
    assert "not watched" in caplog.text and "backslash" in caplog.text
