"""What one AG-UI run (``POST /v1/agents/{agent}/ag-ui``) sends of a turn's events, so that the
messages a stock ``@ag-ui/client`` builds from them are the conversation, clean:

- the turn's user message is left out: the client holds it already (it sent it, under its id);
- each tool call names its assistant message (``parentMessageId``): the text message of the
  model call that made it, or, for a reply with no text, ``msg-<N>`` (N: the model call's event),
  under which the client makes an empty assistant message to carry the calls;
- a tool result is the whole result (``ToolResults`` reads it from the store), not the preview
  the session's stream carries;
- the text of an abandoned model attempt (a retried call) is withdrawn: after its
  ``TEXT_MESSAGE_END`` and ``ModelTextSuperseded``, a ``MESSAGES_SNAPSHOT`` of the thread
  without that message (AG-UI has no event that removes one message; a snapshot replaces the
  client's list, and this one is the client's own list, from the run's input and what the run
  sent, less the abandoned message).

``RunTranscript`` does this for the events of one run, in order; it keeps the messages the
client holds (the run's input, then what the run added) for the snapshot.
"""

from __future__ import annotations

from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    EventType,
    FunctionCall,
    Message,
    MessagesSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCall,
    ToolCallArgsEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
)

from agentrt.gateway._agui import SUPERSEDED

__all__ = ["RunTranscript"]

_MODEL_CALL = "ModelRequestStarted"


class RunTranscript:
    """Rewrites the AG-UI events of one run (``rewrite``) and keeps the client's messages.

    ``messages``: the run's input messages (what the client holds when the run starts)."""

    def __init__(self, messages: list[Message]) -> None:
        self._messages: list[Message] = list(messages)
        self._index: dict[str, Message] = {m.id: m for m in self._messages}
        self._user_ids: set[str] = set()  # the turn's user message, left out
        self._call_seq: int | None = None  # the model call in progress (its event's seq)
        self._reply: str | None = None  # the assistant message of that call's reply

    @property
    def messages(self) -> list[Message]:
        """The messages the client holds after the events rewritten so far."""
        return list(self._messages)

    def rewrite(self, event: BaseEvent) -> list[BaseEvent]:
        """The events the run sends for ``event`` (none, it, a changed copy, or it and a snapshot)."""
        kind = event.type
        if kind == EventType.CUSTOM:
            assert isinstance(event, CustomEvent)
            if event.name == _MODEL_CALL and isinstance(event.value, dict):
                self._call_seq, self._reply = event.value.get("seq"), None
            elif event.name == SUPERSEDED and isinstance(event.value, dict):
                return [event, self._withdraw(str(event.value.get("message_id")))]
            return [event]
        if kind == EventType.TEXT_MESSAGE_START:
            assert isinstance(event, TextMessageStartEvent)
            if event.role == "user":
                self._user_ids.add(event.message_id)
                return []
            if event.role == "assistant":
                self._reply = event.message_id
            self._add(AssistantMessage(id=event.message_id, content="") if event.role == "assistant" else None)
            return [event]
        if kind in (EventType.TEXT_MESSAGE_CONTENT, EventType.TEXT_MESSAGE_END):
            assert isinstance(event, TextMessageContentEvent | TextMessageEndEvent)
            if event.message_id in self._user_ids:
                return []
            if isinstance(event, TextMessageContentEvent):
                message = self._index.get(event.message_id)
                if isinstance(message, AssistantMessage):
                    message.content = (message.content or "") + event.delta
            return [event]
        if kind == EventType.TOOL_CALL_START:
            assert isinstance(event, ToolCallStartEvent)
            return [self._start_call(event)]
        if kind == EventType.TOOL_CALL_ARGS:
            assert isinstance(event, ToolCallArgsEvent)
            call = self._call(event.tool_call_id)
            if call is not None:
                call.function.arguments += event.delta
            return [event]
        if kind == EventType.TOOL_CALL_RESULT:
            assert isinstance(event, ToolCallResultEvent)
            self._add(ToolMessage(id=event.message_id, content=event.content, tool_call_id=event.tool_call_id))
            return [event]
        return [event]

    def _start_call(self, event: ToolCallStartEvent) -> ToolCallStartEvent:
        if self._reply is None:
            self._reply = f"msg-{self._call_seq}" if self._call_seq is not None else f"msg-{event.tool_call_id}"
        parent = self._index.get(self._reply)
        if parent is None:
            parent = AssistantMessage(id=self._reply, content=None, tool_calls=[])
            self._add(parent)
        if isinstance(parent, AssistantMessage):
            call = ToolCall(id=event.tool_call_id, type="function", function=FunctionCall(name=event.tool_call_name, arguments=""))
            parent.tool_calls = [*(parent.tool_calls or []), call]
        return event.model_copy(update={"parent_message_id": self._reply})

    def _call(self, call_id: str) -> ToolCall | None:
        for message in self._messages:
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls or []:
                    if call.id == call_id:
                        return call
        return None

    def _add(self, message: Any) -> None:
        if message is not None and message.id not in self._index:
            self._messages.append(message)
            self._index[message.id] = message

    def _withdraw(self, message_id: str) -> MessagesSnapshotEvent:
        self._messages = [m for m in self._messages if m.id != message_id]
        self._index.pop(message_id, None)
        if self._reply == message_id:
            self._reply = None
        return MessagesSnapshotEvent(messages=[m.model_copy(deep=True) for m in self._messages])
