"""Lanes: the priority and fairness key a start gets, and the settings they refuse."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from temporalio.common import Priority

from agentrt.schemas import MAX_FAIRNESS_KEY_BYTES, Lanes, fairness_key


def test_by_default_sessions_run_before_tasks_and_tasks_before_graphs_each_in_its_tenants_fairness_key() -> None:
    lanes = Lanes()

    assert lanes.priority("interactive", "alice", "acme") == Priority(priority_key=2, fairness_key="acme")
    assert lanes.priority("task", "alice", "acme") == Priority(priority_key=3, fairness_key="acme")
    assert lanes.priority("graph", "alice", "acme") == Priority(priority_key=4, fairness_key="acme")


def test_the_fairness_key_is_the_owner_or_none_as_configured_and_a_weight_goes_with_its_key() -> None:
    weighted = {"acme": 4.0, "alice": 0.5}

    assert Lanes(fairness="owner", weights=weighted).priority("task", "alice", "acme") == Priority(
        priority_key=3, fairness_key="alice", fairness_weight=0.5
    )
    assert Lanes(weights=weighted).priority("task", "alice", "acme").fairness_weight == 4.0
    assert Lanes(fairness="off", weights=weighted).priority("task", "alice", "acme") == Priority(priority_key=3)


def test_lanes_turned_off_leave_every_start_at_the_servers_default() -> None:
    assert Lanes(enabled=False, interactive=1).priority("interactive", "alice", "acme") == Priority.default


def test_a_name_longer_than_the_servers_fairness_key_limit_is_shortened_the_same_way_every_time() -> None:
    long_name = "tenant-" + "é" * 60  # 127 bytes of UTF-8
    other = "tenant-" + "é" * 59 + "e"

    key = fairness_key(long_name)

    assert len(key.encode()) <= MAX_FAIRNESS_KEY_BYTES and key.startswith("tenant-é")
    assert key == fairness_key(long_name) and key != fairness_key(other)
    assert fairness_key("acme") == "acme" and fairness_key("a" * 64) == "a" * 64


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"interactive": 0}, "interactive lane's priority key is an integer from 1 .runs first. to 5 .runs last., not 0"),
        ({"graph": 6}, "graph lane's priority key is an integer from 1"),
        ({"task": True}, "task lane's priority key is an integer from 1 .* not True"),
        ({"task": "2"}, "task lane's priority key is an integer from 1 .* not '2'"),
        ({"fairness": "team"}, "fairness"),
        ({"weights": {"acme": 0}}, "the weight of 'acme' is from 0.001 to 1000, not 0"),
        ({"weights": {"acme": float("inf")}}, "the weight of 'acme' is from 0.001 to 1000"),
        ({"weights": {" ": 2.0}}, "not to an empty name"),
        ({"speed": 1}, "speed"),
    ],
)
def test_a_priority_outside_1_to_5_or_a_weight_the_server_would_clamp_is_refused(settings: dict[str, object], problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        Lanes.model_validate(settings)
