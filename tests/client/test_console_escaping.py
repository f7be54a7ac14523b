"""A graph's and a task's static summary and details (set by the client when it starts them) hold
the goal, node ids and prompts, criteria and checks inert: code spans, never rendered markdown."""

from __future__ import annotations

from agentrt.client._graphs import graph_details, graph_summary
from agentrt.client._tasks import task_details, task_summary
from agentrt.schemas import GraphConfig, GraphNode, GraphSpec, TaskConfig
from tests.workflows.test_console_escaping import HOSTILE, assert_inert, rendered


def test_a_goal_graph_s_summary_and_details_hold_the_goal_inert() -> None:
    config = GraphConfig(graph_id="g1", owner="alice", workspace="/w", goal=HOSTILE)
    assert_inert(graph_details(config))
    summary = graph_summary(config)
    assert "\n" not in summary and "<a " not in rendered(summary) and "<img" not in rendered(summary)


def test_a_given_graph_s_details_hold_node_prompts_and_the_workspace_inert() -> None:
    nodes = GraphSpec(nodes=[GraphNode(id="a", prompt=HOSTILE), GraphNode(id="b", prompt="p", depends_on=["a"])])
    details = graph_details(GraphConfig(graph_id="g1", owner="alice", workspace="/w`<b>x</b>", graph=nodes))
    assert_inert(details)
    assert "<b>x" not in rendered(details)


def test_a_task_s_summary_and_details_hold_goal_criteria_and_checks_inert() -> None:
    config = TaskConfig(
        task_id="t1", owner="alice", goal=HOSTILE, workspace="/w", criteria=[HOSTILE],
        acceptance={"command": "make `x` <img src=y onerror=1>", "review": HOSTILE},  # type: ignore[arg-type]
    )
    details = task_details(config)
    assert_inert(details)
    assert "<img src=y" not in rendered(details)
    summary = task_summary(config)
    assert "\n" not in summary and "<a " not in rendered(summary) and "<img" not in rendered(summary)
