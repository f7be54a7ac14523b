"""The store's content encrypted at rest with the ``[codec]`` keys, and the keys a machine makes
for itself: ``$AGENTRT_HOME/codec-keys.toml``.

``AesGcmStoreCipher`` is the ``agentrt.store.StoreCipher`` of a set of codec keys: AES-256-GCM, a
random 12-byte nonce per value, the value's place in the store (table and session) as associated
data, the key id stored beside the ciphertext so that keys rotate as the payload codec's do (the
current key seals, every key opens). ``open_store(config)`` opens the store with it when keys are
configured; ``encrypt_store`` gives it to a store opened without one, which the worker and the
client plugin do, so that a process holding keys never writes a session's content in clear.

``HOME_KEYS_FILE`` is the keys file ``agentrt dev``, ``agentrt run`` and ``agentrt demo`` create
on first use when no keys are configured (``ensure_home_keys``); every process that reads
``$AGENTRT_HOME`` (``AgentrtConfig.load``) picks it up under the same condition, unless
``[codec] encryption = false`` or ``AGENTRT_ENCRYPTION=off`` turns default encryption off.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from agentrt.schemas import ConfigurationError
from agentrt.store import Store, agentrt_home
from agentrt.worker._codec import (
    NONCE_BYTES,
    TAG_BYTES,
    AesGcmCodec,
    CodecConfig,
    PayloadDecryptionError,
    generate_codec_key,
    load_keys_file,
    new_codec_key_id,
)

__all__ = [
    "ENCRYPTION_ENV",
    "HOME_KEYS_FILE",
    "AesGcmStoreCipher",
    "encryption_setting",
    "encrypt_store",
    "ensure_home_keys",
    "home_codec",
    "home_keys_file",
    "open_store",
    "store_cipher",
]

HOME_KEYS_FILE = "codec-keys.toml"
ENCRYPTION_ENV = "AGENTRT_ENCRYPTION"
_OFF = {"off", "false", "0", "no"}
_ON = {"on", "true", "1", "yes"}


class AesGcmStoreCipher:
    """AES-256-GCM sealing of store values (``agentrt.store.StoreCipher``) with the codec's keys.

    ``keys``: key id -> 32-byte key; ``current`` seals. ``seal(plain, context)`` returns
    ``(current, nonce || ciphertext || tag)``; ``open`` raises ``PayloadDecryptionError`` naming
    the key id for a key this process lacks, a value altered or truncated, or one sealed for
    another context (moved to another session or table). ``ConfigurationError`` for keys
    ``AesGcmCodec`` refuses (not 32 bytes, a malformed id, ``current`` not among them).
    """

    def __init__(self, keys: Mapping[str, bytes], current: str) -> None:
        AesGcmCodec(keys, current)  # the same checks: 32-byte keys, well-formed ids, a current key among them
        self.current = current
        self._ciphers = {key_id: AESGCM(key) for key_id, key in keys.items()}

    def __repr__(self) -> str:
        return f"AesGcmStoreCipher(current={self.current!r}, key_ids={sorted(self._ciphers)!r})"

    def seal(self, plain: bytes, context: bytes) -> tuple[str, bytes]:
        nonce = os.urandom(NONCE_BYTES)
        return self.current, nonce + self._ciphers[self.current].encrypt(nonce, plain, context)

    def open(self, key_id: str, sealed: bytes, context: bytes) -> bytes:
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            held = ", ".join(sorted(self._ciphers))
            raise PayloadDecryptionError(
                key_id, f"the store holds content encrypted with it and this process has no such key (it holds {held})"
            )
        if len(sealed) < NONCE_BYTES + TAG_BYTES:
            raise PayloadDecryptionError(key_id, f"a stored value of {len(sealed)} bytes is shorter than a nonce and a tag")
        try:
            return cipher.decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], context)
        except InvalidTag:
            raise PayloadDecryptionError(
                key_id, "a stored value fails authentication: altered, moved from another session, or sealed with another key"
            ) from None


def store_cipher(codec: CodecConfig) -> AesGcmStoreCipher | None:
    """The store cipher of ``codec``'s keys, or None without keys (``ConfigurationError`` for bad ones)."""
    aes = codec.codec()  # checks the keys and picks the current one
    if aes is None:
        return None
    keys = codec.keys or load_keys_file(codec.keys_file or "")[0]
    return AesGcmStoreCipher(keys, aes.current)


def open_store(config: Any) -> Store:
    """``Store.open(config.database_url)`` sealing content at rest with ``config.codec``'s keys when
    it has some (``config``: an ``AgentrtConfig``)."""
    return Store.open(config.database_url, cipher=store_cipher(config.codec))


def encrypt_store(store: Store, codec: CodecConfig) -> None:
    """Give ``store`` the cipher of ``codec``'s keys when it has none and there are keys."""
    if store.cipher is None and codec.enabled:
        cipher = store_cipher(codec)
        if cipher is not None:
            store.encrypt_with(cipher)


def home_keys_file(env: Mapping[str, str] | None = None) -> Path:
    """``$AGENTRT_HOME/codec-keys.toml``: the keys file a machine makes for itself."""
    return agentrt_home(env) / HOME_KEYS_FILE


def encryption_setting(raw: object, file: Path | None, env: Mapping[str, str]) -> bool:
    """``[codec] encryption`` (a boolean), overridden by ``AGENTRT_ENCRYPTION`` (``on``/``off``,
    ``true``/``false``, ``1``/``0``, ``yes``/``no``): whether the machine's own keys file is made and
    used when no keys are configured (configured keys encrypt either way). Default True.
    ``ConfigurationError`` for another value."""
    value = raw.get("encryption", True) if isinstance(raw, Mapping) else True
    if not isinstance(value, bool):
        raise ConfigurationError(f"{file}: [codec] encryption must be true or false, not {value!r}")
    word = env.get(ENCRYPTION_ENV, "").strip().lower()
    if word in _OFF:
        return False
    if word in _ON:
        return True
    if word:
        raise ConfigurationError(f"{ENCRYPTION_ENV} must be on or off, not {env[ENCRYPTION_ENV]!r}")
    return value


def home_codec(env: Mapping[str, str] | None = None) -> CodecConfig | None:
    """The ``CodecConfig`` of ``$AGENTRT_HOME/codec-keys.toml`` when the file exists, else None
    (``ConfigurationError`` for a bad file, as for any keys file)."""
    path = home_keys_file(env)
    if not path.exists():
        return None
    keys, current = load_keys_file(path)
    config = CodecConfig(keys_file=str(path), keys=keys, current_key=current)
    aes = config.codec()  # picks the current key: the file's, or its only one
    config.current_key = aes.current if aes is not None else None
    return config


def ensure_home_keys(env: Mapping[str, str] | None = None) -> tuple[CodecConfig, bool]:
    """The machine's own keys (``home_codec``), made first when ``$AGENTRT_HOME/codec-keys.toml``
    does not exist: one new AES-256 key (``generate_codec_key``) under a ``key-YYYYMMDD-HHMMSS`` id,
    in a file of mode 600 that appears whole (written beside it, then linked: never replacing one
    another process made at the same moment). Returns ``(codec config, whether it was made now)``."""
    path = home_keys_file(env)
    made = False
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        key_id = new_codec_key_id()
        body = (
            "# Codec keys agentrt made for this machine (docs/encryption.md). Keep this file: the\n"
            "# sessions encrypted with it cannot be read without it.\n"
            f'current = "{key_id}"\n[keys]\n{key_id} = "{base64.b64encode(generate_codec_key()).decode()}"\n'
        )
        draft = path.with_name(f".{HOME_KEYS_FILE}.{os.getpid()}.{os.urandom(4).hex()}")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(body)
            os.chmod(draft, 0o600)  # whatever the umask
            try:
                os.link(draft, path)
                made = True
            except FileExistsError:
                pass  # another process made it first: use theirs
        finally:
            draft.unlink(missing_ok=True)
    codec = home_codec(env)
    assert codec is not None
    return codec, made
