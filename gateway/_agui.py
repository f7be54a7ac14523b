"""The AG-UI encoding of a session's stream (``ag_ui.core`` events), so AG-UI front ends can
follow a session: one run per turn, the model's streamed text as text messages, tool calls and
their results, everything else as ``CUSTOM`` events.

One stream item becomes zero or more AG-UI events, a function of the item and of what is open
at its position (the turn, the text message); ``AguiEncoder`` holds that state and starts from
the store's view of a position (``SessionStream.open_turn``/``open_text``), so a stream resumed
anywhere encodes exactly as it would have without the break.

    agentrt item                          AG-UI events
    TurnStarted                           RUN_STARTED (threadId: session id, runId: turn id)
    UserMessageAdded                      TEXT_MESSAGE_START (role user) / _CONTENT / _END
    ModelRequestStarted                   CUSTOM "ModelRequestStarted"
    delta, an attempt's first             TEXT_MESSAGE_START (assistant), TEXT_MESSAGE_CONTENT
    delta of a retried attempt, first     TEXT_MESSAGE_END of the abandoned attempt's message,
                                          CUSTOM "ModelTextSuperseded", then as above
    delta, later ones                     TEXT_MESSAGE_CONTENT
    AssistantMessageCompleted             TEXT_MESSAGE_END (its text, when nothing streamed:
                                          TEXT_MESSAGE_START / _CONTENT / _END)
    ModelToolCallRequested                TOOL_CALL_START / TOOL_CALL_ARGS / TOOL_CALL_END
    ToolInvocationCompleted / Failed      TOOL_CALL_RESULT (a failure's content: "error (reason): ...")
    TurnEnded                             RUN_FINISHED (cancelled: outcome cancelled) or, for a
                                          failed turn, RUN_ERROR (code: its error_type)
    any other event within a turn         CUSTOM named by its type, value the event as JSON
    any other event between turns         nothing (AG-UI has no events outside a run)

Message ids: ``msg-<N>.<attempt>`` for the text attempt ``attempt`` of the model call event N
started; ``msg-<seq>`` for a user message, a tool result or an assistant message with no stream.
"""

from __future__ import annotations

import json
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from agentrt.schemas import (
    AssistantMessageCompleted,
    Event,
    ModelToolCallRequested,
    ToolInvocationCompleted,
    ToolInvocationFailed,
    TurnEnded,
    TurnStarted,
    UserMessageAdded,
)
from agentrt.store import StreamDelta, StreamEntry, StreamOpenText

# The CUSTOM event that says a retried model call's text replaces the abandoned attempt's message.
SUPERSEDED = "ModelTextSuperseded"


def text_message_id(call_seq: int, attempt: int) -> str:
    """The AG-UI message id of attempt ``attempt``'s text of the model call event ``call_seq`` started."""
    return f"msg-{call_seq}.{attempt}"


class AguiEncoder:
    """Turns stream entries into ``ag_ui.core`` events, in order, for one subscriber.

    ``turn_id``: the turn in progress at the starting position (its run is open); ``text``: the
    model text streaming there (its message is open). Both come from ``SessionStream``.
    """

    def __init__(self, session_id: str, turn_id: str | None = None, text: StreamOpenText | None = None) -> None:
        self._thread = session_id
        self._run = turn_id
        # The open text message: (call seq, attempt, turn id, round).
        self._text: tuple[int, int, str, int] | None = (
            (text.call.seq, text.attempt, text.call.turn_id, text.call.round) if text is not None else None
        )

    def encode(self, entry: StreamEntry) -> list[BaseEvent]:
        """The AG-UI events of ``entry`` (possibly none); updates what is open."""
        if entry.delta is not None:
            return self._delta(entry.delta) if self._run is not None else []
        event = entry.event
        assert event is not None
        if isinstance(event, TurnStarted):
            self._run, self._text = event.turn_id, None
            return [RunStartedEvent(thread_id=self._thread, run_id=event.turn_id or "")]
        if self._run is None:
            return []
        if isinstance(event, TurnEnded):
            out = self._close_text()
            self._run = None
            if event.status == "failed":
                return [*out, RunErrorEvent(message=event.error or "the turn failed", code=event.error_type)]
            result = {"status": event.status, "rounds": event.rounds, "error": event.error}
            if event.output is not None:
                result["output"] = event.output
            outcome = RunFinishedCancelledOutcome() if event.status == "cancelled" else None
            return [*out, RunFinishedEvent(thread_id=self._thread, run_id=event.turn_id or "", result=result, outcome=outcome)]
        if isinstance(event, UserMessageAdded):
            return _whole_message(f"msg-{event.seq}", "user", event.text)
        if isinstance(event, AssistantMessageCompleted):
            return self._completed(event)
        if isinstance(event, ModelToolCallRequested):
            call = event.call
            arguments = call.arguments_raw or json.dumps(call.arguments or {}, ensure_ascii=False)
            return [
                ToolCallStartEvent(tool_call_id=call.id, tool_call_name=call.name),
                *([ToolCallArgsEvent(tool_call_id=call.id, delta=arguments)] if arguments else []),
                ToolCallEndEvent(tool_call_id=call.id),
            ]
        if isinstance(event, ToolInvocationCompleted):
            return [ToolCallResultEvent(message_id=f"msg-{event.seq}", tool_call_id=event.call_id, content=event.preview, role="tool")]
        if isinstance(event, ToolInvocationFailed):
            content = f"error ({event.reason}): {event.error}"
            return [ToolCallResultEvent(message_id=f"msg-{event.seq}", tool_call_id=event.call_id, content=content, role="tool")]
        return [_custom(event)]

    def _delta(self, delta: StreamDelta) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        message_id = text_message_id(delta.call_seq, delta.attempt)
        opened = self._text
        if opened is None or opened[:2] != (delta.call_seq, delta.attempt):
            out.extend(self._close_text())
            if opened is not None and opened[0] == delta.call_seq:
                value = {"message_id": text_message_id(*opened[:2]), "superseded_by": message_id, "attempt": delta.attempt}
                out.append(CustomEvent(name=SUPERSEDED, value=value))
            out.append(TextMessageStartEvent(message_id=message_id, role="assistant"))
            self._text = (delta.call_seq, delta.attempt, delta.turn_id, delta.round)
        if delta.text:
            metadata = {"attempt": delta.attempt, "retry": True} if delta.attempt > 1 else None
            out.append(TextMessageContentEvent(message_id=message_id, delta=delta.text, metadata=metadata))
        return out

    def _completed(self, event: AssistantMessageCompleted) -> list[BaseEvent]:
        opened = self._text
        if opened is not None and opened[2:] == (event.turn_id, event.round):
            return self._close_text()
        return [*self._close_text(), *(_whole_message(f"msg-{event.seq}", "assistant", event.text) if event.text else [])]

    def _close_text(self) -> list[BaseEvent]:
        if self._text is None:
            return []
        message_id = text_message_id(*self._text[:2])
        self._text = None
        return [TextMessageEndEvent(message_id=message_id)]


def _whole_message(message_id: str, role: str, text: str) -> list[BaseEvent]:
    return [
        TextMessageStartEvent(message_id=message_id, role=role),  # type: ignore[arg-type]
        *([TextMessageContentEvent(message_id=message_id, delta=text)] if text else []),
        TextMessageEndEvent(message_id=message_id),
    ]


def _custom(event: Event) -> CustomEvent:
    value: dict[str, Any] = event.model_dump(mode="json")
    return CustomEvent(name=event.type, value=value)
