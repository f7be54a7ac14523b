"""Worker and client configuration: agentrt.toml (or $AGENTRT_CONFIG) plus environment overrides."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from pydantic import ValidationError

from schemas import ConfigurationError, ModelProfile, UnknownProfileError

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "agentrt"
TOP_LEVEL_KEYS = {"default_profile", "profiles", "temporal", "store"}

# Always available: the offline scripted model (a script file is given per session with --script).
BUILTIN_PROFILES = {
    "scripted": ModelProfile(name="scripted", provider="scripted", model="scripted", context_window=200_000),
}


@dataclass
class AgentrtConfig:
    """Resolved configuration.

    Sources, lowest to highest precedence: built-in defaults, the TOML file
    (``$AGENTRT_CONFIG`` or ``./agentrt.toml``), then environment variables
    ``AGENTRT_TEMPORAL_ADDRESS``, ``AGENTRT_NAMESPACE``, ``AGENTRT_TASK_QUEUE``,
    ``AGENTRT_DATABASE_URL``, ``AGENTRT_DEFAULT_PROFILE``.
    """

    temporal_address: str = DEFAULT_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    task_queue: str = DEFAULT_TASK_QUEUE
    database_url: str | None = None
    default_profile: str = "default"
    profiles: dict[str, ModelProfile] = field(default_factory=lambda: dict(BUILTIN_PROFILES))
    source: Path | None = None

    def profile(self, name: str) -> ModelProfile:
        """The profile called ``name``; raises ``UnknownProfileError`` listing the known ones."""
        try:
            return self.profiles[name]
        except KeyError:
            raise UnknownProfileError(name, list(self.profiles)) from None

    @classmethod
    def load(cls, path: str | Path | None = None, env: Mapping[str, str] | None = None) -> "AgentrtConfig":
        """Read the configuration; raises ``ConfigurationError`` for a missing named file or bad TOML."""
        env = os.environ if env is None else env
        explicit = path or env.get("AGENTRT_CONFIG")
        file = Path(explicit) if explicit else Path.cwd() / "agentrt.toml"
        data: dict[str, Any] = {}
        if file.exists():
            try:
                data = tomllib.loads(file.read_text())
            except tomllib.TOMLDecodeError as err:
                raise ConfigurationError(f"{file}: invalid TOML: {err}") from err
        elif explicit:
            raise ConfigurationError(f"configuration file {file} does not exist")
        unknown = sorted(set(data) - TOP_LEVEL_KEYS)
        unknown += [f"temporal.{k}" for k in sorted(set(data.get("temporal", {})) - {"address", "namespace", "task_queue"})]
        unknown += [f"store.{k}" for k in sorted(set(data.get("store", {})) - {"url"})]
        if unknown:
            raise ConfigurationError(
                f"{file}: unknown setting(s) {', '.join(unknown)}; known: default_profile, [profiles.NAME], "
                "[temporal] address/namespace/task_queue, [store] url"
            )
        config = cls(source=file if file.exists() else None)
        temporal = data.get("temporal", {})
        config.temporal_address = temporal.get("address", config.temporal_address)
        config.namespace = temporal.get("namespace", config.namespace)
        config.task_queue = temporal.get("task_queue", config.task_queue)
        config.database_url = data.get("store", {}).get("url")
        config.default_profile = data.get("default_profile", config.default_profile)
        for name, raw in data.get("profiles", {}).items():
            try:
                config.profiles[name] = ModelProfile(name=name, **raw)
            except ValidationError as err:
                raise ConfigurationError(f"{file}: profile {name!r} is invalid: {err}") from err
        config.temporal_address = env.get("AGENTRT_TEMPORAL_ADDRESS", config.temporal_address)
        config.namespace = env.get("AGENTRT_NAMESPACE", config.namespace)
        config.task_queue = env.get("AGENTRT_TASK_QUEUE", config.task_queue)
        config.database_url = env.get("AGENTRT_DATABASE_URL", config.database_url)
        config.default_profile = env.get("AGENTRT_DEFAULT_PROFILE", config.default_profile)
        return config
