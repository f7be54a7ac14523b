"""Stalls and retries are visible, end to end: a loopback OpenAI-compatible server whose first
stream goes idle mid-answer fails that attempt as ``stream_stalled`` after the profile's short idle
bound; Temporal retries the call, the session records ``ModelCallRetried`` (profile, model, base
URL, attempt, cause) in its events, and the turn completes on the second attempt."""

from __future__ import annotations

from pathlib import Path

from agentrt.schemas import ModelCallRetried, ModelProfile, TurnEnded
from tests.activities.providers._loopback import LoopbackServer, Reply
from tests.conftest import Harness
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
