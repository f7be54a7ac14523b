"""One POST of a notification to a target that may be slow, down or hostile, and when to try again.

A target is whatever answers at a configured URL: it may never answer, trickle its answer a byte
at a time, send gigabytes, or redirect elsewhere. So no redirect is followed (a 3xx is a failed
attempt), the answer's body is read only for a short error text and only when the status is not
2xx (at most ``MAX_RESPONSE_BYTES``, undecoded, so nothing is decompressed), and each attempt as a
whole (connect, send, headers, that read) is bounded by one timeout, not only each socket read.
Whatever the target sends back is kept only as printable text: its control characters (terminal
escapes, CR/LF that would forge log lines) are escaped before an error reaches the store or a log.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import httpx

__all__ = ["MAX_RESPONSE_BYTES", "Attempt", "http_client", "post_once", "printable", "retry_at"]

# Bytes of a failed answer's body kept as its error text.
MAX_RESPONSE_BYTES = 1_024
USER_AGENT = "agentrt-webhooks"
# Seconds a Retry-After header may ask for at most (beyond it, the backoff's cap holds).
MAX_RETRY_AFTER_SECONDS = 3_600.0
# Retry-After's delta-seconds form (RFC 9110 section 10.2.3): ASCII digits only, at most 10 of them.
_DELTA_SECONDS = re.compile(r"[0-9]{1,10}")


@dataclass(frozen=True)
class Attempt:
    """How one POST ended: ``delivered`` (a 2xx answer), the answer's ``status_code`` (None when
    there was none), ``error`` (why it was not delivered, printable: see ``printable``) and
    ``retry_after`` (seconds the target asked to wait with Retry-After, when it did)."""

    delivered: bool
    status_code: int | None = None
    error: str | None = None
    retry_after: float | None = None


def http_client(timeout_seconds: float) -> httpx.AsyncClient:
    """The client every attempt goes through: redirects not followed, ``timeout_seconds`` on each
    connect, read, write and pool wait, bodies asked for unencoded."""
    return httpx.AsyncClient(
        follow_redirects=False,
        timeout=httpx.Timeout(timeout_seconds),
        headers={"User-Agent": USER_AGENT, "Accept-Encoding": "identity"},
        limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
    )


async def post_once(
    http: httpx.AsyncClient, url: str, headers: dict[str, str], body: bytes, timeout_seconds: float
) -> Attempt:
    """POST ``body`` to ``url`` once, the whole exchange bounded by ``timeout_seconds``. Never
    raises for what the target does (no answer, a refused connection, a broken stream, any
    status): that is the ``Attempt``'s ``error``."""
    try:
        async with asyncio.timeout(timeout_seconds):
            async with http.stream("POST", url, content=body, headers=headers) as response:
                status = response.status_code
                if 200 <= status < 300:
                    return Attempt(delivered=True, status_code=status)
                head = await _read_at_most(response, MAX_RESPONSE_BYTES)
    except TimeoutError:
        return Attempt(delivered=False, error=f"no answer within {timeout_seconds:g} s")
    except (httpx.HTTPError, httpx.InvalidURL) as err:
        return Attempt(delivered=False, error=printable(f"{type(err).__name__}: {err or 'no detail'}"))
    if 300 <= status < 400:
        where = response.headers.get("location", "")[:200]
        error = f"HTTP {status}: a redirect (to {where!r}) is not followed"
    else:
        text = head.decode("utf-8", "replace").strip()
        error = f"HTTP {status}" + (f": {text}" if text else "")
    return Attempt(delivered=False, status_code=status, error=printable(error), retry_after=_retry_after(response))


def printable(text: str) -> str:
    """``text`` with every character that is not printable (``str.isprintable``: C0/C1 controls
    such as ESC, CR and LF, DEL, format characters such as bidi overrides, line and paragraph
    separators, non-space blanks) written as its Python escape (``\\x1b``, ``\\r``, ``\\u202e``),
    so text a target chose can be stored, logged and shown without acting on a terminal or a log."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


async def _read_at_most(response: httpx.Response, limit: int) -> bytes:
    """Up to ``limit`` bytes of the raw body; the rest is never read (the connection is closed)."""
    kept = bytearray()
    async for chunk in response.aiter_raw():
        kept += chunk[: limit - len(kept)]
        if len(kept) >= limit:
            break
    return bytes(kept)


def _retry_after(response: httpx.Response) -> float | None:
    """Retry-After as seconds (the delta-seconds form only: ASCII digits), at most
    ``MAX_RETRY_AFTER_SECONDS``; None when absent or anything else (an HTTP date, '²', '①', '٥')."""
    value = response.headers.get("retry-after", "").strip()
    if not _DELTA_SECONDS.fullmatch(value):
        return None
    return min(float(value), MAX_RETRY_AFTER_SECONDS)


def retry_at(attempts: int, base_seconds: float, max_seconds: float, retry_after: float | None = None) -> datetime:
    """When to try again after ``attempts`` failed attempts: ``base_seconds`` doubled per attempt
    after the first, at most ``max_seconds``, and no sooner than a ``retry_after`` the target gave."""
    delay = min(base_seconds * 2 ** min(max(attempts - 1, 0), 62), max_seconds)
    if retry_after is not None:
        delay = max(delay, min(retry_after, max_seconds))
    return datetime.now(timezone.utc) + timedelta(seconds=delay)
