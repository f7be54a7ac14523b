"""Whole sessions against recorded provider traffic: a loopback HTTP server replays real streams
(tests/activities/providers/recordings) byte for byte to a real worker, and the session, the
store and the client show what a user would see."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
from pathlib import Path

from agentrt.schemas import AssistantMessageCompleted, ModelProfile, TurnEnded
from tests.activities.providers._loopback import LoopbackServer, Reply
from tests.conftest import Harness
from tests.e2e._support import session_config, write_script
from tests.e2e.conftest import KEY_ENV

RECORDINGS = Path(__file__).parent.parent / "activities" / "providers" / "recordings"


def recorded(name: str) -> Reply:
    """The recorded body ``name`` (vendor/case), served as one SSE response."""
    return Reply(chunks=[(RECORDINGS / f"{name}.sse").read_bytes()])


def add_profile(harness: Harness, **fields: object) -> str:
    profile = ModelProfile(api_key_env=KEY_ENV, **fields)  # type: ignore[arg-type]
    harness.config.profiles[profile.name] = profile
    return profile.name


async def start(harness: Harness, workspace: Path, profile: str, prompt: str, **fields: object):  # type: ignore[no-untyped-def]
    sid = harness.new_session_id()
    config = harness.client.new_config(
        str(workspace), session_id=sid, profile=profile, heartbeat_timeout_seconds=5.0, **fields
    )
    started = await harness.client.start(config, prompt)
    outcome = await harness.client.wait(sid, started.turn_id, timeout_seconds=60)
    return sid, outcome


async def test_anthropic_thinking_goes_back_with_the_tool_result_and_cache_tokens_reach_the_session(
    harness: Harness, workspace: Path, provider_server: LoopbackServer
) -> None:
    profile = add_profile(
        harness, name="claude-thinking", provider="anthropic", model="claude-sonnet-4-20250514",
        base_url=provider_server.url, thinking_budget_tokens=4000, max_output_tokens=8000, context_window=200_000,
    )
    provider_server.reply(recorded("anthropic/thinking-tool-use"), recorded("anthropic/cache-write-code-execution"))

    sid, outcome = await start(harness, workspace, profile, "What's the weather in Florence, Italy?", tools=["fs.read"])

    assert outcome.status == "completed", outcome
    assert outcome.answer == "The sum of the squares of the numbers 1 through 12 is **650**."
    first, second = (r.json for r in provider_server.requests)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 4000}
    # The reply's thinking block, with its signature, opens the assistant message sent back.
    assistant = next(m for m in second["messages"] if m["role"] == "assistant")
    thinking = assistant["content"][0]
    assert thinking["type"] == "thinking" and thinking["signature"]
    assert thinking["thinking"].startswith("The user is asking for weather information for Florence")
    assert [b["type"] for b in assistant["content"]][-1] == "tool_use"
    # Stored beside the transcript, counted in the event, never the answer.
    stored = harness.store.reasoning_at(sid, range(0, 10))
    [blocks] = stored.values()
    assert blocks[0].type == "thinking" and blocks[0].signature == thinking["signature"]
    events = (await harness.client.events(sid)).events
    replies = [e for e in events if isinstance(e, AssistantMessageCompleted)]
    assert replies[0].reasoning_chars == len(thinking["thinking"]) and "Florence" not in replies[0].text
    # The second reply read 6,289 prompt tokens from Anthropic's cache and wrote 3,337: in the
    # session's totals and the usage receipts.
    state = await harness.client.state(sid)
    assert (state.usage.cache_read_tokens, state.usage.cache_write_tokens) == (6_289, 3_337)
    assert state.usage.input_tokens == 424 + 9_632
    receipts = [r for r in harness.store.usage_receipts(sid) if r.status == "completed"]
    assert [(r.cache_read_tokens, r.cache_write_tokens) for r in receipts] == [(0, 0), (6_289, 3_337)]


async def test_a_mistral_reasoning_stream_completes_with_the_answer_apart_from_the_thinking(
    harness: Harness, workspace: Path, provider_server: LoopbackServer
) -> None:
    profile = add_profile(
        harness, name="magistral", provider="openai", model="magistral-medium-latest", base_url=provider_server.url
    )
    provider_server.reply(recorded("mistral/magistral-thinking-then-text"))

    sid, outcome = await start(harness, workspace, profile, "Why did the chicken cross the road?")

    assert outcome.status == "completed", outcome
    [blocks] = harness.store.reasoning_at(sid, range(0, 10)).values()
    assert blocks[0].type == "reasoning" and blocks[0].text
    assert blocks[0].text not in (outcome.answer or "")
    assert len(provider_server.requests) == 1


async def test_groqs_in_stream_tool_use_failed_fails_the_turn_at_once_as_a_400(
    harness: Harness, workspace: Path, provider_server: LoopbackServer
) -> None:
    profile = add_profile(harness, name="groq", provider="openai", model="openai/gpt-oss-120b", base_url=provider_server.url)
    provider_server.reply(recorded("groq/gpt-oss-tool-use-failed-error"))

    sid, outcome = await start(harness, workspace, profile, "What is the weather?")

    assert outcome.status == "failed" and outcome.error_type == "provider_http"
    assert "HTTP 400" in (outcome.error or "") and "tool_use_failed" in (outcome.error or "")
    assert len(provider_server.requests) == 1  # a 400 is not retried
    events = (await harness.client.events(sid)).events
    [ended] = [e for e in events if isinstance(e, TurnEnded)]
    assert ended.error_type == "provider_http"


async def test_an_empty_model_reply_fails_the_turn_as_empty_response(
    harness: Harness, workspace: Path, provider_server: LoopbackServer
) -> None:
    profile = add_profile(harness, name="empty", provider="openai", model="local-model", base_url=provider_server.url)
    # Hand-made (no public recording of an empty reply): a finished stream with no text and no call.
    chunk = {"id": "c1", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": "stop"}]}
    provider_server.reply(Reply(chunks=[f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()]))

    sid, outcome = await start(harness, workspace, profile, "say something")

    assert outcome.status == "failed" and outcome.error_type == "empty_response"
    assert "no text and no tool call" in (outcome.error or "")
    assert outcome.answer is None
    assert len(provider_server.requests) == 1


async def test_a_scripted_model_out_of_replies_fails_the_turn_as_script_exhausted(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "the only reply"}])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script)
    started = await harness.client.start(config, "first")
    assert (await harness.client.wait(sid, started.turn_id, timeout_seconds=60)).answer == "the only reply"

    sent = await harness.client.send(sid, "second")
    outcome = await harness.client.wait(sid, sent.turn_id, timeout_seconds=60)

    assert outcome.status == "failed" and outcome.error_type == "script_exhausted"
    assert "script exhausted" in (outcome.error or "")


async def test_a_turn_at_its_round_limit_ends_with_an_assistant_message_saying_so(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "a.txt").write_text("a")
    call = {"tool_calls": [{"name": "fs.read", "arguments": {"path": "a.txt"}}]}
    script = write_script(tmp_path, [call, call, call])
    sid = harness.new_session_id()
    config = session_config(harness.client, sid, workspace, script, max_rounds_per_turn=2, tools=["fs.read"])
    started = await harness.client.start(config, "loop")

    outcome = await harness.client.wait(sid, started.turn_id, timeout_seconds=60)

    assert outcome.status == "round_limit"
    transcript = harness.store.messages(sid)
    last = transcript[-1][1]
    assert last.role == "assistant" and "limit of 2 model calls" in last.text


async def test_a_provider_that_refuses_connections_shows_its_cause_while_the_call_retries(
    harness: Harness, workspace: Path, provider_server: LoopbackServer, closed_port_url: str
) -> None:
    profile = add_profile(
        harness, name="down", provider="openai", model="gpt-4o-mini", base_url=f"{closed_port_url}/v1"
    )
    sid = harness.new_session_id()
    config = harness.client.new_config(str(workspace), session_id=sid, profile=profile, heartbeat_timeout_seconds=5.0)
    await harness.client.start(config, "hello?")
    handle = harness.handle(sid)

    async def second_attempt() -> str:
        while True:
            described = await handle.describe()
            pending = described.raw_description.pending_activities
            if pending and pending[0].attempt >= 2 and pending[0].last_failure.message:
                return pending[0].last_failure.message
            await asyncio.sleep(0.2)

    message = await asyncio.wait_for(second_attempt(), 60)

    # The server replaces a last failure over 4 KB with "Failure exceeds size limit.".
    assert "Failure exceeds size limit" not in message
    assert closed_port_url in message and "ConnectError" in message
    await harness.client.cancel(sid)


async def test_deepseek_reasoning_content_goes_back_with_the_reply_that_called_a_tool(
    harness: Harness, workspace: Path, provider_server: LoopbackServer
) -> None:
    profile = add_profile(
        harness, name="deepseek", provider="openai", model="deepseek-reasoner", base_url=provider_server.url
    )
    provider_server.reply(recorded("deepseek/reasoner-tool-call"), recorded("deepseek/reasoner-text"))

    sid, outcome = await start(harness, workspace, profile, "What's the weather?")

    assert outcome.status == "completed", outcome
    second = provider_server.requests[1].json
    [called] = [m for m in second["messages"] if m["role"] == "assistant"]
    stored = harness.store.reasoning_at(sid, range(0, 10))
    first_reasoning = next(iter(stored.values()))[0]
    assert first_reasoning.source == "reasoning_content"
    assert called["tool_calls"] and called["reasoning_content"] == first_reasoning.text


async def test_a_call_id_the_model_sends_again_in_a_later_round_is_a_new_effect(
    harness: Harness, workspace: Path, provider_server: LoopbackServer
) -> None:
    # Hand-made: servers that number calls per reply (call_0, call_1 ...) send the same id each round.
    def append(line: str) -> Reply:
        call = {"index": 0, "id": "call_0", "type": "function",
                "function": {"name": "fs__write", "arguments": json.dumps({"path": "log.txt", "content": line, "append": True})}}
        chunks = [{"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": "tool_calls"}]}]
        return Reply(chunks=[b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"])

    done = {"choices": [{"index": 0, "delta": {"content": "wrote both"}, "finish_reason": "stop"}]}
    provider_server.reply(append("one\n"), append("two\n"), Reply(chunks=[f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode()]))
    profile = add_profile(harness, name="numbering", provider="openai", model="local-model", base_url=provider_server.url)
    from tests.e2e._support import ALLOW_ALL

    sid, outcome = await start(harness, workspace, profile, "write two lines", tools=["fs.write"], approval=ALLOW_ALL)

    assert outcome.status == "completed" and outcome.tool_calls == 2, outcome
    assert (workspace / "log.txt").read_text() == "one\ntwo\n"


async def test_an_empty_reply_right_after_a_tool_call_fails_the_turn_instead_of_completing_with_no_answer(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"tool_calls": [{"name": "fs.list", "arguments": {}}]}, {"text": ""}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "look around")

    outcome = await harness.client.wait(sid, started.turn_id, timeout_seconds=60)

    assert outcome.status == "failed" and outcome.error_type == "empty_response"
    assert outcome.rounds == 2 and outcome.answer is None


async def test_a_provider_echoing_the_api_key_in_its_401_gets_it_into_neither_history_nor_events(
    harness: Harness, workspace: Path, provider_server: LoopbackServer
) -> None:
    from tests.activities.providers._loopback import json_reply

    key = os.environ[KEY_ENV]
    provider_server.reply(json_reply(401, {"error": {"message": f"Incorrect API key provided: {key}", "code": "invalid_api_key"}}))
    profile = add_profile(harness, name="echo", provider="openai", model="gpt-4o-mini", base_url=provider_server.url)

    sid, outcome = await start(harness, workspace, profile, "hi")

    assert outcome.status == "failed" and outcome.error_type == "provider_http"
    assert "HTTP 401" in (outcome.error or "") and "[redacted]" in (outcome.error or "")
    history = _decoded_payloads((await harness.handle(sid).fetch_history()).to_json())
    assert "Incorrect API key provided: [redacted]" in history  # the payloads are read, not just their base64
    events = json.dumps([e.model_dump(mode="json") for e in harness.store.events(sid, 0, 100)])
    assert key not in history and key not in events and key not in (outcome.error or "")


def _decoded_payloads(history_json: str) -> str:
    """Every payload's data in an exported history, decoded (the export holds them as base64)."""
    decoded = []
    for data in re.findall(r'"data":\s*"([A-Za-z0-9+/=]+)"', history_json):
        try:
            decoded.append(base64.b64decode(data).decode("utf-8", errors="replace"))
        except ValueError:
            continue
    return history_json + "\n".join(decoded)
