"""The remote codec endpoint of the Temporal UI and CLI: encrypted payloads made readable to
whoever holds a token, without giving them the keys.

Temporal's remote codec protocol: ``POST <endpoint>/decode`` and ``POST <endpoint>/encode``
with a JSON body ``{"payloads": [...]}``, each payload in proto3 JSON form (``metadata``
values and ``data`` in base64), answered with the same shape and as many payloads. The UI
decodes what it shows and encodes what an operator sends (a signal's or an update's JSON);
the ``temporal`` CLI does the same with ``--codec-endpoint`` and ``--codec-auth``. Callers
name their namespace in ``X-Namespace``.

The browser calls the endpoint itself, from the UI's origin: CORS allows the configured UI
origins only, with credentials and the ``Authorization`` header. Every call but a CORS
preflight and ``GET /healthz`` needs ``Authorization: Bearer <token>`` unless the server
was built without a token on purpose (local development); then the ``Host`` header must name
loopback or an allowed host, so a web page whose name an attacker re-points at 127.0.0.1 (DNS
rebinding) reads nothing. Bodies and the payloads of one request are bounded, and the parsing
and the codec's work run in a worker thread, so one large request does not hold the event loop
(other requests, ``/healthz``) while it is decoded. A body that is not the protocol's JSON, or
a payload that does not decrypt, is a 400 with a reason.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request
from fastapi.middleware.cors import CORSMiddleware
from fastapi.middleware.trustedhost import TrustedHostMiddleware
from fastapi.responses import JSONResponse, Response
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from agentrt.schemas import ConfigurationError
from agentrt.worker import PayloadDecryptionError

__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_MAX_PAYLOADS",
    "DEFAULT_UI_ORIGINS",
    "LOOPBACK_HOSTS",
    "MIN_TOKEN_CHARS",
    "CodecServerSettings",
    "codec_app",
]

# A history payload is at most 2 MiB (the server's limit), 2.7 MiB in base64; a UI request
# carries the payloads of one event.
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
# Payloads per request: a UI request carries one event's payloads (a handful), the CLI one
# history page's; 2.5 million empty ones fit in the body limit and would cost seconds of CPU.
DEFAULT_MAX_PAYLOADS = 10_000
# Host names served without a token: loopback, which no attacker's DNS name can be.
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
# A Host header's name: a DNS name or IPv4 address, or an IPv6 address in brackets; no port, no wildcard.
_HOST = re.compile(r"\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})")
# The Temporal UI of `temporal server start-dev` (and `agentrt dev`).
DEFAULT_UI_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")
MIN_TOKEN_CHARS = 16
ALLOWED_HEADERS = ["Authorization", "Content-Type", "X-Namespace"]


@dataclass(frozen=True)
class CodecServerSettings:
    """What a codec server accepts.

    ``namespaces``: the namespaces it serves (a request whose ``X-Namespace`` names another is
    a 403; one without the header is served). ``ui_origins``: browser origins allowed by CORS
    (``scheme://host[:port]``). ``token``: the bearer token every call must carry, or None to
    serve without one (local development only). ``max_body_bytes``: the largest request body
    (bytes; larger is a 413). ``max_payloads``: the most payloads one request may carry (more is
    a 413). ``allowed_hosts``: without a token, the ``Host`` names served besides
    ``LOOPBACK_HOSTS`` (``agentrt codec-server`` adds the address it listens on); any other is a
    400, the defence against DNS rebinding. With a token every host is served: the token is the check.
    """

    namespaces: tuple[str, ...]
    ui_origins: tuple[str, ...] = DEFAULT_UI_ORIGINS
    token: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_payloads: int = DEFAULT_MAX_PAYLOADS
    allowed_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.namespaces or not all(isinstance(n, str) and n for n in self.namespaces):
            raise ConfigurationError("codec server: at least one namespace is needed")
        for origin in self.ui_origins:
            check_origin(origin)
        if self.token is not None and len(self.token) < MIN_TOKEN_CHARS:
            raise ConfigurationError(f"codec server: the token must be at least {MIN_TOKEN_CHARS} characters")
        if self.max_body_bytes < 1:
            raise ConfigurationError(f"codec server: max_body_bytes must be >= 1, not {self.max_body_bytes}")
        if self.max_payloads < 1:
            raise ConfigurationError(f"codec server: max_payloads must be >= 1, not {self.max_payloads}")
        for host in self.allowed_hosts:
            if not isinstance(host, str) or not _HOST.fullmatch(host):
                raise ConfigurationError(
                    f"codec server: allowed host {host!r} must be a host name or address without a port or wildcard "
                    "(an IPv6 address in brackets)"
                )

    @property
    def served_hosts(self) -> tuple[str, ...] | None:
        """The ``Host`` names served (lower case), or None for any (a token is required)."""
        if self.token is not None:
            return None
        return tuple(dict.fromkeys(h.lower() for h in LOOPBACK_HOSTS + self.allowed_hosts))


def check_origin(origin: str) -> str:
    """``origin`` if it is ``http(s)://host[:port]`` with nothing after; ``ConfigurationError`` otherwise
    (``*`` too: credentials are allowed, so origins are named)."""
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path or parts.query or parts.fragment:
        raise ConfigurationError(f"codec server: UI origin {origin!r} must be scheme://host[:port], e.g. http://localhost:8233")
    return origin


class _Refused(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.message = message
        self.headers = headers or {}
        super().__init__(message)


def codec_app(codec: PayloadCodec, settings: CodecServerSettings) -> FastAPI:
    """The codec server as an ASGI app (serve it with uvicorn): ``POST /encode``, ``POST /decode``
    through ``codec``, ``GET /healthz``.

    Answers: 200 ``{"payloads": [...]}``; 400 for a body that is not ``{"payloads": [...]}`` of
    proto3 JSON payloads, a payload that does not decrypt (``PayloadDecryptionError``, named in
    ``error``) or, without a token, a ``Host`` not served (``settings.served_hosts``, plain
    text); 401 without the token; 403 for another namespace; 413 for a body over
    ``settings.max_body_bytes`` or more than ``settings.max_payloads`` payloads. Errors are
    ``{"error": "..."}``. ``codec`` runs in a worker thread, on an event loop of its own.
    """
    app = FastAPI(title="agentrt codec server", docs_url=None, redoc_url=None, openapi_url=None)

    async def apply(request: Request, decode: bool) -> Response:
        try:
            _authorize(request, settings.token)
            _check_namespace(request, settings.namespaces)
            body = await _body(request, settings.max_body_bytes)
            answer = await asyncio.to_thread(_apply, codec, body, decode, settings.max_payloads)
        except _Refused as refused:
            return JSONResponse({"error": refused.message}, status_code=refused.status, headers=refused.headers)
        return Response(answer, media_type="application/json")

    @app.post("/decode")
    async def decode(request: Request) -> Response:
        return await apply(request, decode=True)

    @app.post("/encode")
    async def encode(request: Request) -> Response:
        return await apply(request, decode=False)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    if settings.served_hosts is not None:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(settings.served_hosts), www_redirect=False)
    # Outermost, so a preflight is answered before authorization and a refusal still carries
    # the CORS headers the browser needs to show it.
    app.add_middleware(
        CORSMiddleware,
        allow_origins=list(settings.ui_origins),
        allow_credentials=True,
        allow_methods=["POST"],
        allow_headers=ALLOWED_HEADERS,
        max_age=600,
    )
    return app


def _authorize(request: Request, token: str | None) -> None:
    if token is None:
        return
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), token.encode()):
        raise _Refused(401, "a valid 'Authorization: Bearer <token>' header is required", {"WWW-Authenticate": "Bearer"})


def _check_namespace(request: Request, namespaces: Sequence[str]) -> None:
    namespace = request.headers.get("x-namespace")
    if namespace is not None and namespace not in namespaces:
        raise _Refused(403, f"this codec server serves namespace(s) {', '.join(namespaces)}, not {namespace!r}")


async def _body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise _Refused(400, "malformed Content-Length")
        if int(declared) > limit:
            raise _Refused(413, f"request body over {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _Refused(413, f"request body over {limit} bytes")
    return bytes(body)


def _apply(codec: PayloadCodec, body: bytes, decode: bool, max_payloads: int) -> bytes:
    """The answer's JSON body: ``body`` parsed, decoded or encoded, serialized. Runs in a worker
    thread; ``_Refused`` for a body or a payload refused."""
    payloads = _parse(body, max_payloads)
    try:
        result = asyncio.run(codec.decode(payloads) if decode else codec.encode(payloads))
    except PayloadDecryptionError as err:
        raise _Refused(400, str(err)) from err
    return json.dumps({"payloads": [json_format.MessageToDict(p) for p in result]}, separators=(",", ":")).encode()


def _parse(body: bytes, max_payloads: int) -> list[Payload]:
    """``{"payloads": [...]}`` in proto3 JSON -> payloads; ``_Refused(400)`` for anything else,
    ``_Refused(413)`` for more than ``max_payloads``."""
    try:
        document: Any = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _Refused(400, 'the body must be JSON: {"payloads": [...]}') from None
    listed = document.get("payloads", []) if isinstance(document, dict) else None
    if not isinstance(document, dict) or set(document) - {"payloads"} or not isinstance(listed, list):
        raise _Refused(400, 'the body must be {"payloads": [...]}')
    if len(listed) > max_payloads:
        raise _Refused(413, f"{len(listed)} payloads in one request; at most {max_payloads}")
    payloads = []
    for number, item in enumerate(listed, start=1):
        try:
            payloads.append(json_format.ParseDict(item, Payload()))
        except (json_format.ParseError, ValueError, TypeError, AttributeError, RecursionError) as err:
            raise _Refused(400, f"payload {number} is not a payload in proto3 JSON: {_first_line(err)}") from None
    return payloads


def _first_line(err: Exception) -> str:
    return str(err).splitlines()[0][:200] if str(err) else type(err).__name__
