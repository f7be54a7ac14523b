"""The durable record of sessions checked after a run: what chaos and fleet count as lost.

``count_lost`` compares what a session acknowledged and what its workflow says happened with
the store's transcript and events and with the effects a counted tool left in a file (a line
per call); ``read_lines`` reads that file, ``open_reconciles`` finds the reconcile requests
still waiting for an operator.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from agentrt.client import AgentClient
from agentrt.schemas import TurnOutcome
from agentrt.store import Store


class SentTurn(Protocol):
    """A turn as a driver sent it: its number (1-based), its user text, the turn id the session
    answered with (None: never acknowledged) and its outcome (None: not ended)."""

    number: int
    text: str
    turn_id: str | None
    outcome: TurnOutcome | None


async def workflow_events(client: AgentClient, store: Store, session_id: str, rpc_timeout: float) -> list[Any]:
    """Every event the session's workflow says it emitted, in ``seq`` order, across its runs: the
    current run's from the ``events`` query (``client`` has no store, so it reads only those), the
    runs before a continue-as-new (``first_seq`` > 1) from ``store``, where each run wrote them
    before it continued."""
    events: list[Any] = []
    since = 0
    while True:
        page = await asyncio.wait_for(client.events(session_id, since_seq=since, limit=1000), rpc_timeout)
        if page.first_seq > since + 1:
            older = await asyncio.to_thread(store.events, session_id, since, page.first_seq - 1 - since)
            events.extend(e for e in older if e.seq < page.first_seq)
        events.extend(page.events)
        if not page.events or page.events[-1].seq >= page.last_seq:
            return events
        since = page.events[-1].seq


def count_lost(
    sid: str,
    turns: Sequence[SentTurn],
    events: list[Any],
    stored_events: list[Any],
    messages: list[tuple[int, Any]],
    counts: collections.Counter[str],
    tool: str,
    problem: Callable[[str], None],
) -> int:
    """Violations of session ``sid``'s durable record, one per item (``problem`` gets a line each):

    (1) a user message the session acknowledged that is not in the store transcript exactly
    once, as a ``user`` message with the sent text;
    (2) a transcript position named by a workflow event (``UserMessageAdded``,
    ``AssistantMessageCompleted``, ``ToolInvocationCompleted`` / ``ToolInvocationFailed`` with
    a position) missing from the store or holding the wrong role, or a stored position no event names;
    (3) stored events whose ``seq`` values are not exactly 1..``last_seq`` of the workflow, or
    whose type differs from the workflow's event with the same ``seq``;
    (4) a call of ``tool`` recorded as completed whose ``line`` argument is not in ``counts``
    (the lines of the tool's file);
    (5) a tool call the model requested, in a turn that ended, without exactly one final result
    (``ToolInvocationCompleted`` or a ``ToolInvocationFailed`` other than ``outcome_unknown``);
    (6) a turn with more or fewer than one ``TurnEnded`` event once it has an outcome.

    ``events``: the workflow's events (``AgentClient.events``); ``stored_events`` and
    ``messages``: the store's (``Store.events``, ``Store.messages``).
    """
    lost = 0

    def bad(text: str) -> None:
        nonlocal lost
        lost += 1
        problem(f"{sid}: LOST {text}")

    # (1) acknowledged user messages: exactly once in the transcript
    user_texts = collections.Counter(m.text for _, m in messages if m.role == "user")
    for turn in turns:
        if turn.turn_id is None:
            continue
        if user_texts[turn.text] != 1:
            bad(f"user message of turn {turn.number} is in the transcript {user_texts[turn.text]} times")

    if not events:
        return lost + 1 if any(t.turn_id for t in turns) else lost

    # (2) positions named by events <-> stored messages
    by_position = dict(messages)
    named: dict[int, str] = {}
    for event in events:
        position = getattr(event, "position", None)
        if position is None:
            continue
        role = {"UserMessageAdded": "user", "AssistantMessageCompleted": "assistant"}.get(event.type, "tool")
        if position in named:
            bad(f"position {position} named twice ({named[position]}, {event.type})")
        named[position] = role
    for position, role in sorted(named.items()):
        message = by_position.get(position)
        if message is None:
            bad(f"position {position} ({role}) is not in the store")
        elif message.role != role:
            bad(f"position {position} holds a {message.role} message, events say {role}")
    for position in sorted(set(by_position) - set(named)):
        bad(f"stored position {position} is named by no event")

    # (3) stored events == workflow events, seq 1..last
    last = events[-1].seq
    if [e.seq for e in events] != list(range(1, last + 1)):
        bad(f"workflow event seqs are not 1..{last}")
    stored = {e.seq: e for e in stored_events}
    if sorted(stored) != list(range(1, last + 1)):
        missing = sorted(set(range(1, last + 1)) - set(stored))
        extra = sorted(set(stored) - set(range(1, last + 1)))
        bad(f"stored event seqs differ from 1..{last}: missing {missing[:10]} extra {extra[:10]}")
    for event in events:
        if event.seq in stored and stored[event.seq].type != event.type:
            bad(f"event {event.seq} is {stored[event.seq].type} in the store, {event.type} in the workflow")

    # (4) completed calls of the counted tool: the line is in the file; (5) one final result per call
    requested: dict[tuple[str, str], Any] = {}
    finals: collections.Counter[tuple[str, str]] = collections.Counter()
    completed: list[tuple[str, str]] = []
    ended: collections.Counter[str] = collections.Counter()
    for event in events:
        if event.type == "ModelToolCallRequested":
            requested[(event.turn_id, event.call.id)] = event.call
        elif event.type == "ToolInvocationCompleted":
            finals[(event.turn_id, event.call_id)] += 1
            completed.append((event.turn_id, event.call_id))
        elif event.type == "ToolInvocationFailed" and event.reason != "outcome_unknown":
            finals[(event.turn_id, event.call_id)] += 1
        elif event.type == "TurnEnded":
            ended[event.turn_id] += 1
    for key in completed:
        call = requested.get(key)
        if call is None or call.name != tool:
            continue
        line = (call.arguments or {}).get("line")
        if counts[line] == 0:
            bad(f"{key[0]} {key[1]} completed but its line {line!r} is not in the file")
    for key in requested:
        if key[0] in ended and finals[key] != 1:
            bad(f"{key[0]} {key[1]} has {finals[key]} final results")
    # (6) one TurnEnded per turn that has an outcome
    for turn in turns:
        if turn.outcome is not None and ended[turn.turn_id or ""] != 1:
            bad(f"{turn.turn_id} has {ended[turn.turn_id]} TurnEnded events")
    return lost


def read_lines(path: Path) -> list[str]:
    """The lines of ``path``; none when it does not exist."""
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def open_reconciles(events: list[Any]) -> set[str]:
    """Reconcile requests with no later event naming their request id."""
    open_: set[str] = set()
    for event in events:
        request = getattr(event, "request", None)
        if event.type == "PermissionRequested" and getattr(request, "kind", "tool_call") == "reconcile":
            open_.add(request.request_id)
        elif getattr(event, "request_id", None) in open_ and event.type != "PermissionDecisionIgnored":
            open_.discard(event.request_id)
    return open_
