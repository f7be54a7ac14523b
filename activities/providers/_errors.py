"""Provider errors at the Temporal boundary: Retry-After parsing and the ApplicationError they become."""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
import urllib.parse
from collections.abc import Iterable, Mapping
from datetime import timedelta

from temporalio.exceptions import ApplicationError

from agentrt.schemas import ProviderError, ProviderHTTPError, ProviderProtocolError, ProviderTransportError, shorten

# The longest message an ApplicationError from a provider carries (characters): the cause must
# be what a user sees, and the server replaces a failure over its size limit with "Failure
# exceeds size limit." (the provider's full body stays in ``details``, itself bounded).
MAX_MESSAGE_CHARS = 1_000
# What stands where a secret was.
REDACTED = "[redacted]"
# Credentials in a URL: ``scheme://user:password@host`` (up to the last ``@`` before the path: a
# password may hold one) and query parameters named like secrets (``x-api-key``, ``client_secret``
# too), after ``?``, ``&`` or ``;``, or after ``&`` as JSON (``\u0026``) or a URL (``%26``) escapes it.
_URL_USERINFO = re.compile(r"(://)[^/\s\"']+@")
_SECRET_QUERY = re.compile(
    r"((?:[?&;]|\\u0026|%26)(?:[a-z0-9]+[-_])*(?:api[-_]?key|key|token|secret|password|sig|signature)=)[^&#\s\"']+",
    re.IGNORECASE,
)
# Shorter values are not searched for (they would match ordinary text).
MIN_SECRET_CHARS = 8

# The longest response body kept in an ApplicationError's details (characters).
MAX_DETAIL_BODY_CHARS = 1_000


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait before retrying, from response headers; None when none is given.

    ``retry-after-ms`` (milliseconds; sent by OpenAI and Anthropic) wins over
    ``Retry-After``, which is either delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
    Negative, non-finite or unparsable values are ignored; a date in the past gives 0.
    """
    ms = _number(headers.get("retry-after-ms"))
    if ms is not None:
        return ms / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    if not math.isfinite(number) or number < 0:
        return None
    return number


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with each of ``secrets`` (at least ``MIN_SECRET_CHARS`` long) and the credentials
    of any URL in it (``user:password@``, ``?api-key=...``, ``&token=...``) replaced by
    ``REDACTED``: a provider may echo the key it was sent in its error body, and a base URL may
    carry credentials; neither may reach workflow history or the events table."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET_CHARS:
            for form in _forms(secret):
                text = _without_cut_secret(text.replace(form, REDACTED), form)
    text = _URL_USERINFO.sub(r"\1" + REDACTED + "@", text)
    return _SECRET_QUERY.sub(r"\1" + REDACTED, text)


def _forms(secret: str) -> dict[str, None]:
    """``secret`` as it may be echoed: as is, URL-encoded, and JSON-escaped (also with ``/`` as
    ``\\/`` and ``<``, ``>``, ``&`` as ``\\u003c``, ``\\u003e``, ``\\u0026``, as some encoders write them)."""
    escaped = json.dumps(secret)[1:-1]
    html = escaped.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    forms = (
        secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret),
        escaped, json.dumps(secret, ensure_ascii=False)[1:-1], escaped.replace("/", "\\/"), html, html.replace("/", "\\/"),
    )
    return dict.fromkeys(forms)


def _without_cut_secret(text: str, secret: str) -> str:
    """``text`` with the start of ``secret`` (``MIN_SECRET_CHARS`` or more) redacted where it ends
    ``text``, maybe followed by ``…``: an error cut its body or line (``ProviderHTTPError``,
    ``ProviderProtocolError``) before any redaction, possibly through the secret."""
    head = text[:-1] if text.endswith("…") else text
    for n in range(len(secret) - 1, MIN_SECRET_CHARS - 1, -1):
        if head.endswith(secret[:n]):
            return head[:-n] + REDACTED + text[len(head):]
    return text


def application_error_from(
    exc: ProviderError, *, max_retry_delay: float | None = None, secrets: Iterable[str | None] = ()
) -> ApplicationError:
    """Translate a provider error into the ``ApplicationError`` an activity raises.

    - ``type``: the error's class name (``"ProviderHTTPError"``, ``"ProviderTransportError"``,
      ``"ProviderProtocolError"``, ``"EmptyResponseError"``, ``"ScriptExhaustedError"``).
    - ``message``: ``str(exc)``, at most ``MAX_MESSAGE_CHARS`` characters.
    - ``details``: ``[{"status": int | None, "url": str | None, "body": str | None}]``, plus
      ``"reason"`` for transport and protocol errors and ``"provider"``, ``"model"`` and
      ``"line"`` (the offending event data) for protocol errors; ``body`` at most
      ``MAX_DETAIL_BODY_CHARS`` characters.
    - ``non_retryable``: True for statuses other than 408, 409, 429, 529 and 5xx
      (``schemas.status_is_retryable``); transport errors are always retryable.
    - ``next_retry_delay``: the Retry-After delay when the provider gave one, so Temporal's
      retry policy (the only retry loop) waits as long as the provider asked, at most
      ``max_retry_delay`` seconds when given (for calls the session can do without).

    Every string in it goes through ``redact`` with ``secrets`` (the API key).
    """
    if isinstance(exc, ProviderHTTPError):
        detail: dict[str, object] = {"status": exc.status, "url": exc.url, "body": exc.body}
        retryable = exc.retryable
        retry_after = exc.retry_after
    elif isinstance(exc, ProviderTransportError):
        detail = {"status": None, "url": exc.url, "body": None, "reason": exc.reason}
        retryable = True
        retry_after = None
    elif isinstance(exc, ProviderProtocolError):
        detail = {
            "status": None, "url": exc.url, "body": None, "reason": exc.reason,
            "provider": exc.provider, "model": exc.model, "line": exc.line,
        }
        retryable = False
        retry_after = None
    else:
        detail = {"status": None, "url": None, "body": None}
        retryable = bool(getattr(exc, "retryable", True))
        retry_after = None
    if retry_after is not None and max_retry_delay is not None:
        retry_after = min(retry_after, max_retry_delay)
    secrets = list(secrets)
    # Redacted before cut: a cut must not leave half a secret behind.
    detail = {k: redact(v, secrets) if isinstance(v, str) else v for k, v in detail.items()}
    if isinstance(detail["body"], str):
        detail["body"] = shorten(detail["body"], MAX_DETAIL_BODY_CHARS)
    return ApplicationError(
        bounded_message(str(exc), secrets),
        detail,
        type=type(exc).__name__,
        non_retryable=not retryable,
        next_retry_delay=timedelta(seconds=retry_after) if retry_after is not None else None,
    )


def bounded_message(text: str, secrets: Iterable[str | None] = ()) -> str:
    """``text`` as a failure message may carry it to Temporal: redacted (``redact``), then cut to
    ``MAX_MESSAGE_CHARS``."""
    return shorten(redact(text, secrets), MAX_MESSAGE_CHARS)
