"""How a webhook proves it comes from agentrt: an HMAC-SHA256 of the timestamp and the body under
the target's secret, in headers beside the body, and ``verify_webhook``, the check a receiver runs.

Wire format (one POST per notification and attempt)::

    Agentrt-Webhook-Id: wh_3f2a…             the notification's id, the same on every redelivery
    Agentrt-Webhook-Timestamp: 1767225600     unix seconds when this attempt was signed
    Agentrt-Signature: v1=<hex>[, v1=<hex>]   HMAC-SHA256(secret, f"{timestamp}.{body}"), hex;
                                              one entry per secret while a secret is rotated
    {"id": "wh_3f2a…", "type": "turn.ended", "created_at": "2026-…Z", "data": {…}}

The timestamp is signed with the body, so a captured request cannot be replayed after
``tolerance_seconds``; the id lets a receiver drop a redelivery it already handled. The scheme is
that of Stripe's and the Standard Webhooks signatures (a versioned ``v1=`` entry, several allowed).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from agentrt.schemas import ConfigurationError, WebhookSignatureInvalid

__all__ = [
    "ID_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "sign_webhook",
    "signed_headers",
    "verify_webhook",
]

ID_HEADER = "Agentrt-Webhook-Id"
TIMESTAMP_HEADER = "Agentrt-Webhook-Timestamp"
SIGNATURE_HEADER = "Agentrt-Signature"
DEFAULT_TOLERANCE_SECONDS = 300
# Bounds on what a receiver parses before it knows the request is genuine.
MAX_SIGNATURE_HEADER_CHARS = 4_096
MAX_SIGNATURES = 16
MAX_ID_CHARS = 128
_TIMESTAMP = re.compile(r"^[0-9]{1,12}$")
_HEX_SIGNATURE = re.compile(r"^[0-9a-f]{64}$")
_ENTRY_SEPARATORS = re.compile(r"[,\s]+")
BODY_KEYS = ("id", "type", "created_at", "data")


def sign_webhook(secret: str, timestamp: int, body: bytes) -> str:
    """Hex HMAC-SHA256 under ``secret`` (UTF-8) of ``f"{timestamp}.".encode() + body``."""
    return hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()


def signed_headers(
    secrets: str | Sequence[str], webhook_id: str, body: bytes, timestamp: int | None = None
) -> dict[str, str]:
    """The headers of one attempt: id, ``timestamp`` (unix seconds, default now) and a ``v1=``
    signature per secret (several while a secret is rotated), with the JSON content type."""
    secrets = [secrets] if isinstance(secrets, str) else list(secrets)
    if not secrets or not all(secrets):
        raise ConfigurationError("a webhook is signed with at least one non-empty secret")
    timestamp = int(time.time()) if timestamp is None else timestamp
    signatures = ", ".join(f"v1={sign_webhook(s, timestamp, body)}" for s in secrets)
    return {
        "Content-Type": "application/json",
        ID_HEADER: webhook_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signatures,
    }


def verify_webhook(
    secret: str | Sequence[str],
    body: bytes | str,
    headers: Mapping[str, str],
    *,
    tolerance_seconds: float = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> dict[str, Any]:
    """Check that a webhook request comes from agentrt and return its body as a dict
    (``{"id", "type", "created_at", "data"}``).

    - ``secret``: the target's secret, or several (the old and the new one while rotating): a
      request signed with any of them passes.
    - ``body``: the request body exactly as received (bytes; a str is taken as its UTF-8 bytes).
    - ``headers``: the request headers (names in any case).
    - ``tolerance_seconds``: how far the signed timestamp may lie from ``now`` (unix seconds,
      default the clock), either way.

    Raises ``WebhookSignatureInvalid`` with ``reason``: ``missing_header`` (no id, timestamp or
    signature header), ``malformed_header`` (a timestamp that is not unix seconds, a signature
    header with no ``v1=`` entry of 64 hex digits, too many entries, an id too long),
    ``stale_timestamp`` / ``future_timestamp`` (outside the tolerance), ``signature_mismatch`` (no
    entry matches: a tampered body or timestamp, or another secret) and ``malformed_body`` (signed,
    but not a notification, or its id is not the id header's). Signatures are compared in constant
    time. Raises ``ConfigurationError`` for no secret or an empty one (anyone can sign with an
    empty key), for a ``tolerance_seconds`` that is not a finite number >= 0 and a ``now`` that is
    not finite (NaN compares false with every timestamp and infinity lies beyond none, so either
    would let a request signed at any time through).
    """
    secrets = [secret] if isinstance(secret, str) else list(secret)
    if not secrets or not all(isinstance(s, str) and s for s in secrets):
        raise ConfigurationError("verify_webhook needs the target's secret (a non-empty string, or several)")
    if not _finite(tolerance_seconds) or tolerance_seconds < 0:
        raise ConfigurationError(f"tolerance_seconds is a finite number of seconds >= 0, not {tolerance_seconds!r}")
    if now is not None and not _finite(now):
        raise ConfigurationError(f"now is finite unix seconds, not {now!r}")
    raw = body.encode() if isinstance(body, str) else bytes(body)
    lowered = {k.lower(): v for k, v in headers.items()}
    webhook_id = _header(lowered, ID_HEADER)
    stamp = _header(lowered, TIMESTAMP_HEADER)
    signature = _header(lowered, SIGNATURE_HEADER)
    if len(webhook_id) > MAX_ID_CHARS:
        raise _malformed(f"{ID_HEADER} has {len(webhook_id)} characters (at most {MAX_ID_CHARS})")
    if not _TIMESTAMP.match(stamp.strip()):
        raise WebhookSignatureInvalid("malformed_header", f"{TIMESTAMP_HEADER} is not unix seconds: {stamp[:40]!r}")
    timestamp = int(stamp.strip())
    offered = _v1_signatures(signature)
    now = time.time() if now is None else now
    if timestamp < now - tolerance_seconds:
        raise WebhookSignatureInvalid(
            "stale_timestamp", f"signed {now - timestamp:.0f} s ago, more than the {tolerance_seconds:g} s tolerated"
        )
    if timestamp > now + tolerance_seconds:
        raise WebhookSignatureInvalid(
            "future_timestamp",
            f"signed {timestamp - now:.0f} s ahead of now, more than the {tolerance_seconds:g} s tolerated",
        )
    expected = [sign_webhook(s, timestamp, raw) for s in secrets]
    # Every pair is compared, with no early exit, so the time taken says nothing about which matched.
    matched = False
    for candidate in offered:
        for wanted in expected:
            matched |= hmac.compare_digest(candidate, wanted)
    if not matched:
        raise WebhookSignatureInvalid("signature_mismatch", "no v1 signature matches the body, timestamp and secret")
    return _notification(raw, webhook_id)


def _finite(value: object) -> bool:
    """True for an int or float (not a bool) that is neither NaN nor infinite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _malformed(detail: str) -> WebhookSignatureInvalid:
    return WebhookSignatureInvalid("malformed_header", detail)


def _header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name.lower())
    if value is None or not value.strip():
        raise WebhookSignatureInvalid("missing_header", f"the request has no {name} header")
    return value


def _v1_signatures(header: str) -> list[str]:
    """The ``v1=`` entries' hex digests (entries of other versions are skipped)."""
    if len(header) > MAX_SIGNATURE_HEADER_CHARS:
        raise _malformed(f"{SIGNATURE_HEADER} has {len(header)} characters (at most {MAX_SIGNATURE_HEADER_CHARS})")
    entries = [e for e in _ENTRY_SEPARATORS.split(header.strip()) if e]
    if len(entries) > MAX_SIGNATURES:
        raise _malformed(f"{SIGNATURE_HEADER} has {len(entries)} entries (at most {MAX_SIGNATURES})")
    found = []
    for entry in entries:
        version, sep, value = entry.partition("=")
        if not sep:
            raise _malformed(f"{SIGNATURE_HEADER} entry {entry[:40]!r} is not version=signature")
        if version == "v1":
            if not _HEX_SIGNATURE.fullmatch(value):
                raise WebhookSignatureInvalid("malformed_header", "a v1 signature is 64 lowercase hex digits")
            found.append(value)
    if not found:
        raise WebhookSignatureInvalid("malformed_header", f"{SIGNATURE_HEADER} has no v1= entry")
    return found


def _notification(raw: bytes, webhook_id: str) -> dict[str, Any]:
    try:
        parsed = json.loads(raw)
    except ValueError as err:
        raise WebhookSignatureInvalid("malformed_body", f"the body is not JSON: {err}") from err
    if not isinstance(parsed, dict) or any(k not in parsed for k in BODY_KEYS):
        raise WebhookSignatureInvalid(
            "malformed_body", f"the body is not a notification object with {', '.join(BODY_KEYS)}"
        )
    if parsed["id"] != webhook_id:
        raise WebhookSignatureInvalid("malformed_body", f"the body's id is not the {ID_HEADER} header's")
    return parsed
