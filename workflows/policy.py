"""The policy engine: a pure decision on each tool call before it runs, so workflows stay deterministic."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agentrt.schemas import ApprovalPolicy, ToolSpec


@dataclass(frozen=True)
class Allowed:
    reason: str
    kind: Literal["allowed"] = "allowed"


@dataclass(frozen=True)
class NeedsApproval:
    reason: str
    kind: Literal["needs_approval"] = "needs_approval"


@dataclass(frozen=True)
class DeniedByPolicy:
    reason: str
    kind: Literal["denied"] = "denied"


Decision = Allowed | NeedsApproval | DeniedByPolicy


class PolicyEngine:
    """Decides Allowed | NeedsApproval | DeniedByPolicy from the tool's risk class and the session's policy.

    A per-tool rule in ``ApprovalPolicy.tools`` wins over the rule for the risk class.
    """

    def __init__(self, policy: ApprovalPolicy) -> None:
        self._policy = policy

    def decide(self, spec: ToolSpec) -> Decision:
        rule = self._policy.tools.get(spec.name)
        source = f"policy rule for tool {spec.name}"
        if rule is None:
            rule = getattr(self._policy, spec.risk)
            source = f"policy rule for {spec.risk} tools"
        if rule == "allow":
            return Allowed(f"{source}: allow")
        if rule == "deny":
            return DeniedByPolicy(f"{source}: deny")
        return NeedsApproval(f"{source}: ask")
