"""The policy engine (workflows/policy.py): a tool's risk rule, and a per-tool rule that beats it."""

from __future__ import annotations

import pytest

from agentrt.schemas import ApprovalPolicy, ToolSpec
from agentrt.workflows.policy import Allowed, DeniedByPolicy, NeedsApproval, PolicyEngine


def _spec(risk: str, name: str = "tool") -> ToolSpec:
    return ToolSpec(name=name, description="", risk=risk)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("risk", "expected"),
    [("read_only", Allowed), ("idempotent", NeedsApproval), ("effectful", NeedsApproval)],
)
def test_the_default_policy_runs_read_only_tools_and_asks_for_the_rest(risk: str, expected: type) -> None:
    assert isinstance(PolicyEngine(ApprovalPolicy()).decide(_spec(risk)), expected)


@pytest.mark.parametrize(("rule", "expected"), [("allow", Allowed), ("ask", NeedsApproval), ("deny", DeniedByPolicy)])
def test_the_rule_for_the_tools_risk_class_decides(rule: str, expected: type) -> None:
    policy = ApprovalPolicy(read_only="ask", idempotent="ask", effectful=rule)  # type: ignore[arg-type]
    decision = PolicyEngine(policy).decide(_spec("effectful"))
    assert isinstance(decision, expected)
    assert decision.reason == f"policy rule for effectful tools: {rule}"


def test_a_risk_rule_applies_only_to_its_own_class() -> None:
    engine = PolicyEngine(ApprovalPolicy(read_only="allow", idempotent="deny", effectful="ask"))
    assert isinstance(engine.decide(_spec("idempotent")), DeniedByPolicy)
    assert isinstance(engine.decide(_spec("read_only")), Allowed)


@pytest.mark.parametrize(("rule", "expected"), [("allow", Allowed), ("ask", NeedsApproval), ("deny", DeniedByPolicy)])
def test_a_per_tool_rule_beats_the_risk_rule(rule: str, expected: type) -> None:
    other = {"allow": "deny", "ask": "allow", "deny": "allow"}[rule]
    policy = ApprovalPolicy(read_only=other, idempotent=other, effectful=other, tools={"shell.run": rule})  # type: ignore[arg-type]
    decision = PolicyEngine(policy).decide(_spec("effectful", "shell.run"))
    assert isinstance(decision, expected)
    assert decision.reason == f"policy rule for tool shell.run: {rule}"


def test_a_per_tool_rule_does_not_apply_to_other_tools() -> None:
    engine = PolicyEngine(ApprovalPolicy(effectful="ask", tools={"shell.run": "deny"}))
    assert isinstance(engine.decide(_spec("effectful", "fs.write")), NeedsApproval)


def test_decisions_say_their_kind() -> None:
    engine = PolicyEngine(ApprovalPolicy(read_only="allow", idempotent="ask", effectful="deny"))
    kinds = [engine.decide(_spec(risk)).kind for risk in ("read_only", "idempotent", "effectful")]
    assert kinds == ["allowed", "needs_approval", "denied"]
