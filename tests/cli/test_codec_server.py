"""The codec server over a real uvicorn on 127.0.0.1: Temporal's remote codec protocol, its token,
CORS for the UI, and what it answers to bodies an attacker sends; `agentrt codec-server`'s refusals."""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec
from typer.testing import CliRunner

from agentrt.cli._app import app
from agentrt.cli._codec import _host_name
from agentrt.gateway import DEFAULT_MAX_PAYLOADS, CodecServerSettings, codec_app
from agentrt.schemas import ConfigurationError
from agentrt.worker import AesGcmCodec, AgentrtConfig, free_port

K1 = bytes(range(32))
K2 = bytes(range(50, 82))
TOKEN = "a-test-token-of-enough-length"
UI = "http://localhost:8233"
SECRET = "the launch code is 0000"
CODEC = AesGcmCodec({"k1": K1, "k2": K2}, "k2")


@contextmanager
def serving(settings: CodecServerSettings, codec: PayloadCodec = CODEC) -> Iterator[str]:
    """``codec_app`` on a uvicorn server on a free loopback port, in a thread; yields its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(codec_app(codec, settings), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the codec server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving(CodecServerSettings(namespaces=("default",), ui_origins=(UI,), token=TOKEN, max_body_bytes=64 * 1024)) as found:
        yield found


@pytest.fixture
async def http() -> httpx.AsyncClient:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


AUTH = {"Authorization": f"Bearer {TOKEN}", "X-Namespace": "default"}


def as_json(*payloads: Payload) -> dict[str, list[dict[str, object]]]:
    return {"payloads": [json_format.MessageToDict(p) for p in payloads]}


def payloads_of(body: dict[str, list[dict[str, object]]]) -> list[Payload]:
    return [json_format.ParseDict(p, Payload()) for p in body["payloads"]]


def plain(text: str = SECRET) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(text).encode())


async def test_decode_answers_the_plain_payload_of_an_encrypted_one(url: str, http: httpx.AsyncClient) -> None:
    (encrypted,) = await CODEC.encode([plain()])

    response = await http.post(f"{url}/decode", json=as_json(encrypted, plain("not encrypted")), headers=AUTH)

    assert response.status_code == 200, response.text
    assert payloads_of(response.json()) == [plain(), plain("not encrypted")]


async def test_encode_answers_payloads_encrypted_with_the_current_key(url: str, http: httpx.AsyncClient) -> None:
    response = await http.post(f"{url}/encode", json=as_json(plain()), headers=AUTH)

    assert response.status_code == 200, response.text
    (encrypted,) = payloads_of(response.json())
    assert encrypted.metadata["encryption-key-id"] == b"k2"
    assert SECRET not in response.text
    assert await CODEC.decode([encrypted]) == [plain()]


async def test_an_empty_list_of_payloads_is_answered_with_an_empty_list(url: str, http: httpx.AsyncClient) -> None:
    response = await http.post(f"{url}/decode", json={"payloads": []}, headers=AUTH)

    assert response.status_code == 200 and response.json() == {"payloads": []}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer not-the-token-at-all-nope"},
        {"Authorization": TOKEN},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": f"Bearer {TOKEN}x"},
    ],
    ids=["missing", "wrong", "no-scheme", "basic", "longer"],
)
async def test_a_call_without_the_token_is_refused_with_401(url: str, http: httpx.AsyncClient, headers: dict[str, str]) -> None:
    (encrypted,) = await CODEC.encode([plain()])

    response = await http.post(f"{url}/decode", json=as_json(encrypted), headers=headers)

    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert SECRET not in response.text


async def test_a_preflight_from_the_ui_origin_is_answered_with_credentials_and_the_authorization_header(
    url: str, http: httpx.AsyncClient
) -> None:
    response = await http.options(f"{url}/decode", headers={
        "Origin": UI,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type,x-namespace",
    })

    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == UI
    assert response.headers["access-control-allow-credentials"] == "true"
    allowed = {h.strip().lower() for h in response.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "x-namespace"} <= allowed
    assert "POST" in response.headers["access-control-allow-methods"]


async def test_a_preflight_from_another_origin_is_not_allowed(url: str, http: httpx.AsyncClient) -> None:
    response = await http.options(f"{url}/decode", headers={
        "Origin": "http://evil.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    })

    assert response.status_code == 400
    assert "access-control-allow-origin" not in response.headers


async def test_an_answer_to_the_ui_origin_carries_cors_headers_and_one_to_another_origin_none(
    url: str, http: httpx.AsyncClient
) -> None:
    (encrypted,) = await CODEC.encode([plain()])

    from_ui = await http.post(f"{url}/decode", json=as_json(encrypted), headers={**AUTH, "Origin": UI})
    refused = await http.post(f"{url}/decode", json=as_json(encrypted), headers={"Origin": UI})
    elsewhere = await http.post(f"{url}/decode", json=as_json(encrypted), headers={**AUTH, "Origin": "http://evil.example"})

    assert from_ui.headers["access-control-allow-origin"] == UI
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == UI  # the UI can show why
    assert "access-control-allow-origin" not in elsewhere.headers


async def test_a_call_for_another_namespace_is_refused_with_403(url: str, http: httpx.AsyncClient) -> None:
    (encrypted,) = await CODEC.encode([plain()])

    response = await http.post(f"{url}/decode", json=as_json(encrypted), headers={**AUTH, "X-Namespace": "payments"})

    assert response.status_code == 403
    assert response.json() == {"error": "this codec server serves namespace(s) default, not 'payments'"}


async def test_a_payload_under_an_unknown_key_is_a_400_naming_the_key(url: str, http: httpx.AsyncClient) -> None:
    (foreign,) = await AesGcmCodec({"k9": bytes(32)}, "k9").encode([plain()])

    response = await http.post(f"{url}/decode", json=as_json(foreign), headers=AUTH)

    assert response.status_code == 400
    assert "'k9'" in response.json()["error"] and "no such key here" in response.json()["error"]


async def test_a_tampered_payload_is_a_400_and_nothing_is_passed_through(url: str, http: httpx.AsyncClient) -> None:
    (encrypted,) = await CODEC.encode([plain()])
    encrypted.data = encrypted.data[:-1] + bytes([encrypted.data[-1] ^ 1])

    response = await http.post(f"{url}/decode", json=as_json(encrypted), headers=AUTH)

    assert response.status_code == 400
    assert "authentication failed" in response.json()["error"]
    assert "payloads" not in response.json()


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"\xff\xfe\x00garbage",
        b"[]",
        b'{"payloads": {}}',
        b'{"payloads": [], "extra": 1}',
        b'{"payloads": ["a string"]}',
        b'{"payloads": [{"data": "not base64!!"}]}',
        b'{"payloads": [{"metadata": {"encoding": 5}}]}',
        b'{"payloads": [{"unknownField": 1}]}',
        b'{"payloads": ' + b"[" * 30_000 + b"]" * 30_000 + b"}",
    ],
    ids=["text", "binary", "array", "object-payloads", "extra-key", "string-payload", "bad-base64", "bad-metadata", "unknown-field", "deep"],
)
async def test_a_body_that_is_not_the_protocol_s_json_is_a_400(url: str, http: httpx.AsyncClient, body: bytes) -> None:
    response = await http.post(f"{url}/decode", content=body, headers={**AUTH, "Content-Type": "application/json"})

    assert response.status_code == 400
    assert response.json()["error"]


async def test_a_body_over_the_limit_is_a_413(url: str, http: httpx.AsyncClient) -> None:
    response = await http.post(f"{url}/decode", content=b"x" * (64 * 1024 + 1), headers=AUTH)

    assert response.status_code == 413


async def test_a_streamed_body_over_the_limit_without_a_length_is_a_413(url: str, http: httpx.AsyncClient) -> None:
    async def chunks() -> object:
        for _ in range(100):
            yield b"x" * 1024

    response = await http.post(f"{url}/decode", content=chunks(), headers=AUTH)

    assert response.status_code == 413


async def test_the_server_still_answers_after_hostile_bodies(url: str, http: httpx.AsyncClient) -> None:
    await http.post(f"{url}/decode", content=b"[" * 5000, headers=AUTH)
    await http.post(f"{url}/decode", content=b"x" * (64 * 1024 + 1), headers=AUTH)

    assert (await http.get(f"{url}/healthz")).json() == {"status": "ok"}
    assert (await http.post(f"{url}/decode", json={"payloads": []}, headers=AUTH)).status_code == 200


async def test_a_server_built_without_a_token_serves_calls_without_one(http: httpx.AsyncClient) -> None:
    (encrypted,) = await CODEC.encode([plain()])
    with serving(CodecServerSettings(namespaces=("default",), token=None)) as open_url:
        response = await http.post(f"{open_url}/decode", json=as_json(encrypted))

    assert response.status_code == 200 and payloads_of(response.json()) == [plain()]


async def test_more_payloads_than_the_bound_in_one_request_is_a_413(url: str, http: httpx.AsyncClient) -> None:
    # 2.5 million empty payloads fit in 8 MiB and cost seconds of CPU; the module's server has the default bound.
    at_bound = await http.post(f"{url}/decode", content='{"payloads":[' + ",".join(["{}"] * DEFAULT_MAX_PAYLOADS) + "]}", headers=AUTH)
    over = await http.post(f"{url}/decode", content='{"payloads":[' + ",".join(["{}"] * (DEFAULT_MAX_PAYLOADS + 1)) + "]}", headers=AUTH)

    assert at_bound.status_code == 200 and len(at_bound.json()["payloads"]) == DEFAULT_MAX_PAYLOADS
    assert over.status_code == 413
    assert over.json() == {"error": f"{DEFAULT_MAX_PAYLOADS + 1} payloads in one request; at most {DEFAULT_MAX_PAYLOADS}"}
    assert (await http.get(f"{url}/healthz")).json() == {"status": "ok"}


class GatedCodec(PayloadCodec):
    """The real codec, whose decode waits (in the thread that runs it) until ``gate`` is set."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return await CODEC.encode(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        self.entered.set()
        self.gate.wait(60)
        return await CODEC.decode(payloads)


async def test_health_and_other_calls_are_answered_while_a_request_is_being_decoded(http: httpx.AsyncClient) -> None:
    codec = GatedCodec()
    (encrypted,) = await CODEC.encode([plain()])
    with serving(CodecServerSettings(namespaces=("default",), token=TOKEN), codec) as gated_url:
        slow = asyncio.create_task(http.post(f"{gated_url}/decode", json=as_json(encrypted), headers=AUTH))
        await asyncio.to_thread(codec.entered.wait, 30)
        health = await http.get(f"{gated_url}/healthz", timeout=10)
        encoded = await http.post(f"{gated_url}/encode", json=as_json(plain()), headers=AUTH, timeout=10)
        codec.gate.set()
        decoded = await slow

    assert health.json() == {"status": "ok"} and encoded.status_code == 200
    assert decoded.status_code == 200 and payloads_of(decoded.json()) == [plain()]


@pytest.mark.parametrize("host", ["rebind.attacker.example", "rebind.attacker.example:8081", "127.0.0.1.nip.io", "localhost.evil.example"])
async def test_a_server_without_a_token_refuses_a_host_that_is_not_loopback(http: httpx.AsyncClient, host: str) -> None:
    # DNS rebinding: a page at rebind.attacker.example re-points its name at 127.0.0.1 and calls the server as itself.
    (encrypted,) = await CODEC.encode([plain()])
    with serving(CodecServerSettings(namespaces=("default",), ui_origins=(UI,), token=None)) as open_url:
        response = await http.post(
            f"{open_url}/decode", json=as_json(encrypted), headers={"Host": host, "Origin": f"http://{host}"}
        )
        after = await http.post(f"{open_url}/decode", json=as_json(encrypted))

    assert response.status_code == 400 and SECRET not in response.text
    assert after.status_code == 200 and payloads_of(after.json()) == [plain()]


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST:8081", "127.0.0.1:1", "[::1]:8081", "codec.internal"])
async def test_a_server_without_a_token_serves_loopback_and_its_allowed_hosts(http: httpx.AsyncClient, host: str) -> None:
    (encrypted,) = await CODEC.encode([plain()])
    settings = CodecServerSettings(namespaces=("default",), token=None, allowed_hosts=("codec.internal",))
    with serving(settings) as open_url:
        response = await http.post(f"{open_url}/decode", json=as_json(encrypted), headers={"Host": host})

    assert response.status_code == 200 and payloads_of(response.json()) == [plain()]


async def test_a_server_with_a_token_serves_any_host(url: str, http: httpx.AsyncClient) -> None:
    (encrypted,) = await CODEC.encode([plain()])

    response = await http.post(f"{url}/decode", json=as_json(encrypted), headers={**AUTH, "Host": "codec.example.com"})

    assert response.status_code == 200 and payloads_of(response.json()) == [plain()]


@pytest.mark.parametrize(
    ("listened", "named"),
    [("127.0.0.1", ("127.0.0.1",)), ("::1", ("[::1]",)), ("0.0.0.0", ()), ("::", ()), ("devbox.lan", ("devbox.lan",))],
)
def test_the_command_serves_without_a_token_the_host_it_listens_on_but_no_wildcard(
    listened: str, named: tuple[str, ...]
) -> None:
    assert _host_name(listened) == named


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_payloads": 0}, "max_payloads must be >= 1"),
        ({"allowed_hosts": ("*",)}, "without a port or wildcard"),
        ({"allowed_hosts": ("*.example.com",)}, "without a port or wildcard"),
        ({"allowed_hosts": ("example.com:8081",)}, "without a port or wildcard"),
        ({"allowed_hosts": ("",)}, "without a port or wildcard"),
        ({"token": "short"}, "at least 16 characters"),
        ({"ui_origins": ("*",)}, "UI origin '\\*' must be scheme://host"),
        ({"ui_origins": ("http://localhost:8233/path",)}, "must be scheme://host"),
        ({"namespaces": ()}, "at least one namespace"),
    ],
)
def test_codec_server_settings_refuse_unsafe_values(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        CodecServerSettings(**{"namespaces": ("default",), "token": TOKEN, **fields})  # type: ignore[arg-type]


# ---------------------------------------------------------------- `agentrt codec-server`

runner = CliRunner()


def test_the_command_without_keys_exits_2_saying_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTRT_CODEC_KEYS", raising=False)
    monkeypatch.setenv("AGENTRT_CODEC_TOKEN", TOKEN)

    result = runner.invoke(app, ["codec-server"])

    assert result.exit_code == 2
    assert "no codec keys are configured" in result.output


def test_the_command_without_a_token_exits_2_unless_auth_is_disabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AGENTRT_CODEC_KEYS", f"k1:{base64.b64encode(K1).decode()}")
    monkeypatch.delenv("AGENTRT_CODEC_TOKEN", raising=False)

    result = runner.invoke(app, ["codec-server"])

    assert result.exit_code == 2
    assert "set AGENTRT_CODEC_TOKEN" in result.output and "--insecure-no-auth" in result.output


def test_the_command_with_a_world_readable_keys_file_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTRT_CODEC_KEYS", raising=False)
    (tmp_path / "keys.toml").write_text(f'[keys]\nk1 = "{base64.b64encode(K1).decode()}"\n')
    (tmp_path / "keys.toml").chmod(0o644)
    (tmp_path / "agentrt.toml").write_text('[codec]\nkeys_file = "keys.toml"\n')

    result = runner.invoke(app, ["codec-server", "--config", str(tmp_path / "agentrt.toml")])

    assert result.exit_code == 2
    assert "readable or writable by every user" in result.output


@pytest.mark.parametrize(
    ("content", "mode", "message"),
    [
        (b'[keys]\nk1 = "\xff"\n', 0o600, "is not UTF-8 text (byte 13)"),
        (f'[keys]\nk1 = "{base64.b64encode(K1).decode()}"\n'.encode(), 0o660, "is writable by its group"),
    ],
    ids=["not-utf8", "group-writable"],
)
def test_the_command_with_a_bad_keys_file_exits_2_with_a_message_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, mode: int, message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("AGENTRT_CODEC_KEYS", raising=False)
    monkeypatch.setenv("AGENTRT_CODEC_TOKEN", TOKEN)
    (tmp_path / "keys.toml").write_bytes(content)
    (tmp_path / "keys.toml").chmod(mode)
    (tmp_path / "agentrt.toml").write_text('[codec]\nkeys_file = "keys.toml"\n')

    result = runner.invoke(app, ["codec-server", "--config", str(tmp_path / "agentrt.toml")])

    assert result.exit_code == 2 and result.exception is not None and isinstance(result.exception, SystemExit)
    assert result.output.startswith("error: codec keys file ") and message in result.output


def test_generate_key_prints_a_key_the_configuration_accepts(tmp_path: Path) -> None:
    result = runner.invoke(app, ["codec-server", "--generate-key", "--key-id", "k-2027"])

    assert result.exit_code == 0
    line = result.stdout.strip().splitlines()[0]
    (tmp_path / "agentrt.toml").write_text("")
    config = AgentrtConfig.load(tmp_path / "agentrt.toml", env={"AGENTRT_CODEC_KEYS": line})
    assert config.codec.current_key == "k-2027" and len(config.codec.keys["k-2027"]) == 32
