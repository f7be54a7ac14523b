"""`agentrt task ...` in process (typer's CliRunner), no Temporal server: durations, option
validation, the JSON shapes and the lines people read (the client is a stand-in that records calls)."""

from __future__ import annotations

import json
import re
from contextlib import asynccontextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any, AsyncIterator

import pytest
from typer.testing import CliRunner

from agentrt.client import TaskListing
from agentrt.cli._app import app
from agentrt.client import TASK_STATUSES
from agentrt.cli._task import MAX_DURATION_SECONDS, TaskStatusOption, parse_duration
from agentrt.cli._task_render import status_lines, task_event_line
from agentrt.schemas import (
    AutonomousTaskCheckpointed,
    AutonomousTaskResult,
    AutonomousTaskSessionEnded,
    AutonomyDecision,
    Budget,
    EventsPage,
    Spend,
    TaskCheckpoint,
    TaskConfig,
    TaskNotFound,
    TaskSchedule,
    TaskStatusView,
    Usage,
    UsageReceipt,
)

runner = CliRunner()
AT = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def plain(text: str) -> str:
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def a_view(**fields: Any) -> TaskStatusView:
    spend = Spend(usage=Usage(input_tokens=1200, output_tokens=80), cost_usd=0.012, tool_calls=3, wall_seconds=302)
    checkpoint = TaskCheckpoint(
        number=2, session_id="t1-s2", at=AT, session_status="completed", done="wrote the parser", remaining="tests fail",
        spend=spend,
    )
    values: dict[str, Any] = dict(
        task_id="t1", owner="alice", goal="make the tests pass", criteria=["no new warnings"], status="waiting",
        sessions=2, max_sessions=10, checkpoint=checkpoint, spend=spend, budget=Budget(max_tokens=10_000),
        remaining=Budget(max_tokens=8_720), next_wake=AT + timedelta(hours=6), schedule="every 6h",
        receipts=[UsageReceipt(number=1, session_id="t1-s1", spend=spend, at=AT)],
    )
    values.update(fields)
    return TaskStatusView(**values)


class FakeClient:
    """Stands in for ``AgentClient``: records each call, answers with ``view``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.view = a_view()
        self.result = AutonomousTaskResult(task_id="t1", status="completed", sessions=2, spend=Spend())
        self.worker = True

    def _record(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.calls.append((name, args, kwargs))

    async def start_task(self, goal: str, **kwargs: Any) -> str:
        self._record("start_task", goal, **kwargs)
        return kwargs.get("task_id") or "generated1"

    async def has_worker(self) -> bool:
        return self.worker

    async def task_status(self, task_id: str) -> TaskStatusView:
        self._record("task_status", task_id)
        if task_id == "missing":
            raise TaskNotFound(task_id)
        return self.view

    async def task_events(self, task_id: str, since_seq: int = 0, limit: int = 1000) -> EventsPage:
        self._record("task_events", task_id, since_seq)
        events = [
            AutonomyDecision(seq=1, at=AT, decision="execute", source="schedule", reason="time"),
            AutonomousTaskSessionEnded(seq=2, at=AT, session_id="t1-s1", number=1, status="completed", spend=Spend(tool_calls=2)),
        ]
        return EventsPage(events=[e for e in events if e.seq > since_seq], last_seq=2)

    async def pause_task(self, task_id: str, reason: str | None = None) -> TaskStatusView:
        self._record("pause_task", task_id, reason)
        return self.view.model_copy(update={"status": "paused", "paused_by": "alice"})

    async def cancel_task(self, task_id: str, reason: str | None = None) -> TaskStatusView:
        self._record("cancel_task", task_id, reason)
        return self.view

    async def amend_task_goal(self, task_id: str, goal: str, criteria: Any = None, reason: str | None = None) -> TaskStatusView:
        self._record("amend_task_goal", task_id, goal, criteria, reason)
        return self.view

    async def raise_task_budget(self, task_id: str, budget: Any = None, max_sessions: Any = None, reason: Any = None) -> TaskStatusView:
        self._record("raise_task_budget", task_id, budget, max_sessions, reason)
        return self.view

    async def list_tasks(self, status: str | None = None, limit: int = 50) -> list[TaskListing]:
        self._record("list_tasks", status, limit)
        return [TaskListing("t1", "task-t1", "waiting", "alice", AT, False)]

    async def wait_task(self, task_id: str) -> AutonomousTaskResult:
        self._record("wait_task", task_id)
        return self.result


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    client = FakeClient()

    @asynccontextmanager
    async def fake_runtime(config: Any) -> AsyncIterator[Any]:
        yield SimpleNamespace(client=client)

    monkeypatch.setattr("agentrt.cli._task._task_runtime", fake_runtime)
    return client


# ---------------------------------------------------------------- durations


@pytest.mark.parametrize(
    "text, seconds",
    [("20s", 20), ("15m", 900), ("6h", 21_600), ("2d", 172_800), ("1h30m", 5_400), ("90", 90), ("1.5", 1.5), ("0.5h", 1_800), (" 6H ", 21_600)],
)
def test_durations_read_as_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "is not a duration"), ("soon", "is not a duration: 20s, 15m, 6h, 2d, 1h30m, or plain seconds"), ("6x", "is not a duration"), ("h", "is not a duration"),
        ("-5", "is not a duration"), ("1e3", "is not a duration"), ("nan", "is not a duration"), ("inf", "is not a duration"),
        ("6h 30m", "is not a duration"), ("0", "not more than 0"), ("0s", "not more than 0"), ("367d", "more than a year"),
    ],
)
def test_a_bad_duration_says_what_is_accepted(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_duration(text)


def test_a_year_is_the_longest_duration() -> None:
    assert parse_duration("366d") == MAX_DURATION_SECONDS


def test_the_status_option_lists_every_task_status() -> None:
    assert tuple(s.value for s in TaskStatusOption) == TASK_STATUSES


# ---------------------------------------------------------------- option validation


@pytest.mark.parametrize(
    "args, message",
    [
        (["--every", "6h", "--cron", "0 9 * * *"], "give --every or --cron, not both"),
        (["--every", "soon"], "'soon' is not a duration: 20s, 15m, 6h, 2d, 1h30m, or plain seconds"),
        (["--every", "0"], "'0' is not more than 0 seconds"),
        (["--cron", "0 9 * *"], "must have five fields"),
        (["--budget-usd", "-1"], "must be more than 0, not -1.0"),
        (["--budget-usd", "nan"], "must be more than 0, not nan"),
        (["--budget-hours", "0"], "must be more than 0, not 0.0"),
        (["--budget-tokens", "0"], "greater than or equal to 1"),
        (["--max-sessions", "0"], "greater than or equal to 1"),
        (["--criterion", " "], "a criterion is empty"),
        (["--accept", ""], "Invalid value for --accept: is empty"),
        (["--profile", "gpt-9"], "unknown model profile 'gpt-9'"),
        (["--script", "{script}", "--reviewer-profile", "gpt-9"], "unknown model profile 'gpt-9'"),
        (["--sandbox", "none"], "'none' is not one of"),
    ],
)
def test_task_start_refuses_bad_options_with_the_reason(tmp_path: Path, fake: FakeClient, args: list[str], message: str) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "done"}]}))
    args = [a.replace("{script}", str(script)) for a in args]

    result = runner.invoke(app, ["task", "start", "a goal", "--workspace", str(tmp_path), *args])

    assert result.exit_code == 2, result.output
    assert message in plain(result.output)
    assert fake.calls == []


def test_task_start_without_a_profile_or_script_says_how_to_get_one(tmp_path: Path, fake: FakeClient) -> None:
    result = runner.invoke(app, ["task", "start", "a goal", "--workspace", str(tmp_path)])
    assert result.exit_code == 2
    assert "unknown model profile 'default'" in plain(result.output) and "give --script FILE" in plain(result.output)


def test_an_empty_goal_is_refused(tmp_path: Path, fake: FakeClient) -> None:
    result = runner.invoke(app, ["task", "start", "  ", "--workspace", str(tmp_path)])
    assert result.exit_code == 2 and "the goal is empty" in plain(result.output)


def test_raise_budget_needs_something_to_raise(fake: FakeClient) -> None:
    result = runner.invoke(app, ["task", "raise-budget", "t1"])
    assert result.exit_code == 2
    assert "give at least one of --budget-tokens" in plain(result.output)
    assert fake.calls == []


def test_list_refuses_an_unknown_status(fake: FakeClient) -> None:
    result = runner.invoke(app, ["task", "list", "--status", "sleeping"])
    assert result.exit_code == 2 and "'sleeping' is not one of" in plain(result.output)


@pytest.mark.parametrize(
    "command",
    [["task"], ["task", "start"], ["task", "status"], ["task", "events"], ["task", "pause"], ["task", "resume"],
     ["task", "nudge"], ["task", "cancel"], ["task", "amend"], ["task", "raise-budget"], ["task", "list"], ["task", "wait"]],
)
def test_every_task_command_has_help(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0 and "Usage" in result.output


# ---------------------------------------------------------------- what the commands print


def test_task_start_json_prints_only_the_task_id(tmp_path: Path, fake: FakeClient) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "done"}]}))

    result = runner.invoke(app, [
        "task", "start", "make the tests pass", "--workspace", str(tmp_path), "--script", str(script), "--every", "6h",
        "--criterion", "no new warnings", "--criterion", "docs updated", "--accept", "pytest -q", "--budget-tokens", "5000",
        "--budget-usd", "1.5", "--budget-hours", "2", "--max-sessions", "3", "--id", "nightly", "--json",
    ])

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"task_id": "nightly"}
    [(name, (goal,), kwargs)] = fake.calls
    assert name == "start_task" and goal == "make the tests pass"
    assert kwargs["every_seconds"] == 21_600 and kwargs["cron"] is None
    assert kwargs["criteria"] == ["no new warnings", "docs updated"] and kwargs["accept_command"] == "pytest -q"
    assert kwargs["budget"] == Budget(max_tokens=5000, max_cost_usd=1.5, max_wall_seconds=7200)
    assert kwargs["profile"] == "scripted" and kwargs["script"] == str(script.resolve())
    assert kwargs["max_sessions"] == 3 and kwargs["task_id"] == "nightly"


def test_task_start_says_when_no_worker_runs(tmp_path: Path, fake: FakeClient) -> None:
    fake.worker = False
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "done"}]}))

    result = runner.invoke(app, ["task", "start", "g", "--workspace", str(tmp_path), "--script", str(script)])

    assert result.exit_code == 0, result.output
    assert "task generated1 started" in result.stdout
    assert "the task waits until one runs" in result.stderr


def test_task_status_json_is_the_status_view_with_usage_beside_spend(fake: FakeClient) -> None:
    result = runner.invoke(app, ["task", "status", "t1", "--json"])

    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert TaskStatusView.model_validate({k: v for k, v in body.items() if k != "usage"}) == fake.view
    assert body["status"] == "waiting" and body["sessions"] == 2
    assert body["checkpoint"]["remaining"] == "tests fail"
    assert body["usage"] == body["spend"] and body["spend"]["tool_calls"] == 3


def test_an_unknown_task_is_a_clear_error_with_exit_code_2(fake: FakeClient) -> None:
    result = runner.invoke(app, ["task", "status", "missing"])
    assert result.exit_code == 2
    assert "no task 'missing' (workflow id task-missing)" in result.stderr


def test_task_status_shows_goal_sessions_next_wake_checkpoint_and_spend() -> None:
    lines = status_lines(a_view(), now=AT + timedelta(hours=1))
    text = "\n".join(lines)

    assert "t1 (waiting) owner alice" in lines[0]
    assert "goal       make the tests pass" in text
    assert "sessions   2 of 10 used; running -" in text
    assert "next wake  2030-01-02 09:04:05 UTC (in 5h)" in text
    assert "checkpoint #2 after t1-s2 (completed) at 2030-01-02 03:04:05 UTC: not accepted" in text
    assert "remaining tests fail" in text
    assert "spend      1200 in / 80 out tokens, $0.012, 3 tool call(s), 5m 2s wall time" in text
    assert "budget     10,000 tokens (left: 8,720 tokens)" in text
    assert "receipt    #1 session t1-s1" in text


def test_a_wake_that_has_passed_reads_as_ago() -> None:
    text = "\n".join(status_lines(a_view(), now=AT + timedelta(hours=6, minutes=2)))
    assert "(2m ago)" in text


def test_task_events_prints_one_line_per_event(fake: FakeClient) -> None:
    result = runner.invoke(app, ["task", "events", "t1"])

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].split()[:4] == ["1", "2030-01-02", "03:04:05", "AutonomyDecision"]
    assert "execute [schedule]: time" in lines[0]
    assert "session 1 (t1-s1) ended completed · spent 0 in / 0 out tokens, $0, 2 tool call(s)" in lines[1]


def test_task_events_since_and_json(fake: FakeClient) -> None:
    result = runner.invoke(app, ["task", "events", "t1", "--since", "1", "--json"])

    assert result.exit_code == 0, result.output
    [line] = result.stdout.splitlines()
    assert json.loads(line)["type"] == "AutonomousTaskSessionEnded"


def test_a_checkpoint_event_says_whether_it_was_accepted() -> None:
    checkpoint = TaskCheckpoint(number=1, session_id="t1-s1", at=AT, session_status="completed", accepted=True)
    line = task_event_line(AutonomousTaskCheckpointed(seq=7, at=AT, checkpoint=checkpoint))
    assert "checkpoint #1 after t1-s1 (completed)" in line and line.endswith("accepted")


def test_pause_prints_the_new_status_and_passes_the_reason(fake: FakeClient) -> None:
    result = runner.invoke(app, ["task", "pause", "t1", "--reason", "holiday"])

    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "task t1: paused; now paused, 2 of 10 session(s) used"
    assert fake.calls == [("pause_task", ("t1", "holiday"), {})]


def test_cancel_json_is_the_status_view(fake: FakeClient) -> None:
    result = runner.invoke(app, ["task", "cancel", "t1", "--json"])
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)) >= {"status", "sessions", "checkpoint", "spend", "usage"}


def test_amend_sends_the_goal_and_criteria(fake: FakeClient) -> None:
    result = runner.invoke(app, ["task", "amend", "t1", "new goal", "--criterion", "fast"])
    assert result.exit_code == 0, result.output
    assert fake.calls == [("amend_task_goal", ("t1", "new goal", ["fast"], None), {})]


def test_amend_without_criteria_keeps_the_current_ones(fake: FakeClient) -> None:
    runner.invoke(app, ["task", "amend", "t1", "new goal"])
    assert fake.calls == [("amend_task_goal", ("t1", "new goal", None, None), {})]


def test_raise_budget_sends_only_the_limits_given(fake: FakeClient) -> None:
    result = runner.invoke(app, ["task", "raise-budget", "t1", "--budget-tool-calls", "40", "--max-sessions", "20"])
    assert result.exit_code == 0, result.output
    assert fake.calls == [("raise_task_budget", ("t1", Budget(max_tool_calls=40), 20, None), {})]


def test_list_json_has_a_row_per_task(fake: FakeClient) -> None:
    result = runner.invoke(app, ["task", "list", "--status", "waiting", "--json"])

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {"task_id": "t1", "workflow_id": "task-t1", "status": "waiting", "owner": "alice",
         "started_at": AT.isoformat(), "closed": False}
    ]
    assert fake.calls == [("list_tasks", ("waiting", 50), {})]


@pytest.mark.parametrize("status, code", [("completed", 0), ("failed", 1), ("cancelled", 1)])
def test_wait_exits_0_only_for_a_completed_task(fake: FakeClient, status: str, code: int) -> None:
    fake.result = AutonomousTaskResult(task_id="t1", status=status, sessions=1, spend=Spend(), failure_reason="max_sessions" if status == "failed" else None)  # type: ignore[arg-type]

    result = runner.invoke(app, ["task", "wait", "t1", "--json"])

    assert result.exit_code == code, result.output
    assert json.loads(result.stdout)["status"] == status


def test_task_author_text_reaches_the_terminal_escaped() -> None:
    from agentrt.cli._task_render import status_lines, task_event_line
    from agentrt.schemas import AutonomousTaskPaused, Budget, Spend, TaskStatusView

    view = TaskStatusView(
        task_id="t1", owner="al\x1b[31mice", goal="g", status="paused", sessions=0, max_sessions=1,
        spend=Spend(), budget=Budget(), remaining=Budget(), schedule="every 1m, when `x\x1b]0;pwned\x07` says execute",
        paused_by="bob\x1b[2J",
    )
    text = "\n".join(status_lines(view, AT))
    assert "\x1b" not in text and "\x07" not in text
    line = task_event_line(AutonomousTaskPaused(seq=1, at=AT, principal="eve\x1b[2J", reason="r"))
    assert "\x1b" not in line and "eve\\u001b[2J" in line
