"""At-rest encryption of the store's content: what a cipher given to ``Store.open`` does, and how
a sealed value sits in a text column.

A store opened with a cipher seals what it writes to the columns that hold what a session said
and did: the transcript (``messages.content_json``), the events (``events.body_json``), token
deltas (``token_deltas.text``), reasoning blocks (``reasoning.blocks_json``), compaction
summaries (``context_summaries.text``), recorded tool results (``effects.result_text``), and what
autonomous tasks and task graphs were asked and did (``tasks.goal``, ``task_events.body_json``,
``task_checkpoints.body_json``, ``graphs.goal``, ``graph_events.body_json``).
Every read opens them again, so callers see clear text. A sealed value is one line of ASCII:

    agentrt-sealed:<key id>:<base64 of what the cipher sealed>

The key id picks the key on read, so keys rotate without rewriting rows; rows written without a
cipher (before encryption was turned on) hold their clear text and read as they are. A clear value
that itself starts with the prefix (a model's or a tool's text can) is written as
``agentrt-clear:<value>`` and read back without that marker, so no text read in clear is ever
taken for a sealed one. Each value is bound to its place (the table and the session, or the
effect's key) as associated data: a sealed row copied into another session fails to open instead
of showing there.

The store itself holds no keys and imports no cryptography: the cipher is injected
(``StoreCipher``), built by the worker from the ``[codec]`` keys (``agentrt.worker.open_store``).
"""

from __future__ import annotations

import base64
import binascii
from typing import Protocol, runtime_checkable

from agentrt.schemas import ConfigurationError

__all__ = ["CLEAR_PREFIX", "SEALED_PREFIX", "StoreCipher", "is_sealed", "open_text", "seal_text"]

SEALED_PREFIX = "agentrt-sealed:"
# Marks a value stored in clear that starts with one of the two prefixes.
CLEAR_PREFIX = "agentrt-clear:"


@runtime_checkable
class StoreCipher(Protocol):
    """What the store asks of a cipher. ``seal(plain, context)`` returns ``(key id, sealed bytes)``
    with ``context`` authenticated, not stored; ``open(key_id, sealed, context)`` returns the plain
    bytes, or raises (an unknown key id, a value altered or moved to another context: the cipher's
    own typed error, never the bytes as they are). Key ids are 1-64 of ``A-Z a-z 0-9 . _ -``."""

    def seal(self, plain: bytes, context: bytes) -> tuple[str, bytes]: ...

    def open(self, key_id: str, sealed: bytes, context: bytes) -> bytes: ...


def is_sealed(value: str) -> bool:
    """Whether a stored column value is sealed (starts with ``SEALED_PREFIX``)."""
    return value.startswith(SEALED_PREFIX)


def seal_text(cipher: StoreCipher | None, text: str, context: str) -> str:
    """``text`` as stored: sealed by ``cipher`` for ``context``, or as it is without a cipher (after
    ``CLEAR_PREFIX`` when it starts with ``SEALED_PREFIX`` or ``CLEAR_PREFIX``)."""
    if cipher is None:
        return CLEAR_PREFIX + text if text.startswith((SEALED_PREFIX, CLEAR_PREFIX)) else text
    key_id, sealed = cipher.seal(text.encode("utf-8"), context.encode("utf-8"))
    return f"{SEALED_PREFIX}{key_id}:{base64.b64encode(sealed).decode('ascii')}"


def open_text(cipher: StoreCipher | None, value: str, context: str) -> str:
    """A stored column value as clear text: opened by ``cipher`` when sealed, as it is otherwise.

    Raises ``ConfigurationError`` for a sealed value read without a cipher (naming the key id,
    never the value) or one that is not well formed; the cipher's own error when it cannot
    open it."""
    if value.startswith(CLEAR_PREFIX):
        return value[len(CLEAR_PREFIX):]
    if not value.startswith(SEALED_PREFIX):
        return value
    key_id, sep, encoded = value[len(SEALED_PREFIX):].partition(":")
    if not sep or not key_id:
        raise ConfigurationError(f"a sealed value in the store ({context.split('/')[0]}) names no key id")
    if cipher is None:
        raise ConfigurationError(
            f"the store holds content encrypted with codec key {key_id!r} and this process has no codec keys: "
            "give it the keys ([codec] keys_file, AGENTRT_CODEC_KEYS, or $AGENTRT_HOME/codec-keys.toml) and open "
            "the store with them (agentrt.worker.open_store)"
        )
    try:
        sealed = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigurationError(f"a sealed value in the store ({context.split('/')[0]}) is not base64") from None
    return cipher.open(key_id, sealed, context.encode("utf-8")).decode("utf-8")
