"""Encryption by default for the commands that run a worker on this machine (`agentrt dev`, `run`,
`demo`): the machine's own codec keys, made on first use, the `--no-encryption` opt-out, and the
codec server `agentrt dev` runs beside its UI."""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TextIO

import typer

from agentrt.schemas import ConfigurationError
from agentrt.store import agentrt_home
from agentrt.worker import AgentrtConfig, CodecConfig, ensure_home_keys, free_port, home_keys_file, port_is_open

# Where `agentrt codec-server` listens by default; `agentrt dev` takes another free port when it is taken.
DEV_CODEC_PORT = 8081
# How often `agentrt dev` starts its codec server before it gives up, and how long it waits for
# each to answer with its keys (seconds).
CODEC_SERVER_STARTS = 3
CODEC_SERVER_WAIT_SECONDS = 20.0


def no_encryption_option() -> Any:
    return typer.Option(
        False, "--no-encryption",
        help="Write history and the store in clear: neither make nor use $AGENTRT_HOME/codec-keys.toml "
        "(as \\[codec] encryption = false or AGENTRT_ENCRYPTION=off). Keys configured in \\[codec] stay on.",
    )


def without_encryption(config: AgentrtConfig) -> AgentrtConfig:
    """``config`` with default encryption off: the machine's own keys dropped. Configured keys
    (``[codec]``, ``AGENTRT_CODEC_KEYS``) are a usage error: an opt-out of the default does not
    turn off what an operator configured."""
    if config.codec.enabled and config.codec.keys_file != str(home_keys_file()):
        raise typer.BadParameter(
            "codec keys are configured ([codec] keys_file or AGENTRT_CODEC_KEYS): --no-encryption only turns off "
            f"the default keys of {home_keys_file()}; remove the [codec] keys to run in clear",
            param_hint="--no-encryption",
        )
    return dataclasses.replace(config, codec=CodecConfig(), encryption=False)


def with_home_keys(config: AgentrtConfig, notice: TextIO) -> AgentrtConfig:
    """``config`` encrypting with the machine's own keys when encryption is on and none are
    configured: ``$AGENTRT_HOME/codec-keys.toml``, made now (mode 600) when missing, which
    ``notice`` is told."""
    if not config.encryption or config.codec.enabled:
        return config
    codec, made = ensure_home_keys()
    if made:
        print(
            f"agentrt: made codec keys {codec.keys_file} (mode 600; keep it): this machine's sessions are encrypted "
            "in Temporal history and in the store, and every agentrt command with this AGENTRT_HOME reads them. "
            "--no-encryption or [codec] encryption = false turns this off (docs/encryption.md)",
            file=notice,
        )
    return dataclasses.replace(config, codec=codec)


@asynccontextmanager
async def local_codec_server(ui_port: int, codec: CodecConfig) -> AsyncIterator[str]:
    """`agentrt codec-server --insecure-no-auth` on loopback for the dev UI at ``ui_port`` (the
    dev UI has no sign-in, so it sends no token), reading the keys the way this process does
    (same environment and directory), on port 8081 or a free one when that is taken; yields its
    URL (its log: ``$AGENTRT_HOME/codec-server.log``). Stopped on exit.

    It is yielded once it answers with ``codec``'s keys (an ``/encode`` this process decodes): a
    server another `agentrt dev` started on 8081 at the same moment, with keys of its own under
    the same time-named id, is never taken for it. ``ConfigurationError`` when none starts."""
    candidates = [] if port_is_open("127.0.0.1", DEV_CODEC_PORT) else [DEV_CODEC_PORT]
    log_file = agentrt_home() / "codec-server.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    origins = [arg for host in ("localhost", "127.0.0.1") for arg in ("--ui-origin", f"http://{host}:{ui_port}")]
    process: subprocess.Popen[bytes] | None = None
    endpoint = ""
    try:
        for _ in range(CODEC_SERVER_STARTS):
            port = candidates.pop(0) if candidates else free_port()
            endpoint = f"http://127.0.0.1:{port}"
            with log_file.open("ab") as log:
                process = subprocess.Popen(
                    [sys.executable, "-m", "agentrt.cli", "codec-server", "--host", "127.0.0.1", "--port", str(port),
                     "--insecure-no-auth", *origins],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                )
            if await _serves_keys(process, endpoint, codec):
                break
            await _stop(process)
        else:
            raise ConfigurationError(f"the codec server for the UI did not start ({CODEC_SERVER_STARTS} tries; see {log_file})")
        yield endpoint
    finally:
        if process is not None:
            await _stop(process)


async def _serves_keys(process: subprocess.Popen[bytes], endpoint: str, codec: CodecConfig) -> bool:
    """Whether the server at ``endpoint`` is ``process`` serving ``codec``'s keys: it encodes a
    probe that ``codec`` decodes. False once ``process`` exited (its port was taken) or another
    server answers there, or after ``CODEC_SERVER_WAIT_SECONDS``."""
    import httpx
    from google.protobuf import json_format
    from temporalio.api.common.v1 import Payload

    aes = codec.codec()
    if aes is None:
        return False
    probe = Payload(metadata={"encoding": b"json/plain"}, data=b'"agentrt-dev-probe"')
    body = {"payloads": [json_format.MessageToDict(probe)]}
    deadline = asyncio.get_running_loop().time() + CODEC_SERVER_WAIT_SECONDS
    async with httpx.AsyncClient(timeout=5) as http:
        while asyncio.get_running_loop().time() < deadline:
            if process.poll() is not None:
                return False
            try:
                answer = await http.post(f"{endpoint}/encode", json=body, headers={"X-Namespace": "default"})
            except httpx.TransportError:
                await asyncio.sleep(0.1)
                continue
            try:
                encoded = [json_format.ParseDict(p, Payload()) for p in answer.json()["payloads"]]
                decoded = await aes.decode(encoded)
            except Exception:  # noqa: BLE001 - another server, or one with other keys: not ours
                return False
            return [p.data for p in decoded] == [probe.data] and process.poll() is None
    return False


async def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            await asyncio.to_thread(process.wait, 10)
        except subprocess.TimeoutExpired:
            process.kill()
