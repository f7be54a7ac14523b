"""The AG-UI encoding on stores filled by hand, for what a scripted session does not show: a
turn that fails mid-stream, events between turns, a reply that streamed nothing, and streams
resumed inside an open run and message."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from ag_ui.core import Event as AguiEvent
from pydantic import TypeAdapter

from agentrt.gateway._stream import StreamHub, StreamItem
from agentrt.schemas import (
    AssistantMessageCompleted,
    Event,
    ModelRequestStarted,
    OperatorActed,
    SessionArchived,
    StoreAppendInput,
    ToolInvocationFailed,
    TurnEnded,
    TurnStarted,
    Usage,
)
from agentrt.store import Store

SID = "s1"
TURN = "t1"
AGUI_EVENT = TypeAdapter(AguiEvent)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(f"sqlite:///{tmp_path / 'agui.db'}") as s:
        yield s


@pytest.fixture
async def hub(store: Store) -> AsyncIterator[StreamHub]:
    hub = StreamHub(store, poll_seconds=0.02)
    yield hub
    await hub.aclose()


def put(store: Store, first: int, *events: Event) -> None:
    for i, event in enumerate(events):
        event.seq = first + i
    store.append(StoreAppendInput(session_id=SID, events=list(events)))


async def agui(hub: StreamHub, last_event_id: str | None = None) -> list[tuple[str, str, dict]]:  # type: ignore[type-arg]
    """(id, AG-UI type, data) of every item after ``last_event_id``, each parsed as an AG-UI event."""
    items: list[StreamItem] = await asyncio.wait_for(_all(hub, last_event_id), 10)
    for item in items:
        AGUI_EVENT.validate_python(item.data)
    return [(item.id, item.event, item.data) for item in items]


async def _all(hub: StreamHub, last_event_id: str | None) -> list[StreamItem]:
    return [item async for item in await hub.subscribe(SID, last_event_id, "ag-ui")]


def failed_mid_stream(store: Store) -> None:
    put(store, 1, OperatorActed(principal="op", action="raise_budget", reason="more"), TurnStarted(turn_id=TURN),
        ModelRequestStarted(turn_id=TURN, round=1, profile="p"))
    store.append_deltas(SID, TURN, 1, 1, ["half ", "an"], 0)
    put(store, 4, TurnEnded(turn_id=TURN, status="failed", rounds=1, usage=Usage(), error="provider down", error_type="provider_http"),
        OperatorActed(principal="op", action="archive", reason="done"), SessionArchived(principal="op"))


async def test_a_turn_that_fails_mid_stream_ends_its_message_then_the_run_with_run_error(hub: StreamHub, store: Store) -> None:
    failed_mid_stream(store)
    assert [(i, t) for i, t, _ in await agui(hub)] == [
        ("2", "RUN_STARTED"), ("3", "CUSTOM"), ("3.1.0:0", "TEXT_MESSAGE_START"), ("3.1.0", "TEXT_MESSAGE_CONTENT"),
        ("3.1.1", "TEXT_MESSAGE_CONTENT"), ("4:0", "TEXT_MESSAGE_END"), ("4", "RUN_ERROR"),
    ]


async def test_a_failed_turn_s_run_error_carries_its_error_and_type(hub: StreamHub, store: Store) -> None:
    failed_mid_stream(store)
    *_, (_, _, data) = await agui(hub)
    assert data == {"type": "RUN_ERROR", "message": "provider down", "code": "provider_http"}


async def test_events_between_turns_have_no_ag_ui_event(hub: StreamHub, store: Store) -> None:
    failed_mid_stream(store)
    assert [i for i, _, _ in await agui(hub)][0] == "2"  # OperatorActed (1) came before the turn
    assert await agui(hub, "4") == []  # after the run: OperatorActed, SessionArchived


@pytest.mark.parametrize("last_id", ["3", "3.1.0", "3.1.0:0"])
async def test_a_stream_resumed_inside_a_run_and_its_message_continues_them(hub: StreamHub, store: Store, last_id: str) -> None:
    failed_mid_stream(store)
    everything = await agui(hub)
    at = [i for i, _, _ in everything].index(last_id)
    assert await agui(hub, last_id) == everything[at + 1:]


async def test_a_reply_that_streamed_nothing_is_one_whole_text_message(hub: StreamHub, store: Store) -> None:
    put(store, 1, TurnStarted(turn_id=TURN), ModelRequestStarted(turn_id=TURN, round=1, profile="p"),
        AssistantMessageCompleted(turn_id=TURN, round=1, text="whole", tool_calls=0, usage=Usage(), position=1),
        TurnEnded(turn_id=TURN, status="cancelled", rounds=1, usage=Usage()), SessionArchived(principal="op"))
    assert [(t, d.get("messageId"), d.get("delta")) for _, t, d in await agui(hub)][2:5] == [
        ("TEXT_MESSAGE_START", "msg-3", None), ("TEXT_MESSAGE_CONTENT", "msg-3", "whole"), ("TEXT_MESSAGE_END", "msg-3", None),
    ]
    *_, (_, kind, data) = await agui(hub)
    assert kind == "RUN_FINISHED" and data["outcome"] == {"type": "cancelled"}


async def test_a_failed_tool_call_is_a_tool_call_result_that_says_why(hub: StreamHub, store: Store) -> None:
    put(store, 1, TurnStarted(turn_id=TURN),
        ToolInvocationFailed(turn_id=TURN, call_id="c1", tool="fs.write", reason="denied", error="the user said no"))
    [_, (_, kind, data)] = await asyncio.wait_for(_first(hub, 2), 10)
    assert kind == "TOOL_CALL_RESULT"
    assert data["toolCallId"] == "c1" and data["content"] == "error (denied): the user said no"


async def _first(hub: StreamHub, count: int) -> list[tuple[str, str, dict]]:  # type: ignore[type-arg]
    items = await hub.subscribe(SID, None, "ag-ui")
    got = [await anext(items) for _ in range(count)]
    await items.aclose()
    return [(item.id, item.event, item.data) for item in got]
