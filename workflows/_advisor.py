"""Which tool batches the advisor reviews: every one (``full``) or only those with a high-risk
call (``lightweight``). Pure: the session workflow runs the ``advisor.review`` activity.
"""

from __future__ import annotations

import re

from agentrt.schemas import AdvisorPolicy, ToolCall, ToolSpec
from agentrt.workflows.policy import _outside, classify_call

# Shell commands whose effect no rule can see: code handed to an interpreter inline or as a file.
_HIDDEN_CODE = re.compile(
    r"(^|[\s;&|(`])(python[\d.]*|pypy\d*|perl|ruby|node|deno|php|lua|Rscript)\s+(-[a-zA-Z]*[ce]\b|[^\s-])"
    r"|(^|[\s;&|(`])(sh|bash|dash|zsh|ksh|source|\.)\s+[^\s-]"
)
# Reads of secrets the policy does not call destructive (it only guards writes).
_SECRET_READ = re.compile(
    r"(~|\$HOME|/root|/home/[^/\s]+)/\.(ssh|aws|gnupg|netrc|pgpass|docker|kube)\b|\bid_(rsa|ed25519|ecdsa)\b"
    r"|(^|[/\s])\.env\b|\$\{?[A-Z_]*(KEY|TOKEN|SECRET|PASSWORD)\b|/proc/[^\s]*/environ|\bprintenv\b|^\s*env\s*($|[;|&])"
)
# Files a write to changes what runs later, outside this session (CI, hooks, build entry points).
_RUNS_LATER = re.compile(r"(^|/)(\.github/workflows|\.gitlab-ci\.yml$|\.circleci/|\.husky/|Makefile$|Dockerfile$)")


def high_risk_rule(spec: ToolSpec | None, call: ToolCall, workspace: str) -> str:
    """Why ``call`` is high-risk for a ``lightweight`` review (``""`` when it is not): a
    destructive shell command (``rm -rf``, ``sudo`` ...), a command that uses the network, a
    write to a secrets file such as ``.env`` or to a path outside the workspace
    (``agentrt.workflows.policy.classify_call`` decides the first three); also code handed to an
    interpreter (``python -c``, ``sh script.sh``: no rule sees what it does), a read of secrets
    (``~/.ssh``, ``$API_KEY``, ``.env``) and a write to a file that runs later (CI, hooks).
    Best effort: a batch it misses still meets the policy and the sandbox."""
    if spec is None or call.arguments is None:
        return ""
    risk = classify_call(spec, call.arguments, workspace)
    if risk.risk == "destructive":
        return risk.rule or "destructive"
    if risk.risk == "network" or risk.network:
        return risk.network or risk.rule or "network"
    if risk.outside_workspace:
        return risk.rule or "outside the workspace"
    command = call.arguments.get("command")
    if spec.name == "shell.run" and isinstance(command, str):
        if _HIDDEN_CODE.search(command):
            return "runs code an interpreter reads (inline or from a file)"
        if _SECRET_READ.search(command):
            return "reads secrets (keys, tokens, .env, environment)"
    path = call.arguments.get("path")
    if spec.risk != "read_only" and isinstance(path, str) and _outside(path, workspace):
        return f"writes outside the workspace: {path[:100]}"
    if spec.risk != "read_only" and isinstance(path, str) and _RUNS_LATER.search(path):
        return f"writes a file that runs later (CI, hooks, build): {path[:100]}"
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
