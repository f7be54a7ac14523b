"""Secrets a tool or MCP server declares by name: where a worker finds their values (``[secrets]``
of agentrt.toml), how a name is spelled, what stands in a recorded text where a value was, and the
errors of a secret that cannot be had. The values themselves never cross a process or history
boundary; only names do.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from agentrt.schemas._base import Model
from agentrt.schemas._errors import ConfigurationError
from agentrt.schemas._run_errors import ToolError

__all__ = [
    "MIN_SECRET_VALUE_CHARS",
    "SECRET_NAME",
    "SecretNotFound",
    "SecretSourceFailed",
    "SecretsConfig",
    "SecretsMissing",
    "secret_marker",
]

# A secret's name: an environment variable's spelling (letters, digits and _, not starting with a digit).
SECRET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
# The shortest value a worker hands to a tool (characters). Shorter values cannot be redacted
# safely: they match ordinary text, and a redaction that replaces them would tell a model which of
# the strings it prints is the secret (a guessing oracle).
MIN_SECRET_VALUE_CHARS = 8

SecretSourceName = Literal["env", "file", "hook"]


def secret_marker(name: str) -> str:
    """What stands in recorded text where the value of secret ``name`` was: ``[secret:NAME]``."""
    return f"[secret:{name}]"


class SecretsConfig(Model):
    """The ``[secrets]`` table of agentrt.toml: where a worker looks up the secrets its tools and
    MCP servers declare, tried in the order of ``sources`` (the first that has a name wins).

    - ``env``: the worker's environment variable of the same name (the default source).
    - ``file``: ``path``, a directory of files (one per secret, named as the secret, its text the
      value, one trailing newline dropped) or a TOML file of ``NAME = "value"`` lines. Either must
      be owned by the worker's user and neither readable nor writable by every user, nor writable
      by its group (``chmod 600``; ``700`` for a directory).
    - ``hook``: ``"module:function"``, a callable of the secret's name returning its value (``str``)
      or None when it has none; sync or ``async``; each lookup bounded by ``timeout_seconds``.
    """

    sources: list[SecretSourceName] = Field(default_factory=lambda: ["env"], min_length=1)
    path: str | None = None
    hook: str | None = None
    timeout_seconds: float = Field(default=10.0, gt=0, le=300, allow_inf_nan=False)

    @model_validator(mode="after")
    def _complete(self) -> "SecretsConfig":
        if len(set(self.sources)) != len(self.sources):
            raise ValueError(f"sources names a source twice: {self.sources}")
        if "file" in self.sources and not self.path:
            raise ValueError('source "file" needs path (a directory of files or a TOML file)')
        if "hook" in self.sources and not self.hook:
            raise ValueError('source "hook" needs hook = "module:function"')
        if self.hook is not None and not re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", self.hook):
            raise ValueError(f'hook must be "module:function", not {self.hook!r}')
        return self


class SecretNotFound(ToolError):
    """No configured source has secret ``name``, which ``owner`` (a tool, or ``mcp:<server>``)
    declared; ``sources`` lists where it was looked for. The call was not run."""

    def __init__(self, name: str, owner: str, sources: list[str]) -> None:
        self.name = name
        self.owner = owner
        self.sources = sources
        super().__init__(
            f"secret {name} (declared by {owner}) is not set in any of the worker's secret sources "
            f"({', '.join(sources)}); the call was not run"
        )


class SecretSourceFailed(ToolError):
    """Secret ``name`` could not be read: ``reason`` says why (the hook raised, timed out or gave no
    string; the secrets file is unreadable or open to other users; the value is shorter than
    ``MIN_SECRET_VALUE_CHARS``). The call was not run."""

    def __init__(self, name: str, owner: str, reason: str) -> None:
        self.name = name
        self.owner = owner
        self.reason = reason
        super().__init__(f"secret {name} (declared by {owner}) cannot be read: {reason}; the call was not run")


class SecretsMissing(ConfigurationError):
    """At worker start: secrets that tools or MCP servers declare and no configured source has.
    ``missing`` maps each name to who declared it (tool names, ``mcp:<server>``)."""

    def __init__(self, missing: dict[str, list[str]], sources: list[str]) -> None:
        self.missing = missing
        self.sources = sources
        listed = "; ".join(f"{name} (declared by {', '.join(owners)})" for name, owners in sorted(missing.items()))
        super().__init__(
            f"no secret source of this worker ({', '.join(sources)}) has {listed}: set them, or configure "
            "[secrets] sources in agentrt.toml"
        )
