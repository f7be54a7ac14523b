"""``StreamHub`` following real sessions on the dev server: the scripted model's turn (a tool call,
then an answer), a model call retried after its stream was cut (a loopback provider), resuming
after every id, in the native and the AG-UI encoding."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from ag_ui.core import Event as AguiEvent
from pydantic import TypeAdapter

from agentrt.gateway._stream import StreamHub, StreamItem, StreamSubscription
from agentrt.schemas import ModelProfile
from tests.activities.providers._loopback import LoopbackServer, Reply
from tests.conftest import Harness
from tests.e2e._support import write_script

AGUI_EVENT = TypeAdapter(AguiEvent)
KEY_ENV = "AGENTRT_TEST_STREAM_KEY"
ANSWER = "The readme says this is a small demo project used by the tests of the runtime."


@pytest.fixture
async def hub(harness: Harness) -> AsyncIterator[StreamHub]:
    hub = StreamHub(harness.store, poll_seconds=0.05)
    yield hub
    await hub.aclose()


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    monkeypatch.setenv(KEY_ENV, "sk-test-not-a-real-key")
    server = LoopbackServer().start()
    yield server
    server.stop()


async def rest(items: StreamSubscription, timeout: float = 90.0) -> list[StreamItem]:
    async def collect() -> list[StreamItem]:
        return [item async for item in items]

    return await asyncio.wait_for(collect(), timeout)


async def followed_session(harness: Harness, hub: StreamHub, workspace: Path, config_fields: dict, prompt: str) -> list[StreamItem]:  # type: ignore[type-arg]
    """Subscribe to a new session before it starts, run one turn, archive it: every item the
    subscriber got, live."""
    sid = harness.new_session_id()
    items = await hub.subscribe(sid)
    following = asyncio.ensure_future(rest(items))
    config = harness.client.new_config(str(workspace), session_id=sid, heartbeat_timeout_seconds=5.0, **config_fields)
    started = await harness.client.start(config, prompt)
    await harness.client.wait(sid, started.turn_id, timeout_seconds=60)
    await harness.client.archive(sid)
    return await following


async def scripted_session(harness: Harness, hub: StreamHub, workspace: Path, tmp_path: Path) -> list[StreamItem]:
    script = write_script(tmp_path, [
        {"text": "Let me read the readme first.", "tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}]},
        {"text": ANSWER},
    ])
    return await followed_session(harness, hub, workspace, {"profile": "scripted", "script": script}, "what is this?")


def cut_then_whole(provider: LoopbackServer) -> None:
    """The first request's stream stops after some text (a transport error: the call is retried);
    the second streams the whole answer."""
    def chunk(content: str, finish: str | None = None) -> bytes:
        body = {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]}
        return f"data: {json.dumps(body)}\n\n".encode()

    provider.reply(
        Reply(chunks=[chunk("Hello "), chunk("wor")]),
        Reply(chunks=[chunk("Hello "), chunk("world, "), chunk("again.", "stop"), b"data: [DONE]\n\n"]),
    )


def add_profile(harness: Harness, provider: LoopbackServer) -> str:
    profile = ModelProfile(name="cut-stream", provider="openai", model="local-model", base_url=provider.url, api_key_env=KEY_ENV)
    harness.config.profiles[profile.name] = profile
    return profile.name


def texts_by_call(items: list[StreamItem]) -> dict[int, str]:
    """The streamed text of each model call's last attempt, as a client that drops superseded
    attempts shows it."""
    shown: dict[int, list[tuple[int, str]]] = {}
    for item in items:
        if item.event == "ModelTokenDelta":
            data = item.data
            kept = [(a, t) for a, t in shown.get(data["seq"], []) if a not in data.get("supersedes", [])]
            shown[data["seq"]] = [*kept, (data["attempt"], data["text"])]
    return {seq: "".join(text for _, text in parts) for seq, parts in shown.items()}


# ---------------------------------------------------------------- native


async def test_a_session_s_stream_holds_its_events_with_each_call_s_deltas_and_ends_at_archive(
    harness: Harness, hub: StreamHub, workspace: Path, tmp_path: Path
) -> None:
    items = await scripted_session(harness, hub, workspace, tmp_path)
    event_items = [item for item in items if item.event != "ModelTokenDelta"]
    assert [int(item.id) for item in event_items] == list(range(1, len(event_items) + 1))
    assert event_items[-1].event == "SessionArchived"
    assert len({item.id for item in items}) == len(items)
    started = {int(item.id): item for item in event_items if item.event == "ModelRequestStarted"}
    completed = [item.data["text"] for item in event_items if item.event == "AssistantMessageCompleted"]
    assert texts_by_call(items) == dict(zip(started, completed, strict=True))
    assert completed[-1] == ANSWER
    for i, item in enumerate(items):  # each delta right after its call's event or another delta of it
        if item.event == "ModelTokenDelta":
            assert items[i - 1].id == str(item.data["seq"]) or items[i - 1].id.startswith(f"{item.data['seq']}.")


async def test_resuming_a_session_s_stream_after_any_id_gives_exactly_the_rest(
    harness: Harness, hub: StreamHub, workspace: Path, tmp_path: Path
) -> None:
    items = await scripted_session(harness, hub, workspace, tmp_path)
    sid = harness.session_ids[-1]
    expected = [(item.id, item.data) for item in items]
    for i, (last_id, _) in enumerate(expected[:-1]):
        resumed = await rest(await hub.subscribe(sid, last_id))
        assert [(item.id, item.data) for item in resumed] == expected[i + 1:], last_id


async def test_a_retried_model_call_streams_anew_marked_as_a_retry_that_supersedes_the_cut_attempt(
    harness: Harness, hub: StreamHub, workspace: Path, provider: LoopbackServer
) -> None:
    cut_then_whole(provider)
    items = await followed_session(harness, hub, workspace, {"profile": add_profile(harness, provider)}, "hello?")
    deltas = [item for item in items if item.event == "ModelTokenDelta"]
    assert [(d.data["attempt"], d.data["text"]) for d in deltas] == [
        (1, "Hello "), (1, "wor"), (2, "Hello "), (2, "world, "), (2, "again."),
    ]
    assert all(d.data.get("retry") is None for d in deltas[:2])
    assert all(d.data["retry"] is True and d.data["supersedes"] == [1] for d in deltas[2:])
    assert list(texts_by_call(items).values()) == ["Hello world, again."]
    assert len(provider.requests) == 2


# ---------------------------------------------------------------- AG-UI


async def test_the_ag_ui_encoding_of_a_session_parses_as_ag_ui_events_one_run_per_turn(
    harness: Harness, hub: StreamHub, workspace: Path, tmp_path: Path
) -> None:
    await scripted_session(harness, hub, workspace, tmp_path)
    items = await rest(await hub.subscribe(harness.session_ids[-1], None, "ag-ui"))
    events = [AGUI_EVENT.validate_python(item.data) for item in items]
    types = [e.type.value for e in events]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED" and types.count("RUN_STARTED") == 1
    assert [item.event for item in items] == types
    starts = [e.message_id for e in events if e.type.value == "TEXT_MESSAGE_START"]
    ends = [e.message_id for e in events if e.type.value == "TEXT_MESSAGE_END"]
    assert starts == ends and len(starts) == 3  # the user's message and the two replies
    text = "".join(e.delta for e in events if e.type.value == "TEXT_MESSAGE_CONTENT" and e.message_id == starts[-1])
    assert text == ANSWER
    calls = [e.tool_call_id for e in events if e.type.value == "TOOL_CALL_START"]
    assert calls == [e.tool_call_id for e in events if e.type.value == "TOOL_CALL_END"]
    assert calls == [e.tool_call_id for e in events if e.type.value == "TOOL_CALL_RESULT"]
    assert types.index("TOOL_CALL_START") < types.index("TOOL_CALL_ARGS") < types.index("TOOL_CALL_END") < types.index("TOOL_CALL_RESULT")


async def test_resuming_the_ag_ui_encoding_after_any_id_or_part_gives_exactly_the_rest(
    harness: Harness, hub: StreamHub, workspace: Path, tmp_path: Path
) -> None:
    await scripted_session(harness, hub, workspace, tmp_path)
    sid = harness.session_ids[-1]
    expected = [(item.id, item.data) for item in await rest(await hub.subscribe(sid, None, "ag-ui"))]
    assert any(":" in item_id for item_id, _ in expected)
    for i, (last_id, _) in enumerate(expected[:-1]):
        resumed = await rest(await hub.subscribe(sid, last_id, "ag-ui"))
        assert [(item.id, item.data) for item in resumed] == expected[i + 1:], last_id


async def test_a_retried_call_in_the_ag_ui_encoding_ends_the_abandoned_message_and_starts_a_new_one(
    harness: Harness, hub: StreamHub, workspace: Path, provider: LoopbackServer
) -> None:
    cut_then_whole(provider)
    native = await followed_session(harness, hub, workspace, {"profile": add_profile(harness, provider)}, "hello?")
    call = next(item.id for item in native if item.event == "ModelRequestStarted")
    items = await rest(await hub.subscribe(harness.session_ids[-1], None, "ag-ui"))
    events = [AGUI_EVENT.validate_python(item.data) for item in items]
    abandoned, retried = f"msg-{call}.1", f"msg-{call}.2"
    assistant = [
        (e.type.value, e.name if e.type.value == "CUSTOM" else e.message_id, getattr(e, "delta", None))
        for e in events
        if e.type.value.startswith("TEXT_MESSAGE") and e.message_id.startswith(f"msg-{call}.")
        or e.type.value == "CUSTOM" and e.name == "ModelTextSuperseded"
    ]
    assert assistant == [
        ("TEXT_MESSAGE_START", abandoned, None),
        ("TEXT_MESSAGE_CONTENT", abandoned, "Hello "),
        ("TEXT_MESSAGE_CONTENT", abandoned, "wor"),
        ("TEXT_MESSAGE_END", abandoned, None),
        ("CUSTOM", "ModelTextSuperseded", None),
        ("TEXT_MESSAGE_START", retried, None),
        ("TEXT_MESSAGE_CONTENT", retried, "Hello "),
        ("TEXT_MESSAGE_CONTENT", retried, "world, "),
        ("TEXT_MESSAGE_CONTENT", retried, "again."),
        ("TEXT_MESSAGE_END", retried, None),
    ]
    superseded = next(e for e in events if e.type.value == "CUSTOM" and e.name == "ModelTextSuperseded")
    assert superseded.value == {"message_id": abandoned, "superseded_by": retried, "attempt": 2}
