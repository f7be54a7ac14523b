"""Idempotent writes against the real session, task and graph workflows: a send, a start, a task's or a
graph's start repeated with its idempotency key (as a caller does after a lost answer) does its work once
and answers what the first call answered."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import AsyncIterator

import pytest
from temporalio.service import RPCError

from agentrt.client import AgentClient, connect
from agentrt.schemas import (
    GraphSpec,
    RequestRejected,
    SendMessageInput,
    SessionNotFound,
    UserMessageAdded,
    graph_workflow_id,
    idempotency_digest,
    task_workflow_id,
)
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, DevServer, build_worker
from agentrt.workflows.session import SessionWorkflow
from tests.cli.test_cli import agentrt
from tests.conftest import OWNER, Harness
from tests.e2e._graphs import answer, write_graph_script
from tests.e2e._support import session_config, write_script
from tests.e2e._tasks import write_task_script


async def user_messages(client: AgentClient, session_id: str) -> list[UserMessageAdded]:
    return [e async for e in client.all_events(session_id) if isinstance(e, UserMessageAdded)]


def new_key() -> str:
    return f"key-{uuid.uuid4()}"


def keyed_id(kind: str, principal: str, key: str) -> str:
    """The id a start of ``kind`` with ``key`` and no id derives (docs/idempotency.md, "Derived ids")."""
    return "k-" + idempotency_digest(kind, principal, key)[:24]


async def started_session(harness: Harness, workspace: Path, tmp_path: Path, answers: int = 4) -> str:
    script = write_script(tmp_path, [{"text": f"answer {n}"} for n in range(1, answers + 1)])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "hello")
    await harness.client.wait(sid, started.turn_id, timeout_seconds=60)
    return sid


# ---------------------------------------------------------------- send and send_and_wait


async def test_send_repeated_with_the_same_key_queues_one_message(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    sid = await started_session(harness, workspace, tmp_path)
    key = new_key()

    first = await harness.client.send(sid, "pay the invoice", idempotency_key=key)
    again = await harness.client.send(sid, "pay the invoice", idempotency_key=key)

    assert first.turn_id == again.turn_id == "turn-2"
    outcome = await harness.client.wait(sid, first.turn_id, timeout_seconds=60)
    assert (outcome.status, outcome.answer) == ("completed", "answer 2")
    after = await harness.client.send(sid, "pay the invoice", idempotency_key=key)
    assert (after.turn_id, after.queued_behind) == ("turn-2", 0)
    assert [m.text for m in await user_messages(harness.client, sid)] == ["hello", "pay the invoice"]
    assert [m.text for _, m in harness.store.messages(sid) if m.role == "user"] == ["hello", "pay the invoice"]
    assert (await harness.client.state(sid)).turns_completed == 2


async def test_the_session_itself_answers_a_repeat_that_the_server_does_not(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """Any Temporal client, any update id: the session's own memory of keys answers the first turn."""
    sid = await started_session(harness, workspace, tmp_path)
    key = new_key()
    first = await harness.client.send(sid, "once", idempotency_key=key)

    raw = await harness.handle(sid).execute_update(
        SessionWorkflow.send_message, SendMessageInput(text="once", principal=OWNER, idempotency_key=key),
        id=f"another-id-{uuid.uuid4().hex}",
    )

    assert raw.turn_id == first.turn_id
    await harness.client.wait(sid, first.turn_id, timeout_seconds=60)
    assert [m.text for m in await user_messages(harness.client, sid)] == ["hello", "once"]


async def test_sends_at_once_with_the_same_key_queue_one_message(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    sid = await started_session(harness, workspace, tmp_path)
    key = new_key()

    results = await asyncio.gather(*(harness.client.send(sid, "only once", idempotency_key=key) for _ in range(5)))

    assert {r.turn_id for r in results} == {"turn-2"}
    await harness.client.wait(sid, "turn-2", timeout_seconds=60)
    assert [m.text for m in await user_messages(harness.client, sid)] == ["hello", "only once"]


async def test_send_and_wait_repeated_with_the_same_key_returns_the_first_outcome(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = await started_session(harness, workspace, tmp_path)
    key = new_key()

    first = await harness.client.send_and_wait(sid, "what now?", idempotency_key=key)
    again = await harness.client.send_and_wait(sid, "what now?", idempotency_key=key)
    # A send of the same key names the same turn too.
    sent = await harness.client.send(sid, "what now?", idempotency_key=key)

    assert (first.turn_id, first.status, first.answer) == ("turn-2", "completed", "answer 2")
    assert again == first and sent.turn_id == "turn-2"
    assert [m.text for m in await user_messages(harness.client, sid)] == ["hello", "what now?"]


async def test_the_same_key_with_another_text_is_rejected_and_the_first_message_stays(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = await started_session(harness, workspace, tmp_path)
    key = new_key()
    first = await harness.client.send(sid, "pay 10 euros", idempotency_key=key)

    with pytest.raises(RequestRejected, match=f"idempotency key '{key}' was used for another message") as caught:
        await harness.client.send(sid, "pay 10000 euros", idempotency_key=key)
    with pytest.raises(RequestRejected, match="was used for another message"):
        await harness.client.send_and_wait(sid, "pay 10000 euros", idempotency_key=key)

    assert caught.value.session_id == sid and "turn-2" in caught.value.reason
    outcome = await harness.client.wait(sid, first.turn_id, timeout_seconds=60)
    assert outcome.status == "completed"
    assert [m.text for m in await user_messages(harness.client, sid)] == ["hello", "pay 10 euros"]


async def test_two_texts_under_one_key_at_once_queue_exactly_one_of_them(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """Both may pass the validator in one workflow task: the handler refuses the second."""
    sid = await started_session(harness, workspace, tmp_path)
    key = new_key()

    results = await asyncio.gather(
        harness.client.send(sid, "text a", idempotency_key=key), harness.client.send(sid, "text b", idempotency_key=key),
        return_exceptions=True,
    )

    refused = [r for r in results if isinstance(r, RequestRejected)]
    assert len(refused) == 1 and "was used for another message" in refused[0].reason
    await harness.client.wait(sid, "turn-2", timeout_seconds=60)
    texts = [m.text for m in await user_messages(harness.client, sid)]
    assert len(texts) == 2 and texts[1] in ("text a", "text b")


MALFORMED_KEYS = ["", "k" * 201, "has space", "line\nbreak", "ключ", "k'; DROP TABLE sessions;--", "../../etc"]


async def test_a_malformed_key_is_refused_before_anything_is_sent(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    sid = await started_session(harness, workspace, tmp_path)

    for key in MALFORMED_KEYS:
        with pytest.raises(RequestRejected, match="idempotency key") as caught:
            await harness.client.send(sid, "hi", idempotency_key=key)
        assert caught.value.session_id == sid and caught.value.request == "send_message"
        with pytest.raises(RequestRejected, match="idempotency key"):
            await harness.client.send_and_wait(sid, "hi", idempotency_key=key)

    view = await harness.client.state(sid)
    assert view.queued_turn_ids == [] and view.active_turn_id is None and view.turns_completed == 1
    assert [m.text for m in await user_messages(harness.client, sid)] == ["hello"]


async def test_a_stranger_repeating_the_owner_s_key_learns_nothing_and_sends_nothing(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = await started_session(harness, workspace, tmp_path)
    key = new_key()
    await harness.client.send(sid, "secret plan", idempotency_key=key)

    for text in ("secret plan", "another text"):
        with pytest.raises(SessionNotFound) as caught:  # another owner's session answers as a missing one
            await harness.as_principal("mallory").send(sid, text, idempotency_key=key)
        assert "turn-" not in str(caught.value)

    await harness.client.wait(sid, "turn-2", timeout_seconds=60)
    assert [m.text for m in await user_messages(harness.client, sid)] == ["hello", "secret plan"]


@pytest.fixture(scope="module")
async def low_limit_server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    """A dev server that suggests continue-as-new after 120 history events: a session continues as
    new every few turns."""
    server = DevServer.on_free_ports(
        tmp_path_factory.mktemp("idempotency-server"),
        ["--dynamic-config-value", "limit.historyCount.suggestContinueAsNew=120"],
    )
    await server.start()
    yield server
    server.stop()


async def test_keys_are_remembered_across_continue_as_new(
    low_limit_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    config = AgentrtConfig(
        temporal_address=low_limit_server.address, task_queue=f"idem-{uuid.uuid4().hex[:8]}", database_url=store_url
    )
    temporal = await connect(low_limit_server.address, plugin=AgentrtPlugin(config, store))
    client = AgentClient(temporal, task_queue=config.task_queue, principal=OWNER, store=store)
    script = write_script(tmp_path, [{"text": f"answer {n}"} for n in range(1, 61)])
    sid = uuid.uuid4().hex[:12]
    start_key, send_key, wait_key = new_key(), new_key(), new_key()
    async with build_worker(temporal, config, store, task_queue=config.task_queue):
        session = session_config(client, sid, workspace, script)
        started = await client.start(session, "message 1", idempotency_key=start_key)
        sent = await client.send(sid, "message 2", idempotency_key=send_key)
        waited = await client.send_and_wait(sid, "message 3", idempotency_key=wait_key)
        count = 3
        while (await client.state(sid)).run < 2:
            count += 1
            assert count < 60, "the session never continued as new"
            await client.send_and_wait(sid, f"message {count}")

        # A run that never saw these update ids: the session's carried memory answers.
        assert (await client.start(session, "message 1", idempotency_key=start_key)).turn_id == started.turn_id
        assert (await client.send(sid, "message 2", idempotency_key=send_key)).turn_id == sent.turn_id
        assert await client.send_and_wait(sid, "message 3", idempotency_key=wait_key) == waited
        with pytest.raises(RequestRejected, match="was used for another message"):
            await client.send(sid, "message 2, changed", idempotency_key=send_key)

        texts = [m.text for m in await user_messages(client, sid)]
        assert texts == [f"message {n}" for n in range(1, count + 1)]
        assert waited.answer == "answer 3" and (await client.state(sid)).turns_completed == count


# ---------------------------------------------------------------- starts


async def test_start_repeated_with_a_key_starts_one_session(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": "started"}, {"text": "never"}])
    key = new_key()
    # A caller that builds its config again on each retry gets the same session id from the key.
    configs = [harness.client.new_config(str(workspace), script=script, profile="scripted", idempotency_key=key) for _ in range(2)]
    sid = configs[0].session_id
    harness.session_ids.append(sid)

    first = await harness.client.start(configs[0], "begin", idempotency_key=key)
    run_id = (await harness.handle(sid).describe()).run_id
    again = await harness.client.start(configs[1], "begin", idempotency_key=key)

    assert configs[1].session_id == sid and sid.startswith("k-") and len(sid) == 26
    assert (first.session_id, first.turn_id) == (again.session_id, again.turn_id) == (sid, "turn-1")
    assert (await harness.handle(sid).describe()).run_id == run_id
    assert (await harness.client.wait(sid, "turn-1", timeout_seconds=60)).answer == "started"
    assert [m.text for m in await user_messages(harness.client, sid)] == ["begin"]
    # Another principal's key of the same text is another session.
    assert harness.as_principal("bob").new_config(str(workspace), idempotency_key=key).session_id != sid


async def test_start_and_wait_repeated_with_a_key_returns_the_first_outcome(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "the first answer"}, {"text": "never"}])
    key = new_key()
    config = harness.client.new_config(str(workspace), script=script, profile="scripted", idempotency_key=key)
    harness.session_ids.append(config.session_id)

    first = await harness.client.start_and_wait(config, "go", idempotency_key=key)
    again = await harness.client.start_and_wait(config, "go", idempotency_key=key)

    assert again == first and first[1].answer == "the first answer"
    assert [m.text for m in await user_messages(harness.client, config.session_id)] == ["go"]


async def test_a_start_repeated_after_the_session_ended_answers_the_first_turn(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "done"}])
    key = new_key()
    config = harness.client.new_config(str(workspace), script=script, profile="scripted", idempotency_key=key)
    harness.session_ids.append(config.session_id)
    first = await harness.client.start(config, "one thing", idempotency_key=key)
    await harness.client.wait(config.session_id, first.turn_id, timeout_seconds=60)
    await harness.client.archive(config.session_id)
    await harness.handle(config.session_id).result()

    again = await harness.client.start(config, "one thing", idempotency_key=key)

    assert again.turn_id == first.turn_id
    with pytest.raises(RequestRejected, match="has ended"):
        await harness.client.start(config, "something else", idempotency_key=key)


async def test_a_keyed_start_under_the_id_of_a_session_started_without_the_key_is_refused_and_sends_nothing(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    # The config asks for other tools and a read-only sandbox: sending into the running session would drop both.
    sid = await started_session(harness, workspace, tmp_path)
    script = write_script(tmp_path, [{"text": "x"}])
    config = session_config(harness.client, sid, workspace, script, tools=[], sandbox="read_only")

    for start in (harness.client.start(config, "new session please", idempotency_key=new_key()),
                  harness.client.start_and_wait(config, "new session please", idempotency_key=new_key())):
        with pytest.raises(RequestRejected, match="a session with this id exists and was not started with this idempotency key") as caught:
            await start
        assert (caught.value.session_id, caught.value.request) == (sid, "start")

    assert [m.text for m in await user_messages(harness.client, sid)] == ["hello"]
    view = await harness.client.state(sid)
    assert view.queued_turn_ids == [] and view.active_turn_id is None and view.turns_completed == 1


async def test_a_keyed_start_under_the_id_of_a_session_started_with_another_key_is_refused(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "first"}, {"text": "never"}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script)
    first = await harness.client.start(config, "begin", idempotency_key=new_key())
    await harness.client.wait(sid, first.turn_id, timeout_seconds=60)

    with pytest.raises(RequestRejected, match="a session with this id exists"):
        await harness.client.start(config, "begin", idempotency_key=new_key())
    with pytest.raises(RequestRejected, match="a session with this id exists"):  # another principal's key
        await harness.as_principal("mallory").start(config, "begin", idempotency_key=new_key())

    assert [m.text for m in await user_messages(harness.client, sid)] == ["begin"]


async def test_a_stranger_repeating_the_owner_s_keyed_start_is_refused_and_sends_nothing(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "first"}, {"text": "never"}])
    key = new_key()
    config = harness.client.new_config(str(workspace), script=script, profile="scripted", idempotency_key=key)
    harness.session_ids.append(config.session_id)
    first = await harness.client.start(config, "begin", idempotency_key=key)
    await harness.client.wait(config.session_id, first.turn_id, timeout_seconds=60)
    mallory = harness.as_principal("mallory")

    for config_of_the_start in (config, config.model_copy(update={"owner": "mallory"})):
        with pytest.raises(RequestRejected, match="ids starting with 'k-' are derived from an idempotency key"):
            await mallory.start(config_of_the_start, "begin", idempotency_key=key)

    assert [m.text for m in await user_messages(harness.client, config.session_id)] == ["begin"]


async def test_the_same_key_with_another_config_is_refused_and_the_first_session_stands(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "first"}, {"text": "never"}])
    key = new_key()
    config = harness.client.new_config(str(workspace), script=script, profile="scripted", idempotency_key=key)
    harness.session_ids.append(config.session_id)
    first = await harness.client.start(config, "begin", idempotency_key=key)

    with pytest.raises(RequestRejected, match=f"idempotency key '{key}' was used for another start of session"):
        await harness.client.start(config.model_copy(update={"tools": []}), "begin", idempotency_key=key)

    assert (await harness.client.start(config, "begin", idempotency_key=key)).turn_id == first.turn_id
    assert [m.text for m in await user_messages(harness.client, config.session_id)] == ["begin"]


async def test_a_start_without_a_key_into_a_running_session_still_sends_to_it(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = await started_session(harness, workspace, tmp_path)

    again = await harness.client.start(session_config(harness.client, sid, workspace, "ignored.json"), "and more")

    assert again.turn_id == "turn-2"
    await harness.client.wait(sid, again.turn_id, timeout_seconds=60)
    assert [m.text for m in await user_messages(harness.client, sid)] == ["hello", "and more"]


@pytest.mark.parametrize("kind", ["session", "task", "graph"])
async def test_an_explicit_id_in_the_space_of_derived_ids_is_refused_before_anything_starts(
    harness: Harness, workspace: Path, tmp_path: Path, kind: str
) -> None:
    # Bob takes the id Alice's keyed start of "order-42" derives: the client refuses it, so Alice's start can run.
    squatted = keyed_id(kind, OWNER, "order-42")
    bob = harness.as_principal("bob")
    script = write_script(tmp_path, [{"text": "x"}])
    starts = {
        "session": lambda: bob.start(session_config(bob, squatted, workspace, script), "mine now"),
        "task": lambda: bob.start_task("squat", workspace=str(workspace), script=script, every_seconds=3600, task_id=squatted),
        "graph": lambda: bob.start_graph(goal="squat", workspace=str(workspace), script=script, graph_id=squatted),
    }
    workflow_ids = {"session": f"session-{squatted}", "task": task_workflow_id(squatted), "graph": graph_workflow_id(squatted)}

    with pytest.raises(RequestRejected, match="ids starting with 'k-' are derived from an idempotency key") as caught:
        await starts[kind]()
    with pytest.raises(RequestRejected, match="ids starting with 'k-' are derived"):  # another key's id, even with a key
        await {"session": lambda: bob.start(session_config(bob, squatted, workspace, script), "x", idempotency_key="order-42"),
               "task": lambda: bob.start_task("s", workspace=str(workspace), task_id=squatted, idempotency_key="order-42"),
               "graph": lambda: bob.start_graph(goal="s", workspace=str(workspace), graph_id=squatted, idempotency_key="order-42"),
               }[kind]()

    assert caught.value.session_id == squatted and caught.value.request == "start"
    with pytest.raises(RPCError):
        await harness.temporal.get_workflow_handle(workflow_ids[kind]).describe()  # nothing was started


async def test_a_retry_that_kept_the_derived_id_passes_it_with_its_key(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_task_script(tmp_path, [[{"text": "working"}]], reviews=[{"verdict": "fail", "findings": ["not yet"]}])
    key = new_key()

    task_id = await harness.client.start_task("g", workspace=str(workspace), script=script, every_seconds=3600, idempotency_key=key)
    try:
        again = await harness.client.start_task(
            "g", workspace=str(workspace), script=script, every_seconds=3600, task_id=task_id, idempotency_key=key
        )
        assert again == task_id == keyed_id("task", OWNER, key)
    finally:
        await harness.client.cancel_task(task_id)


async def test_a_start_with_a_malformed_key_starts_nothing(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, write_script(tmp_path, [{"text": "x"}]))

    for start in (harness.client.start(config, "hi", idempotency_key="bad key"),
                  harness.client.start_and_wait(config, "hi", idempotency_key="bad key")):
        with pytest.raises(RequestRejected, match="idempotency key has only the characters"):
            await start
    with pytest.raises(RequestRejected, match="idempotency key has at most 200 characters"):
        harness.client.new_config(str(workspace), idempotency_key="k" * 300)

    with pytest.raises(RPCError):
        await harness.handle(sid).describe()  # no workflow was started


# ---------------------------------------------------------------- tasks and graphs


async def test_start_task_repeated_with_a_key_starts_one_task(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_task_script(tmp_path, [[{"text": "working"}]], reviews=[{"verdict": "fail", "findings": ["not yet"]}])
    key = new_key()

    async def start(goal: str = "keep the lights on", task_id: str | None = None, idempotency_key: str = key) -> str:
        return await harness.client.start_task(
            goal, workspace=str(workspace), script=script, every_seconds=3600, task_id=task_id, idempotency_key=idempotency_key
        )

    task_id = await start()
    started = [task_id]
    handle = harness.temporal.get_workflow_handle(task_workflow_id(task_id))
    run_id = (await handle.describe()).run_id
    try:
        assert await start() == task_id and task_id.startswith("k-") and len(task_id) == 26
        assert (await handle.describe()).run_id == run_id
        with pytest.raises(RequestRejected, match=f"idempotency key '{key}' was used for another start of task {task_id}"):
            await start("another goal")
        # An id taken by a task started without this key keeps its refusal.
        other = await harness.client.start_task("g", workspace=str(workspace), script=script, every_seconds=3600)
        started.append(other)
        with pytest.raises(RequestRejected, match="a task with this id is running; choose another id"):
            await start(task_id=other)
        with pytest.raises(RequestRejected, match="rejected start: the idempotency key is empty"):
            await harness.client.start_task("g", workspace=str(workspace), idempotency_key="")
        # An explicit id with a key: a retry finds it too.
        named, named_key = f"named-{uuid.uuid4().hex[:6]}", new_key()
        assert await start(task_id=named, idempotency_key=named_key) == named
        started.append(named)
        assert await start(task_id=named, idempotency_key=named_key) == named
    finally:
        for started_id in started:
            await harness.client.cancel_task(started_id)


async def test_start_graph_repeated_with_a_key_starts_one_graph(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_graph_script(tmp_path, {"a": [{"turns": [answer("done")]}]})
    graph = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "do a"}]})
    key = new_key()

    async def start(spec: GraphSpec = graph) -> str:
        return await harness.client.start_graph(graph=spec, workspace=str(workspace), script=script, idempotency_key=key)

    graph_id = await start()
    handle = harness.temporal.get_workflow_handle(graph_workflow_id(graph_id))
    run_id = (await handle.describe()).run_id
    try:
        assert await start() == graph_id
        assert (await handle.describe()).run_id == run_id
        other = GraphSpec.model_validate({"nodes": [{"id": "b", "prompt": "do b"}]})
        with pytest.raises(RequestRejected, match="was used for another start of graph"):
            await start(other)
        with pytest.raises(RequestRejected, match="idempotency key has only the characters"):
            await harness.client.start_graph(graph=graph, workspace=str(workspace), script=script, idempotency_key="a/b")
    finally:
        await harness.client.cancel_graph(graph_id)


# ---------------------------------------------------------------- the CLI


async def test_session_send_twice_with_one_key_from_the_cli_queues_one_message(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = await started_session(harness, workspace, tmp_path)
    key = new_key()
    args = ("session", "send", sid, "from the shell", "--idempotency-key", key, "--json")

    first = await agentrt(harness, *args, cwd=tmp_path)
    again = await agentrt(harness, *args, cwd=tmp_path)

    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    assert json.loads(first.stdout)["turn_id"] == json.loads(again.stdout)["turn_id"] == "turn-2"
    assert json.loads(again.stdout)["answer"] == "answer 2"
    assert [m.text for m in await user_messages(harness.client, sid)] == ["hello", "from the shell"]
    other = await agentrt(harness, "session", "send", sid, "another text", "--idempotency-key", key, cwd=tmp_path)
    assert other.returncode == 2 and "was used for another message" in other.stderr
    bad = await agentrt(harness, "session", "send", sid, "x", "--idempotency-key", "no spaces", cwd=tmp_path)
    assert bad.returncode == 2 and "--idempotency-key" in bad.stderr


async def test_run_twice_with_one_key_from_the_cli_runs_one_session(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": "ran once"}, {"text": "never"}])
    key = new_key()
    args = ("run", "do it once", "-w", str(workspace), "--script", script, "--idempotency-key", key, "--json")

    first = await agentrt(harness, *args, cwd=tmp_path)
    again = await agentrt(harness, *args, cwd=tmp_path)

    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    one, two = json.loads(first.stdout), json.loads(again.stdout)
    assert (one["session_id"], one["turn_id"], one["answer"]) == (two["session_id"], two["turn_id"], "ran once")
    harness.session_ids.append(one["session_id"])
    assert [m.text for m in await user_messages(harness.client, one["session_id"])] == ["do it once"]


async def test_run_with_a_session_id_in_the_space_of_derived_ids_exits_2(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "x"}])
    squatted = keyed_id("session", "alice", "order-42")

    result = await agentrt(harness, "run", "mine now", "-w", str(workspace), "--script", script, "--session-id", squatted, cwd=tmp_path)

    assert result.returncode == 2 and "ids starting with 'k-' are derived from an idempotency key" in result.stderr
    with pytest.raises(RPCError):
        await harness.handle(squatted).describe()
