"""What the CLI tells a user whose turn a quota stopped: the quota's commands, not a session budget's raise."""

from __future__ import annotations

import pytest

from agentrt.cli._common import print_outcome
from agentrt.schemas import TurnOutcome


def test_a_turn_stopped_by_a_quota_points_at_the_quota_commands(capsys: pytest.CaptureFixture[str]) -> None:
    error = "tenant 'acme' is at its tokens_per_day quota of 5,000 (used 5,100): it resets at 2026-12-07T00:00:00Z (UTC midnight)"
    print_outcome("s1", TurnOutcome(turn_id="turn-2", status="budget_exceeded", error=error, error_type="QuotaExceeded"), False)
    out = capsys.readouterr().out
    assert "[budget_exceeded QuotaExceeded: tenant 'acme' is at its tokens_per_day quota" in out
    assert "agentrt quota raise" in out and "session raise-budget" not in out


def test_a_turn_stopped_by_its_budget_points_at_raise_budget(capsys: pytest.CaptureFixture[str]) -> None:
    print_outcome("s1", TurnOutcome(turn_id="turn-1", status="budget_exceeded", error="tokens budget ...", error_type="BudgetExceeded"), False)
    assert "agentrt session raise-budget s1" in capsys.readouterr().out
