"""bench.webhook_chaos at a tiny size: a watched session, task and graph, a receiver that goes down
twice (once holding a request it never answers) and a dispatcher SIGKILLed once; every notification
the store's event logs owe arrives, none under a second id, none unowed, none given up."""

from __future__ import annotations

import pytest
import re

import pytest

from bench import webhook_chaos

pytestmark = pytest.mark.runs_first  # long: handed out first (tests/conftest.py)

# A session (an approval, two turn ends), a task (waiting, running, waiting, running, completed) and
# a graph approved automatically (planning, approved, executing, completed).
OWED = 3 + 5 + 4


async def test_every_owed_notification_arrives_under_its_id_while_the_receiver_and_dispatcher_die() -> None:
    report = await webhook_chaos.run_webhook_chaos(
        sessions=1, tasks=1, graphs=1, receiver_outages=2, dispatcher_kills=1, seed=3, chaos_seconds=8.0,
        deadline_seconds=150.0, progress=print,
    )
    print(report.line())

    assert report.problems == []
    assert (report.watches, report.notifications, report.received) == (3, OWED, OWED)
    assert (report.receiver_outages, report.dispatcher_kills) == (2, 1)
    assert (report.missing, report.duplicated, report.unexpected, report.failed, report.unended) == (0, 0, 0, 0, 0)
    assert report.repeats == report.repeats_unanswered + report.repeats_answered
    assert re.fullmatch(
        r"webhook_chaos watches=3 notifications=12 receiver_outages=2 dispatcher_kills=1 missing=0 duplicated=0 "
        r"unexpected=0 failed=0 unended=0 repeats=\d+ repeats_unanswered=\d+ repeats_answered=\d+",
        report.line(),
    )
    assert report.ok
