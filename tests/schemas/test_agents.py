"""`apply_agent`: an agent narrows its starter's grants, never widens them, and brings its own settings."""

from __future__ import annotations

from agentrt.schemas import AdvisorPolicy, AgentSpec, ApprovalPolicy, Budget, SessionConfig, apply_agent, child_config, SessionTemplate

BASE = SessionConfig(session_id="s1", owner="alice", workspace="/ws", agent="desk")


def test_an_agent_s_instructions_tools_and_settings_apply() -> None:
    agent = AgentSpec(
        name="desk", instructions="Be brief.", tools=["lookup", "fs.read"], profile="fast",
        approval=ApprovalPolicy(effectful="allow"), advisor=AdvisorPolicy(mode="full"), budget=Budget(max_tool_calls=5),
    )

    config = apply_agent(BASE.model_copy(update={"system_prompt": "The customer is Bob."}), agent)

    assert config.tools == ["lookup", "fs.read"] and config.profile == "fast"
    assert config.system_prompt == "Be brief.\n\nThe customer is Bob."
    assert config.approval.effectful == "allow" and config.advisor.mode == "full"
    assert config.budget == Budget(max_tool_calls=5) and config.agent == "desk"


def test_an_agent_never_widens_the_tools_or_the_sandbox_its_starter_granted() -> None:
    agent = AgentSpec(name="desk", tools=["lookup", "shell.run"], sandbox="danger_full_access")
    granted = BASE.model_copy(update={"tools": ["lookup", "fs.read"], "sandbox": "read_only"})

    config = apply_agent(granted, agent)

    assert config.tools == ["lookup"] and config.sandbox == "read_only"
    assert apply_agent(BASE, AgentSpec(name="desk", sandbox="read_only")).sandbox == "read_only"


def test_a_starter_s_budget_stands_and_unset_fields_keep_the_session_s() -> None:
    starter = BASE.model_copy(update={"budget": Budget(max_tokens=100), "profile": "big"})

    config = apply_agent(starter, AgentSpec(name="desk", budget=Budget(max_tokens=10_000)))

    assert config.budget == Budget(max_tokens=100) and config.profile == "big" and config.system_prompt is None


def test_a_template_s_agent_reaches_every_child() -> None:
    child = child_config(SessionTemplate(agent="desk"), session_id="c1", owner="alice", workspace="/ws")
    assert child.agent == "desk"


def test_an_old_worker_still_reads_a_config_without_an_agent() -> None:
    assert "agent" not in SessionConfig(session_id="s", owner="a", workspace="/").model_dump(mode="json")


def test_an_agent_name_a_worker_lacks_is_told_with_the_registered_name_it_is_close_to() -> None:
    from agentrt.schemas import AgentNotRegistered

    typo = str(AgentNotRegistered("triag", "agentrt", ["support", "triage"]))
    unknown = str(AgentNotRegistered("billing", "agentrt", []))

    assert "(registered: support, triage; did you mean 'triage'?)" in typo
    assert "(registered: none); a session of an agent needs every worker polling 'agentrt' to register it" in unknown
    assert "agentrt dev --agents MODULE, agentrt worker --agents MODULE" in unknown
