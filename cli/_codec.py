"""`agentrt codec-server`: the Temporal UI's remote codec endpoint, and new codec keys."""

from __future__ import annotations

import base64
import ipaddress
import os
from pathlib import Path
from typing import Optional

import typer
import uvicorn

from agentrt.gateway import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_PAYLOADS,
    DEFAULT_UI_ORIGINS,
    CodecServerSettings,
    codec_app,
    is_loopback,
)
from agentrt.schemas import AgentrtError, ConfigurationError
from agentrt.worker import AesGcmCodec, AgentrtConfig, generate_codec_key, new_codec_key_id

DEFAULT_PORT = 8081
DEFAULT_TOKEN_ENV = "AGENTRT_CODEC_TOKEN"


def _host_name(host: str) -> tuple[str, ...]:
    """The ``Host`` name callers use for the address ``host`` listened on (an IPv6 address in
    brackets); none for a wildcard address (0.0.0.0, ::), which is no name a caller sends."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return (host,)
    if address.is_unspecified:
        return ()
    return (f"[{address}]",) if address.version == 6 else (str(address),)


def _print_new_key(key_id: Optional[str]) -> None:
    key_id = key_id or new_codec_key_id()
    key = generate_codec_key()
    try:
        AesGcmCodec({key_id: key}, key_id)  # checks the id
    except ConfigurationError as err:
        raise typer.BadParameter(str(err), param_hint="--key-id") from None
    typer.echo(f"{key_id}:{base64.b64encode(key).decode()}")
    typer.echo(
        f"a new AES-256 key {key_id!r}: add it under [keys] of the keys file as {key_id} = \"<the base64 after the colon>\" "
        "(chmod 600), or append the line to AGENTRT_CODEC_KEYS (comma-separated). Give it to every worker, client "
        "and codec server before making it current.",
        err=True,
    )


def codec_server(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on."),
    port: int = typer.Option(DEFAULT_PORT, "--port", help="TCP port to listen on."),
    config_path: Optional[Path] = typer.Option(
        None, "--config", dir_okay=False, resolve_path=True,
        help="agentrt.toml to read \\[codec] and \\[temporal] namespace from.", show_default="found as every command finds it",
    ),
    ui_origins: Optional[list[str]] = typer.Option(
        None, "--ui-origin", help="Origin of a Temporal UI allowed to call (repeatable).",
        show_default=" ".join(DEFAULT_UI_ORIGINS),
    ),
    namespaces: Optional[list[str]] = typer.Option(
        None, "--namespace", help="Namespace served, as callers name it in X-Namespace (repeatable).",
        show_default="the configured namespace",
    ),
    token_env: str = typer.Option(
        DEFAULT_TOKEN_ENV, "--token-env", help="Environment variable holding the bearer token callers must send."
    ),
    insecure_no_auth: bool = typer.Option(
        False, "--insecure-no-auth", help="Serve without a token: anyone who reaches the port reads every payload (local development)."
    ),
    max_body_bytes: int = typer.Option(DEFAULT_MAX_BODY_BYTES, "--max-body-bytes", min=1024, help="Largest request body (bytes)."),
    max_payloads: int = typer.Option(DEFAULT_MAX_PAYLOADS, "--max-payloads", min=1, help="Most payloads in one request."),
    generate_key: bool = typer.Option(False, "--generate-key", help="Print a new key as ID:BASE64 (for the keys file or AGENTRT_CODEC_KEYS) and exit."),
    key_id: Optional[str] = typer.Option(None, "--key-id", help="Id of the key --generate-key makes.", show_default="key-YYYYMMDD-HHMMSS (UTC)"),
) -> None:
    """Serve the payload codec to the Temporal UI and CLI: POST /decode and /encode with the \\[codec] keys.

    Point the UI at it (Settings, Codec Server, or `temporal server start-dev --ui-codec-endpoint URL`)
    and the CLI with `--codec-endpoint URL --codec-auth "Bearer $AGENTRT_CODEC_TOKEN"`.
    With --insecure-no-auth only requests to localhost, 127.0.0.1, [::1] or the --host address are served.
    """
    if generate_key:
        _print_new_key(key_id)
        return
    try:
        config = AgentrtConfig.load(config_path)
        codec = config.codec.codec()
        if codec is None:
            raise ConfigurationError(
                "no codec keys are configured, so there is nothing to decode: set [codec] keys_file "
                "(or AGENTRT_CODEC_KEYS); `agentrt codec-server --generate-key` makes a key"
            )
        token = None if insecure_no_auth else os.environ.get(token_env, "").strip()
        if token == "":
            raise ConfigurationError(
                f"set {token_env} to the bearer token callers must send (e.g. `openssl rand -base64 32`), "
                "or pass --insecure-no-auth for local development"
            )
        settings = CodecServerSettings(
            namespaces=tuple(namespaces or [config.namespace]),
            ui_origins=tuple(ui_origins or DEFAULT_UI_ORIGINS),
            token=token,
            max_body_bytes=max_body_bytes,
            max_payloads=max_payloads,
            allowed_hosts=_host_name(host) if token is None else (),
        )
    except AgentrtError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    if token is None and not is_loopback(host):
        typer.echo(f"warning: serving without a token on {host}: whoever reaches port {port} can decrypt every payload", err=True)
    url = f"http://{host}:{port}"
    typer.echo(
        f"codec server at {url} · keys {', '.join(codec.key_ids)} (current {codec.current}) · namespaces "
        f"{', '.join(settings.namespaces)} · UI origins {', '.join(settings.ui_origins)} · "
        + ("no token (--insecure-no-auth)" if token is None else f"bearer token from ${token_env}"),
        err=True,
    )
    typer.echo(
        f"  temporal workflow show -w ID --codec-endpoint {url}"
        + ("" if token is None else f' --codec-auth "Bearer ${token_env}"'),
        err=True,
    )
    uvicorn.run(codec_app(codec, settings), host=host, port=port, log_level="info", server_header=False)
