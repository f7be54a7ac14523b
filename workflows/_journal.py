"""The event journal: numbers and stamps a session's events and stages them, with transcript
messages, for the store.

Pure bookkeeping over ``SessionState`` (``seq``, ``next_position`` and the unflushed lists
live there, so they travel through continue-as-new); the workflow writes what is staged
with one ``store.append`` activity and then calls ``flushed``.
"""

from __future__ import annotations

import json
from datetime import datetime

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


class EventJournal:
    """Events of the current run (for the ``events`` query) and what is not yet in the store.

    ``first_seq`` is the first event this run answers for: the events an earlier run emitted
    but did not write belong to this run's view.
    """

    def __init__(self, state: SessionState) -> None:
        self._state = state
        self.events: list[Event] = list(state.unflushed_events)
        self.first_seq = state.unflushed_events[0].seq if state.unflushed_events else state.seq + 1

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

    def take_position(self) -> int:
        """The next transcript position (0, 1, 2, ...)."""
        position = self._state.next_position
        self._state.next_position += 1
        return position

    def stage_message(self, position: int, turn_id: str, message: Message) -> int:
        """Stage ``message`` at ``position``; returns its size in bytes as context planning counts it."""
        self._state.unflushed_messages.append(PositionedMessage(position=position, turn_id=turn_id, message=message))
        return len(message.text.encode()) + sum(
            len(c.name) + len(c.arguments_raw or json.dumps(c.arguments)) for c in message.tool_calls
        )

    def unflushed(self) -> tuple[list[Event], list[PositionedMessage]]:
        """Copies of the staged events and messages, oldest first."""
        return list(self._state.unflushed_events), list(self._state.unflushed_messages)

    def flushed(self, events: int, messages: int) -> None:
        """The first ``events`` staged events and ``messages`` staged messages are in the store."""
        del self._state.unflushed_events[:events]
        del self._state.unflushed_messages[:messages]

    def page(self, since_seq: int, limit: int) -> EventsPage:
        selected = [e for e in self.events if e.seq > since_seq][:limit]
        return EventsPage(events=selected, last_seq=self._state.seq, first_seq=self.first_seq)

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
