"""``RunTranscript`` on events made by hand: what a run sends of a turn's AG-UI events, and the
messages it keeps for a snapshot (the e2e tests drive it with the real client)."""

from __future__ import annotations

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    MessagesSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)

from agentrt.gateway._agui_transcript import RunTranscript

USER = UserMessage(id="u1", content="hi")


def text(message_id: str, role: str, *deltas: str) -> list[BaseEvent]:
    return [
        TextMessageStartEvent(message_id=message_id, role=role),  # type: ignore[arg-type]
        *(TextMessageContentEvent(message_id=message_id, delta=d) for d in deltas),
        TextMessageEndEvent(message_id=message_id),
    ]


def call(call_id: str, name: str = "fs.read") -> list[BaseEvent]:
    return [ToolCallStartEvent(tool_call_id=call_id, tool_call_name=name), ToolCallArgsEvent(tool_call_id=call_id, delta="{}"),
            ToolCallEndEvent(tool_call_id=call_id)]


def model_call(seq: int) -> CustomEvent:
    return CustomEvent(name="ModelRequestStarted", value={"seq": seq, "type": "ModelRequestStarted"})


def sent(transcript: RunTranscript, events: list[BaseEvent]) -> list[BaseEvent]:
    return [out for event in events for out in transcript.rewrite(event)]


def test_the_turn_s_user_message_is_left_out() -> None:
    transcript = RunTranscript([USER])
    assert sent(transcript, text("msg-2", "user", "hi")) == []
    assert [m.id for m in transcript.messages] == ["u1"]


def test_tool_calls_name_the_text_message_of_their_model_call() -> None:
    transcript = RunTranscript([USER])
    out = sent(transcript, [model_call(3), *text("msg-3.1", "assistant", "let me see"), *call("c1"), *call("c2")])
    assert [e.parent_message_id for e in out if isinstance(e, ToolCallStartEvent)] == ["msg-3.1", "msg-3.1"]
    [_, reply] = transcript.messages
    assert isinstance(reply, AssistantMessage) and reply.content == "let me see"
    assert [c.id for c in reply.tool_calls or []] == ["c1", "c2"]


def test_calls_of_a_reply_without_text_share_a_message_named_after_the_model_call() -> None:
    transcript = RunTranscript([USER])
    out = sent(transcript, [model_call(7), *call("c1"), *call("c2"), model_call(12), *call("c3")])
    assert [e.parent_message_id for e in out if isinstance(e, ToolCallStartEvent)] == ["msg-7", "msg-7", "msg-12"]


def test_an_abandoned_attempt_is_withdrawn_by_a_snapshot_of_the_client_s_other_messages() -> None:
    transcript = RunTranscript([USER])
    sent(transcript, [model_call(3), *call("c1"), ToolCallResultEvent(message_id="msg-4", tool_call_id="c1", content="r")])
    events = [model_call(5), *text("msg-5.1", "assistant", "Hel"),
              CustomEvent(name="ModelTextSuperseded", value={"message_id": "msg-5.1", "superseded_by": "msg-5.2", "attempt": 2}),
              *text("msg-5.2", "assistant", "Hello")]
    out = sent(transcript, events)
    [snapshot] = [e for e in out if isinstance(e, MessagesSnapshotEvent)]
    assert [m.id for m in snapshot.messages] == ["u1", "msg-3", "msg-4"]
    assert [m.id for m in transcript.messages] == ["u1", "msg-3", "msg-4", "msg-5.2"]
