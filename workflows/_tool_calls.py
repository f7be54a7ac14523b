"""Triage of a model's tool calls before anything runs: unknown tools, invalid arguments, policy.

Pure: the session workflow emits the events and opens the approvals this decides.
Argument validation uses ``jsonschema`` (pinned exactly in pyproject.toml, because its
verdict decides which commands a workflow issues).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from agentrt.schemas import ToolCall, ToolSpec, argument_problems
from agentrt.workflows.policy import Allowed, DeniedByPolicy, DeniedBySandbox, PolicyEngine

PREVIEW_CHARS = 200


@dataclass(frozen=True)
class Triage:
    """What happens to one call: ``run`` it, ``ask`` for approval first, or ``refuse`` it.

    ``failure`` names why a refused call did not run (``unknown_tool``, ``invalid_arguments``,
    ``denied``, ``denied_by_sandbox``); ``text`` is the error the model sees, or the policy's
    reason for ``ask`` and ``run``; ``rule`` for ``ask`` the policy rule a grant for the session
    would cover, for ``run`` the setting that allowed the call (``Allowed.rule``).
    """

    call: ToolCall
    action: Literal["run", "ask", "refuse"]
    text: str = ""
    failure: Literal["unknown_tool", "invalid_arguments", "denied", "denied_by_sandbox"] | None = None
    rule: str = ""  # ``ask``: the rule a grant for the session would cover; ``run``: the setting that allowed it


def triage(call: ToolCall, tools: dict[str, ToolSpec], policy: PolicyEngine) -> Triage:
    """Decide what happens to ``call`` given the session's tools and policy."""
    spec = tools.get(call.name)
    if spec is None:
        known = ", ".join(sorted(tools)) or "(none)"
        return Triage(
            call, "refuse", f"unknown tool {call.name!r} (not granted to this session); available tools: {known}", "unknown_tool"
        )
    if call.arguments is None:
        return Triage(
            call,
            "refuse",
            f"arguments for {call.name} are not a JSON object ({call.arguments_error}); "
            f"received: {call.arguments_raw[:500]}",
            "invalid_arguments",
        )
    problems = argument_problems(spec, call.arguments)
    if problems:
        return Triage(call, "refuse", f"invalid arguments for {call.name}: " + "; ".join(problems), "invalid_arguments")
    decision = policy.decide(spec, call.arguments)
    if isinstance(decision, DeniedBySandbox):
        return Triage(call, "refuse", f"tool call denied by the sandbox ({decision.reason}); no approval can allow it", "denied_by_sandbox")
    if isinstance(decision, DeniedByPolicy):
        return Triage(call, "refuse", f"tool call denied by policy ({decision.reason})", "denied")
    if isinstance(decision, Allowed):
        return Triage(call, "run", decision.reason, rule=decision.rule)
    return Triage(call, "ask", decision.reason, rule=decision.rule)


def preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def arguments_preview(call_arguments: dict | None, limit: int) -> str:
    return preview(json.dumps(call_arguments), limit)
