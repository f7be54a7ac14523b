"""Signed webhooks: ``verify_webhook`` against good, tampered, stale and malformed requests, and
``WebhookDispatcher`` posting to real HTTP receivers on loopback: retries under one id, a restart
that resends nothing delivered, targets that are down, slow, endless or redirecting, watches that
end. Sessions' events are written to a fresh store as the workflow's ``store.append`` writes them;
tasks and runs are stand-in workflows on the real Temporal dev server that set their
``AgentSessionStatus`` as the real ones do (the real workflows are in tests/e2e/test_webhooks.py).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from agentrt.client import AgentClient, WebhookDispatcher, verify_webhook
from agentrt.gateway._webhook_delivery import http_client, post_once
from agentrt.gateway._webhook_notes import MAX_ARGUMENTS_BYTES, webhook_id
from agentrt.gateway._webhook_signing import ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign_webhook, signed_headers
from agentrt.schemas import (
    SESSION_OWNER,
    SESSION_STATUS,
    AssistantMessageCompleted,
    AutonomousTaskCreated,
    AutonomousTaskStatusChanged,
    Budget,
    ConfigurationError,
    Event,
    GraphNotFound,
    PermissionRequest,
    PermissionRequested,
    SessionArchived,
    SessionNotFound,
    StoreAppendInput,
    GraphRecordInput,
    TaskGraphCreated,
    TaskGraphStatusChanged,
    TaskNotFound,
    TaskRecordInput,
    TurnEnded,
    TurnStarted,
    Usage,
    WebhookSignatureInvalid,
    arguments_sha256,
)
from agentrt.store import NewWebhookDelivery, Store, webhook_watch_id
from agentrt.worker import AgentrtConfig, DevServer

SECRET = "whsec-test-1"
NOW = 1_767_225_600


# ---------------------------------------------------------------- a receiver on loopback


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class Receiver:
    """A real HTTP server on 127.0.0.1 that records each POST, then answers by the next planned
    behaviour (default: 204): a status, ``("redirect", url)``, ``("hang",)`` (no answer until
    stopped), ``("endless", status)`` (a body that never ends), ``("trickle",)`` (headers one
    byte at a time, forever) or ``("raw", bytes)`` (these bytes as the whole answer)."""

    def __init__(self, *plan: Any) -> None:
        self.requests: list[Received] = []
        self.plan: deque[Any] = deque(plan)
        self.release = threading.Event()
        self.bytes_sent = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.requests.append(Received({k.lower(): v for k, v in self.headers.items()}, body))
                step = receiver.plan.popleft() if receiver.plan else 204
                try:
                    receiver.act(self, step)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def act(self, handler: BaseHTTPRequestHandler, step: Any) -> None:
        kind = step[0] if isinstance(step, tuple) else "status"
        if kind == "status":
            body = b'{"ok": false}' if step >= 400 else b""
            handler.send_response(step)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        elif kind == "redirect":
            handler.send_response(307)
            handler.send_header("Location", step[1])
            handler.send_header("Content-Length", "0")
            handler.end_headers()
        elif kind == "hang":
            self.release.wait(60)
            handler.close_connection = True
        elif kind == "endless":
            handler.send_response(step[1])
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            chunk = b"x" * 65_536
            while not self.release.is_set():
                handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.bytes_sent += len(chunk)
        elif kind == "raw":
            handler.wfile.write(step[1])
            handler.close_connection = True
        elif kind == "trickle":
            handler.wfile.write(b"HTTP/1.1 200 OK\r\n")
            while not self.release.is_set():
                handler.wfile.write(b"X")
                handler.wfile.flush()
                time.sleep(0.05)

    def ids(self) -> list[str]:
        return [r.headers[ID_HEADER.lower()] for r in self.requests]

    async def wait_for(self, count: int, timeout: float = 30.0) -> list[Received]:
        async def poll() -> None:
            while len(self.requests) < count:
                await asyncio.sleep(0.02)

        await asyncio.wait_for(poll(), timeout)
        return self.requests

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


async def until(condition: Callable[[], Any], timeout: float = 30.0) -> None:
    """Wait until ``condition()`` (or the awaitable it returns) is true, checking every 20 ms."""

    async def poll() -> None:
        while True:
            value = condition()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), timeout)


async def _exists(client: AgentClient, workflow_id: str) -> bool:
    try:
        await client.temporal.get_workflow_handle(workflow_id).describe()
    except RPCError:
        return False
    return True


Receivers = Callable[..., Receiver]


@dataclass(frozen=True)
class Target:
    url: str
    secret: str = SECRET
    events: tuple[str, ...] = ("turn.ended", "approval.requested", "run.status")


@pytest.fixture
def receivers() -> Iterator[Receivers]:
    made: list[Receiver] = []

    def make(*plan: Any) -> Receiver:
        made.append(Receiver(*plan))
        return made[-1]

    yield make
    for r in made:
        r.stop()


# ---------------------------------------------------------------- verify_webhook


def signed(
    data: Any = None, *, secret: str = SECRET, timestamp: int = NOW, wid: str = "wh_1"
) -> tuple[bytes, dict[str, str]]:
    body = json.dumps({"id": wid, "type": "turn.ended", "created_at": "2026-01-01T00:00:00Z", "data": data or {}}).encode()
    return body, signed_headers(secret, wid, body, timestamp)


def test_a_signed_notification_verifies_and_returns_its_body() -> None:
    body, headers = signed({"session_id": "s1"})

    assert verify_webhook(SECRET, body, headers, now=NOW + 10)["data"] == {"session_id": "s1"}


def test_header_names_in_any_case_and_a_text_body_verify() -> None:
    body, headers = signed()

    assert verify_webhook(SECRET, body.decode(), {k.upper(): v for k, v in headers.items()}, now=NOW)["id"] == "wh_1"


def test_a_tampered_body_is_a_signature_mismatch() -> None:
    body, headers = signed({"status": "failed"})

    with pytest.raises(WebhookSignatureInvalid, match="no v1 signature matches") as err:
        verify_webhook(SECRET, body.replace(b"failed", b"passed"), headers, now=NOW)
    assert err.value.reason == "signature_mismatch"


def test_a_wrong_secret_is_a_signature_mismatch() -> None:
    body, headers = signed(secret="someone-else")

    with pytest.raises(WebhookSignatureInvalid) as err:
        verify_webhook(SECRET, body, headers, now=NOW)
    assert err.value.reason == "signature_mismatch"


def test_a_replay_with_a_fresh_timestamp_and_the_old_signature_is_a_mismatch() -> None:
    body, headers = signed(timestamp=NOW - 3600)
    headers[TIMESTAMP_HEADER] = str(NOW)

    with pytest.raises(WebhookSignatureInvalid) as err:
        verify_webhook(SECRET, body, headers, now=NOW)
    assert err.value.reason == "signature_mismatch"


@pytest.mark.parametrize(("offset", "reason"), [(-301, "stale_timestamp"), (301, "future_timestamp")])
def test_a_timestamp_outside_the_tolerance_is_refused(offset: int, reason: str) -> None:
    body, headers = signed(timestamp=NOW + offset)

    with pytest.raises(WebhookSignatureInvalid, match="tolerated") as err:
        verify_webhook(SECRET, body, headers, now=NOW)
    assert err.value.reason == reason
    assert verify_webhook(SECRET, body, headers, now=NOW, tolerance_seconds=400)["id"] == "wh_1"


def test_any_v1_entry_verifies_while_the_sender_signs_with_two_secrets() -> None:
    body = json.dumps({"id": "wh_1", "type": "run.status", "created_at": "x", "data": {}}).encode()
    headers = signed_headers(["old-secret", SECRET], "wh_1", body, NOW)

    assert ", v1=" in headers[SIGNATURE_HEADER]
    assert verify_webhook(SECRET, body, headers, now=NOW)["type"] == "run.status"
    assert verify_webhook("old-secret", body, headers, now=NOW)["type"] == "run.status"


def test_a_receiver_holding_the_old_and_the_new_secret_accepts_either() -> None:
    body, headers = signed(secret="old-secret")

    assert verify_webhook([SECRET, "old-secret"], body, headers, now=NOW)["id"] == "wh_1"


@pytest.mark.parametrize("missing", [ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER])
def test_a_request_without_a_webhook_header_is_refused(missing: str) -> None:
    body, headers = signed()
    del headers[missing]

    with pytest.raises(WebhookSignatureInvalid, match=missing) as err:
        verify_webhook(SECRET, body, headers, now=NOW)
    assert err.value.reason == "missing_header"


@pytest.mark.parametrize(
    ("header", "value"),
    [
        (TIMESTAMP_HEADER, "yesterday"),
        (TIMESTAMP_HEADER, "-5"),
        (TIMESTAMP_HEADER, "1" * 40),
        (SIGNATURE_HEADER, "sha256=abc"),
        (SIGNATURE_HEADER, "v1"),
        (SIGNATURE_HEADER, "v1=" + "Z" * 64),
        (SIGNATURE_HEADER, ", ".join(["v1=" + "0" * 64] * 17)),
        (SIGNATURE_HEADER, "v1=" + "0" * 10_000),
        (ID_HEADER, "wh_" + "a" * 500),
    ],
)
def test_a_malformed_webhook_header_is_refused(header: str, value: str) -> None:
    body, headers = signed()
    headers[header] = value

    with pytest.raises(WebhookSignatureInvalid) as err:
        verify_webhook(SECRET, body, headers, now=NOW)
    assert err.value.reason == "malformed_header"


def test_a_signed_body_that_is_not_a_notification_is_refused() -> None:
    body = b'["not", "an", "object"]'
    headers = signed_headers(SECRET, "wh_1", body, NOW)

    with pytest.raises(WebhookSignatureInvalid) as err:
        verify_webhook(SECRET, body, headers, now=NOW)
    assert err.value.reason == "malformed_body"


def test_a_body_whose_id_is_not_the_id_header_is_refused() -> None:
    body, headers = signed(wid="wh_1")
    headers[ID_HEADER] = "wh_2"  # a redelivery dressed as another notification

    with pytest.raises(WebhookSignatureInvalid, match="id") as err:
        verify_webhook(SECRET, body, headers, now=NOW)
    assert err.value.reason == "malformed_body"


@pytest.mark.parametrize("secret", ["", [], [SECRET, ""]])
def test_an_empty_secret_is_a_configuration_error(secret: Any) -> None:
    # Anyone can compute an HMAC under an empty key: a receiver configured without a secret must not pass requests.
    body = signed()[0]
    headers = signed_headers("x", "wh_1", body, NOW)
    headers[SIGNATURE_HEADER] = "v1=" + sign_webhook("", NOW, body)

    with pytest.raises(ConfigurationError, match="secret"):
        verify_webhook(secret, body, headers, now=NOW)


def test_a_negative_tolerance_is_a_configuration_error() -> None:
    body, headers = signed()

    with pytest.raises(ConfigurationError, match="tolerance_seconds"):
        verify_webhook(SECRET, body, headers, now=NOW, tolerance_seconds=-1)


@pytest.mark.parametrize("tolerance", [float("nan"), float("inf"), True])
def test_a_tolerance_that_is_not_a_finite_number_is_a_configuration_error(tolerance: Any) -> None:
    # NaN compares false with every timestamp: a request signed in 1970 would pass.
    body, headers = signed(timestamp=1)

    with pytest.raises(ConfigurationError, match="tolerance_seconds"):
        verify_webhook(SECRET, body, headers, now=NOW, tolerance_seconds=tolerance)


def test_a_now_that_is_not_finite_is_a_configuration_error() -> None:
    body, headers = signed(timestamp=1)

    with pytest.raises(ConfigurationError, match="now"):
        verify_webhook(SECRET, body, headers, now=float("nan"))


# ---------------------------------------------------------------- the dispatcher: sessions



@pytest.fixture
def db(tmp_path: Path) -> Iterator[Store]:
    with Store.open(f"sqlite:///{tmp_path / 'gateway.db'}") as s:
        yield s


@pytest.fixture
async def client(temporal_server: DevServer) -> AgentClient:
    temporal = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
    return AgentClient(temporal, task_queue=f"tq-{uuid.uuid4().hex[:8]}", principal="alice", operators=["ops"])


def dispatcher(db: Store, client: AgentClient, *targets: Target, **options: Any) -> WebhookDispatcher:
    options.setdefault("poll_seconds", 0.05)
    options.setdefault("request_timeout_seconds", 2.0)
    options.setdefault("retry_base_seconds", 0.05)
    options.setdefault("retry_max_seconds", max(0.2, options["retry_base_seconds"]))
    options.setdefault("log_wait_seconds", 0.0)  # the stand-ins keep no event log: their status is described
    return WebhookDispatcher(db, client, list(targets), **options)


async def a_session(client: AgentClient, *, owner: str = "alice") -> str:
    """A session workflow that exists (no worker runs it): what ``watch`` checks."""
    session_id = f"s{uuid.uuid4().hex[:10]}"
    await client.temporal.start_workflow(
        "SessionWorkflow", id=f"session-{session_id}", task_queue=f"nobody-{uuid.uuid4().hex[:6]}",
        search_attributes=TypedSearchAttributes([SearchAttributePair(SESSION_OWNER, owner)]),
    )
    return session_id


def request(seq: int, turn_id: str = "t1", arguments: dict[str, Any] | None = None) -> PermissionRequested:
    arguments = {"path": "notes.md", "content": "hi"} if arguments is None else arguments
    return PermissionRequested(seq=seq, turn_id=turn_id, request=PermissionRequest(
        request_id=f"req-{seq}", turn_id=turn_id, call_id=f"call-{seq}", tool="fs.write", arguments=arguments,
        arguments_sha256=arguments_sha256(arguments), risk="effectful", reason="writes a file",
    ))


def answered(seq: int, turn_id: str = "t1", text: str = "done") -> AssistantMessageCompleted:
    return AssistantMessageCompleted(
        seq=seq, turn_id=turn_id, round=1, text=text, tool_calls=0, usage=Usage(), position=seq
    )


def ended(seq: int, turn_id: str = "t1", status: str = "completed") -> TurnEnded:
    usage = Usage(input_tokens=10, output_tokens=2)
    return TurnEnded(seq=seq, turn_id=turn_id, status=status, rounds=1, usage=usage)  # type: ignore[arg-type]


def write(db: Store, session_id: str, *events: Event) -> None:
    db.append(StoreAppendInput(session_id=session_id, events=list(events)))


def one_turn(db: Store, session_id: str, first: int = 1, turn_id: str = "t1") -> None:
    """A turn that asked for an approval and ended: seq ``first`` .. ``first + 3``."""
    write(db, session_id, TurnStarted(seq=first, turn_id=turn_id), request(first + 1, turn_id),
          answered(first + 2, turn_id, f"answer of {turn_id}"), ended(first + 3, turn_id))


async def test_a_turn_that_asked_for_an_approval_posts_approval_requested_then_turn_ended_signed(
    db: Store, client: AgentClient, receivers: Receivers
) -> None:
    receiver = receivers()
    sid = await a_session(client)
    one_turn(db, sid)

    async with dispatcher(db, client, Target(receiver.url)) as d:
        await d.watch("session", sid, "alice")
        first, second = await receiver.wait_for(2)

    bodies = [verify_webhook(SECRET, r.body, r.headers) for r in (first, second)]
    assert [b["type"] for b in bodies] == ["approval.requested", "turn.ended"]
    approval, turn = bodies[0]["data"], bodies[1]["data"]
    assert (approval["session_id"], approval["turn_id"], approval["request"]["request_id"]) == (sid, "t1", "req-2")
    assert approval["request"]["arguments"] == {"path": "notes.md", "content": "hi"}
    assert (turn["status"], turn["answer"], turn["usage"]["input_tokens"]) == ("completed", "answer of t1", 10)
    assert turn["seq"] == 4
    assert len(set(receiver.ids())) == 2 and all(i.startswith("wh_") for i in receiver.ids())


async def test_a_target_that_fails_twice_then_succeeds_gets_the_same_webhook_id_and_body_three_times(
    db: Store, client: AgentClient, receivers: Receivers
) -> None:
    receiver = receivers(500, 503, 200)
    sid = await a_session(client)
    write(db, sid, ended(1))

    async with dispatcher(db, client, Target(receiver.url, events=("turn.ended",))) as d:
        await d.watch("session", sid, "alice")
        attempts = await receiver.wait_for(3)
        await until(lambda: db.webhook_deliveries()[0].state == "delivered")
        await asyncio.sleep(0.2)  # nothing more comes once it is delivered

    assert len(receiver.requests) == 3
    assert len(set(receiver.ids())) == 1 and len({r.body for r in attempts}) == 1
    assert all(verify_webhook(SECRET, r.body, r.headers)["id"] == receiver.ids()[0] for r in attempts)
    (row,) = db.webhook_deliveries()
    assert (row.state, row.attempts, row.last_status_code, row.webhook_id) == ("delivered", 3, 200, receiver.ids()[0])


async def test_a_target_that_always_fails_is_given_up_after_max_attempts(
    db: Store, client: AgentClient, receivers: Receivers
) -> None:
    receiver = receivers(500, 500, 500, 500)
    sid = await a_session(client)
    write(db, sid, ended(1))

    async with dispatcher(db, client, Target(receiver.url), max_attempts=2) as d:
        await d.watch("session", sid, "alice")
        await receiver.wait_for(2)
        await until(lambda: db.webhook_deliveries()[0].state == "failed")
        await asyncio.sleep(0.2)

    assert len(receiver.requests) == 2
    (row,) = db.webhook_deliveries()
    assert (row.state, row.attempts) == ("failed", 2) and row.last_error == 'HTTP 500: {"ok": false}'


async def test_a_target_gets_only_the_types_it_asked_for(db: Store, client: AgentClient, receivers: Receivers) -> None:
    turns, approvals = receivers(), receivers()
    sid = await a_session(client)
    one_turn(db, sid)

    targets = Target(turns.url, events=("turn.ended",)), Target(approvals.url, events=("approval.requested",))
    async with dispatcher(db, client, *targets) as d:
        await d.watch("session", sid, "alice")
        await turns.wait_for(1)
        await approvals.wait_for(1)

    assert [r.json["type"] for r in turns.requests] == ["turn.ended"]
    assert [r.json["type"] for r in approvals.requests] == ["approval.requested"]


async def test_one_notification_keeps_one_id_across_targets(
    db: Store, client: AgentClient, receivers: Receivers
) -> None:
    a, b = receivers(), receivers()
    sid = await a_session(client)
    write(db, sid, ended(1))

    async with dispatcher(db, client, Target(a.url), Target(b.url, secret="another-secret")) as d:
        await d.watch("session", sid, "alice")
        await a.wait_for(1)
        await b.wait_for(1)

    assert a.ids() == b.ids()
    assert verify_webhook("another-secret", b.requests[0].body, b.requests[0].headers)["id"] == a.ids()[0]


async def test_a_restarted_dispatcher_resumes_from_its_cursor_and_resends_nothing_delivered(
    db: Store, client: AgentClient, receivers: Receivers
) -> None:
    receiver = receivers()
    sid = await a_session(client)
    one_turn(db, sid, 1, "t1")

    async with dispatcher(db, client, Target(receiver.url)) as first:
        await first.watch("session", sid, "alice")
        await receiver.wait_for(2)
    one_turn(db, sid, 5, "t2")  # while no dispatcher runs
    async with dispatcher(db, client, Target(receiver.url)):
        await receiver.wait_for(4)
        await asyncio.sleep(0.3)

    # At least once: a POST the receiver had answered when the first dispatcher stopped, before it
    # recorded the answer, may come again, under the same id; nothing else is sent twice.
    first_by_id = {}
    for request in receiver.requests:
        first_by_id.setdefault(request.json["id"], request.json)
    assert [(b["type"], b["data"]["turn_id"]) for b in first_by_id.values()] == [
        ("approval.requested", "t1"), ("turn.ended", "t1"), ("approval.requested", "t2"), ("turn.ended", "t2"),
    ]
    assert all(r.body == next(q.body for q in receiver.requests if q.json["id"] == r.json["id"]) for r in receiver.requests)
    assert db.webhook_watch(webhook_watch_id("session", sid)).cursor == 8  # type: ignore[union-attr]


async def test_a_notification_in_flight_when_the_dispatcher_stops_is_redelivered_under_its_id(
    db: Store, client: AgentClient, receivers: Receivers
) -> None:
    receiver = receivers(("hang",), 204)
    sid = await a_session(client)
    write(db, sid, ended(1))

    first = dispatcher(db, client, Target(receiver.url), request_timeout_seconds=30.0)
    await first.start()
    await first.watch("session", sid, "alice")
    await receiver.wait_for(1)
    await first.stop()  # the attempt is cut short, unanswered
    async with dispatcher(db, client, Target(receiver.url)):
        await receiver.wait_for(2)
        await until(lambda: db.webhook_deliveries()[0].state == "delivered")

    assert receiver.ids()[0] == receiver.ids()[1]
    assert receiver.requests[0].body == receiver.requests[1].body
    assert db.webhook_deliveries()[0].state == "delivered"


async def test_notifications_made_again_from_the_same_events_have_the_same_ids(
    tmp_path: Path, client: AgentClient, receivers: Receivers
) -> None:
    # What a poll repeated after a crash (before its commit) makes: the same notification ids.
    sid = await a_session(client)
    ids = []
    for name in ("a", "b"):
        receiver = receivers()
        with Store.open(f"sqlite:///{tmp_path / name}.db") as db:
            one_turn(db, sid)
            async with dispatcher(db, client, Target(receiver.url)) as d:
                await d.watch("session", sid, "alice")
                await receiver.wait_for(2)
        ids.append(receiver.ids())

    assert ids[0] == ids[1]
    assert ids[0][1] == webhook_id(webhook_watch_id("session", sid), "seq:4")


async def test_the_watch_ends_when_the_session_is_archived(
    db: Store, client: AgentClient, receivers: Receivers
) -> None:
    receiver = receivers()
    sid = await a_session(client)
    write(db, sid, ended(1), SessionArchived(seq=2, principal="alice"))

    async with dispatcher(db, client, Target(receiver.url)) as d:
        watch = await d.watch("session", sid, "alice")
        await receiver.wait_for(1)
        await d.poll()
        write(db, sid, ended(3, "t9"))  # nothing follows an archive; were it there, it is not watched
        await d.poll()
        await asyncio.sleep(0.2)

    after = db.webhook_watch(watch.watch_id)
    assert after is not None and (after.state, after.cursor) == ("ended", 2)
    assert [r.json["data"]["turn_id"] for r in receiver.requests] == ["t1"]


async def test_since_seq_skips_the_session_s_earlier_events(
    db: Store, client: AgentClient, receivers: Receivers
) -> None:
    receiver = receivers()
    sid = await a_session(client)
    one_turn(db, sid, 1, "t1")
    one_turn(db, sid, 5, "t2")

    async with dispatcher(db, client, Target(receiver.url)) as d:
        await d.watch("session", sid, "alice", since_seq=4)
        await receiver.wait_for(2)
        await asyncio.sleep(0.2)

    assert [r.json["data"]["turn_id"] for r in receiver.requests] == ["t2", "t2"]


async def test_watching_a_session_twice_notifies_each_event_once(
    db: Store, client: AgentClient, receivers: Receivers
) -> None:
    receiver = receivers()
    sid = await a_session(client)

    async with dispatcher(db, client, Target(receiver.url)) as d:
        first = await d.watch("session", sid, "alice")
        second = await d.watch("session", sid, "ops")
        write(db, sid, ended(1))
        await receiver.wait_for(1)
        await asyncio.sleep(0.2)

    assert first.watch_id == second.watch_id and len(receiver.requests) == 1


async def test_events_after_a_missing_seq_wait_for_it(db: Store, client: AgentClient, receivers: Receivers) -> None:
    receiver = receivers()
    sid = await a_session(client)
    write(db, sid, ended(3, "t2"))  # seq 1 and 2 are not written yet

    async with dispatcher(db, client, Target(receiver.url)) as d:
        await d.watch("session", sid, "alice")
        assert await d.poll() == 0
        write(db, sid, TurnStarted(seq=1, turn_id="t1"), ended(2, "t1"))
        await receiver.wait_for(2)

    assert [r.json["data"]["turn_id"] for r in receiver.requests] == ["t1", "t2"]


async def test_huge_tool_arguments_are_left_out_of_approval_requested(
    db: Store, client: AgentClient, receivers: Receivers
) -> None:
    receiver = receivers()
    sid = await a_session(client)
    big = {"path": "big.txt", "content": "x" * (MAX_ARGUMENTS_BYTES + 1)}
    write(db, sid, request(1, arguments=big))

    async with dispatcher(db, client, Target(receiver.url)) as d:
        await d.watch("session", sid, "alice")
        (received,) = await receiver.wait_for(1)

    sent = verify_webhook(SECRET, received.body, received.headers)["data"]["request"]
    assert (sent["arguments"], sent["arguments_truncated"], sent["arguments_sha256"]) == (None, True, arguments_sha256(big))
    assert len(received.body) < 4_096


# ---------------------------------------------------------------- hostile and absent targets


@pytest.mark.parametrize("down", ["refused", "hangs", "trickles"])
async def test_a_target_that_is_down_or_stalls_does_not_hold_back_the_others(
    db: Store, client: AgentClient, receivers: Receivers, closed_port_url: str, down: str
) -> None:
    healthy = receivers()
    bad_url = closed_port_url if down == "refused" else receivers(("hang",) if down == "hangs" else ("trickle",)).url
    sid = await a_session(client)
    write(db, sid, ended(1), ended(2, "t2"))

    targets = Target(bad_url), Target(healthy.url)
    async with dispatcher(db, client, *targets, request_timeout_seconds=0.5, retry_base_seconds=60) as d:
        await d.watch("session", sid, "alice")
        await healthy.wait_for(2)
        await until(lambda: db.webhook_deliveries(target_url=bad_url)[0].last_error)

    first_bad = db.webhook_deliveries(target_url=bad_url)[0]
    assert (first_bad.state, first_bad.attempts, first_bad.last_status_code) == ("pending", 1, None)
    expected = "ConnectError" if down == "refused" else "no answer within 0.5 s"
    assert expected in (first_bad.last_error or "")


async def test_a_redirect_is_not_followed(db: Store, client: AgentClient, receivers: Receivers) -> None:
    elsewhere = receivers()
    redirecting = receivers(("redirect", elsewhere.url))
    sid = await a_session(client)
    write(db, sid, ended(1))

    async with dispatcher(db, client, Target(redirecting.url), retry_base_seconds=60) as d:
        await d.watch("session", sid, "alice")
        await redirecting.wait_for(1)
        await until(lambda: db.webhook_deliveries()[0].last_status_code)

    assert elsewhere.requests == []
    (row,) = db.webhook_deliveries()
    assert (row.state, row.last_status_code) == ("pending", 307)
    assert row.last_error is not None and "redirect" in row.last_error and elsewhere.url in row.last_error


@pytest.mark.parametrize("status", [200, 500])
async def test_an_endless_answer_is_not_read_past_a_small_bound(
    db: Store, client: AgentClient, receivers: Receivers, status: int
) -> None:
    receiver = receivers(("endless", status))
    sid = await a_session(client)
    write(db, sid, ended(1), ended(2, "t2"))

    async with dispatcher(db, client, Target(receiver.url), request_timeout_seconds=30.0, retry_base_seconds=60) as d:
        await d.watch("session", sid, "alice")
        await receiver.wait_for(2)  # the next notification went out: the endless one did not hold the loop
        await until(lambda: db.webhook_deliveries()[0].last_status_code)

    first = db.webhook_deliveries()[0]
    assert first.attempts == 1
    if status == 200:
        assert first.state == "delivered"
    else:  # its error text is the first KiB of the body, read without waiting for the attempt's bound
        assert (first.state, first.last_status_code) == ("pending", 500)
        assert (first.last_error or "").startswith("HTTP 500: xxx") and len(first.last_error or "") < 1_100


def answer(status: int, *headers: bytes, body: bytes = b"") -> tuple[str, bytes]:
    """A ``("raw", ...)`` step: the status line, ``headers`` as sent (any bytes) and ``body``."""
    head = b"".join(h + b"\r\n" for h in headers)
    return ("raw", b"HTTP/1.1 %d X\r\n%bContent-Length: %d\r\nConnection: close\r\n\r\n%b" % (status, head, len(body), body))


@pytest.mark.parametrize(
    "value", [b"\xb2", "\u2460".encode(), "\u0665".encode(), b"1e3", b"-5", b"12345678901", b"Wed, 21 Oct 2026 07:28:00 GMT"]
)
async def test_a_retry_after_that_is_not_ascii_delta_seconds_is_ignored_not_raised(
    receivers: Receivers, value: bytes
) -> None:
    # '²' (latin-1 0xB2), '①' and the Arabic-Indic 5 pass str.isdigit(); float() refuses the first two.
    receiver = receivers(answer(503, b"Retry-After: " + value))

    async with http_client(5) as http:
        attempt = await post_once(http, receiver.url, {"Content-Type": "application/json"}, b"{}", 5)

    assert (attempt.delivered, attempt.status_code, attempt.retry_after) == (False, 503, None)


async def test_a_retry_after_in_ascii_digits_is_honoured_up_to_its_bound(receivers: Receivers) -> None:
    receiver = receivers(answer(503, b"Retry-After: 7"), answer(503, b"Retry-After: 9999999999"))

    async with http_client(5) as http:
        first = await post_once(http, receiver.url, {}, b"{}", 5)
        second = await post_once(http, receiver.url, {}, b"{}", 5)

    assert (first.retry_after, second.retry_after) == (7.0, 3_600.0)


async def test_a_target_answering_a_retry_after_of_superscript_two_is_given_up_after_max_attempts(
    db: Store, client: AgentClient, receivers: Receivers
) -> None:
    receiver = receivers(*[answer(503, b"Retry-After: \xb2")] * 4)
    sid = await a_session(client)
    write(db, sid, ended(1))

    async with dispatcher(db, client, Target(receiver.url), max_attempts=2) as d:
        await d.watch("session", sid, "alice")
        await until(lambda: [r for r in db.webhook_deliveries() if r.state == "failed"])
        await asyncio.sleep(0.2)

    (row,) = db.webhook_deliveries()
    assert (row.state, row.attempts, row.last_status_code, len(receiver.requests)) == ("failed", 2, 503, 2)


async def test_an_attempt_that_raises_is_a_failed_attempt_and_max_attempts_ends_the_delivery(
    db: Store, client: AgentClient, receivers: Receivers
) -> None:
    # A target whose secrets (during a rotation) include an empty one cannot sign: each attempt
    # raises before anything is sent. (A plain empty secret is refused when the dispatcher is made.)
    receiver = receivers()
    sid = await a_session(client)
    write(db, sid, ended(1))

    async with dispatcher(db, client, Target(receiver.url, secret=cast(str, ["rotated", ""])), max_attempts=3) as d:
        await d.watch("session", sid, "alice")
        await until(lambda: [r for r in db.webhook_deliveries() if r.state == "failed"])
        await asyncio.sleep(0.2)

    (row,) = db.webhook_deliveries()
    assert (row.state, row.attempts, row.last_status_code) == ("failed", 3, None)
    assert (row.last_error or "").startswith("ConfigurationError: ")
    assert receiver.requests == []


async def test_a_delivery_claimed_past_max_attempts_fails_without_another_post(
    db: Store, client: AgentClient, receivers: Receivers
) -> None:
    receiver = receivers()
    sid = await a_session(client)
    _, watch = db.add_webhook_watch("session", sid, "alice")
    body = signed(wid="wh_cut")[0].decode()
    db.advance_webhook_watch(watch.watch_id, 0, 1, deliveries=[NewWebhookDelivery("wh_cut", receiver.url, "turn.ended", body)])
    for _ in range(3):  # three attempts begun and never finished: a dispatcher that died mid-attempt each time
        db.claim_webhook_deliveries(receiver.url, lease_seconds=0)

    async with dispatcher(db, client, Target(receiver.url), max_attempts=2):
        await until(lambda: db.webhook_deliveries()[0].state == "failed")

    (row,) = db.webhook_deliveries()
    assert (row.webhook_id, row.attempts, receiver.requests) == ("wh_cut", 4, [])
    assert "no attempt left" in (row.last_error or "")


async def test_control_characters_a_target_answers_are_escaped_in_last_error_and_the_log(
    db: Store, client: AgentClient, receivers: Receivers, caplog: pytest.LogCaptureFixture
) -> None:
    hostile = b"\x1b[2J\x1b[31mPWN\xff\r\nX-Injected: 1\n2026-01-01 CRITICAL forged line \xe2\x80\xae"
    receiver = receivers(answer(500, body=hostile))
    sid = await a_session(client)
    write(db, sid, ended(1))

    with caplog.at_level("WARNING", logger="agentrt.webhooks"):
        async with dispatcher(db, client, Target(receiver.url), retry_base_seconds=60) as d:
            await d.watch("session", sid, "alice")
            await until(lambda: [r for r in db.webhook_deliveries() if r.last_status_code])

    error = db.webhook_deliveries()[0].last_error or ""
    assert error == "HTTP 500: \\x1b[2J\\x1b[31mPWN\ufffd\\r\\nX-Injected: 1\\n2026-01-01 CRITICAL forged line \\u202e"
    logged = [r.getMessage() for r in caplog.records if "attempt 1 of" in r.getMessage()]
    assert len(logged) == 1 and "\\x1b[2J" in logged[0]
    assert not any(c in logged[0] for c in "\x1b\r\n\u202e")


# ---------------------------------------------------------------- tasks and runs


@workflow.defn(name="WebhookStatusStandIn")
class StatusStandIn:
    """Sets ``AgentSessionStatus`` as a task or graph workflow does; ends at a final status."""

    def __init__(self) -> None:
        self._done = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self._done)

    @workflow.signal
    def set_status(self, status: str) -> None:
        workflow.upsert_search_attributes([SESSION_STATUS.value_set(status)])
        self._done = status in ("completed", "failed", "cancelled", "rejected")


@workflow.defn(name="WebhookParentStandIn")
class ParentStandIn:
    """Starts a session workflow as its child (as a graph or a delegating session does) and waits."""

    @workflow.run
    async def run(self, child_id: str) -> None:
        await workflow.start_child_workflow(
            "SessionWorkflow", id=f"session-{child_id}", task_queue=f"nobody-{child_id}",
            search_attributes=TypedSearchAttributes([SearchAttributePair(SESSION_OWNER, "alice")]),
        )
        await workflow.wait_condition(lambda: False)


@pytest.fixture
async def stand_ins(client: AgentClient) -> AsyncIterator[Callable[..., Any]]:
    queue = f"stand-ins-{uuid.uuid4().hex[:6]}"

    async def start(kind: str, status: str, owner: str = "alice") -> Any:
        item_id = f"{kind[0]}{uuid.uuid4().hex[:10]}"
        if kind == "child":
            await client.temporal.start_workflow(ParentStandIn.run, item_id, id=f"parent-{item_id}", task_queue=queue)
            await until(lambda: _exists(client, f"session-{item_id}"))
            return item_id
        handle = await client.temporal.start_workflow(
            StatusStandIn.run, id=f"{'task' if kind == 'task' else 'graph'}-{item_id}", task_queue=queue,
            search_attributes=TypedSearchAttributes(
                [SearchAttributePair(SESSION_OWNER, owner), SearchAttributePair(SESSION_STATUS, status)]
            ),
        )
        return item_id, handle

    workflows = [StatusStandIn, ParentStandIn]
    async with Worker(client.temporal, task_queue=queue, workflows=workflows, workflow_runner=UnsandboxedWorkflowRunner()):
        yield start


async def test_a_run_s_status_changes_are_posted_in_order_and_its_watch_ends_at_a_final_status(
    db: Store, client: AgentClient, receivers: Receivers, stand_ins: Callable[..., Any]
) -> None:
    receiver = receivers()
    run_id, handle = await stand_ins("run", "pending_approval")

    async with dispatcher(db, client, Target(receiver.url)) as d:
        watch = await d.watch("run", run_id, "alice")
        for count, status in enumerate(["executing", "completed"], start=2):
            await receiver.wait_for(count - 1)
            await handle.signal(StatusStandIn.set_status, status)
        await receiver.wait_for(3)
        await handle.result()

    changes = [verify_webhook(SECRET, r.body, r.headers)["data"] for r in receiver.requests]
    assert [(c["status"], c["previous_status"], c["change"]) for c in changes] == [
        ("pending_approval", None, 1), ("executing", "pending_approval", 2), ("completed", "executing", 3),
    ]
    assert {(c["kind"], c["run_id"], c["owner"]) for c in changes} == {("run", run_id, "alice")}
    assert db.webhook_watch(watch.watch_id).state == "ended"  # type: ignore[union-attr]


async def test_a_task_s_status_change_is_posted_as_run_status_with_its_task_id(
    db: Store, client: AgentClient, receivers: Receivers, stand_ins: Callable[..., Any]
) -> None:
    receiver = receivers()
    task_id, handle = await stand_ins("task", "running")

    async with dispatcher(db, client, Target(receiver.url)) as d:
        await d.watch("task", task_id, "alice")
        await receiver.wait_for(1)
        await handle.signal(StatusStandIn.set_status, "paused")
        await receiver.wait_for(2)

    assert [(r.json["type"], r.json["data"]["task_id"], r.json["data"]["status"]) for r in receiver.requests] == [
        ("run.status", task_id, "running"), ("run.status", task_id, "paused"),
    ]


async def test_a_terminated_run_is_posted_as_terminated_and_its_watch_ends(
    db: Store, client: AgentClient, receivers: Receivers, stand_ins: Callable[..., Any]
) -> None:
    receiver = receivers()
    run_id, handle = await stand_ins("run", "executing")

    async with dispatcher(db, client, Target(receiver.url)) as d:
        watch = await d.watch("run", run_id, "alice")
        await receiver.wait_for(1)
        await handle.terminate("operator stopped it")
        await receiver.wait_for(2)

    last = receiver.requests[-1].json["data"]
    assert (last["status"], last["previous_status"], last["closed"]) == ("terminated", "executing", True)
    assert db.webhook_watch(watch.watch_id).state == "ended"  # type: ignore[union-attr]


# A task's and a graph's status events as ``task.record`` / ``graph.record`` write them (status-events-v1).
TASK_STATUSES = ["waiting", "running", "waiting", "running", "paused", "running", "completed"]
GRAPH_STATUSES = ["planning", "pending_approval", "approved", "executing", "paused", "executing", "completed"]


def record_statuses(db: Store, kind: str, target_id: str, statuses: list[str], *, first_change: int = 1) -> None:
    """One store write (one poll sees it all) of the target's created event and a status event per
    status; ``first_change`` > 1: only the status events, numbered on from an earlier write."""
    events: list[Event] = []
    if first_change == 1:
        events.append(
            AutonomousTaskCreated(seq=1, task_id=target_id, owner="alice", goal="g", max_sessions=3, budget=Budget(),
                                  schedule="once", status_events=True)
            if kind == "task" else TaskGraphCreated(seq=1, graph_id=target_id, owner="alice", status_events=True)
        )
    changed = AutonomousTaskStatusChanged if kind == "task" else TaskGraphStatusChanged
    previous = None
    for change, status in enumerate(statuses, start=first_change):
        events.append(changed(seq=change + 1, status=status, previous=previous, change=change))
        previous = status
    if kind == "task":
        db.record_task(TaskRecordInput(task_id=target_id, owner="alice", goal="g", status=statuses[-1], events=events))  # type: ignore[arg-type]
    else:
        db.record_graph(GraphRecordInput(graph_id=target_id, owner="alice", goal="g", status=statuses[-1], events=events))  # type: ignore[arg-type]


@pytest.mark.parametrize(("kind", "statuses"), [("task", TASK_STATUSES), ("run", GRAPH_STATUSES)])
async def test_statuses_that_pass_within_one_poll_each_get_a_delivery_in_order_under_their_own_id(
    db: Store, client: AgentClient, receivers: Receivers, stand_ins: Callable[..., Any], kind: str, statuses: list[str]
) -> None:
    receiver = receivers()
    target_id, _ = await stand_ins(kind, "executing")  # its search attribute shows none of these statuses
    record_statuses(db, kind, target_id, statuses)  # all of them before the dispatcher's first poll

    async with dispatcher(db, client, Target(receiver.url), poll_seconds=30.0, log_wait_seconds=30.0) as d:
        watch = await d.watch(kind, target_id, "alice")  # type: ignore[arg-type]
        await receiver.wait_for(len(statuses))
        await until(lambda: db.webhook_watch(watch.watch_id).state == "ended")  # type: ignore[union-attr]

    changes = [verify_webhook(SECRET, r.body, r.headers)["data"] for r in receiver.requests]
    assert [(c["status"], c["previous_status"], c["change"]) for c in changes] == [
        (status, ([None, *statuses][n]), n + 1) for n, status in enumerate(statuses)
    ]
    keys = [f"status:{n}:{status}" for n, status in enumerate(statuses, start=1)]
    assert receiver.ids() == [webhook_id(watch.watch_id, key) for key in keys]
    assert [d.webhook_id for d in db.webhook_deliveries(watch_id=watch.watch_id)] == receiver.ids()
    assert {c["owner"] for c in changes} == {"alice"} and [c["closed"] for c in changes][-1] is True


async def test_status_events_written_later_are_delivered_after_the_earlier_ones_once_each(
    db: Store, client: AgentClient, receivers: Receivers, stand_ins: Callable[..., Any]
) -> None:
    receiver = receivers()
    task_id, _ = await stand_ins("task", "running")
    record_statuses(db, "task", task_id, ["waiting", "running"])

    async with dispatcher(db, client, Target(receiver.url)) as d:
        await d.watch("task", task_id, "alice")
        await receiver.wait_for(2)
        record_statuses(db, "task", task_id, ["waiting", "running", "completed"], first_change=3)
        await receiver.wait_for(5)
        await asyncio.sleep(0.2)  # nothing more comes

    statuses = [r.json["data"]["status"] for r in receiver.requests]
    assert statuses == ["waiting", "running", "waiting", "running", "completed"]
    assert len(set(receiver.ids())) == 5


async def test_a_run_that_records_its_statuses_and_is_terminated_ends_with_terminated_after_its_last_status(
    db: Store, client: AgentClient, receivers: Receivers, stand_ins: Callable[..., Any]
) -> None:
    receiver = receivers()
    run_id, handle = await stand_ins("run", "executing")
    record_statuses(db, "run", run_id, ["planning", "approved", "executing"])
    await handle.terminate("operator stopped it")  # closed from outside: no final status in its log

    async with dispatcher(db, client, Target(receiver.url)) as d:
        watch = await d.watch("run", run_id, "alice")
        await receiver.wait_for(4)
        await until(lambda: db.webhook_watch(watch.watch_id).state == "ended")  # type: ignore[union-attr]

    changes = [r.json["data"] for r in receiver.requests]
    assert [(c["status"], c["change"], c["closed"]) for c in changes] == [
        ("planning", 1, False), ("approved", 2, False), ("executing", 3, False), ("terminated", 4, True),
    ]
    assert changes[-1]["previous_status"] == "executing"


async def test_a_new_run_s_empty_log_holds_its_watch_until_its_statuses_arrive_from_the_first(
    db: Store, client: AgentClient, receivers: Receivers, stand_ins: Callable[..., Any]
) -> None:
    receiver = receivers()
    run_id, _ = await stand_ins("run", "executing")  # its first write is under way: no log yet

    async with dispatcher(db, client, Target(receiver.url), log_wait_seconds=30.0) as d:
        await d.watch("run", run_id, "alice")
        assert await d.poll() == 0
        record_statuses(db, "run", run_id, ["planning", "approved", "executing"])
        await receiver.wait_for(3)

    assert [r.json["data"]["status"] for r in receiver.requests] == ["planning", "approved", "executing"]


async def test_a_run_an_older_build_started_is_read_from_its_search_attribute(
    db: Store, client: AgentClient, receivers: Receivers, stand_ins: Callable[..., Any]
) -> None:
    receiver = receivers()
    run_id, _ = await stand_ins("run", "executing")
    old = TaskGraphCreated(seq=1, graph_id=run_id, owner="alice")  # no status_events: it records no status
    db.record_graph(GraphRecordInput(graph_id=run_id, owner="alice", goal="g", status="executing", events=[old]))

    async with dispatcher(db, client, Target(receiver.url), log_wait_seconds=30.0) as d:
        await d.watch("run", run_id, "alice")
        await receiver.wait_for(1)

    assert [(r.json["data"]["status"], r.json["data"]["change"]) for r in receiver.requests] == [("executing", 1)]


async def test_a_stranger_cannot_watch_another_principal_s_run_but_an_operator_can(
    db: Store, client: AgentClient, stand_ins: Callable[..., Any]
) -> None:
    run_id, _ = await stand_ins("run", "executing")
    d = dispatcher(db, client)

    with pytest.raises(GraphNotFound, match=run_id):
        await d.watch("run", run_id, "mallory")
    assert db.webhook_watches() == []

    assert (await d.watch("run", run_id, "ops")).principal == "ops"


async def test_a_stranger_cannot_watch_a_child_session_of_another_principal(
    db: Store, client: AgentClient, stand_ins: Callable[..., Any]
) -> None:
    child = await stand_ins("child", "idle")
    d = dispatcher(db, client)

    with pytest.raises(SessionNotFound):
        await d.watch("session", child, "mallory")
    assert (await d.watch("session", child, "alice")).target_id == child
    top_level = await a_session(client)  # a top-level session of another owner: as missing too
    with pytest.raises(SessionNotFound):
        await d.watch("session", top_level, "mallory")


@pytest.mark.parametrize(("kind", "error"), [("session", SessionNotFound), ("task", TaskNotFound), ("run", GraphNotFound)])
async def test_watching_what_does_not_exist_is_not_found(
    db: Store, client: AgentClient, kind: str, error: type
) -> None:
    d = dispatcher(db, client)

    with pytest.raises(error):
        await d.watch(kind, f"nope-{uuid.uuid4().hex[:6]}", "alice")  # type: ignore[arg-type]
    with pytest.raises(error):
        await d.watch(kind, "x" * 2_000, "alice")  # type: ignore[arg-type]
    assert db.webhook_watches(state=None) == []


@pytest.mark.parametrize(("kind", "since_seq"), [("graph", 0), ("session", -1)])
async def test_an_unknown_kind_or_a_negative_since_seq_is_a_configuration_error(
    db: Store, client: AgentClient, kind: str, since_seq: int
) -> None:
    with pytest.raises(ConfigurationError):
        await dispatcher(db, client).watch(kind, "s1", "alice", since_seq=since_seq)  # type: ignore[arg-type]


# ---------------------------------------------------------------- configuration


async def test_the_webhooks_of_agentrt_toml_are_the_dispatcher_s_targets(
    db: Store, client: AgentClient, receivers: Receivers, tmp_path: Path
) -> None:
    receiver = receivers()
    toml = tmp_path / "agentrt.toml"
    toml.write_text(
        f'[[gateway.webhooks]]\nurl = "{receiver.url}"\nsecret_env = "HOOK_SECRET"\nevents = ["turn.ended"]\n'
    )
    config = AgentrtConfig.load(toml, env={"HOOK_SECRET": "from-the-environment"})
    sid = await a_session(client)
    one_turn(db, sid)

    async with WebhookDispatcher(db, client, config.gateway.webhooks, poll_seconds=0.05) as d:
        await d.watch("session", sid, "alice")
        (received,) = await receiver.wait_for(1)

    assert verify_webhook("from-the-environment", received.body, received.headers)["type"] == "turn.ended"


def test_a_webhook_secret_env_unset_fails_only_the_dispatcher_not_the_configuration(db: Store, tmp_path: Path) -> None:
    # workers, the CLI and the codec server share agentrt.toml but not the gateway's secret
    toml = tmp_path / "agentrt.toml"
    toml.write_text('[[gateway.webhooks]]\nurl = "http://127.0.0.1:9/hook"\nsecret_env = "HOOK_SECRET"\n')
    config = AgentrtConfig.load(toml, env={})
    assert config.gateway.webhooks[0].secret_env == "HOOK_SECRET"
    with pytest.raises(ConfigurationError, match="'HOOK_SECRET', its secret_env, is not set"):
        WebhookDispatcher(db, None, config.gateway.webhooks)  # type: ignore[arg-type]


def test_bad_dispatcher_options_are_a_configuration_error(db: Store) -> None:
    with pytest.raises(ConfigurationError):
        WebhookDispatcher(db, None, [], poll_seconds=0)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        WebhookDispatcher(db, None, [], max_attempts=0)  # type: ignore[arg-type]


@pytest.mark.parametrize("ticks", range(6))
async def test_stop_returns_when_a_watch_wakes_the_poll_loop_just_before_it(
    db: Store, client: AgentClient, ticks: int
) -> None:
    # On Python 3.11, asyncio.wait_for returns the inner result and drops a cancel that arrives
    # once the event it waits on is set (gh-86296): stop() then waited forever on the poll loop.
    session_id = await a_session(client)
    hub = dispatcher(db, client, poll_seconds=30.0)
    await hub.start()
    await asyncio.sleep(0.2)  # the poll loop waits for its next pass
    await hub.watch("session", session_id, "alice")
    for _ in range(ticks):
        await asyncio.sleep(0)
    await asyncio.wait_for(hub.stop(), 10)
    assert [w.target_id for w in db.webhook_watches()] == [session_id]
