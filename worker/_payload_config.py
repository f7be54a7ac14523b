"""The ``[payloads]`` section of agentrt.toml and its ``AGENTRT_PAYLOAD_*`` overrides: which driver
stores big Temporal payloads and where (``worker/_payloads.py`` builds the drivers from it).

Kept apart from ``_config.py`` because the s3 driver's settings are checked as a whole (a bucket
for ``driver = "s3"``) after the file and the environment have both had their say.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Mapping, get_args

from agentrt.schemas import ConfigurationError
from agentrt.store import agentrt_home

__all__ = [
    "DEFAULT_PAYLOAD_THRESHOLD_BYTES",
    "PAYLOAD_DRIVERS",
    "PAYLOAD_KEYS",
    "PayloadConfig",
    "PayloadDriverName",
    "payload_config",
    "payload_env",
]

PAYLOAD_KEYS = {"driver", "path", "threshold_bytes", "bucket", "endpoint_url", "region"}
PayloadDriverName = Literal["store", "directory", "s3", "none"]
PAYLOAD_DRIVERS: tuple[str, ...] = get_args(PayloadDriverName)
# The SDK's default; the server rejects a single payload above 2 MiB and a gRPC message above 4 MB.
DEFAULT_PAYLOAD_THRESHOLD_BYTES = 256 * 1024
_ENDPOINT = re.compile(r"https?://[^\s/]+(/\S*)?")


@dataclass
class PayloadConfig:
    """The ``[payloads]`` section: where Temporal payloads at or above ``threshold_bytes`` go.

    ``driver`` is ``"store"`` (the ``payloads`` table of the application store; the default),
    ``"directory"`` (one file per payload under ``path``, default ``$AGENTRT_HOME/payloads``;
    a relative ``path`` in agentrt.toml is taken from the file's directory, one in
    ``AGENTRT_PAYLOAD_PATH`` from the working directory; single-machine only unless every
    process mounts the same directory), ``"s3"`` (objects in the S3 bucket ``bucket`` through
    the SDK's ``S3StorageDriver``; ``endpoint_url`` for an S3-compatible server such as MinIO,
    ``region`` for AWS; credentials come from the standard AWS chain, never from this file) or
    ``"none"`` (payloads stay inline in workflow history).
    ``threshold_bytes`` is the serialized payload size (bytes) from which a payload is
    stored externally. Every client and worker of a task queue must use the same settings.
    A ``bucket`` set with another driver still registers the s3 driver to read references.
    """

    driver: PayloadDriverName = "store"
    path: str = field(default_factory=lambda: str(agentrt_home() / "payloads"))
    threshold_bytes: int = DEFAULT_PAYLOAD_THRESHOLD_BYTES
    bucket: str | None = None
    endpoint_url: str | None = None
    region: str | None = None

    def check(self, where: str) -> None:
        """Raise ``ConfigurationError`` (naming ``where``) when the settings cannot work together:
        ``driver = "s3"`` without a bucket, an ``endpoint_url`` that is no http(s) URL."""
        if self.driver == "s3" and not self.bucket:
            raise ConfigurationError(
                f"{where}: [payloads] driver = \"s3\" needs a bucket: set [payloads] bucket or AGENTRT_PAYLOAD_BUCKET"
            )
        if self.endpoint_url is not None and not _ENDPOINT.fullmatch(self.endpoint_url):
            raise ConfigurationError(
                f"{where}: [payloads] endpoint_url must be an http:// or https:// URL, not {self.endpoint_url!r}"
            )


def _payload_driver(value: object, where: str) -> PayloadDriverName:
    if value not in PAYLOAD_DRIVERS:
        raise ConfigurationError(f"{where}: payload driver must be one of {', '.join(PAYLOAD_DRIVERS)}, not {value!r}")
    return value  # type: ignore[return-value]


def _text(raw: Mapping[str, Any], key: str, file: Path | None) -> str:
    value = raw[key]
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{file}: [payloads] {key} must be a non-empty string, not {value!r}")
    return value.strip()


def payload_config(raw: Mapping[str, Any], file: Path | None, home: Path) -> PayloadConfig:
    """The ``[payloads]`` table ``raw`` of ``file`` (``home`` is ``$AGENTRT_HOME``);
    ``ConfigurationError`` for a value of the wrong kind. Unknown keys are checked by the caller."""
    config = PayloadConfig(path=str(home / "payloads"))
    if "driver" in raw:
        config.driver = _payload_driver(raw["driver"], f"{file}: [payloads] driver")
    if "path" in raw:
        path = Path(_text(raw, "path", file)).expanduser()
        config.path = str(path if path.is_absolute() or file is None else file.parent / path)
    if "threshold_bytes" in raw:
        threshold = raw["threshold_bytes"]
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            raise ConfigurationError(f"{file}: [payloads] threshold_bytes must be an integer >= 0, not {threshold!r}")
        config.threshold_bytes = threshold
    for key in ("bucket", "endpoint_url", "region"):
        if key in raw:
            setattr(config, key, _text(raw, key, file))
    return config


def payload_env(config: PayloadConfig, env: Mapping[str, str], file: Path | None) -> PayloadConfig:
    """``config`` with the environment's overrides (``AGENTRT_PAYLOAD_DRIVER``, ``AGENTRT_PAYLOAD_PATH``,
    ``AGENTRT_PAYLOAD_BUCKET``, ``AGENTRT_PAYLOAD_ENDPOINT_URL``, ``AGENTRT_PAYLOAD_REGION``; an empty
    one is ignored), then checked as a whole (``PayloadConfig.check``)."""
    if "AGENTRT_PAYLOAD_DRIVER" in env:
        config.driver = _payload_driver(env["AGENTRT_PAYLOAD_DRIVER"], "AGENTRT_PAYLOAD_DRIVER")
    if env.get("AGENTRT_PAYLOAD_PATH"):
        config.path = env["AGENTRT_PAYLOAD_PATH"]
    for key in ("bucket", "endpoint_url", "region"):
        value = env.get(f"AGENTRT_PAYLOAD_{key.upper()}", "").strip()
        if value:
            setattr(config, key, value)
    config.check(str(file) if file is not None else "environment")
    return config
