"""Tests for what adapters share: wire-safe tool names, tool-argument parsing, provider_for."""

from __future__ import annotations

import re

import pytest

from agentrt.activities.providers import (
    AnthropicProvider,
    OpenAIProvider,
    Provider,
    ScriptedProvider,
    ToolNames,
    provider_for,
    tool_call_from_text,
)
from agentrt.schemas import ConfigurationError, ModelProfile

WIRE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_dotted_tool_names_map_to_wire_names_and_back() -> None:
    names = ToolNames(["fs.read", "shell.run", "memory_put"])

    assert [names.to_wire(n) for n in ["fs.read", "shell.run", "memory_put"]] == ["fs__read", "shell__run", "memory_put"]
    assert names.to_name("fs__read") == "fs.read"
    assert names.to_name("memory_put") == "memory_put"


def test_wire_names_stay_unique_and_valid_when_names_collide_or_run_long() -> None:
    tools = ["fs.read", "fs__read", "mcp:server/tool", "mcp/server:tool", "x." + "y" * 80, "lookup\n", "lookup"]
    names = ToolNames(tools)

    wires = [names.to_wire(t) for t in tools]

    assert len(set(wires)) == len(tools)
    assert all(WIRE.fullmatch(w) for w in wires)  # "$" alone would pass "lookup\n"
    assert [names.to_name(w) for w in wires] == tools
    assert names.to_wire("fs__read") == "fs__read"


def test_unknown_wire_name_is_returned_unchanged() -> None:
    assert ToolNames(["fs.read"]).to_name("made_up") == "made_up"


@pytest.mark.parametrize(
    ("raw", "arguments"),
    [("", {}), ("  \n", {}), ('{"a": 1}', {"a": 1})],
)
def test_argument_text_that_parses_gives_arguments(raw: str, arguments: dict) -> None:
    call = tool_call_from_text("c1", "fs.read", raw)

    assert (call.arguments, call.arguments_error, call.arguments_raw) == (arguments, None, "")


@pytest.mark.parametrize(("raw", "why"), [("{bad", "not valid JSON"), ("[1, 2]", "JSON object"), ('"s"', "JSON object")])
def test_argument_text_that_is_not_an_object_gives_arguments_error(raw: str, why: str) -> None:
    call = tool_call_from_text("c1", "fs.read", raw)

    assert (call.arguments, call.arguments_raw) == (None, raw)
    assert why in (call.arguments_error or "")


def test_provider_for_reads_the_api_key_from_the_named_variable() -> None:
    profile = ModelProfile(name="p", provider="anthropic", model="claude", api_key_env="ANTHROPIC_API_KEY")

    provider = provider_for(profile, env={"ANTHROPIC_API_KEY": "sk-ant"})

    assert isinstance(provider, AnthropicProvider)
    assert provider.api_key == "sk-ant"
    assert isinstance(provider, Provider)


def test_provider_for_raises_when_the_named_key_variable_is_missing() -> None:
    profile = ModelProfile(name="p", provider="openai", model="gpt-4o", api_key_env="OPENAI_API_KEY")

    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        provider_for(profile, env={})


def test_provider_for_allows_a_keyless_openai_compatible_local_server() -> None:
    profile = ModelProfile(name="p", provider="openai", model="llama3", base_url="http://127.0.0.1:11434/v1")

    provider = provider_for(profile, env={})

    assert isinstance(provider, OpenAIProvider)
    assert provider.api_key is None


def test_provider_for_refuses_the_vendor_endpoint_without_a_key_variable() -> None:
    profile = ModelProfile(name="p", provider="openai", model="gpt-4o")

    with pytest.raises(ConfigurationError, match="api_key_env"):
        provider_for(profile, env={})


def test_provider_for_builds_the_scripted_provider_and_needs_a_script() -> None:
    assert isinstance(provider_for(ModelProfile(name="s", provider="scripted", script="s.json"), env={}), ScriptedProvider)
    with pytest.raises(ConfigurationError, match="script"):
        provider_for(ModelProfile(name="s", provider="scripted"), env={})


@pytest.mark.parametrize(
    "profile",
    [
        ModelProfile(name="p", provider="openai"),  # no model
        ModelProfile(name="p", provider="openai", model="gpt-4o"),  # the vendor's endpoint, no api_key_env
        ModelProfile(name="p", provider="scripted"),  # no script
    ],
)
def test_a_profile_provider_for_refuses_is_named_as_the_worker_s_configuration(profile: ModelProfile) -> None:
    # The message reaches a client as a failed turn: it must say where to look.
    with pytest.raises(ConfigurationError, match="model profile 'p' of the worker's configuration"):
        provider_for(profile, env={})


def test_an_unset_key_variable_is_named_as_the_worker_s_environment() -> None:
    profile = ModelProfile(name="p", provider="openai", model="gpt-4o", api_key_env="OPENAI_API_KEY")

    with pytest.raises(ConfigurationError, match=r"\$OPENAI_API_KEY, which is not set in the worker's environment"):
        provider_for(profile, env={})


def test_a_key_no_header_can_carry_is_named_as_the_worker_s_environment() -> None:
    profile = ModelProfile(name="p", provider="openai", model="gpt-4o", api_key_env="KEY")

    with pytest.raises(ConfigurationError, match=r"the API key in \$KEY \(the worker's environment\)"):
        provider_for(profile, env={"KEY": "sk-key\n"})


async def test_a_huge_error_body_is_read_only_up_to_its_bound(server) -> None:  # type: ignore[no-untyped-def]
    from agentrt.activities.providers._base import MAX_ERROR_BODY_BYTES, stream_sse
    from agentrt.schemas import ProviderHTTPError
    from tests.activities.providers._loopback import Reply

    # An error body that claims 1 GB and breaks off after 8 MB: read to its end, it would be a
    # cut stream (a transport error) after 8 MB in memory; read to the bound, it is the 500 it says.
    server.reply(
        Reply(status=500, headers={"Content-Type": "text/plain"}, chunks=[b"e" * 65536] * 128, content_length=1 << 30)
    )

    with pytest.raises(ProviderHTTPError) as caught:
        async for _ in stream_sse(f"{server.url}/v1/x", headers={}, body={}, timeout_seconds=10):
            pass

    assert caught.value.status == 500 and len(caught.value.body) == 4096
    assert MAX_ERROR_BODY_BYTES < 8 * 1024 * 1024


@pytest.mark.parametrize(
    "raw",
    [
        "[" * 100_000 + "]" * 100_000,  # past the JSON reader's recursion limit
        '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"a": ' + "[" * 500 + "]" * 500 + "}",  # parses, but history could not read it back
        '{"a": ' + '{"b": ' * 70 + "1" + "}" * 70 + "}",
    ],
)
def test_arguments_nested_too_deep_give_arguments_error_not_an_exception(raw: str) -> None:
    from agentrt.activities.providers._base import MAX_ARGUMENT_DEPTH

    call = tool_call_from_text("c1", "fs.read", raw)

    assert call.arguments is None
    assert call.arguments_raw == (raw if len(raw) <= 2000 else raw[:2000] + f"… ({len(raw):,} characters in all)")
    assert f"deeper than {MAX_ARGUMENT_DEPTH} levels" in (call.arguments_error or "")


def test_arguments_nested_up_to_the_bound_parse() -> None:
    from agentrt.activities.providers._base import MAX_ARGUMENT_DEPTH

    raw = '{"a": ' * (MAX_ARGUMENT_DEPTH - 1) + "[]" + "}" * (MAX_ARGUMENT_DEPTH - 1)

    assert tool_call_from_text("c1", "fs.read", raw).arguments is not None


@pytest.mark.parametrize("raw", ['{"path": "\\ud800"}', '{"\\udc00": 1}', '{"a": ["x", {"b": "\\udfff"}]}'])
def test_arguments_with_a_lone_surrogate_give_arguments_error(raw: str) -> None:
    # Valid JSON syntax, but not text: the ToolCall could not be serialized into history (UTF-8).
    call = tool_call_from_text("c1", "fs.read", raw)

    assert (call.arguments, call.arguments_raw) == (None, raw)
    assert "surrogate" in (call.arguments_error or "")
    call.model_dump_json()


def test_arguments_with_an_escaped_surrogate_pair_parse() -> None:
    assert tool_call_from_text("c1", "fs.read", '{"s": "\\ud83d\\ude00"}').arguments == {"s": "\U0001f600"}


@pytest.mark.parametrize("key", ["sk-SECRET\n", "sk-SECRET\r\nX-Injected: 1", "sk-SECRÉT", "sk-\x00SECRET", " sk-SECRET"])
@pytest.mark.parametrize("provider", ["openai", "openai-responses", "anthropic"])
def test_an_api_key_no_header_can_carry_is_a_configuration_error_that_does_not_show_it(provider: str, key: str) -> None:
    # A key read from a file or a Kubernetes secret often ends in a newline: httpx refused it
    # with an error quoting the header (the key), which became the activity's failure message;
    # a non-ASCII key raised UnicodeEncodeError.
    profile = ModelProfile(name="p", provider=provider, model="m", api_key_env="KEY")  # type: ignore[arg-type]

    with pytest.raises(ConfigurationError, match=r"\$KEY") as caught:
        provider_for(profile, env={"KEY": key})

    assert "SECR" not in str(caught.value)


async def test_a_request_httpx_refuses_to_send_does_not_quote_its_headers(server) -> None:  # type: ignore[no-untyped-def]
    from agentrt.activities.providers._base import stream_sse
    from agentrt.schemas import ProviderTransportError

    with pytest.raises(ProviderTransportError) as caught:
        async for _ in stream_sse(
            f"{server.url}/v1/x", headers={"Authorization": "Bearer sk-SECRET\n"}, body={}, timeout_seconds=10
        ):
            pass

    assert "SECRET" not in str(caught.value)


@pytest.mark.parametrize(
    ("chunks", "why"),
    [
        ([b"data: " + b"x" * 4096] * 64, "line of the event stream"),  # one line that never ends
        ([b": keep-alive\n" * 300] * 64, "more than"),  # short lines without end
    ],
)
async def test_an_event_stream_is_read_only_up_to_its_bounds(server, monkeypatch, chunks, why) -> None:  # type: ignore[no-untyped-def]
    # A hostile server's 100 MB line (or endless stream) was buffered whole: memory without bound
    # until the deadline. The bounds are made small here; the real ones are in _base.
    from agentrt.activities.providers import _base
    from agentrt.schemas import ProviderTransportError
    from tests.activities.providers._loopback import Reply

    monkeypatch.setattr(_base, "MAX_LINE_CHARS", 64 * 1024)
    monkeypatch.setattr(_base, "MAX_STREAM_CHARS", 128 * 1024)
    server.reply(Reply(chunks=chunks))

    with pytest.raises(ProviderTransportError, match=why):
        async for _ in _base.stream_sse(f"{server.url}/v1/x", headers={}, body={}, timeout_seconds=10):
            pass


def test_arguments_longer_than_the_bound_are_refused_before_they_reach_history() -> None:
    from agentrt.activities.providers._base import MAX_ARGUMENT_CHARS

    raw = '{"path": "a", "content": "' + "x" * MAX_ARGUMENT_CHARS + '"}'

    call = tool_call_from_text("c1", "fs.write", raw)

    assert call.arguments is None
    assert call.arguments_error == f"arguments of {len(raw):,} characters are more than a tool call may have ({MAX_ARGUMENT_CHARS:,})"
    assert call.arguments_raw.startswith('{"path": "a"') and len(call.arguments_raw) < 2100
    assert len(call.model_dump_json()) < 3000


def test_unparsable_argument_text_keeps_only_its_start() -> None:
    raw = "not json " * 10_000

    call = tool_call_from_text("c1", "fs.read", raw)

    assert call.arguments_raw == raw[:2000] + f"… ({len(raw):,} characters in all)"
