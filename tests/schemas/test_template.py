"""SessionTemplate and child_config: every child config is derived from one template."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentrt.schemas import (
    SESSION_CHILD_FIELDS,
    AdvisorPolicy,
    Budget,
    GraphConfig,
    GraphSpec,
    SessionConfig,
    SessionTemplate,
    TaskConfig,
    child_config,
    session_template,
)


def test_every_session_config_field_is_either_inherited_or_given_per_child() -> None:
    template = set(SessionTemplate.model_fields)
    assert template | SESSION_CHILD_FIELDS == set(SessionConfig.model_fields)
    assert not template & SESSION_CHILD_FIELDS


def test_template_defaults_are_the_session_configs() -> None:
    config = SessionConfig(session_id="s", owner="o", workspace="/w")
    assert session_template(config) == SessionTemplate()


def test_a_child_gets_every_template_field_and_its_own() -> None:
    template = SessionTemplate(
        system_prompt="be brief", system_prompt_mode="replace", advisor=AdvisorPolicy(mode="full"),
        model_timeout_seconds=30, local_tools=False, mcp_servers=["docs"], budget=Budget(max_tokens=9),
    )
    child = child_config(template, session_id="c", owner="o", workspace="/w", prompt="go", interactive=False)
    assert session_template(child) == template.model_copy(update={"interactive": False})
    assert (child.session_id, child.prompt) == ("c", "go")


def test_a_child_does_not_share_mutable_values_with_its_template() -> None:
    template = SessionTemplate(operators=["ops"])
    child = child_config(template, session_id="c", owner="o", workspace="/w")
    child.operators.append("eve")
    assert template.operators == ["ops"]


def test_an_unknown_per_child_field_is_refused() -> None:
    with pytest.raises(ValidationError):
        child_config(SessionTemplate(), session_id="c", owner="o", workspace="/w", colour="red")


def test_a_task_without_a_template_makes_one_from_its_flat_fields() -> None:
    task = TaskConfig(task_id="t", owner="o", goal="g", workspace="/w", profile="big", sandbox="read_only", operators=["ops"])
    template = task.template()
    assert (template.profile, template.sandbox, template.operators, template.approval.mode) == ("big", "read_only", ["ops"], "never")
    assert "session" not in task.model_dump()  # an old worker still reads the payload


def test_a_task_template_replaces_the_flat_fields() -> None:
    task = TaskConfig(
        task_id="t", owner="o", goal="g", workspace="/w", sandbox="danger_full_access",
        session=SessionTemplate(system_prompt="sp", sandbox="read_only", tool_task_queue="tools"),
    )
    assert (task.sandbox, task.tool_task_queue, task.template().system_prompt) == ("read_only", "tools", "sp")
    assert TaskConfig.model_validate_json(task.model_dump_json()) == task


def test_a_graph_template_replaces_the_flat_fields() -> None:
    spec = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "p"}]})
    graph = GraphConfig(graph_id="g", owner="o", workspace="/w", graph=spec, session=SessionTemplate(profile="big", network=True))
    assert (graph.profile, graph.network, graph.template().profile) == ("big", True, "big")
    assert GraphConfig(graph_id="g", owner="o", workspace="/w", graph=spec).template().approval.mode == "never"


def test_a_graph_template_may_not_grant_delegate() -> None:
    spec = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "p"}]})
    with pytest.raises(ValidationError, match="delegate"):
        GraphConfig(graph_id="g", owner="o", workspace="/w", graph=spec, session=SessionTemplate(tools=["delegate"]))
