"""The event journal: numbers and stamps a workflow's events and stages them for the store.

One ``Journal`` type for the three workflows: over any state that carries ``seq`` and
``unflushed_events`` (``SessionState``, ``TaskState``, ``GraphState``), so what is staged
travels through continue-as-new. The workflow writes what ``take`` gives (``store.append``,
``task.record``, ``graph.record``) and then calls ``written``. A session's journal
(``EventJournal``) stages transcript messages beside its events as well.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Protocol

from agentrt.schemas import (
    AssistantMessageCompleted,
    Event,
    EventsPage,
    Message,
    ModelToolCallRequested,
    PositionedMessage,
    SessionState,
    ToolCall,
    ToolInvocationCompleted,
    ToolInvocationFailed,
)


class JournalState(Protocol):
    """What a journal keeps in the workflow's carried state: the last sequence number given and
    the events not yet in the store, oldest first."""

    seq: int
    unflushed_events: list[Event]


class Journal:
    """Events of the current run (for the ``events`` query) and what is not yet in the store.

    ``first_seq`` is the first event this run answers for: the events an earlier run emitted
    but did not write belong to this run's view. ``events`` may be given: a list the state keeps
    of every event (a graph's ``GraphState.events``), then the query answers from all of them.
    """

    def __init__(self, state: JournalState, events: list[Event] | None = None) -> None:
        self._state = state
        self.events: list[Event] = list(state.unflushed_events) if events is None else events
        self.first_seq = self.events[0].seq if self.events else state.seq + 1

    @property
    def last_seq(self) -> int:
        return self._state.seq

    def emit(self, event: Event, now: datetime) -> Event:
        """Give ``event`` the next sequence number and the time ``now`` (``workflow.now()``), and stage it."""
        self._state.seq += 1
        event.seq = self._state.seq
        event.at = now
        self.events.append(event)
        self._state.unflushed_events.append(event)
        return event

    def take(self) -> list[Event]:
        """The staged events, for one store write (they stay staged until ``written``)."""
        return list(self._state.unflushed_events)

    def written(self, events: list[Event]) -> None:
        """``events`` (from ``take``) are in the store."""
        done = {e.seq for e in events}
        self._state.unflushed_events = [e for e in self._state.unflushed_events if e.seq not in done]

    def page(self, since_seq: int, limit: int) -> EventsPage:
        selected = [e for e in self.events if e.seq > since_seq][:limit]
        return EventsPage(events=selected, last_seq=self._state.seq, first_seq=self.first_seq)


class EventJournal(Journal):
    """A session's journal: its events, and the transcript messages staged with them."""

    def __init__(self, state: SessionState) -> None:
        super().__init__(state)
        self._session = state

    def take_position(self) -> int:
        """The next transcript position (0, 1, 2, ...)."""
        position = self._session.next_position
        self._session.next_position += 1
        return position

    def stage_message(self, position: int, turn_id: str, message: Message) -> int:
        """Stage ``message`` at ``position``; returns its size in bytes as context planning counts it."""
        self._session.unflushed_messages.append(PositionedMessage(position=position, turn_id=turn_id, message=message))
        return len(message.text.encode()) + sum(
            len(c.name) + len(c.arguments_raw or json.dumps(c.arguments)) for c in message.tool_calls
        )

    def unflushed(self) -> tuple[list[Event], list[PositionedMessage]]:
        """Copies of the staged events and messages, oldest first."""
        return list(self._state.unflushed_events), list(self._session.unflushed_messages)

    def flushed(self, events: int, messages: int) -> None:
        """The first ``events`` staged events and ``messages`` staged messages are in the store."""
        del self._state.unflushed_events[:events]
        del self._session.unflushed_messages[:messages]

    def unanswered_calls(self, turn_id: str) -> list[ToolCall]:
        """Tool calls of the turn's latest assistant message that have no result message yet."""
        answered: set[str] = set()
        last_calls: list[ToolCall] = []
        for event in self.events:
            if event.turn_id != turn_id:
                continue
            if isinstance(event, AssistantMessageCompleted):
                answered.clear()
                last_calls = []
            elif isinstance(event, ModelToolCallRequested):
                last_calls.append(event.call)
            elif isinstance(event, ToolInvocationCompleted) or (
                isinstance(event, ToolInvocationFailed) and event.position is not None
            ):
                answered.add(event.call_id)  # a result message exists for it
        return [call for call in last_calls if call.id not in answered]
