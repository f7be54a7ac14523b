"""Tests for the error boundary: Retry-After parsing, ApplicationError mapping, httpx error mapping."""

from __future__ import annotations

import json
import urllib.parse
from datetime import timedelta

import httpx
import pytest

from agentrt.activities.providers import OpenAIProvider, application_error_from, retry_after_seconds
from agentrt.schemas import Message, ModelProfile, ModelRequest, ProviderHTTPError, ProviderTransportError

URL = "https://api.example.test/v1/chat/completions"


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 529])
def test_retryable_statuses_give_a_retryable_application_error(status: int) -> None:
    error = application_error_from(ProviderHTTPError(status, URL, "{}"))

    assert error.non_retryable is False


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_other_client_errors_give_a_non_retryable_application_error(status: int) -> None:
    error = application_error_from(ProviderHTTPError(status, URL, "{}"))

    assert error.non_retryable is True


def test_application_error_carries_type_message_details_and_retry_delay() -> None:
    exc = ProviderHTTPError(429, URL, '{"error": "slow down"}', retry_after=2.5)

    error = application_error_from(exc)

    assert error.type == "ProviderHTTPError"
    assert error.message == str(exc)
    assert error.details == ({"status": 429, "url": URL, "body": '{"error": "slow down"}'},)
    assert error.next_retry_delay == timedelta(seconds=2.5)


def test_application_error_without_retry_after_has_no_retry_delay() -> None:
    assert application_error_from(ProviderHTTPError(503, URL, "")).next_retry_delay is None


def test_transport_error_is_always_retryable() -> None:
    error = application_error_from(ProviderTransportError(URL, "ConnectError: refused"))

    assert error.type == "ProviderTransportError"
    assert error.non_retryable is False
    assert error.details[0]["url"] == URL


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({}, None),
        ({"retry-after": "12"}, 12.0),
        ({"retry-after": "0.5"}, 0.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-3"}, None),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:10 GMT"}, 10.0),
    ],
)
def test_retry_after_header_is_read_in_seconds(headers: dict[str, str], seconds: float | None) -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT

    assert retry_after_seconds(httpx.Headers(headers), now=now) == seconds


async def test_read_timeout_from_httpx_becomes_a_chained_stream_stalled_transport_error() -> None:
    # httpx's read timeout is the profile's stream_idle_timeout_seconds: no bytes for that long.
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    profile = ModelProfile(name="t", provider="openai", model="m", base_url="https://api.example.test/v1")
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    provider = OpenAIProvider(profile, "k", client=client)

    with pytest.raises(ProviderTransportError, match="stream_stalled: no bytes for 60 s") as caught:
        await provider.complete(ModelRequest(profile=profile, messages=[Message(role="user", text="x")]))

    assert isinstance(caught.value.__cause__, httpx.ReadTimeout)
    assert caught.value.url == URL
    await client.aclose()


def test_a_retry_after_beyond_the_callers_bound_is_clamped() -> None:
    exc = ProviderHTTPError(503, URL, "busy", retry_after=3600)
    err = application_error_from(exc, max_retry_delay=10)
    assert err.next_retry_delay == timedelta(seconds=10) and not err.non_retryable
    assert application_error_from(exc).next_retry_delay == timedelta(seconds=3600)


def test_a_huge_provider_error_reaches_temporal_bounded_in_message_and_details() -> None:
    from agentrt.activities.providers._errors import MAX_DETAIL_BODY_CHARS, MAX_MESSAGE_CHARS

    err = application_error_from(ProviderHTTPError(500, URL, "x" * 100_000))

    assert len(err.message) <= MAX_MESSAGE_CHARS and err.message.startswith(f"provider returned HTTP 500 for {URL}")
    assert len(err.details[0]["body"]) <= MAX_DETAIL_BODY_CHARS


def test_a_protocol_error_is_not_retried_and_names_provider_model_url_and_line() -> None:
    from agentrt.schemas import ProviderProtocolError

    err = application_error_from(ProviderProtocolError("openai", "gpt-x", URL, '{"choices": "nope"}', "choices is not a list"))

    assert err.type == "ProviderProtocolError" and err.non_retryable
    assert err.details[0] == {
        "status": None, "url": URL, "body": None, "reason": "choices is not a list",
        "provider": "openai", "model": "gpt-x", "line": '{"choices": "nope"}',
    }
    assert "gpt-x" in err.message and URL in err.message


def test_a_key_echoed_in_an_error_body_and_url_credentials_never_reach_temporal() -> None:
    key = "sk-live-1234567890abcdef"
    url = "https://user:hunter2pass@gw.example.test/v1/chat/completions?api-key=abc123secret&x=1"
    body = f'{{"error": {{"message": "Incorrect API key provided: {key}"}}}}'

    err = application_error_from(ProviderHTTPError(401, url, body), secrets=[key, None, "short"])

    text = err.message + json.dumps(err.details[0])
    assert key not in text and "hunter2pass" not in text and "abc123secret" not in text
    assert "Incorrect API key provided: [redacted]" in err.message
    assert "https://[redacted]@gw.example.test" in err.details[0]["url"] and "api-key=[redacted]&x=1" in err.details[0]["url"]
    assert err.non_retryable  # a 401 is final


def test_redact_leaves_ordinary_text_and_short_values_alone() -> None:
    from agentrt.activities.providers import redact

    assert redact("key=value in prose; http://host/path?page=2", ["abc"]) == "key=value in prose; http://host/path?page=2"


@pytest.mark.parametrize(
    "echo",
    [
        lambda key: urllib.parse.quote(key, safe=""),
        lambda key: urllib.parse.quote_plus(key),
        lambda key: json.dumps({"key": key}),
        lambda key: json.dumps({"key": key}).replace("/", "\\/"),
        lambda key: json.dumps({"key": key}).replace("&", "\\u0026").replace("<", "\\u003c"),
    ],
)
def test_a_key_echoed_url_encoded_or_json_escaped_never_reaches_temporal(echo) -> None:
    key = "Zm9vL2Jhcit/Ki9xdXV4&<=="
    body = f"bad key: {echo(key)}"

    err = application_error_from(ProviderHTTPError(401, URL, body), secrets=[key])

    text = err.message + json.dumps(err.details[0])
    assert "Zm9vL2Jhcit" not in text and "[redacted]" in err.message


def test_a_key_cut_through_by_an_errors_own_limit_leaves_no_part_of_it() -> None:
    from agentrt.activities.providers import redact
    from agentrt.schemas import ProviderProtocolError

    key = "sk-live-" + "K" * 40
    line = "x" * (ProviderProtocolError.LINE_CHARS - 20) + key  # the line is cut inside the key
    err = application_error_from(ProviderProtocolError("openai", "m", URL, line, "bad chunk"), secrets=[key])
    body = "y" * 4080 + key  # a ProviderHTTPError keeps 4,096 characters of the body
    logged = redact(str(ProviderHTTPError(400, URL, body)), [key])

    assert "KKKK" not in err.message + json.dumps(err.details[0]) and "KKKK" not in logged
    assert err.details[0]["line"].endswith("[redacted]…") and logged.endswith("[redacted]")


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        ("https://user:p@ss@gw.example.test/v1", "ss@gw"),
        ("https://gw.example.test/v1?alt=sse\\u0026key=abc123secret", "abc123secret"),
        ("https://gw.example.test/v1?alt=sse%26key=abc123secret", "abc123secret"),
        ("https://gw.example.test/v1?alt=sse;token=abc123secret", "abc123secret"),
        ("https://gw.example.test/v1?x-api-key=abc123secret", "abc123secret"),
        ("https://gw.example.test/v1?client_secret=abc123secret", "abc123secret"),
    ],
)
def test_url_credentials_past_an_at_sign_or_an_escaped_separator_are_redacted(url: str, secret: str) -> None:
    from agentrt.activities.providers import redact

    assert secret not in redact(url)
