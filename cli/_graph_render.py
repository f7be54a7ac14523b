"""Plain-text rendering of task graphs for `agentrt graph`: a graph's snapshot (header, the DAG one
line per node, the answer, what to do next), its events one line each, and its result.

Prompts, answers, findings and errors come from models and tools: every line goes through
``printable`` so none can drive the terminal."""

from __future__ import annotations

from datetime import timezone

from agentrt.cli._render import describe, printable
from agentrt.cli._task_render import cut, spend_text
from agentrt.schemas import (
    TERMINAL_GRAPH_STATUSES,
    AgentTaskCompleted,
    AgentTaskFailed,
    AgentTaskStarted,
    Event,
    GraphSnapshot,
    NodeView,
    TaskBlocked,
    TaskCancelled,
    TaskDecomposed,
    TaskGraphCompleted,
    TaskGraphCreated,
    TaskGraphFailed,
    TaskGraphPaused,
    TaskGraphResumed,
    TaskGraphStatusChanged,
    TaskGraphResult,
    TaskPlanApproved,
    TaskPlanRejected,
    TaskRetried,
    TaskReviewed,
)

# A mark per node status, so a DAG reads at a glance.
NODE_MARKS: dict[str, str] = {
    "pending": "·",
    "delegated": "▶",
    "reviewing": "?",
    "retrying": "↻",
    "completed": "✓",
    "failed": "✗",
    "blocked": "⊘",
    "cancelled": "–",
}
# Characters of a node's finding, error or answer under its line; findings shown per node.
DETAIL_CHARS = 160
FINDINGS_SHOWN = 3
# Characters of the graph's answer in `graph status` and at the end of `graph run`.
PLAN_TEXT_CHARS = 20_000  # a node's prompt is at most this long (MAX_NODE_PROMPT_CHARS)
ANSWER_CHARS = 4_000
# Deepest indentation of a node's line (two spaces per level of dependency).
MAX_INDENT_LEVELS = 8
# Failed nodes named (and given a `graph retry` command) while a graph waits for a retry by hand.
RETRY_NODES_SHOWN = 3


def node_depths(nodes: list[NodeView]) -> dict[str, int]:
    """Each node's level: 0 without dependencies, else one more than its deepest dependency
    (a dependency on no listed node counts as level 0)."""
    depths: dict[str, int] = {}
    by_id = {n.id: n for n in nodes}

    def depth(node_id: str, seen: frozenset[str]) -> int:
        if node_id in depths:
            return depths[node_id]
        node = by_id.get(node_id)
        if node is None or node_id in seen:
            return -1
        level = 1 + max((depth(d, seen | {node_id}) for d in node.depends_on), default=-1)
        depths[node_id] = level
        return level

    for node in nodes:
        depth(node.id, frozenset())
    return depths


def dependency_order(nodes: list[NodeView]) -> list[NodeView]:
    """``nodes`` with each after every node it depends on, ties in the given order (a node in a
    cycle or waiting on no listed node comes last, as given)."""
    done: set[str] = set()
    order: list[NodeView] = []
    remaining = list(nodes)
    known = {n.id for n in nodes}
    while remaining:
        ready = [n for n in remaining if all(d in done or d not in known for d in n.depends_on)]
        if not ready:
            order += remaining
            break
        order += ready
        done.update(n.id for n in ready)
        remaining = [n for n in remaining if n.id not in done]
    return order


def node_line(node: NodeView, depth: int = 0, width: int = 0) -> str:
    """``✓ id  role  status  N attempt(s)  <- deps  session ID`` (the session while one runs); the
    mark and id (indented by ``depth``) padded to ``width`` characters, so columns line up."""
    mark = NODE_MARKS.get(node.status, "?")
    indent = "  " * min(max(depth, 0), MAX_INDENT_LEVELS)
    parts = [f"{indent}{mark} {node.id}".ljust(width), f"{node.role:<8}", f"{node.status:<9}"]
    if node.attempts:
        parts.append(f"{node.attempts} attempt{'s' if node.attempts != 1 else ''}")
    if node.depends_on:
        parts.append(f"<- {', '.join(node.depends_on)}")
    if node.session_id and node.status in ("delegated", "reviewing", "retrying"):
        parts.append(f"session {node.session_id}")
    return printable("  ".join(parts).rstrip())


def node_detail_lines(node: NodeView, depth: int = 0) -> list[str]:
    """What is known under a node's line: the reviewer's findings, its error, what blocks it."""
    indent = "  " * min(max(depth, 0), MAX_INDENT_LEVELS) + "    "
    lines = [f"{indent}finding: {cut(f, DETAIL_CHARS)}" for f in node.findings[:FINDINGS_SHOWN]]
    if len(node.findings) > FINDINGS_SHOWN:
        lines.append(f"{indent}(and {len(node.findings) - FINDINGS_SHOWN} more finding(s))")
    if node.error:
        lines.append(f"{indent}error: {cut(node.error, DETAIL_CHARS)}")
    if node.blocked_by:
        lines.append(f"{indent}blocked: {cut(node.blocked_by, 80)} failed")
    return lines


def dag_lines(snapshot: GraphSnapshot) -> list[str]:
    """The graph's nodes in dependency order, one line each (indented by level), details under them."""
    if not snapshot.nodes:
        return ["  (no plan yet)" if snapshot.status in ("planning",) else "  (no nodes)"]
    depths = node_depths(snapshot.nodes)
    width = max(2 * min(max(depths.get(n.id, 0), 0), MAX_INDENT_LEVELS) + 2 + len(n.id) for n in snapshot.nodes)
    lines: list[str] = []
    for node in dependency_order(snapshot.nodes):
        depth = depths.get(node.id, 0)
        lines.append("  " + node_line(node, depth, width))
        lines += ["  " + line for line in node_detail_lines(node, depth)]
    return lines


def plan_lines(snapshot: GraphSnapshot) -> list[str]:
    """What an approver decides on: the risk level and why, then each node in dependency order with
    its prompt, what the reviewer checks and the tools it will be granted."""
    lines = [f"plan of graph {printable(snapshot.graph_id)}: {len(snapshot.nodes)} node(s), at most {snapshot.max_parallel} at once"]
    if snapshot.risk_level:
        why = "; ".join(snapshot.risk_reasons[:4])
        lines.append(printable(f"risk {snapshot.risk_level}" + (f" ({why})" if why else "")))
    for node in dependency_order(snapshot.nodes):
        deps = f" <- {', '.join(node.depends_on)}" if node.depends_on else ""
        lines.append(printable(f"  {node.id} ({node.role}){deps}"))
        lines += _wrapped("prompt", node.prompt)
        if node.acceptance:
            lines += _wrapped("checked against", node.acceptance)
        tools = ", ".join(node.tools) if node.tools is not None else "the graph's tools"
        lines.append(printable(f"      tools: {tools or '(none)'}"))
    return lines


def _wrapped(label: str, text: str) -> list[str]:
    """``label: text`` whole (an approver sees all of what a node will be told), each line
    terminal-safe; past ``PLAN_TEXT_CHARS`` characters, cut with where to read the rest."""
    shown = text if len(text) <= PLAN_TEXT_CHARS else text[:PLAN_TEXT_CHARS] + f"… [{len(text) - PLAN_TEXT_CHARS} more characters: graph status --json]"
    first, *rest = shown.splitlines() or [""]
    return [printable(f"      {label}: {first}")] + [printable(f"        {line}") for line in rest]


def answer_lines(text: str, limit: int = ANSWER_CHARS) -> list[str]:
    """A model's answer, newlines kept, each line terminal-safe and indented; cut to ``limit`` characters."""
    shown = text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"
    return [("  " + printable(line)).rstrip() for line in shown.splitlines()] or ["  (empty)"]


def waiting_for_retry(snapshot: GraphSnapshot) -> list[NodeView]:
    """The nodes that failed for good while the graph waits for a retry by hand of one
    (``retry_until``, ``--retry-window``); empty when it does not wait."""
    if snapshot.retry_until is None or snapshot.status in TERMINAL_GRAPH_STATUSES:
        return []
    return [n for n in snapshot.nodes if n.status == "failed"]


def retry_wait_line(snapshot: GraphSnapshot) -> str | None:
    """``nodes a, b failed for good: waiting until ... UTC for a retry by hand (agentrt graph retry ID NODE)``,
    or None when the graph does not wait for one."""
    failed = waiting_for_retry(snapshot)
    if not failed or snapshot.retry_until is None:
        return None
    until = snapshot.retry_until.astimezone(timezone.utc)
    ids = ", ".join(n.id for n in failed[:RETRY_NODES_SHOWN]) + (", …" if len(failed) > RETRY_NODES_SHOWN else "")
    return printable(
        f"node{'s' if len(failed) != 1 else ''} {ids} failed for good: waiting until {until:%Y-%m-%d %H:%M:%S} UTC for a retry "
        f"by hand (agentrt graph retry {snapshot.graph_id} NODE), else the graph ends failed"
    )


def next_steps(snapshot: GraphSnapshot) -> list[str]:
    """Commands that fit the graph's state."""
    gid = snapshot.graph_id
    steps = [f"agentrt graph retry {gid} {n.id}" for n in waiting_for_retry(snapshot)[:RETRY_NODES_SHOWN]]
    if snapshot.status == "pending_approval":
        steps += [f"agentrt graph approve {gid}", f"agentrt graph approve {gid} --reject --reason WHY"]
    elif snapshot.status in ("planning", "approved", "executing"):
        steps += [f"agentrt graph events {gid}", f"agentrt graph wait {gid}", f"agentrt graph cancel {gid}"]
    elif snapshot.status == "paused":
        steps += [f"agentrt graph resume {gid}", f"agentrt graph cancel {gid}"]
    running = [n for n in snapshot.nodes if n.session_id and n.status in ("delegated", "reviewing", "retrying")]
    failed = [n for n in snapshot.nodes if n.status == "failed" and n.session_ids]
    for node in (running or failed)[:3]:
        steps.append(f"agentrt session events {node.session_id or node.session_ids[-1]}   (node {node.id})")
    return steps


def graph_lines(snapshot: GraphSnapshot) -> list[str]:
    """``graph status`` for people: the header, the DAG, the answer or failure, the next steps."""
    s = snapshot
    approval = s.approve_plan
    if s.approved_by:
        approval += f", approved by {s.approved_by}"
    if s.token_id:
        approval += f" (token {s.token_id})"
    risk = s.risk_level or ("not assessed yet" if s.status in ("planning",) else "- (no plan was assessed)")
    if s.risk_reasons:
        risk += f" ({'; '.join(cut(r, 80) for r in s.risk_reasons[:3])})"
    waiting = " · waiting for a retry by hand" if waiting_for_retry(s) else ""
    lines = [
        f"graph      {s.graph_id} ({s.status}{waiting}) owner {s.owner}",
        f"goal       {cut(s.goal, 400) if s.goal else '(a given graph)'}",
        f"risk       {risk}",
        f"approval   {approval}",
        f"parallel   at most {s.max_parallel} at once, {s.running} running · {s.max_retries} retr"
        f"{'y' if s.max_retries == 1 else 'ies'} per node · failure policy {s.failure_policy}",
        f"spend      {spend_text(s.spend)}",
    ]
    if s.workspace:
        lines.append(f"workspace  {s.workspace}")
    if s.paused is not None:
        why = f": {cut(s.paused.reason, 200)}" if s.paused.reason else ""
        lines.append(f"paused     by {s.paused.principal} since {s.paused.since:%Y-%m-%d %H:%M:%S} UTC{why}")
    lines = [printable(line) for line in lines]
    lines.append(f"nodes      {len(s.nodes)}" + (f" ({_counts(s.nodes)})" if s.nodes else ""))
    lines += plan_lines(s)[2:] if s.status == "pending_approval" else dag_lines(s)
    if s.answer:
        lines.append("answer")
        lines += answer_lines(s.answer)
    if s.failure or s.failure_reason:
        lines.append(printable(f"failure    {s.failure_reason or '-'}: {cut(s.failure or '', 400)}"))
    if (retry := retry_wait_line(s)) is not None:
        lines.append(f"retry      {retry}")
    steps = next_steps(s)
    if steps:
        lines.append("next steps")
        lines += [printable(f"  {step}") for step in steps]
    return lines


def _counts(nodes: list[NodeView]) -> str:
    counts: dict[str, int] = {}
    for node in nodes:
        counts[node.status] = counts.get(node.status, 0) + 1
    return ", ".join(f"{n} {status}" for status, n in counts.items())


def _by(principal: str | None, reason: str | None) -> str:
    return (f" by {principal}" if principal else "") + (f": {cut(reason)}" if reason else "")


def graph_event_text(event: Event) -> str:
    """What a graph event says, on one line (the session renderer's for other events)."""
    match event:
        case TaskGraphCreated():
            what = f"for {cut(event.goal)}" if event.goal else "from a given graph"
            return f"graph {event.graph_id} created by {event.owner} {what}; plan approval {event.approve_plan}"
        case TaskDecomposed():
            if event.direct_answer is not None and not event.nodes:
                return f"the planner answered without a plan: {cut(event.direct_answer)}"
            reasons = f" ({'; '.join(cut(r, 80) for r in event.risk_reasons[:3])})" if event.risk_reasons else ""
            ids = ", ".join(n.id for n in event.nodes[:10]) + (", …" if len(event.nodes) > 10 else "")
            return (
                f"planned {len(event.nodes)} node(s) [{event.source}]: {ids}; risk {event.risk_level}{reasons}; "
                f"at most {event.max_parallel} at once"
            )
        case TaskPlanApproved():
            how = "automatically" if event.token.automatic else f"by {event.principal}"
            why = f": {cut(event.reason)}" if event.reason else ""
            return f"plan approved {how}{why}; token {event.token.token_id} (risk {event.token.risk_level})"
        case TaskPlanRejected():
            return "plan rejected" + _by(event.principal, event.reason)
        case AgentTaskStarted():
            tools = f"; tools: {', '.join(event.tools[:8])}" + (", …" if len(event.tools) > 8 else "") if event.tools else ""
            return f"node {event.node_id} attempt {event.attempt} started as session {event.session_id} ({event.role}{tools})"
        case AgentTaskCompleted():
            answer = f": {cut(event.answer, 120)}" if event.answer else ""
            return f"node {event.node_id} completed (attempt {event.attempt}){answer}"
        case AgentTaskFailed():
            final = " for good" if event.final else ""
            error = f": {cut(event.error)}" if event.error else ""
            return f"node {event.node_id} attempt {event.attempt} failed{final}{error}"
        case TaskReviewed():
            verdict = "passed" if event.passed else "failed"
            findings = f": {'; '.join(cut(f, 100) for f in event.findings[:3])}" if event.findings else ""
            error = f" (review error: {cut(event.error, 100)})" if event.error else ""
            severity = f" [{event.severity}]" if event.severity else ""
            return f"node {event.node_id} attempt {event.attempt} review {verdict}{severity}{findings}{error}"
        case TaskRetried():
            feedback = f": {cut(event.feedback)}" if event.feedback else ""
            if event.principal is not None:
                unblocked = f"; unblocked {', '.join(event.unblocked)}" if event.unblocked else ""
                return f"node {event.node_id} retried by hand as attempt {event.attempt}" + _by(event.principal, event.reason) + unblocked
            return f"node {event.node_id} retried as attempt {event.attempt}{feedback}"
        case TaskBlocked():
            return f"node {event.node_id} blocked: {event.blocked_by} failed"
        case TaskCancelled():
            what = f"node {event.node_id}" if event.node_id else "graph"
            return f"{what} cancelled" + _by(event.principal, event.reason)
        case TaskGraphPaused():
            return "graph paused" + _by(event.principal, event.reason) + "; no node starts, its sessions pause"
        case TaskGraphResumed():
            return "graph resumed" + _by(event.principal, event.reason) + f" after {event.paused_seconds:.1f} s paused"
        case TaskGraphStatusChanged():
            return f"status {event.status}" + (f" (was {event.previous})" if event.previous else "")
        case TaskGraphCompleted():
            return f"graph completed · spent {spend_text(event.spend)}"
        case TaskGraphFailed():
            error = f": {cut(event.error)}" if event.error else ""
            return f"graph failed ({event.reason}){error} · spent {spend_text(event.spend)}"
    return describe(event)


def graph_event_line(event: Event) -> str:
    """``seq  time (UTC)  type  what it says``."""
    at = event.at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S") if event.at else "-"
    return printable(f"{event.seq:>4}  {at:<19}  {event.type:<20} {graph_event_text(event)}")


def graph_result_lines(result: TaskGraphResult) -> list[str]:
    """How a graph ended: status, nodes by status, spend, the failure and the answer."""
    counts: dict[str, int] = {}
    for status in result.nodes.values():
        counts[status] = counts.get(status, 0) + 1
    nodes = ", ".join(f"{n} {status}" for status, n in counts.items()) or "no nodes"
    lines = [printable(f"graph {result.graph_id} {result.status} ({nodes}) · spent {spend_text(result.spend)}")]
    if result.failure or result.failure_reason:
        lines.append(printable(f"failure: {result.failure_reason or '-'}: {cut(result.failure or '', 400)}"))
    if result.answer:
        lines.append("answer")
        lines += answer_lines(result.answer)
    return lines
