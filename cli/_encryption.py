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

from agentrt.store import agentrt_home
from agentrt.worker import AgentrtConfig, CodecConfig, ensure_home_keys, free_port, home_keys_file, port_is_open

# Where `agentrt codec-server` listens by default; `agentrt dev` takes another free port when it is taken.
DEV_CODEC_PORT = 8081


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
async def local_codec_server(ui_port: int) -> AsyncIterator[str]:
    """`agentrt codec-server --insecure-no-auth` on loopback for the dev UI at ``ui_port`` (the
    dev UI has no sign-in, so it sends no token), reading the keys the way this process does
    (same environment and directory), on port 8081 or a free one when that is taken; yields its
    URL (its log: ``$AGENTRT_HOME/codec-server.log``). Stopped on exit."""
    port = DEV_CODEC_PORT if not port_is_open("127.0.0.1", DEV_CODEC_PORT) else free_port()
    log_file = agentrt_home() / "codec-server.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    origins = [arg for host in ("localhost", "127.0.0.1") for arg in ("--ui-origin", f"http://{host}:{ui_port}")]
    with log_file.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "agentrt.cli", "codec-server", "--host", "127.0.0.1", "--port", str(port),
             "--insecure-no-auth", *origins],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
        )
    try:
        # Not waited for: the UI asks it only when someone browses, and this process checked the keys already.
        yield f"http://127.0.0.1:{port}"
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                await asyncio.to_thread(process.wait, 10)
            except subprocess.TimeoutExpired:
                process.kill()
