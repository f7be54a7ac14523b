"""``stream_response`` over HTTP: a tiny FastAPI app serving it under uvicorn on loopback, read
with httpx-sse; a client that disconnects mid-stream resumes with Last-Event-ID and gets
exactly the rest, in both encodings; keep-alives, ``retry:``, 400 and 204."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Annotated, Literal

import httpx
import pytest
import uvicorn
from ag_ui.core import Event as AguiEvent
from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse
from httpx_sse import ServerSentEvent, aconnect_sse
from pydantic import TypeAdapter

from agentrt.gateway._stream import StreamHub, stream_response
from agentrt.schemas import (
    AssistantMessageCompleted,
    Event,
    InvalidStreamCursor,
    ModelRequestStarted,
    SessionArchived,
    StoreAppendInput,
    TurnEnded,
    TurnStarted,
    Usage,
    UserMessageAdded,
)
from agentrt.store import Store

SID = "s1"
TURN = "t1"
URL = f"/v1/sessions/{SID}/stream"


def stream_app(hub: StreamHub, ping_seconds: float = 15.0, closed: list[str] | None = None) -> FastAPI:
    """An app serving ``stream_response``; each response over appends its session id to ``closed``."""
    app = FastAPI()

    @app.exception_handler(InvalidStreamCursor)
    async def bad_cursor(request: Request, err: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(err)}, status_code=400)

    @app.get("/v1/sessions/{session_id}/stream")
    async def stream(
        session_id: str,
        encoding: Literal["native", "ag-ui"] = "native",
        last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    ):  # type: ignore[no-untyped-def]
        on_close = (lambda: closed.append(session_id)) if closed is not None else None
        return await stream_response(
            hub, session_id, last_event_id, encoding, ping_seconds=ping_seconds, retry_ms=1500, on_close=on_close
        )

    return app


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    server = _Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        assert not task.done(), "the server did not start"
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            yield http
    finally:
        server.should_exit = True
        await task


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(f"sqlite:///{tmp_path / 'sse.db'}") as s:
        yield s


@pytest.fixture
async def hub(store: Store) -> AsyncIterator[StreamHub]:
    hub = StreamHub(store, poll_seconds=0.02)
    yield hub
    await hub.aclose()


class Writer:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.seq = 0

    def put(self, *events: Event) -> None:
        for event in events:
            self.seq += 1
            event.seq = self.seq
        self.store.append(StoreAppendInput(session_id=SID, events=list(events)))

    def deltas(self, attempt: int, *texts: str, start: int = 0) -> None:
        self.store.append_deltas(SID, TURN, 1, attempt, list(texts), start)


@pytest.fixture
def writer(store: Store) -> Writer:
    writer = Writer(store)
    writer.put(
        TurnStarted(turn_id=TURN),
        UserMessageAdded(turn_id=TURN, principal="alice", text="hi", position=0),
        ModelRequestStarted(turn_id=TURN, round=1, profile="p"),
    )
    writer.deltas(1, "one ", "two ")
    return writer


def finish(writer: Writer) -> None:
    writer.deltas(1, "three ", "four", start=2)
    writer.put(
        AssistantMessageCompleted(turn_id=TURN, round=1, text="one two three four", tool_calls=0, usage=Usage(), position=1),
        TurnEnded(turn_id=TURN, status="completed", rounds=1, usage=Usage()),
        SessionArchived(principal="alice"),
    )


async def read_events(http: httpx.AsyncClient, count: int | None, headers: dict[str, str] | None = None, params: dict[str, str] | None = None) -> list[ServerSentEvent]:
    """The first ``count`` events that carry data (None: all, until the server ends the stream);
    then the connection is dropped."""
    got: list[ServerSentEvent] = []
    async with aconnect_sse(http, "GET", URL, headers=headers or {}, params=params or {}) as source:
        assert source.response.status_code == 200
        async for sse in source.aiter_sse():
            if sse.data:
                got.append(sse)
            if count is not None and len(got) == count:
                break
    return got


async def test_a_client_that_disconnects_mid_stream_resumes_with_last_event_id_and_gets_exactly_the_rest(
    hub: StreamHub, writer: Writer
) -> None:
    async with serving(stream_app(hub)) as http:
        first = await read_events(http, 4)
        assert [e.id for e in first] == ["1", "2", "3", "3.1.0"]
        finish(writer)
        second = await read_events(http, None, headers={"Last-Event-ID": first[-1].id})
    assert [e.id for e in second] == ["3.1.1", "3.1.2", "3.1.3", "4", "5", "6"]
    assert [e.event for e in second][-3:] == ["AssistantMessageCompleted", "TurnEnded", "SessionArchived"]
    assert "".join(json.loads(e.data)["text"] for e in [first[-1], *second[:3]]) == "one two three four"


async def test_the_stream_opens_with_a_retry_interval(hub: StreamHub, writer: Writer) -> None:
    async with serving(stream_app(hub)) as http, aconnect_sse(http, "GET", URL) as source:
        opening = await anext(source.aiter_sse())
    assert opening.retry == 1500 and opening.data == ""


async def test_an_idle_stream_carries_keep_alive_comments(hub: StreamHub, writer: Writer) -> None:
    async with serving(stream_app(hub, ping_seconds=0.1)) as http, http.stream("GET", URL) as response:
        lines = response.aiter_lines()
        seen: list[str] = []
        while not any(line.startswith(": ping") for line in seen):
            seen.append(await asyncio.wait_for(anext(lines), 10))
    assert "id: 3.1.1" in seen  # the backlog came first, then only comments while nothing happened


@pytest.mark.parametrize("cursor", ["garbage", "-1", "99999", "9" * 10_000, "3.7.0"])
async def test_a_hostile_last_event_id_gets_400_before_any_event(hub: StreamHub, writer: Writer, cursor: str) -> None:
    async with serving(stream_app(hub)) as http:
        response = await http.get(URL, headers={"Last-Event-ID": cursor})
        assert response.status_code == 400
        assert "invalid stream position" in response.json()["detail"]
        assert len(response.text) < 400
        assert [e.id for e in await read_events(http, 3)] == ["1", "2", "3"]


async def test_resuming_after_the_last_item_gets_204_so_an_event_source_stops_reconnecting(hub: StreamHub, writer: Writer) -> None:
    finish(writer)
    async with serving(stream_app(hub)) as http:
        response = await http.get(URL, headers={"Last-Event-ID": "6"})
    assert response.status_code == 204


async def test_the_ag_ui_encoding_resumes_mid_item_after_a_part_id(hub: StreamHub, writer: Writer) -> None:
    adapter = TypeAdapter(AguiEvent)
    async with serving(stream_app(hub)) as http:
        params = {"encoding": "ag-ui"}
        first = await read_events(http, 3, params=params)
        assert [e.id for e in first] == ["1", "2:0", "2:1"]  # RUN_STARTED, then the user message's first parts
        finish(writer)
        second = await read_events(http, None, headers={"Last-Event-ID": "2:1"}, params=params)
    assert [e.event for e in first + second] == ["message"] * (len(first) + len(second))  # no event: lines
    parsed = [adapter.validate_json(e.data) for e in first + second]
    assert [p.type.value for p in parsed] == [
        "RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "CUSTOM",
        "TEXT_MESSAGE_START", *["TEXT_MESSAGE_CONTENT"] * 4, "TEXT_MESSAGE_END", "RUN_FINISHED",
    ]
    assert [e.id for e in second] == ["2", "3", "3.1.0:0", "3.1.0", "3.1.1", "3.1.2", "3.1.3", "4", "5"]



async def test_on_close_is_called_once_when_the_client_leaves_mid_stream(hub: StreamHub, writer: Writer) -> None:
    closed: list[str] = []
    async with serving(stream_app(hub, closed=closed)) as http:
        assert len(await read_events(http, 3)) == 3
    assert closed == [SID]


async def test_on_close_is_called_once_when_the_stream_ends(hub: StreamHub, writer: Writer) -> None:
    closed: list[str] = []
    finish(writer)
    async with serving(stream_app(hub, closed=closed)) as http:
        assert (await read_events(http, None))[-1].event == "SessionArchived"
    assert closed == [SID]


async def test_on_close_is_called_once_for_a_stream_resumed_at_its_end(hub: StreamHub, writer: Writer) -> None:
    closed: list[str] = []
    finish(writer)
    async with serving(stream_app(hub, closed=closed)) as http:
        assert (await http.get(URL, headers={"Last-Event-ID": "6"})).status_code == 204
    assert closed == [SID]


async def test_on_close_is_not_called_for_a_position_that_names_nothing(hub: StreamHub, writer: Writer) -> None:
    closed: list[str] = []
    async with serving(stream_app(hub, closed=closed)) as http:
        assert (await http.get(URL, headers={"Last-Event-ID": "garbage"})).status_code == 400
    assert closed == []
