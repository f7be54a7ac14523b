"""Which tool batches the advisor reviews: every one (``full``) or only those with a high-risk
call (``lightweight``). Pure: the session workflow runs the ``advisor.review`` activity.
"""

from __future__ import annotations

from agentrt.schemas import AdvisorPolicy, ToolCall, ToolSpec
from agentrt.workflows.policy import _outside, classify_call


def high_risk_rule(spec: ToolSpec | None, call: ToolCall, workspace: str) -> str:
    """Why ``call`` is high-risk for a ``lightweight`` review (``""`` when it is not): a
    destructive shell command (``rm -rf``, ``sudo`` ...), a command that uses the network, a
    write to a secrets file such as ``.env`` or to a path outside the workspace
    (``agentrt.workflows.policy.classify_call`` decides the first three)."""
    if spec is None or call.arguments is None:
        return ""
    risk = classify_call(spec, call.arguments, workspace)
    if risk.risk == "destructive":
        return risk.rule or "destructive"
    if risk.risk == "network" or risk.network:
        return risk.network or risk.rule or "network"
    if risk.outside_workspace:
        return risk.rule or "outside the workspace"
    path = call.arguments.get("path")
    if spec.risk != "read_only" and isinstance(path, str) and _outside(path, workspace):
        return f"writes outside the workspace: {path[:100]}"
    return ""


def review_reason(policy: AdvisorPolicy, risks: list[str]) -> str | None:
    """Why this batch is reviewed (the text of ``AdvisorReviewStarted.reason``), or None when
    the advisor's ``mode`` says it is not: ``off``; ``lightweight`` and no high-risk call."""
    if policy.mode == "full":
        return "full: every batch is reviewed"
    if policy.mode == "lightweight":
        rules = sorted({r for r in risks if r})
        return "lightweight: " + "; ".join(rules) if rules else None
    return None
