"""``provider.complete`` against a real streaming HTTP server on loopback: the first token delta is
in the store while the model still streams (not held for a batch), and a worker's calls of one
profile share one kept-alive connection."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from agentrt.activities import ModelActivities
from agentrt.activities.tools import default_registry
from agentrt.schemas import Message, ModelCallInput, ModelProfile, PositionedMessage, StoreAppendInput
from agentrt.store import Store

SID = "streaming-session"


class _Model(ThreadingHTTPServer):
    """Chat Completions, streamed: ``chunks`` text chunks; with ``hold`` set, the first one is
    sent and the rest wait until ``hold`` is released. Counts the connections it accepted."""

    daemon_threads = True

    def __init__(self, chunks: list[str]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.chunks = chunks
        self.hold: threading.Event | None = None
        self.connections = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        self.connections += 1
        super().process_request(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Model

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, body: dict[str, Any] | str) -> None:
        data = f"data: {body if isinstance(body, str) else json.dumps(body)}\n\n".encode()
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def do_POST(self) -> None:  # noqa: N802 - the http.server name
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i, text in enumerate(self.server.chunks):
            if i == 1 and self.server.hold is not None:
                assert self.server.hold.wait(30), "the test never released the stream"
            self._send({"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})
        self._send({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        self._send({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": len(self.server.chunks)}})
        self._send("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


@pytest.fixture
def model() -> Iterator[_Model]:
    server = _Model(["first", " second", " third"])
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    if server.hold is not None:
        server.hold.set()
    server.shutdown()
    server.server_close()


@dataclass
class Profiles:
    profiles: dict[str, ModelProfile] = field(default_factory=dict)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(f"sqlite:///{tmp_path / 'agentrt.db'}") as store:
        store.append(StoreAppendInput(session_id=SID, messages=[PositionedMessage(position=0, message=Message(role="user", text="hi"))]))
        yield store


def activities_for(model: _Model, store: Store) -> ModelActivities:
    profile = ModelProfile(name="loopback", provider="openai", model="m", base_url=f"http://127.0.0.1:{model.server_address[1]}")
    return ModelActivities(Profiles({"loopback": profile}), store, default_registry())


def call(round: int) -> ModelCallInput:
    return ModelCallInput(session_id=SID, turn_id="t1", round=round, profile="loopback", upto_position=1, reply_position=1)


async def test_the_first_token_is_in_the_store_while_the_model_still_streams(model: _Model, store: Store) -> None:
    model.hold = threading.Event()
    activities = activities_for(model, store)
    running = asyncio.ensure_future(ActivityEnvironment().run(activities.complete, call(1)))
    # Only the first chunk has been sent: a batched write (0.2 s or 32 chunks) would wait for the next.
    for _ in range(1000):
        if store.deltas(SID) or running.done():
            break
        await asyncio.sleep(0.01)
    assert [d.text for d in store.deltas(SID)] == ["first"]
    model.hold.set()
    result = await running
    assert result.text == "first second third"
    assert "".join(d.text for d in store.deltas(SID)) == "first second third"


async def test_a_worker_s_calls_of_one_profile_share_one_connection(model: _Model, store: Store) -> None:
    activities = activities_for(model, store)
    env = ActivityEnvironment()
    for round in (1, 2, 3):
        assert (await env.run(activities.complete, call(round))).text == "first second third"
    assert model.connections == 1
    # Another worker (its own activities) has its own client.
    await env.run(activities_for(model, store).complete, call(4))
    assert model.connections == 2


async def test_a_cookie_the_model_sets_rides_on_no_later_request(store: Store) -> None:
    # One client serves every session of a profile: a Set-Cookie of one answer must not reach the next request.
    seen: list[str | None] = []

    class _Cookies(_Handler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            seen.append(self.headers.get("Cookie"))
            super().do_POST()

        def end_headers(self) -> None:
            self.send_header("Set-Cookie", "tenant=alice; Path=/")
            super().end_headers()

    server = _Model(["hi"])
    server.RequestHandlerClass = _Cookies
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        activities = activities_for(server, store)
        env = ActivityEnvironment()
        await env.run(activities.complete, call(1))
        await env.run(activities.complete, call(2))
    finally:
        server.shutdown()
        server.server_close()
    assert seen == [None, None]
