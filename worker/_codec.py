"""Encrypted payloads: an AES-GCM payload codec with key ids, and the ``[codec]`` section.

Temporal keeps every workflow input, result, signal, update, query answer, heartbeat and
failure in its history, readable by whoever can read the namespace. With keys configured,
every payload a client, worker or replayer writes is AES-256-GCM ciphertext
(``AesGcmCodec``); the server, the ``temporal`` CLI and the UI see only ciphertext unless
they ask a codec server that holds the keys (``agentrt codec-server``).

The wire format is the one of the SDK's encryption sample (also the Go and TypeScript
samples), so codecs and codec servers built from them read agentrt's payloads:

    metadata  encoding = "binary/encrypted", encryption-key-id = "<key id>"
    data      nonce (12 random bytes) || AES-GCM ciphertext and 16-byte tag
              of the original payload, serialized (protobuf)

Key ids select the key on decode, so keys rotate without rewriting history: add the new
key to every process first, then make it the current one; payloads written with the old
keys stay readable while the old key is configured. Keys come from a keys file (TOML or
JSON; ``[codec] keys_file``) or from ``AGENTRT_CODEC_KEYS``, validated at configuration
load (``ConfigurationError``): 32-byte keys (base64), well-formed ids given once, an existing
current key, a keys file in UTF-8 that only its owner may write and other users may not read.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import hashlib
import json
import os
import re
import stat
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from agentrt.schemas import ClientError, ConfigurationError, RunError

__all__ = [
    "CODEC_KEYS",
    "ENCRYPTED_ENCODING",
    "FINGERPRINT_PREFIX",
    "KEY_BYTES",
    "KEY_ID_METADATA",
    "AesGcmCodec",
    "CodecConfig",
    "KeylessCodec",
    "PayloadCodecMismatch",
    "PayloadDecryptionError",
    "codec_config",
    "codec_fingerprints",
    "generate_codec_key",
    "key_fingerprint",
    "load_keys_file",
    "new_codec_key_id",
    "parse_env_keys",
]

CODEC_KEYS = {"keys_file", "current_key", "encryption"}  # encryption: worker/_at_rest.py
KEYS_FILE_KEYS = {"current", "keys"}
ENCRYPTED_ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"
KEY_BYTES = 32  # AES-256
NONCE_BYTES = 12  # the GCM standard nonce; random per payload
TAG_BYTES = 16
# What a codec key's fingerprint starts with, among the payload fingerprints a worker advertises.
FINGERPRINT_PREFIX = "aes-gcm:"
# Key ids appear in payload metadata and in worker identities (comma-separated, space-ended).
_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_FINGERPRINT_SALT = b"agentrt codec key fingerprint\x00"


class PayloadDecryptionError(RunError):
    """An encrypted payload could not be read: its key id is not among this process's keys
    (or the process has none), or it fails authentication (altered, truncated, or encrypted
    with another key under the same id). Never passed through as it is.

    Fields: ``key_id`` (as the payload's metadata names it; empty when it names none),
    ``reason``.
    """

    def __init__(self, key_id: str, reason: str) -> None:
        self.key_id = key_id
        self.reason = reason
        super().__init__(f"payload encrypted with key {key_id!r} cannot be decrypted: {reason}")


class PayloadCodecMismatch(ClientError):
    """A message would reach workers that could not read it, or be written in clear where they
    encrypt; it was not sent and nothing was started (the session, task or graph is unchanged).
    Either this client encrypts with a key that no worker polling the task queue holds (or the
    workers hold no keys at all), or this client has no keys and the workers encrypt.

    Fields: ``session_id`` (the session's id; a task's or graph's for their starts: ``kind``),
    ``task_queue``, ``key_id`` (this client's current key; None when it has no keys),
    ``client_fingerprint`` (``aes-gcm:<id>@<hash>``; None without keys), ``worker_fingerprints``
    (worker identity -> the payload fingerprints it advertises), ``kind`` (``session``, ``task``,
    ``graph``).
    """

    def __init__(
        self,
        session_id: str,
        task_queue: str,
        key_id: str | None,
        client_fingerprint: str | None,
        worker_fingerprints: dict[str, list[str]],
        *,
        kind: str = "session",
    ) -> None:
        self.session_id = session_id
        self.task_queue = task_queue
        self.key_id = key_id
        self.client_fingerprint = client_fingerprint
        self.worker_fingerprints = worker_fingerprints
        self.kind = kind
        workers = "; ".join(
            f"{identity.split()[0]} holds {', '.join(codec_fingerprints(prints)) or 'no codec keys'}"
            for identity, prints in worker_fingerprints.items()
        )
        refused = f"{kind} {session_id}: " + ("message not sent" if kind == "session" else "not started")
        if key_id is None:
            super().__init__(
                f"{refused}. The workers on task queue {task_queue!r} encrypt payloads (worker {workers}) and this "
                "client has no codec keys: it would write its input in clear into workflow history, and could not "
                "read what the workers write. Give this client the workers' keys ([codec] keys_file or "
                "AGENTRT_CODEC_KEYS, the same ids and bytes)."
            )
            return
        super().__init__(
            f"{refused}. It would be encrypted with codec key {key_id!r} "
            f"({client_fingerprint}), which no worker on task queue {task_queue!r} holds (worker {workers}). "
            "Give the workers this key ([codec] keys_file or AGENTRT_CODEC_KEYS, the same id and bytes) and "
            "restart them, or make a key they hold current here ([codec] current_key, AGENTRT_CODEC_CURRENT_KEY)."
        )


def codec_fingerprints(prints: Sequence[str]) -> list[str]:
    """The codec key fingerprints (``aes-gcm:<id>@<hash>``) among a worker's advertised payload fingerprints."""
    return [p for p in prints if p.startswith(FINGERPRINT_PREFIX)]


def key_fingerprint(key_id: str, key: bytes) -> str:
    """``aes-gcm:<key id>@<12 hex digits>``: names a key without revealing it (a salted SHA-256
    of the key, 48 bits). Two processes with the same fingerprint hold the same key under the same id."""
    return f"{FINGERPRINT_PREFIX}{key_id}@{hashlib.sha256(_FINGERPRINT_SALT + key).hexdigest()[:12]}"


def generate_codec_key() -> bytes:
    """A new random AES-256 key (32 bytes, from the OS's CSPRNG)."""
    return AESGCM.generate_key(bit_length=KEY_BYTES * 8)


def new_codec_key_id(now: _dt.datetime | None = None) -> str:
    """A key id naming when the key was made: ``key-YYYYMMDD-HHMMSS`` (UTC)."""
    return (now or _dt.datetime.now(_dt.timezone.utc)).strftime("key-%Y%m%d-%H%M%S")


def _check_key_id(key_id: object, where: str) -> str:
    if not isinstance(key_id, str) or not _KEY_ID.fullmatch(key_id):
        raise ConfigurationError(
            f"{where}: key id {key_id!r} must be 1-64 characters of letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )
    return key_id


def _check_keys(keys: Mapping[str, bytes], where: str) -> dict[str, bytes]:
    checked: dict[str, bytes] = {}
    for key_id, key in keys.items():
        _check_key_id(key_id, where)
        if not isinstance(key, (bytes, bytearray)) or len(key) != KEY_BYTES:
            size = len(key) if isinstance(key, (bytes, bytearray)) else type(key).__name__
            raise ConfigurationError(f"{where}: key {key_id!r} is {size} bytes; AES-256-GCM keys are {KEY_BYTES} bytes")
        checked[key_id] = bytes(key)
    return checked


class AesGcmCodec(PayloadCodec):
    """AES-256-GCM encryption of every payload, with key ids for rotation.

    ``keys`` maps key id -> 32-byte key; ``current`` (one of them) encrypts new payloads.
    ``encode`` gives each payload a fresh random 12-byte nonce. ``decode`` picks the key by
    the payload's ``encryption-key-id`` and passes payloads that are not ``binary/encrypted``
    through unchanged (histories written before encryption stay readable); an unknown key id
    or a payload that fails authentication raises ``PayloadDecryptionError`` naming the key
    id. Raises ``ConfigurationError`` for a key of another size, a malformed id or a
    ``current`` not among ``keys``.

    Random nonces bound one key to about 2**32 payloads (NIST SP 800-38D): rotate well before.
    """

    def __init__(self, keys: Mapping[str, bytes], current: str) -> None:
        checked = _check_keys(keys, "codec")
        if not checked:
            raise ConfigurationError("codec: no keys given")
        if current not in checked:
            listed = ", ".join(sorted(checked))
            raise ConfigurationError(f"codec: current key {current!r} is not among the keys ({listed})")
        self.current = current
        self._ciphers = {key_id: AESGCM(key) for key_id, key in checked.items()}
        self._fingerprints = {key_id: key_fingerprint(key_id, key) for key_id, key in checked.items()}
        self._current_id = current.encode()

    def __repr__(self) -> str:
        return f"AesGcmCodec(current={self.current!r}, key_ids={list(self.key_ids)!r})"

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The ids of every key this codec decrypts with, sorted."""
        return tuple(sorted(self._ciphers))

    @property
    def current_fingerprint(self) -> str:
        """``key_fingerprint`` of the current key: what a worker must advertise to read new payloads."""
        return self._fingerprints[self.current]

    @property
    def fingerprints(self) -> list[str]:
        """``key_fingerprint`` of every key, the current one first."""
        return [self.current_fingerprint] + [self._fingerprints[k] for k in self.key_ids if k != self.current]

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Each payload serialized and encrypted with the current key (see the module docstring)."""
        return [self.encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """Each ``binary/encrypted`` payload decrypted; others unchanged. ``PayloadDecryptionError`` otherwise."""
        return [self.decrypt(p) if p.metadata.get("encoding") == ENCRYPTED_ENCODING else p for p in payloads]

    def encrypt(self, payload: Payload) -> Payload:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[self.current].encrypt(nonce, payload.SerializeToString(deterministic=True), None)
        metadata = {"encoding": ENCRYPTED_ENCODING, KEY_ID_METADATA: self._current_id}
        return Payload(metadata=metadata, data=nonce + sealed)

    def decrypt(self, payload: Payload) -> Payload:
        key_id = _key_id_of(payload)
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            held = ", ".join(self.key_ids)
            raise PayloadDecryptionError(
                key_id, f"no such key here (this process holds {held}; [codec] keys_file or AGENTRT_CODEC_KEYS)"
            )
        data = payload.data
        if len(data) < NONCE_BYTES + TAG_BYTES:
            raise PayloadDecryptionError(key_id, f"{len(data)} bytes is shorter than a nonce and a tag")
        try:
            plain = cipher.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], None)
        except InvalidTag:
            raise PayloadDecryptionError(
                key_id, "authentication failed: the payload was altered, or encrypted with another key under this id"
            ) from None
        try:
            return Payload.FromString(plain)
        except DecodeError as err:
            raise PayloadDecryptionError(key_id, f"the decrypted bytes are not a payload: {err}") from err


class KeylessCodec(PayloadCodec):
    """The codec of a process without keys: payloads pass unchanged both ways, but an encrypted
    payload it must read raises ``PayloadDecryptionError`` naming its key id, instead of the
    converter's "unknown encoding" further on."""

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return list(payloads)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        for p in payloads:
            if p.metadata.get("encoding") == ENCRYPTED_ENCODING:
                raise PayloadDecryptionError(
                    _key_id_of(p), "this process has no codec keys ([codec] keys_file or AGENTRT_CODEC_KEYS)"
                )
        return list(payloads)


def _key_id_of(payload: Payload) -> str:
    return payload.metadata.get(KEY_ID_METADATA, b"").decode("utf-8", "replace")


# ---------------------------------------------------------------- configuration


def _key_bytes(value: object, key_id: str, where: str) -> bytes:
    """A base64 key (standard or URL-safe alphabet), decoded; the value itself is never echoed."""
    if not isinstance(value, str):
        raise ConfigurationError(f"{where}: key {key_id!r} must be a base64 string, not a {type(value).__name__}")
    text = value.strip()
    try:
        key = base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigurationError(f"{where}: key {key_id!r} is not valid base64") from None
    if len(key) != KEY_BYTES:
        raise ConfigurationError(
            f"{where}: key {key_id!r} is {len(key)} bytes after base64 decoding; AES-256-GCM keys are "
            f"{KEY_BYTES} bytes "
            "(`agentrt codec-server --generate-key` makes one)"
        )
    return key


def parse_env_keys(value: str, where: str = "AGENTRT_CODEC_KEYS") -> dict[str, bytes]:
    """``"id1:base64key,id2:base64key"`` -> ``{id: 32-byte key}``; ``ConfigurationError`` for a
    malformed entry, a repeated id or a key that is not 32 bytes."""
    keys: dict[str, bytes] = {}
    for number, entry in enumerate((e.strip() for e in value.split(",")), start=1):
        if not entry:
            continue
        key_id, sep, encoded = entry.partition(":")
        if not sep:
            raise ConfigurationError(f"{where}: entry {number} is not 'id:base64key'")
        key_id = _check_key_id(key_id.strip(), where)
        if key_id in keys:
            raise ConfigurationError(f"{where}: key id {key_id!r} is given twice")
        keys[key_id] = _key_bytes(encoded, key_id, where)
    if not keys:
        raise ConfigurationError(f"{where}: no keys ('id1:base64key,id2:base64key')")
    return keys


def load_keys_file(path: str | os.PathLike[str]) -> tuple[dict[str, bytes], str | None]:
    """``(keys, current)`` from a keys file: JSON when its name ends in ``.json``, TOML otherwise.

    ```toml
    current = "k2"        # optional: [codec] current_key / AGENTRT_CODEC_CURRENT_KEY win over it
    [keys]
    k1 = "base64 of 32 bytes"
    k2 = "base64 of 32 bytes"
    ```

    JSON: ``{"current": "k2", "keys": {"k1": "...", "k2": "..."}}``. Raises
    ``ConfigurationError`` when the file is missing or unreadable, readable or writable by every
    user (mode bits ``o+r``/``o+w``), writable by its group (``g+w``: a member could swap in a
    key of theirs and read what is encrypted next), not UTF-8, malformed, names a setting or a
    key id twice (JSON; TOML refuses that itself), or holds a bad key. ``chmod 600`` it; ``640``
    is accepted, so the keys can be shared with a service group (a Kubernetes secret volume
    with an ``fsGroup`` is ``0440``).
    """
    file = Path(path)
    try:
        info = file.stat()
    except FileNotFoundError:
        raise ConfigurationError(f"codec keys file {file} does not exist") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigurationError(f"codec keys file {file} is not a regular file")
    if os.name == "posix" and info.st_mode & (stat.S_IROTH | stat.S_IWOTH):
        raise ConfigurationError(
            f"codec keys file {file} is readable or writable by every user (mode {stat.filemode(info.st_mode)}); "
            f"`chmod 600 {file}` (a Kubernetes secret volume: defaultMode 0400)"
        )
    if os.name == "posix" and info.st_mode & stat.S_IWGRP:
        raise ConfigurationError(
            f"codec keys file {file} is writable by its group (mode {stat.filemode(info.st_mode)}); `chmod 600 {file}`"
        )
    try:
        raw = file.read_bytes()
    except OSError as err:
        raise ConfigurationError(f"codec keys file {file} cannot be read: {err.strerror or err}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigurationError(f"codec keys file {file} is not UTF-8 text (byte {err.start})") from None
    data: Any
    if file.suffix.lower() == ".json":
        try:
            data = json.loads(text, object_pairs_hook=lambda pairs: _unique_pairs(pairs, file))
        except json.JSONDecodeError as err:
            raise ConfigurationError(f"codec keys file {file}: invalid JSON: line {err.lineno}: {err.msg}") from None
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise ConfigurationError(f"codec keys file {file}: invalid TOML: {err}") from None
    if not isinstance(data, dict):
        raise ConfigurationError(f"codec keys file {file}: must hold a table with keys (and current)")
    unknown = sorted(set(data) - KEYS_FILE_KEYS)
    if unknown:
        listed = ", ".join(unknown)
        raise ConfigurationError(f"codec keys file {file}: unknown setting(s) {listed}; known: current, keys")
    table = data.get("keys")
    if not isinstance(table, dict) or not table:
        raise ConfigurationError(f"codec keys file {file}: 'keys' must be a non-empty table of key id -> base64 key")
    where = f"codec keys file {file}"
    keys = {_check_key_id(key_id, where): _key_bytes(value, key_id, where) for key_id, value in table.items()}
    current = data.get("current")
    if current is not None:
        _check_key_id(current, f"{where}: current")
    return keys, current


def _unique_pairs(pairs: list[tuple[str, Any]], file: Path) -> dict[str, Any]:
    """A JSON object's members as a dict; ``ConfigurationError`` for a name given twice (``json``
    would keep the last silently, so a file could hold two keys under one id and use either)."""
    found: dict[str, Any] = {}
    for name, value in pairs:
        if name in found:
            raise ConfigurationError(f"codec keys file {file}: {name!r} is given twice in one object")
        found[name] = value
    return found


@dataclass
class CodecConfig:
    """The ``[codec]`` section: payload encryption. Without keys payloads are not encrypted.

    ``keys_file`` (``[codec] keys_file``, relative to agentrt.toml; ``AGENTRT_CODEC_KEYS_FILE``,
    relative to the working directory): a keys file (``load_keys_file``). ``current_key``
    (``[codec] current_key``, ``AGENTRT_CODEC_CURRENT_KEY``): the key id new payloads are
    encrypted with; defaults to the keys file's ``current``, or to the only key.
    ``AGENTRT_CODEC_KEYS`` (``"id1:base64key,id2:base64key"``) gives the keys instead of a file.
    ``keys`` holds the loaded keys (id -> 32 bytes; kept out of ``repr``); a config built
    directly with only ``keys_file`` reads the file in ``codec()``.
    """

    keys_file: str | None = None
    current_key: str | None = None
    keys: dict[str, bytes] = field(default_factory=dict, repr=False)

    @property
    def enabled(self) -> bool:
        """True when payloads are encrypted (keys given, or a keys file to read them from)."""
        return bool(self.keys) or self.keys_file is not None

    def codec(self) -> AesGcmCodec | None:
        """The ``AesGcmCodec`` of these keys, or None without keys; ``ConfigurationError`` for bad keys."""
        keys, current = dict(self.keys), self.current_key
        if not keys and self.keys_file is not None:
            keys, file_current = load_keys_file(self.keys_file)
            current = current or file_current
        if not keys:
            if current is not None:
                raise ConfigurationError(
                    f"[codec] current_key {current!r} is set but no keys are (keys_file or AGENTRT_CODEC_KEYS)"
                )
            return None
        return AesGcmCodec(keys, _current_of(keys, current))


def _current_of(keys: Mapping[str, bytes], current: str | None) -> str:
    if current is None:
        if len(keys) == 1:
            return next(iter(keys))
        raise ConfigurationError(
            f"codec: {len(keys)} keys ({', '.join(sorted(keys))}) and none is current: set [codec] current_key, "
            "AGENTRT_CODEC_CURRENT_KEY or the keys file's current"
        )
    if current not in keys:
        raise ConfigurationError(f"codec: current key {current!r} is not among the keys ({', '.join(sorted(keys))})")
    return current


def codec_config(raw: Mapping[str, Any], file: Path | None, env: Mapping[str, str]) -> CodecConfig:
    """``[codec]`` with environment overrides, keys loaded and checked.

    ``AGENTRT_CODEC_KEYS`` replaces the keys file's keys; ``AGENTRT_CODEC_KEYS_FILE`` the
    ``keys_file``; ``AGENTRT_CODEC_CURRENT_KEY`` the ``current_key``. Raises
    ``ConfigurationError`` for an unknown setting, a bad value, a bad or world-readable keys
    file, a key that is not 32 bytes, or a current key that is not among the keys.
    """
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{file}: codec must be a table ([codec]), not {raw!r}")
    unknown = sorted(set(raw) - CODEC_KEYS)
    if unknown:
        raise ConfigurationError(f"{file}: unknown setting(s) {', '.join('codec.' + k for k in unknown)}")
    config = CodecConfig()
    if "keys_file" in raw:
        value = raw["keys_file"]
        if not isinstance(value, str) or not value:
            raise ConfigurationError(f"{file}: [codec] keys_file must be a non-empty string, not {value!r}")
        path = Path(value).expanduser()
        config.keys_file = str(path if path.is_absolute() or file is None else file.parent / path)
    if "current_key" in raw:
        config.current_key = _check_key_id(raw["current_key"], f"{file}: [codec] current_key")
    if env.get("AGENTRT_CODEC_KEYS_FILE"):
        config.keys_file = str(Path(env["AGENTRT_CODEC_KEYS_FILE"]).expanduser().absolute())
    if env.get("AGENTRT_CODEC_CURRENT_KEY"):
        config.current_key = _check_key_id(env["AGENTRT_CODEC_CURRENT_KEY"], "AGENTRT_CODEC_CURRENT_KEY")
    file_current = None
    if env.get("AGENTRT_CODEC_KEYS", "").strip():
        config.keys = parse_env_keys(env["AGENTRT_CODEC_KEYS"])
    elif config.keys_file is not None:
        config.keys, file_current = load_keys_file(config.keys_file)
    if not config.keys:
        if config.current_key is not None:
            raise ConfigurationError(
                f"codec current key {config.current_key!r} is set but no keys are: set [codec] keys_file, "
                "AGENTRT_CODEC_KEYS_FILE or AGENTRT_CODEC_KEYS"
            )
        return config
    config.current_key = _current_of(config.keys, config.current_key or file_current)
    return config
