"""Encrypted payloads: an AES-GCM payload codec with key ids, and the ``[codec]`` section."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from agentrt.schemas import ConfigurationError

CODEC_KEYS = {"keys_file", "current_key"}


@dataclass
class CodecConfig:
    """The ``[codec]`` section. Without keys payloads are not encrypted."""

    keys_file: str | None = None
    current_key: str | None = None


def codec_config(raw: Mapping[str, Any], file: Path | None, env: Mapping[str, str]) -> CodecConfig:
    """``[codec]`` with environment overrides; raises ``ConfigurationError`` for an unknown key or bad value."""
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{file}: codec must be a table ([codec]), not {raw!r}")
    unknown = sorted(set(raw) - CODEC_KEYS)
    if unknown:
        raise ConfigurationError(f"{file}: unknown setting(s) {', '.join('codec.' + k for k in unknown)}")
    return CodecConfig(**dict(raw))
