"""The policy engine: a pure decision on each tool call before it runs, so workflows stay deterministic.

Two policies meet here (the pair Codex CLI and the seeds use):

- ``SandboxPolicy`` (``read_only``, ``workspace_write``, ``danger_full_access``) and the
  session's ``network`` switch say what a call may touch at all. A call outside them is
  ``DeniedBySandbox``: structural, and no approval widens it.
- ``ApprovalPolicy`` says who decides what the sandbox allows: its ``mode`` (``never``: no
  person is asked, ``on_request``: the rule of the call's risk class decides, ``always``:
  every call is asked about) and its rules per risk class and per tool (``allow``, ``ask``,
  ``deny``).

A call's risk class is its tool's (``read_only``, ``idempotent``, ``effectful``) unless its
arguments say more: a shell command that deletes recursively, escalates privileges, writes
devices or secrets files, or writes outside the workspace is ``destructive``; one that
reaches the network is ``network`` (``classify_command``); a file write to ``.env`` is
``destructive``. Decisions: ``Allowed | NeedsApproval | DeniedByPolicy | DeniedBySandbox``. The risk
classification lives in ``_risk``; this module decides.

A decision picks the commands a session workflow issues: a change to any rule here changes
what running sessions replay, so it comes as a new ``version`` chosen with ``workflow.patched``
(version 2: ``policy-sandbox-v1``; version 3: ``policy-decisions-v1``, which refuses a file
write outside the workspace before anyone is asked, never asks about a read-only call, and
lets ``danger_full_access`` with mode ``never`` run destructive and network calls).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agentrt.schemas import DELEGATE_TOOL, ApprovalPolicy, SandboxPolicy, ToolSpec
from agentrt.workflows._risk import CallRisk, RiskClass, classify_call, classify_command, file_write_outside
from agentrt.workflows._risk import is_outside as _outside  # as workflows/_advisor.py imports it

__all__ = [
    "Allowed",
    "CallRisk",
    "Decision",
    "DeniedByPolicy",
    "DeniedBySandbox",
    "LATEST_VERSION",
    "NeedsApproval",
    "PolicyEngine",
    "RiskClass",
    "classify_call",
    "classify_command",
]

# Tools whose processes run inside the OS sandbox: the OS confines what their commands touch.
OS_SANDBOXED_TOOLS = frozenset({"shell.run"})
# Tools whose effects run under this session's sandbox policy or a narrower one: a delegated
# session holds at most the delegating session's sandbox (``narrowed_grants``).
SANDBOX_INHERITING_TOOLS = frozenset({DELEGATE_TOOL})
NO_INTERACTIVE_ROUTE = "no_interactive_route"


LATEST_VERSION = 3


@dataclass(frozen=True)
class Allowed:
    """A call runs without asking; ``rule`` names the setting that allowed it
    (``approval.read_only = allow``, ``approval.tools["fs.write"] = allow``, ``approval.mode = never``,
    ``read-only call``), recorded with the grant (``PermissionGranted.rule``)."""

    reason: str
    rule: str = ""
    kind: Literal["allowed"] = "allowed"


@dataclass(frozen=True)
class NeedsApproval:
    reason: str
    rule: str = ""  # what a grant "for this session" covers: the tool and its risk rule
    kind: Literal["needs_approval"] = "needs_approval"


@dataclass(frozen=True)
class DeniedByPolicy:
    reason: str
    kind: Literal["denied"] = "denied"


@dataclass(frozen=True)
class DeniedBySandbox:
    reason: str
    kind: Literal["denied_by_sandbox"] = "denied_by_sandbox"


Decision = Allowed | NeedsApproval | DeniedByPolicy | DeniedBySandbox


class PolicyEngine:
    """Decides ``Allowed | NeedsApproval | DeniedByPolicy | DeniedBySandbox`` for a call.

    ``approval``: the session's ``ApprovalPolicy``; ``sandbox`` and ``network``: its
    ``SandboxPolicy`` and network switch; ``interactive``: False when no person can answer an
    approval (then a call that needs one is denied with ``no_interactive_route`` instead of
    waiting forever); ``workspace``: for paths in commands and file writes. ``version=1`` keeps
    the first engine (a rule per the tool's own risk class; no sandbox, no mode), which sessions
    recorded before ``policy-sandbox-v1`` replay with; ``version=2`` the engine sessions recorded
    before ``policy-decisions-v1`` replay with.

    Order: a file write outside the workspace (version 3: ``DeniedByPolicy``), the sandbox
    (structural), a ``deny`` rule, a read-only call (version 3: allowed in every mode), then the
    mode and rule. A per-tool rule in ``ApprovalPolicy.tools`` wins over the rule for the risk
    class; ``destructive`` and ``network`` calls use the stricter of the two.
    """

    def __init__(
        self,
        policy: ApprovalPolicy,
        sandbox: SandboxPolicy = "workspace_write",
        *,
        network: bool = False,
        interactive: bool = True,
        workspace: str = "/",
        version: int = LATEST_VERSION,
    ) -> None:
        self._policy = policy
        self._sandbox = sandbox
        self._network = network
        self._interactive = interactive
        self._workspace = workspace
        self.version = version

    def decide(self, spec: ToolSpec, arguments: dict[str, Any] | None = None) -> Decision:
        if self.version < 2:
            return self._decide_v1(spec)
        risk = classify_call(spec, arguments, self._workspace)
        if self.version >= 3:
            outside = file_write_outside(spec, arguments, self._workspace)
            if outside is not None:  # the tool refuses it in every sandbox: refused before anyone is asked
                return DeniedByPolicy(f"{spec.name} writes only inside the workspace, and {outside!r} is outside it")
        denied = self._sandbox_denies(spec, risk)
        if denied is not None:
            return denied
        rule, source, setting = self._rule(spec, risk)
        what = f"{spec.name} ({risk.risk}{': ' + risk.rule if risk.rule else ''})"
        grant_rule = f"{spec.name}:{risk.risk}:{risk.rule}"
        if rule == "deny":
            return DeniedByPolicy(f"{source}: deny")
        mode = self._policy.mode
        if self.version >= 3 and risk.risk == "read_only" and not spec.untrusted:
            if rule == "allow":
                return Allowed(f"{source}: allow", setting)
            return Allowed(f"{what} is read-only: it runs without approval in every approval mode", "read-only call")
        if mode == "always":
            return self._ask(f"approval policy always: every call is asked about; {what}", grant_rule)
        if spec.untrusted:
            # An untrusted source (an MCP server with trust = "untrusted"): every call is asked about.
            if mode == "never":
                return DeniedByPolicy(f"{spec.source or spec.name} is untrusted: {what} needs an approval, and no one is asked")
            return self._ask(f"{spec.source or spec.name} is untrusted: every call is asked about; {what}", grant_rule)
        if rule == "allow":
            return Allowed(f"{source}: allow", setting)
        if mode == "never":
            unconfined = self.version >= 3 and self._sandbox == "danger_full_access"
            if risk.risk in ("destructive", "network") and not unconfined:
                return DeniedByPolicy(f"approval policy never: {what} would need an approval, and no one is asked")
            confined = "with full access (danger_full_access)" if unconfined else "confined by the sandbox policy"
            return Allowed(f"approval policy never: {what} runs without asking, {confined}", "approval.mode = never")
        return self._ask(f"{source}: ask; {what}", grant_rule)

    def _ask(self, reason: str, rule: str) -> Decision:
        if not self._interactive:
            return DeniedByPolicy(f"{NO_INTERACTIVE_ROUTE}: {reason}, but no one can answer an approval for this session")
        return NeedsApproval(reason, rule)

    def _sandbox_denies(self, spec: ToolSpec, risk: CallRisk) -> DeniedBySandbox | None:
        if self._sandbox == "danger_full_access":
            return None
        if risk.network and not self._network:
            return DeniedBySandbox(f"sandbox: network access is off for this session ({risk.network})")
        if risk.outside_workspace:
            return DeniedBySandbox(f"sandbox {self._sandbox}: {risk.rule}")
        if self._sandbox == "read_only":
            confined = spec.name in OS_SANDBOXED_TOOLS or spec.name in SANDBOX_INHERITING_TOOLS
            if risk.risk == "destructive" or (risk.risk == "effectful" and not confined):
                return DeniedBySandbox(f"sandbox read_only: {spec.name} would change the workspace ({risk.risk})")
        return None

    def _rule(self, spec: ToolSpec, risk: CallRisk) -> tuple[str, str, str]:
        """The rule that applies (``allow``, ``ask``, ``deny``), said as a reason's start and as
        the setting it comes from."""
        class_rule = getattr(self._policy, risk.risk)
        class_source = f"policy rule for {risk.risk} calls"
        class_setting = f"approval.{risk.risk} = {class_rule}"
        tool_rule = self._policy.tools.get(spec.name)
        if tool_rule is None:
            return class_rule, class_source, class_setting
        tool_source = f"policy rule for tool {spec.name}"
        tool_setting = f'approval.tools["{spec.name}"] = {tool_rule}'
        if risk.risk in ("destructive", "network"):
            order = {"deny": 0, "ask": 1, "allow": 2}
            if order[tool_rule] > order[class_rule]:
                return class_rule, class_source, class_setting
        return tool_rule, tool_source, tool_setting

    def _decide_v1(self, spec: ToolSpec) -> Decision:
        rule = self._policy.tools.get(spec.name)
        source = f"policy rule for tool {spec.name}"
        if rule is None:
            rule = getattr(self._policy, spec.risk)
            source = f"policy rule for {spec.risk} tools"
        if rule == "allow":
            return Allowed(f"{source}: allow", f"{source}: allow")
        if rule == "deny":
            return DeniedByPolicy(f"{source}: deny")
        return NeedsApproval(f"{source}: ask")
