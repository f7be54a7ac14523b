"""A model stream that goes idle mid-answer fails its attempt as ``StreamStalled`` (code
``stream_stalled``, retryable) after the profile's ``stream_idle_timeout_seconds``, well before its
whole ``timeout_seconds``: wire tests against a real loopback server that stops sending and keeps
the connection open."""

from __future__ import annotations

import pytest

from agentrt.activities.providers import AnthropicProvider, OpenAIProvider, application_error_from
from agentrt.schemas import Message, ModelProfile, ModelRequest, StreamStalled
from agentrt.activities._retries import failure_code
from tests.activities.providers._loopback import LoopbackServer, Reply, sse_data, sse_typed
from tests.activities.providers.test_openai import chunk

IDLE = 0.3  # seconds: the test's short idle bound; the whole call may take 600


def request(provider: str, base_url: str) -> ModelRequest:
    profile = ModelProfile(
        name="t", provider=provider, model="m", base_url=f"{base_url}/v1" if provider == "openai" else base_url,  # type: ignore[arg-type]
        stream_idle_timeout_seconds=IDLE, timeout_seconds=600,
    )
    return ModelRequest(profile=profile, system="terse", messages=[Message(role="user", text="hi")], tools=[])


async def test_an_openai_stream_that_goes_idle_mid_answer_fails_as_stream_stalled(server: LoopbackServer) -> None:
    server.reply(Reply(chunks=sse_data(chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"}), "[DONE]"), stall_after=2))
    req = request("openai", server.url)
    seen: list[str] = []

    async def on_delta(text: str) -> None:
        seen.append(text)

    with pytest.raises(StreamStalled, match=f"stream_stalled: no bytes for {IDLE:g} s") as stalled:
        await OpenAIProvider(req.profile, "sk-test").complete(req, on_delta)
    assert seen == ["Hel"] and stalled.value.idle_seconds == IDLE


async def test_an_anthropic_stream_that_goes_idle_fails_as_stream_stalled(server: LoopbackServer) -> None:
    start = {"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "model": "m",
             "content": [], "stop_reason": None, "usage": {"input_tokens": 3, "output_tokens": 1}}}
    server.reply(Reply(chunks=sse_typed(start, {"type": "ping"}, {"type": "message_stop"}), stall_after=2))
    req = request("anthropic", server.url)
    with pytest.raises(StreamStalled):
        await AnthropicProvider(req.profile, "sk-ant-test").complete(req)


async def test_a_stalled_stream_is_a_retryable_failure_coded_stream_stalled(server: LoopbackServer) -> None:
    server.reply(Reply(hang=True))  # the headers, then nothing
    req = request("openai", server.url)
    with pytest.raises(StreamStalled) as stalled:
        await OpenAIProvider(req.profile, "sk-test").complete(req)
    failure = application_error_from(stalled.value)
    assert (failure.type, failure.non_retryable, failure_code(failure)) == ("StreamStalled", False, "stream_stalled")


def test_a_profile_s_idle_timeout_defaults_to_a_minute_and_refuses_nonsense() -> None:
    assert ModelProfile(name="p", provider="openai").stream_idle_timeout_seconds == 60.0
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="stream_idle_timeout_seconds"):
            ModelProfile(name="p", provider="openai", stream_idle_timeout_seconds=bad)
