"""The destructive commands a graph node's answer (or a diff in it) holds, for its reviewer: a
node that did, or tells its reader to do, ``rm -rf``, ``sudo``, ``mkfs``, a write to ``.env`` ...
gets a high-severity finding, whatever the reviewer model says.

Read with the policy engine's classifier (``agentrt.workflows.policy.classify_command``): each
line of the answer, with a shell prompt (``$ ``), a quote (``> ``) or a diff's ``+`` taken off,
or each inline code span of a line that has some, is read as a command. Bounded work on untrusted text: at most
``MAX_ANSWER_LINES`` lines and ``MAX_CANDIDATES`` candidates, none over ``MAX_CANDIDATE_CHARS``.
"""

from __future__ import annotations

import re

from agentrt.schemas import cut_middle
from agentrt.workflows.policy import classify_command

__all__ = ["MAX_ANSWER_LINES", "MAX_CANDIDATES", "MAX_CANDIDATE_CHARS", "MAX_FINDINGS", "destructive_findings"]

MAX_ANSWER_LINES = 5_000
MAX_CANDIDATES = 2_000
# Longer lines are prose, not commands (the classifier calls any command over its own bound destructive).
MAX_CANDIDATE_CHARS = 2_000
MAX_FINDINGS = 5

_CODE_SPAN = re.compile(r"`([^`\n]{1,2000})`")
_PREFIX = re.compile(r"^(?:\$|#|>|❯|%)\s+|^\+(?!\+\+)")


def _candidates(answer: str) -> list[str]:
    found: list[str] = []
    for line in answer.splitlines()[:MAX_ANSWER_LINES]:
        text = line.strip()
        if text.startswith("```"):
            continue
        spans = _CODE_SPAN.findall(text)
        if spans:  # a line with code spans is prose around them: the spans are the commands
            found.extend(span.strip() for span in spans)
        else:
            found.append(_PREFIX.sub("", text, count=1).strip())
        if len(found) >= MAX_CANDIDATES:
            break
    return [c for c in found[:MAX_CANDIDATES] if c and len(c) <= MAX_CANDIDATE_CHARS]


def destructive_findings(answer: str) -> list[str]:
    """High-severity findings, one per destructive command in ``answer`` (at most
    ``MAX_FINDINGS``, each naming the command, cut, and the classifier's rule); [] when none."""
    findings: list[str] = []
    seen: set[str] = set()
    for command in _candidates(answer):
        risk = classify_command(command)
        if risk.risk != "destructive" or command in seen:
            continue
        seen.add(command)
        findings.append(f"high: a destructive command in the node's answer: {cut_middle(command, 200)!r} ({risk.rule})")
        if len(findings) >= MAX_FINDINGS:
            break
    return findings
