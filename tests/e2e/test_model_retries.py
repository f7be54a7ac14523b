"""Stalls and retries are visible, end to end: a loopback OpenAI-compatible server whose first
stream goes idle mid-answer fails that attempt as ``stream_stalled`` after the profile's short idle
bound; Temporal retries the call, the session records ``ModelCallRetried`` (profile, model, base
URL, attempt, cause) in its events, and the turn completes on the second attempt. A call whose
worker died mid-call is announced by its retry instead (``worker_lost``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentrt.schemas import ModelCallRetried, ModelProfile, ModelRequestStarted, TurnEnded
from tests.activities.providers._loopback import LoopbackServer, Reply
from tests.conftest import Harness
from tests.e2e._support import kill_hard, session_config, wait_for_event, worker_process, write_script
from tests.e2e.conftest import KEY_ENV
from tests.e2e.test_memory_recall import RECORDED_TEXT

FIRST_CHUNK = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}\n\n'


async def test_a_stalled_stream_is_retried_and_the_retry_is_an_event_of_the_session(
    harness: Harness, workspace: Path, provider_server: LoopbackServer
) -> None:
    profile = ModelProfile(
        name="loopback-stall", provider="openai", model="gpt-4o-mini", base_url=provider_server.url, api_key_env=KEY_ENV,
        stream_idle_timeout_seconds=0.5,
    )
    harness.config.profiles[profile.name] = profile
    provider_server.reply(Reply(chunks=[FIRST_CHUNK, b"data: [DONE]\n\n"], stall_after=1), Reply(chunks=[RECORDED_TEXT.read_bytes()]))
    client = harness.client
    config = client.new_config(str(workspace), session_id=harness.new_session_id(), profile=profile.name)

    started = await client.start(config, "hello")
    outcome = await client.wait(config.session_id, started.turn_id, timeout_seconds=120)

    assert outcome.status == "completed", outcome.error
    assert len(provider_server.requests) == 2
    events = (await client.events(config.session_id)).events
    [retried] = [e for e in events if isinstance(e, ModelCallRetried)]
    assert (retried.profile, retried.model, retried.base_url) == ("loopback-stall", "gpt-4o-mini", provider_server.url)
    assert (retried.attempt, retried.cause, retried.turn_id) == (2, "stream_stalled", started.turn_id)
    assert "no bytes for 0.5 s" in retried.detail
    [ended] = [e for e in events if isinstance(e, TurnEnded)]
    assert retried.seq < ended.seq


async def test_a_model_call_retried_after_its_worker_died_is_an_event_of_the_session(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "answered after the crash", "delay_seconds": 4}])
    client = harness.client_on(harness.task_queue + "-proc")
    log = tmp_path / "worker.log"
    with worker_process(harness, log) as first:
        sid = harness.new_session_id()
        config = session_config(client, sid, workspace, script, heartbeat_timeout_seconds=2.0)
        started = await client.start(config, "think slowly")
        await wait_for_event(client, sid, lambda e: isinstance(e, ModelRequestStarted))
        await asyncio.sleep(1.5)  # the call is in flight and has heartbeated
        kill_hard(first)
    with worker_process(harness, log):
        outcome = await asyncio.wait_for(client.wait(sid, started.turn_id), timeout=120)
        events = (await client.events(sid)).events

    assert outcome.status == "completed" and outcome.answer == "answered after the crash"
    [retried] = [e for e in events if isinstance(e, ModelCallRetried)]
    assert (retried.attempt, retried.cause, retried.turn_id, retried.round) == (2, "worker_lost", started.turn_id, 1)
    assert "attempt 1 ended without an answer" in retried.detail
