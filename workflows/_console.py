"""What the Temporal UI shows of a session, task or graph: the search attributes its workflow list
filters on, written only when a value changes, and current details that say, in markdown, how to
act on what waits (the exact update name and JSON for **Send an Update**, and the CLI commands).

Pure: the workflows pass in what they know (``workflow.info().typed_search_attributes`` among
it); nothing here reads a clock or does I/O. The search attributes are ``console-v1``
(``CONSOLE_PATCH``); the details are no part of history and need no patch.

Text a model, a tool or an MCP server chose (tool names, arguments, questions) is shown only
inside code spans with its backticks replaced, so it cannot pass for the runtime's own
instructions; ids and principals in commands are shell-quoted, and JSON is ``json.dumps``'d.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from shlex import quote
from types import MappingProxyType
from typing import Any, Literal

from temporalio.common import SearchAttributePair, SearchAttributeUpdate, TypedSearchAttributes

from agentrt.schemas import (
    AGENT_KIND,
    AGENT_PROFILE,
    PENDING_APPROVALS,
    SESSION_OWNER,
    SESSION_STATUS,
    SPEND_USD,
    BudgetCrossing,
    PauseState,
    PermissionRequest,
    code_span,
)

# console-v1: sessions, tasks and graphs keep AgentKind, AgentOwner, AgentSessionStatus,
# AgentProfile, AgentPendingApprovals and AgentSpendUsd current, each upserted only when its
# value differs from the workflow's typed search attributes (one upsert per change, none per round).
CONSOLE_PATCH = "console-v1"
# Requests listed one by one in a session's details; the rest are counted.
SHOWN_REQUESTS = 5
# Characters of a tool call's arguments, a question or a reason shown in the details.
SHOWN_CHARS = 160

Kind = Literal["session", "task", "graph"]


@dataclass(frozen=True)
class Listing:
    """The values of a workflow's search attributes.

    ``kind``: ``session``, ``task`` or ``graph`` (``AgentKind``); ``owner`` (``AgentOwner``);
    ``status`` (``AgentSessionStatus``); ``profile`` (``AgentProfile``); ``pending_approvals``:
    decisions a human owes it now (``AgentPendingApprovals``); ``spend_usd``: US dollars spent so
    far (``AgentSpendUsd``), None while there is no cost to show (the attribute is left as it is).
    """

    kind: Kind
    owner: str
    status: str
    profile: str
    pending_approvals: int = 0
    spend_usd: float | None = None


def changed(listing: Listing, current: TypedSearchAttributes) -> list[SearchAttributeUpdate[Any]]:
    """Updates for the attributes whose value in ``listing`` differs from ``current`` (the
    workflow's ``info().typed_search_attributes``, which each upsert keeps up to date); empty
    when nothing changed, so the caller upserts nothing."""
    wanted: list[tuple[Any, Any]] = [
        (SESSION_STATUS, listing.status),
        (SESSION_OWNER, listing.owner),
        (AGENT_KIND, listing.kind),
        (AGENT_PROFILE, listing.profile),
        (PENDING_APPROVALS, listing.pending_approvals),
        (SPEND_USD, None if listing.spend_usd is None else float(listing.spend_usd)),
    ]
    return [key.value_set(value) for key, value in wanted if value is not None and current.get(key) != value]


def child_session_attributes(profile: str) -> list[SearchAttributePair[Any]]:
    """What a task or graph starts a child session with beside its owner and status: its kind,
    profile and no approvals waiting, so the session is listed with them before it runs."""
    return [
        SearchAttributePair(AGENT_KIND, "session"),
        SearchAttributePair(AGENT_PROFILE, profile),
        SearchAttributePair(PENDING_APPROVALS, 0),
    ]


def spend_or_none(cost_usd: float) -> float | None:
    """``cost_usd`` when there is a cost to show, else None (nothing priced was spent yet)."""
    return cost_usd if cost_usd > 0 else None


# ---------------------------------------------------------------- markdown pieces


def code(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` as a one-line markdown code span, cut to ``limit`` characters: backticks become
    ``ˋ`` so that text chosen by a model or a tool cannot close the span and write markdown."""
    return code_span(text, limit)


def payload(fields: dict[str, Any]) -> str:
    """The JSON an operator types into **Send an Update** / **Send a Signal**, as one line (a
    backtick in a value written ``\\u0060``, so the JSON fits a one-backtick code span)."""
    return json.dumps(fields, ensure_ascii=False).replace("`", "\\u0060")


def command(*words: str) -> str:
    """A shell command line, each word quoted where the shell would read it otherwise."""
    return " ".join(quote(w) for w in words)


def literal(text: str) -> str:
    """``text`` exactly, as a markdown code span: fenced by more backticks than it holds in a row
    (CommonMark), so a command can be copied as it is whatever its words hold."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    padded = f" {text} " if longest else text
    return f"{fence}{padded}{fence}"


def cmd(*words: str) -> str:
    """A shell command line (``command``) as a code span (``literal``)."""
    return literal(command(*words))


def how_to(
    workflow_id: str,
    update: str,
    fields: dict[str, Any],
    cli: Sequence[str] | None = None,
    *,
    signal: str | None = None,
    label: str | None = None,
) -> list[str]:
    """Lines that say how to send update ``update`` with ``fields``: the JSON for the UI's
    **Send an Update** (and **Send a Signal** ``signal``, which takes the same JSON), the
    ``agentrt`` command when given (``cli``, its words) and the ``temporal`` command; the first
    line starts with ``label`` when given."""
    body = payload(fields)
    ui = f"Send an Update `{update}`" + (f" (or Send a Signal `{signal}`)" if signal else "") + f": `{body}`"
    if label:
        ui = f"{label}: {ui}"
    lines = [ui]
    if cli:
        lines.append(f"CLI: {cmd(*cli)}")
    lines.append(cmd("temporal", "workflow", "update", "execute", "--workflow-id", workflow_id, "--name", update, "--input", body))
    return lines


def block(lines: Sequence[str]) -> str:
    """Lines shown one below another (markdown hard line breaks)."""
    return "  \n".join(lines)


# ---------------------------------------------------------------- sessions


def _request_lines(workflow_id: str, session_id: str, owner: str, request: PermissionRequest) -> list[str]:
    rid = request.request_id
    if request.kind == "reconcile":
        head = f"**{code(rid)}** reconcile {code(request.tool)} {code(json.dumps(request.arguments, ensure_ascii=False))}: was its effect applied?"
        answer = {"request_id": rid, "outcome": "applied", "principal": owner}
        return [
            head,
            *how_to(workflow_id, "decide_reconcile", answer, ["agentrt", "session", "reconcile", session_id, rid, "applied"], signal="reconcile"),
            f"Not applied (it runs once more): `{payload({**answer, 'outcome': 'not_applied'})}` · "
            + cmd("agentrt", "session", "reconcile", session_id, rid, "not_applied"),
        ]
    if request.kind == "elicitation":
        head = f"**{code(rid)}** {code(request.tool)} asks {code(request.message or request.reason)}"
        schema = code(json.dumps(request.requested_schema or {}, ensure_ascii=False))
        answer = {"request_id": rid, "principal": owner, "action": "accept", "content": {}}
        return [
            head,
            f"Answer with content matching {schema}:",
            *how_to(workflow_id, "answer_elicitation", answer, ["agentrt", "session", "answer", session_id, rid, "{}"]),
            f"Decline: `{payload({'request_id': rid, 'principal': owner, 'action': 'decline'})}` · "
            + cmd("agentrt", "session", "answer", session_id, rid, "--decline"),
        ]
    head = f"**{code(rid)}** {code(request.tool)} {code(json.dumps(request.arguments, ensure_ascii=False))}"
    grant = {"request_id": rid, "decision": "grant", "principal": owner}
    deny = {"request_id": rid, "decision": "deny", "principal": owner, "reason": "not now"}
    return [
        head,
        how_to(workflow_id, "decide", grant, signal="permission_decision", label="Approve")[0],
        how_to(workflow_id, "decide", deny, signal="permission_decision", label="Deny")[0],
        f"CLI: {cmd('agentrt', 'session', 'approve', session_id, rid)} · " + cmd("agentrt", "session", "deny", session_id, rid),
        cmd("temporal", "workflow", "update", "execute", "--workflow-id", workflow_id, "--name", "decide", "--input", payload(grant)),
    ]


def session_details(
    *,
    workflow_id: str,
    session_id: str,
    owner: str,
    status: str,
    profile: str,
    turns: int,
    pending: Sequence[PermissionRequest] = (),
    spend_usd: float | None = None,
    paused: PauseState | None = None,
) -> str:
    """Markdown for a session's current details: its status line, who paused it and how to resume
    it (while ``paused``) and, for each request waiting for a decision (at most ``SHOWN_REQUESTS``),
    how to decide it from the UI and the CLI."""
    head = [f"**{status}**", f"owner {code(owner)}", f"profile {code(profile)}", f"{turns} turns"]
    if spend_usd is not None:
        head.append(f"${spend_usd:.4f}")
    if pending:
        head.insert(1, f"{len(pending)} waiting for a decision")
    sections = [" · ".join(head)]
    if paused is not None:
        sections.append(block(pause_lines(workflow_id, "session", session_id, owner, paused)))
    for request in list(pending)[:SHOWN_REQUESTS]:
        sections.append(block(_request_lines(workflow_id, session_id, owner, request)))
    if len(pending) > SHOWN_REQUESTS:
        more = len(pending) - SHOWN_REQUESTS
        sections.append(f"and {more} more: {cmd('agentrt', 'session', 'state', session_id)}")
    if status == "idle":
        sections.append(block([
            how_to(workflow_id, "send_message", {"text": "...", "principal": owner}, label="Send a message")[0],
            f"CLI: {cmd('agentrt', 'session', 'send', session_id, '...')}",
        ]))
    return "\n\n".join(sections)


# ---------------------------------------------------------------- tasks and graphs


# Budget dimension -> the ``agentrt task raise-budget`` flag that raises it (those with one).
_BUDGET_FLAGS = MappingProxyType({"tokens": "--budget-tokens", "cost_usd": "--budget-usd", "tool_calls": "--budget-tool-calls"})


def raise_budget_lines(workflow_id: str, task_id: str, owner: str, crossing: BudgetCrossing) -> list[str]:
    """How to raise the limit ``crossing`` reached (here: to twice its value) for a task."""
    raised: float | int = crossing.limit * 2
    if crossing.dimension != "cost_usd" and crossing.dimension != "wall_seconds":
        raised = int(raised)
    fields = {"principal": owner, "budget": {f"max_{crossing.dimension}": raised}}
    flag = _BUDGET_FLAGS.get(crossing.dimension)
    cli = ["agentrt", "task", "raise-budget", task_id, flag, str(raised)] if flag else None
    if crossing.dimension == "wall_seconds":
        cli = ["agentrt", "task", "raise-budget", task_id, "--budget-hours", f"{raised / 3600:g}"]
    return how_to(workflow_id, "raise_budget", fields, cli, label="Raise the limit")


def task_control_lines(workflow_id: str, task_id: str, owner: str, update: str, label: str) -> list[str]:
    """How to ``update`` (``resume``, ``nudge``, ``cancel``, ``pause``) a task as its owner."""
    return how_to(workflow_id, update, {"principal": owner}, ["agentrt", "task", update, task_id], label=label)


def pause_lines(workflow_id: str, kind: Kind, item_id: str, owner: str, paused: PauseState) -> list[str]:
    """Who paused a session, task or graph and why, and how to resume it as its owner."""
    why = f": {code(paused.reason)}" if paused.reason else ""
    head = f"paused by {code(paused.principal)} at {paused.since:%Y-%m-%d %H:%M:%S} UTC{why}; no model or tool call starts"
    return [head, *how_to(workflow_id, "resume", {"principal": owner}, ["agentrt", kind, "resume", item_id], label="Resume")]


def plan_approval_lines(workflow_id: str, graph_id: str, owner: str) -> list[str]:
    """How to approve, or reject, a graph's plan that waits for approval."""
    approve = {"principal": owner}
    reject = {"principal": owner, "approve": False, "reason": "not this plan"}
    return [
        how_to(workflow_id, "approve_plan", approve, label="Approve the plan")[0],
        how_to(workflow_id, "approve_plan", reject, label="Reject it")[0],
        f"CLI: {cmd('agentrt', 'graph', 'approve', graph_id)} · "
        + cmd("agentrt", "graph", "approve", graph_id, "--reject", "--reason", "not this plan"),
        cmd("temporal", "workflow", "update", "execute", "--workflow-id", workflow_id, "--name", "approve_plan", "--input", payload(approve)),
    ]


def graph_cancel_lines(workflow_id: str, graph_id: str, owner: str) -> list[str]:
    """How to cancel a graph as its owner."""
    return how_to(workflow_id, "cancel", {"principal": owner}, ["agentrt", "graph", "cancel", graph_id], label="Cancel")
