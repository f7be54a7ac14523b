"""`agentrt audit`'s pieces that need no server: `--since` as a time or a span, and a row's line,
in which text a principal or a reason chose cannot drive the terminal."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
import typer

from agentrt.cli._audit import audit_line, parse_since
from agentrt.schemas import AuditEntry

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=timezone.utc)


def test_since_takes_a_span_before_now_or_an_iso_time_read_as_utc_unless_it_names_a_zone() -> None:
    assert parse_since("90s", NOW) == NOW - timedelta(seconds=90)
    assert parse_since("12h", NOW) == NOW - timedelta(hours=12)
    assert parse_since("7d", NOW) == NOW - timedelta(days=7)
    assert parse_since("2026-12-06T09:00", NOW) == datetime(2026, 12, 6, 9, 0, tzinfo=timezone.utc)
    assert parse_since("2026-12-06T09:00+01:00", NOW) == datetime(2026, 12, 6, 8, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("value", ["yesterday", "12 hours", "-5m", ""])
def test_since_refuses_what_is_neither_a_time_nor_a_span(value: str) -> None:
    with pytest.raises(typer.BadParameter):
        parse_since(value, NOW)


def test_a_line_names_who_what_on_what_when_and_why_and_escapes_control_characters() -> None:
    entry = AuditEntry(
        id=1, at=NOW, principal="ops\x1b[2J", action="deny", target_kind="session", target_id="s1", owner="alice",
        reason="not\nthis one", detail={"request_id": "req-3", "as": "operator"},
    )
    line = audit_line(entry)
    assert line == "2026-12-06 12:00:00 UTC  ops\\u001b[2J  deny  session s1 req-3  (operator)  reason: not this one"
