"""Webhooks end to end: a scripted session on the real dev server and worker asks for an approval
and ends its turn, a task graph goes through its statuses, and a receiver on loopback gets each as
a signed notification, acted on from its body (the approval is decided with the request id it
carries). The dispatcher stops and a new one resumes in between, resending nothing delivered."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentrt.client import WebhookDispatcher, verify_webhook
from agentrt.schemas import GraphNotFound, GraphSpec
from agentrt.store import webhook_watch_id
from tests.conftest import Harness
from tests.e2e._graphs import answer, write_graph_script
from tests.e2e._tasks import write_task_script
from tests.e2e._support import session_config, write_script

SECRET = "e2e-webhook-secret"


class Receiver:
    """A real HTTP server on 127.0.0.1 that answers 204 and keeps each verified notification."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: v for k, v in self.headers.items()}
                receiver.received.append(verify_webhook(SECRET, body, headers))
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/agentrt"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def about(self, target_id: str) -> list[dict[str, Any]]:
        """The notifications about ``target_id`` (the store is shared: other tests' watches may post here too)."""
        return [b for b in self.received if b["data"]["target_id"] == target_id]

    async def first(self, target_id: str, predicate: Any, timeout: float = 60.0) -> dict[str, Any]:
        async def poll() -> dict[str, Any]:
            while True:
                for body in self.about(target_id):
                    if predicate(body):
                        return body
                await asyncio.sleep(0.05)

        return await asyncio.wait_for(poll(), timeout)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass(frozen=True)
class Target:
    url: str
    secret: str = SECRET
    events: tuple[str, ...] = ("turn.ended", "approval.requested", "run.status")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def dispatcher(harness: Harness, receiver: Receiver) -> WebhookDispatcher:
    targets = [Target(receiver.url)]
    return WebhookDispatcher(harness.store, harness.client, targets, poll_seconds=0.1, retry_base_seconds=0.1)


async def test_a_session_posts_approval_requested_then_turn_ended_across_a_dispatcher_restart(
    harness: Harness, receiver: Receiver, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "notes.md", "content": "from the model\n"}}]},
        {"text": "wrote notes.md"},
    ])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "write the notes")

    async with dispatcher(harness, receiver) as first:
        await first.watch("session", sid, "alice")
        asked = await receiver.first(sid, lambda b: b["type"] == "approval.requested")
        # Stopped only once the 2xx is recorded: a notification being posted when the dispatcher stops
        # is posted again (docs/webhooks.md), which a busy machine would otherwise sometimes show here.
        watch_id = webhook_watch_id("session", sid)
        await _until(lambda: [d.state for d in harness.store.webhook_deliveries(watch_id=watch_id)] == ["delivered"])
    request = asked["data"]["request"]
    await harness.client.approve(sid, request["request_id"])  # decided from what the notification carried
    outcome = await harness.client.wait(sid, started.turn_id)
    async with dispatcher(harness, receiver):  # a new dispatcher on the same store: the gateway restarted
        ended = await receiver.first(sid, lambda b: b["type"] == "turn.ended")
        await harness.client.archive(sid)
        await _until(lambda: harness.store.webhook_watch(watch_id).state == "ended")  # type: ignore[union-attr]

    assert outcome.status == "completed" and (workspace / "notes.md").read_text() == "from the model\n"
    assert (asked["data"]["session_id"], asked["data"]["turn_id"]) == (sid, started.turn_id)
    assert (request["tool"], request["arguments"]) == ("fs.write", {"path": "notes.md", "content": "from the model\n"})
    assert ended["data"]["turn_id"] == started.turn_id
    assert (ended["data"]["status"], ended["data"]["answer"], ended["data"]["rounds"]) == ("completed", "wrote notes.md", 2)
    notes = receiver.about(sid)
    assert [b["type"] for b in notes] == ["approval.requested", "turn.ended"]
    assert len({b["id"] for b in notes}) == 2


async def test_a_task_graph_posts_its_status_changes_until_it_completes(
    harness: Harness, receiver: Receiver, workspace: Path, tmp_path: Path
) -> None:
    spec = GraphSpec.model_validate({"nodes": [{"id": "only", "prompt": "say hello"}]})
    script = write_graph_script(tmp_path, {"only": [{"turns": [answer("hello")]}]})
    graph_id = await harness.client.start_graph(graph=spec, workspace=str(workspace), script=script, approve_plan="ask")

    async with dispatcher(harness, receiver) as d:
        watch = await d.watch("run", graph_id, "alice")
        await receiver.first(graph_id, lambda b: b["data"]["status"] == "pending_approval")
        await harness.client.approve_graph(graph_id)
        result = await harness.client.wait_graph(graph_id)
        await receiver.first(graph_id, lambda b: b["data"]["status"] == "completed")
        await _until(lambda: harness.store.webhook_watch(watch.watch_id).state == "ended")  # type: ignore[union-attr]

    notes = receiver.about(graph_id)
    changes = [b["data"] for b in notes]
    assert result.status == "completed"
    assert {b["type"] for b in notes} == {"run.status"}
    assert {(c["kind"], c["run_id"], c["owner"]) for c in changes} == {("run", graph_id, "alice")}
    statuses = [c["status"] for c in changes]
    assert statuses == ["planning", "pending_approval", "approved", "executing", "completed"]  # approved lasts no time
    assert [c["change"] for c in changes] == list(range(1, len(changes) + 1))
    assert [c["previous_status"] for c in changes] == [None, *statuses[:-1]]
    assert len({b["id"] for b in notes}) == len(changes)


async def test_a_task_posts_every_status_it_passed_through_however_short(
    harness: Harness, receiver: Receiver, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [[{"text": "done"}]])
    task_id = await harness.client.start_task(
        "say done", workspace=str(workspace), script=script, accept_command="true", max_sessions=1
    )

    async with dispatcher(harness, receiver) as d:
        watch = await d.watch("task", task_id, "alice")
        result = await harness.client.wait_task(task_id)
        await _until(lambda: harness.store.webhook_watch(watch.watch_id).state == "ended")  # type: ignore[union-attr]
        await _until(lambda: len(receiver.about(task_id)) == 3)

    changes = [b["data"] for b in receiver.about(task_id)]
    assert result.status == "completed"
    assert [(c["status"], c["previous_status"], c["change"]) for c in changes] == [
        ("waiting", None, 1), ("running", "waiting", 2), ("completed", "running", 3),  # waiting: the task woke at once
    ]
    assert {(c["kind"], c["task_id"], c["owner"]) for c in changes} == {("task", task_id, "alice")}


async def test_a_stranger_cannot_watch_a_graph_they_do_not_own(
    harness: Harness, receiver: Receiver, workspace: Path, tmp_path: Path
) -> None:
    spec = GraphSpec.model_validate({"nodes": [{"id": "only", "prompt": "say hello"}]})
    script = write_graph_script(tmp_path, {"only": [{"turns": [answer("hello")]}]})
    graph_id = await harness.client.start_graph(graph=spec, workspace=str(workspace), script=script, approve_plan="ask")
    d = dispatcher(harness, receiver)

    with pytest.raises(GraphNotFound):
        await d.watch("run", graph_id, "mallory")
    assert harness.store.webhook_watch(webhook_watch_id("run", graph_id)) is None
    await harness.client.cancel_graph(graph_id)


async def _until(condition: Any, timeout: float = 30.0) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), timeout)
