"""Model profiles and session configuration."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from agentrt.schemas._base import Model

ApprovalRule = Literal["allow", "ask", "deny"]


class ModelProfile(Model):
    """A named model choice, declared in agentrt.toml under ``[profiles.NAME]``.

    - ``provider``: ``openai`` (Chat Completions; any compatible ``base_url`` such as vLLM,
      Ollama or llama.cpp), ``anthropic`` (Messages API) or ``scripted`` (offline script).
    - ``api_key_env``: the *name* of the worker's environment variable holding the key;
      the key itself never enters workflow history.
    - ``context_window`` and ``max_output_tokens`` are in tokens.
    - ``script``: path to a scripted-model file (``scripted`` only).
    - ``timeout_seconds``: bound on one HTTP request (seconds).
    """

    name: str
    provider: Literal["openai", "anthropic", "scripted"]
    model: str = ""
    base_url: str | None = None
    api_key_env: str | None = None
    context_window: int = Field(default=128_000, ge=1)
    max_output_tokens: int = Field(default=4_096, ge=1)
    temperature: float | None = None
    script: str | None = None
    timeout_seconds: float = 600.0

    @model_validator(mode="after")
    def _output_fits_the_window(self) -> "ModelProfile":
        if self.max_output_tokens >= self.context_window:
            raise ValueError(
                f"max_output_tokens ({self.max_output_tokens}) must be smaller than context_window "
                f"({self.context_window}): the reply's tokens are reserved inside the window"
            )
        return self


class ApprovalPolicy(Model):
    """What the policy engine does with a tool call, by the tool's risk class.

    Rules: ``allow`` runs it, ``ask`` waits for an approval signal, ``deny`` refuses it.
    ``tools`` overrides the rule for a named tool (e.g. ``{"shell.run": "ask"}``).
    Defaults: read-only tools run; idempotent and effectful ones need approval.
    """

    read_only: ApprovalRule = "allow"
    idempotent: ApprovalRule = "ask"
    effectful: ApprovalRule = "ask"
    tools: dict[str, ApprovalRule] = Field(default_factory=dict)


class SessionConfig(Model):
    """Everything a session needs to start; carried in the workflow input.

    - ``owner``: the principal who may send messages and decide approvals.
    - ``workspace``: absolute directory on the worker's machine; file tools are confined to it.
    - ``profile``: model profile name (see ``ModelProfile``); ``script``: a scripted-model
      file that overrides the profile's own (for ``--script``).
    - ``tools``: tool names offered to the model; None offers every registered tool.
    - ``approval_timeout_seconds``: a pending approval is denied after this many seconds;
      None waits forever.
    - ``max_rounds_per_turn``: model calls per turn before the turn ends as ``round_limit``.
    - ``heartbeat_timeout_seconds``: how soon a dead worker's model or tool call is retried
      elsewhere (seconds). Those activities heartbeat about once a second while they run
      (``HEARTBEAT_THROTTLE``), so a worker whose event loop stalls for longer than this
      less a second has its calls retried; the default, 3 s, resumes a killed worker's
      turn within about 4 s of its restart (``python -m bench.recovery``).
    - ``local_tools``: tools whose spec says ``local_activity`` (fast, read-only) run as
      Temporal local activities: no activity task and no extra workflow task per call. False
      runs every tool as a regular activity (each call then shows in the UI's timeline).
    """

    session_id: str
    owner: str
    workspace: str
    profile: str = "default"
    script: str | None = None
    system_prompt: str | None = None
    tools: list[str] | None = None
    approval: ApprovalPolicy = Field(default_factory=ApprovalPolicy)
    approval_timeout_seconds: float | None = None
    max_rounds_per_turn: int = Field(default=250, ge=1)
    model_timeout_seconds: float = 600.0
    tool_timeout_seconds: float = 300.0
    heartbeat_timeout_seconds: float = 3.0
    title: str | None = None
    # Left out when True (the default): a worker of an earlier version still reads the config.
    local_tools: bool = Field(default=True, exclude_if=lambda v: v is True)
