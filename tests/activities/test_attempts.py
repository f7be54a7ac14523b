"""Which worker process ran an attempt: what a retry reads of the attempt before it."""

from __future__ import annotations

import dataclasses
import time

import pytest
from temporalio import activity
from temporalio.testing import ActivityEnvironment

from agentrt.activities._attempts import HEARTBEAT_SECONDS, WORKER_PROCESS, beating, heartbeat, previous_attempt_elsewhere


def info(**fields: object) -> activity.Info:
    return dataclasses.replace(ActivityEnvironment.default_info(), **fields)


@pytest.mark.parametrize(
    "fields, elsewhere",
    [
        ({"attempt": 1}, False),  # a first attempt follows nobody
        ({"attempt": 2, "heartbeat_details": [WORKER_PROCESS]}, False),  # retried here: this process is alive
        ({"attempt": 2, "heartbeat_details": ["other-host/1/0123456789ab"]}, True),
        ({"attempt": 2, "heartbeat_details": []}, True),  # no heartbeat: nothing says where it ran
        ({"attempt": 3, "heartbeat_details": ["other-host/1/0123456789ab"], "is_local": True}, False),
    ],
)
def test_a_retry_knows_whether_the_attempt_before_ran_in_another_process(fields: dict, elsewhere: bool) -> None:
    assert previous_attempt_elsewhere(info(**fields)) is elsewhere


def test_a_heartbeat_names_this_worker_process() -> None:
    sent: list[tuple[object, ...]] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: sent.append(details)
    env.run(heartbeat)
    assert sent == [(WORKER_PROCESS,)]
    host, pid, nonce = WORKER_PROCESS.split("/")
    assert host and pid.isdigit() and len(nonce) == 12


def test_a_synchronous_call_keeps_heartbeating_after_a_heartbeat_that_failed() -> None:
    """A heartbeat the worker's loop did not take in time (``TimeoutError`` from the SDK) is followed
    by the next one: the side thread that sends them lives until the call ends."""
    sent: list[tuple[object, ...]] = []

    def on_heartbeat(*details: object) -> None:
        if not sent:
            sent.append(("failed",))
            raise TimeoutError()
        sent.append(details)

    def work() -> str:
        with beating():
            time.sleep(HEARTBEAT_SECONDS * 3.5)
        return "done"

    env = ActivityEnvironment()
    env.on_heartbeat = on_heartbeat
    assert env.run(work) == "done"
    assert sent[0] == ("failed",) and (WORKER_PROCESS,) in sent[1:]
    count = len(sent)
    time.sleep(HEARTBEAT_SECONDS * 2)
    assert len(sent) == count  # none after the call ended
