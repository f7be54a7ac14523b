"""MCP servers and skills as tool sources: their configuration, listings, calls and server requests.

An MCP tool reaches the model as ``<server>.<tool>``; its risk class comes from the tool's
annotations (``readOnlyHint``, ``destructiveHint``, ``idempotentHint``, ``openWorldHint``;
MCP specification 2025-06-18 and later, "Tool annotations"), a per-tool override in
agentrt.toml, or, with neither, ``effectful``.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from agentrt.schemas._activities import StoreAppendInput, ToolExecuteInput, ToolExecuteResult
from agentrt.schemas._base import Model
from agentrt.schemas._messages import ToolSpec

__all__ = [
    "ElicitationAnswer",
    "ElicitationRequest",
    "MCP_TOOL_NAME_PATTERN",
    "McpCallInput",
    "McpCallResult",
    "McpListToolsInput",
    "McpListToolsResult",
    "McpRisk",
    "McpServerChange",
    "McpServerConfig",
    "McpServerEvent",
    "McpServerState",
    "McpToolInfo",
    "McpTrust",
    "McpTrustDecision",
    "McpTrustLevel",
    "SECRET_REFERENCE",
    "SERVER_NAME_PATTERN",
    "VARIABLE_REFERENCE",
]

# A server's name: it prefixes its tools' names (``<server>.<tool>``), so no dot.
SERVER_NAME_PATTERN = r"^[A-Za-z0-9_-]{1,32}$"
# A tool name a model may see (MCP 2025-11-25 recommends [A-Za-z0-9_.-]{1,128}; a provider's
# wire name takes at most 64 characters, ``<server>.`` included).
MCP_TOOL_NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"

# A secret's reference in ``env`` and ``headers`` values: ``${NAME}``, read from the worker's environment.
VARIABLE_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# A declared secret's reference there: ``${secret:NAME}``, read from the worker's secret sources ([secrets]).
SECRET_REFERENCE = re.compile(r"\$\{secret:([A-Za-z_][A-Za-z0-9_]*)\}")
# Prefixes of built-in tools: a server of that name would shadow them.
RESERVED_SERVER_NAMES = frozenset({"fs", "shell", "memory", "skill", "mcp", "delegate", "agentrt"})

McpRisk = Literal["read_only", "idempotent", "effectful"]
# How far an MCP server is trusted: agentrt.toml's ``trust``, or an operator's decision.
McpTrust = Literal["trusted", "untrusted"]
# An operator's decision on a server: a trust, or ``revoked`` (no worker offers or calls its tools).
McpTrustLevel = Literal["trusted", "untrusted", "revoked"]
McpServerState = Literal["starting", "ready", "stopped", "failed"]


class McpServerConfig(Model):
    """One ``[mcp.servers.NAME]`` table of agentrt.toml: how a worker reaches an MCP server.

    - stdio: ``command`` (the executable), ``args``, ``env`` (extra environment; a value may hold
      ``${VAR}`` references, read from the worker's environment when the server starts and
      never part of workflow input), ``cwd`` (working directory; default a directory of its own
      under ``$AGENTRT_HOME/mcp/NAME``).
    - streamable HTTP: ``url`` and ``headers`` (values may hold ``${VAR}`` references too).
    - ``start``: ``lazy`` (on first use, the default) or ``eager`` (when the worker starts).
    - ``trust``: ``trusted`` (the policy decides by risk class) or ``untrusted`` (every call
      needs an approval unless the policy denies it).
    - ``risk``: per-tool risk class overrides, by the tool's MCP name (``{"echo": "read_only"}``).
    - ``sandbox``: a stdio server runs in the OS sandbox ``shell.run`` uses: ``workspace_write``
      (its ``cwd`` writable, the default), ``read_only``, or ``none`` (unsandboxed, on the worker
      as it is). ``read_paths``: more host paths the sandboxed server may read (its program and
      libraries, when they live outside ``/usr``). ``network``: whether it may use the network.
    - ``timeout_seconds``: bound on connecting and on listing its tools (seconds).
    - ``secrets``: declared secrets the worker reads from its ``[secrets]`` sources when it starts
      the server, by where they go: an environment variable of a stdio server, or a header of an
      HTTP one (``{"GITHUB_TOKEN" = "GITHUB_TOKEN"}``: variable or header -> secret name). A value
      in ``env`` or ``headers`` may also hold ``${secret:NAME}`` (``"Bearer ${secret:SEARCH_TOKEN}"``).
    """

    name: str = Field(pattern=SERVER_NAME_PATTERN)
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    start: Literal["lazy", "eager"] = "lazy"
    trust: McpTrust = "trusted"
    risk: dict[str, McpRisk] = Field(default_factory=dict)
    sandbox: Literal["read_only", "workspace_write", "none"] = "workspace_write"
    read_paths: list[str] = Field(default_factory=list)
    network: bool = False
    timeout_seconds: float = Field(default=30.0, gt=0, le=600, allow_inf_nan=False)
    secrets: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_transport(self) -> "McpServerConfig":
        if self.name in RESERVED_SERVER_NAMES:
            raise ValueError(f"{self.name!r} names built-in tools ({self.name}.*); choose another server name")
        if (self.command is None) == (self.url is None):
            raise ValueError("give either command (a stdio server) or url (a streamable HTTP server), not both or neither")
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise ValueError(f"url must start with http:// or https://, not {self.url!r}")
        if self.url is not None and (self.args or self.env or self.cwd):
            raise ValueError("args, env and cwd are for a stdio server (command), not a url")
        if self.command is not None and self.headers:
            raise ValueError("headers are for a streamable HTTP server (url), not a command")
        for key, secret in self.secrets.items():
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", secret):
                raise ValueError(f"secrets.{key}: a secret name is letters, digits and _ (not starting with a digit), not {secret!r}")
            if self.command is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ValueError(f"secrets.{key}: a stdio server's secrets go to environment variables; {key!r} is not one")
            if self.url is not None and not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", key):
                raise ValueError(f"secrets.{key}: an HTTP server's secrets go to headers; {key!r} is not a header name")
        for where, values in (("env", self.env), ("headers", self.headers)):
            for key, value in values.items():
                if "${" in VARIABLE_REFERENCE.sub("", SECRET_REFERENCE.sub("", value)):
                    raise ValueError(
                        f"{where}.{key}: a ${{...}} that is not a variable reference; write ${{NAME}} with NAME of "
                        "letters, digits and _ (not starting with a digit), e.g. ${API_TOKEN}"
                    )
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    @property
    def declared_secrets(self) -> list[str]:
        """The names of the secrets the server needs: ``secrets`` and ``${secret:NAME}`` references, sorted."""
        found = set(self.secrets.values())
        for value in [*self.env.values(), *self.headers.values()]:
            found.update(SECRET_REFERENCE.findall(value))
        return sorted(found)


class McpToolInfo(Model):
    """One tool a server lists, as ``agentrt mcp tools`` shows it: its MCP ``name``, the name the
    model sees (``<server>.<name>``), its risk class and ``risk_reason`` (which annotation or
    override gave it), ``skipped`` (why the model does not see it: a name no provider
    accepts, say; None when it does) and ``input_schema``, the JSON Schema of its arguments."""

    name: str
    qualified_name: str
    description: str = ""
    risk: McpRisk
    risk_reason: str
    annotations: dict[str, Any] = Field(default_factory=dict)
    skipped: str | None = None
    input_schema: dict[str, Any] = Field(default_factory=dict)


class McpListToolsInput(Model):
    """Activity ``mcp.list_tools``: the tools of ``servers`` for one turn of ``session_id``.

    ``store_writes``: the workflow's staged events and messages, written first (as with
    ``tool.execute``)."""

    session_id: str
    turn_id: str
    servers: list[str]
    store_writes: StoreAppendInput | None = Field(default=None, exclude_if=lambda v: v is None)


class McpListToolsResult(Model):
    """The specs a turn offers the model (``<server>.<tool>``, risk from annotations), ``digest``
    (the SHA-256 under which the store keeps these specs for the model call to read; None when
    there are none) and ``failures``: server name → why it could not be listed (the turn goes
    on without its tools)."""

    tools: list[ToolSpec] = Field(default_factory=list)
    digest: str | None = None
    failures: dict[str, str] = Field(default_factory=dict)


class ElicitationRequest(Model):
    """What a server asked the user in the middle of a call (MCP ``elicitation/create``, or an
    ``InputRequiredResult`` input request of the 2026-07-28 revision): ``message`` and the
    ``requested_schema`` (a flat JSON Schema object) the answer's ``content`` must match;
    ``mode`` ``url`` asks the user to open ``url`` instead. ``key``: the input request's key
    (2026-07-28); ``request_state``: an opaque token the next run of the call resumes from (the
    worker's ``McpManager`` wraps the server's own state, the round's keys and how many answers
    earlier rounds used); None makes the next run start the call over."""

    message: str
    requested_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    mode: Literal["form", "url"] = "form"
    url: str | None = None
    key: str | None = None
    request_state: str | None = None


class ElicitationAnswer(Model):
    """Update ``answer_elicitation`` (CLI ``agentrt session answer ID REQ JSON``):
    ``{"request_id": "req-3", "principal": "alice", "action": "accept", "content": {...}}``.

    ``action``: ``accept`` (``content`` must match the request's schema), ``decline`` or
    ``cancel`` (no content). The server gets exactly this answer."""

    request_id: str
    principal: str
    action: Literal["accept", "decline", "cancel"] = "accept"
    content: dict[str, Any] | None = None
    reason: str | None = None

    @field_validator("content")
    @classmethod
    def _content_is_flat(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return value
        for key, item in value.items():
            if not isinstance(item, (str, int, float, bool, list)) and item is not None:
                raise ValueError(f"content.{key}: an elicitation answer holds strings, numbers, booleans or lists")
        return value


class McpCallInput(ToolExecuteInput):
    """Activity ``mcp.call_tool``: one call of ``call.name`` = ``<server>.<tool>``.

    ``risk``: the spec's risk class (an effectful call goes through the effect ledger);
    ``answers``: the user's answers to the requests the server made during earlier runs of
    this call, in order (the call is run again from the start and each request answered from
    here); ``request_state``: the server's state from the last ``InputRequiredResult``."""

    risk: McpRisk = "effectful"
    answers: list[ElicitationAnswer] = Field(default_factory=list)
    request_state: str | None = None


class McpCallResult(ToolExecuteResult):
    """``input_required``: the server asked the user something this call has no answer for; the
    call was stopped before a result (nothing stored) and the workflow asks the user."""

    input_required: ElicitationRequest | None = Field(default=None, exclude_if=lambda v: v is None)


class McpServerEvent(Model):
    """One change of an MCP server's connection in one worker process, kept in the store's
    ``mcp_server_events`` table (``agentrt mcp list`` reads the latest per server):
    ``McpServerStarting``, ``McpServerReady`` (``tools``: how many it lists),
    ``McpServerStopped`` (the worker shut it down) or ``McpServerFailed`` (``diagnostic``: why;
    the worker restarts it with backoff on next use). ``worker``: the worker's identity;
    ``at``: when (UTC)."""

    type: Literal["McpServerStarting", "McpServerReady", "McpServerStopped", "McpServerFailed"]
    server: str
    worker: str
    at: datetime
    tools: int | None = None
    diagnostic: str | None = None
    protocol_version: str | None = None


class McpTrustDecision(Model):
    """An operator's decision on how far an MCP server is trusted (``agentrt mcp trust``, ``agentrt
    mcp revoke``), kept in the store's ``mcp_trust_decisions`` table and the audit log. The latest
    decision on ``server`` overrides its ``trust`` in agentrt.toml from the next tool listing of
    every worker on: ``trusted`` (the policy decides by risk class), ``untrusted`` (every call needs
    an approval) or ``revoked`` (no worker lists or calls its tools, and workers stop it, until a
    later decision trusts it again). ``principal``: who decided; ``reason``: why; ``at``: when (UTC)."""

    server: str = Field(pattern=SERVER_NAME_PATTERN)
    trust: McpTrustLevel
    principal: str
    reason: str
    at: datetime


class McpServerChange(Model):
    """An operator's change of the MCP servers at run time (``agentrt mcp add`` and ``agentrt mcp
    change``, ``AgentClient.add_mcp_server``, ``POST /v1/mcp/servers``), kept in the store's
    ``mcp_server_changes`` table and the audit log (``add_mcp_server``, ``change_mcp_server``). The
    latest change of ``server`` is its configuration for every worker from its next listing of the
    server's tools on (a few seconds: workers cache the registry briefly), whatever agentrt.toml
    says. ``action``: ``add`` (a new name) or ``change``; ``config``: the server's table;
    ``principal``: who; ``reason``: why; ``at``: when (UTC)."""

    server: str = Field(pattern=SERVER_NAME_PATTERN)
    action: Literal["add", "change"]
    config: McpServerConfig
    principal: str
    reason: str
    at: datetime
