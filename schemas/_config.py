"""Model profiles and session configuration."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from agentrt.schemas._base import Model
from agentrt.schemas._budget import Budget, ModelPrice
from agentrt.schemas._errors import CapabilityWidened
from agentrt.schemas._output import OutputSpec

__all__ = [
    "AdvisorMode",
    "AdvisorPolicy",
    "ApprovalMode",
    "ApprovalPolicy",
    "ApprovalRule",
    "MAX_APPROVAL_TIMEOUT_SECONDS",
    "MAX_CALL_TIMEOUT_SECONDS",
    "ModelProfile",
    "PROTECTED_FILE_PATTERN",
    "SandboxPolicy",
    "SessionConfig",
    "SessionParent",
    "narrowed_grants",
]

ApprovalRule = Literal["allow", "ask", "deny"]
ApprovalMode = Literal["never", "on_request", "always"]
# How a process a tool starts is confined (``agentrt.activities.tools`` runs it under bubblewrap):
# ``read_only`` (the workspace read-only), ``workspace_write`` (read-write), ``danger_full_access``
# (no OS sandbox at all).
SandboxPolicy = Literal["read_only", "workspace_write", "danger_full_access"]
# Files whose writing changes what runs later or holds secrets (a regular expression over a path
# relative to the workspace): secrets (.env, keys), agentrt's own configuration, git's hooks and
# config, shell start-up files. The policy engine calls writes to them destructive; fs.write does
# not reach one through a link of another name.
PROTECTED_FILE_PATTERN = (
    r"(^|/)\.env(\.[^/]*)?$|(^|/)(id_rsa|id_ed25519|\.netrc|\.pgpass|credentials)$"
    r"|(^|/)agentrt\.toml$|(^|/)\.git(/|$)|(^|/)\.envrc$|(^|/)\.(bashrc|profile|bash_profile|zshrc)$"
)
# The longest an approval may wait before it is denied: a year (seconds). Finite and bounded so
# that the workflow's timer is one Temporal accepts (a timer of 1e308 s overflows).
MAX_APPROVAL_TIMEOUT_SECONDS = 366 * 24 * 3600
# The longest bound on one model or tool call and the longest heartbeat timeout: a year (seconds).
# A call timeout becomes an activity's ``timedelta``: 1e308 s overflows it, and one of 0 or less
# is refused by the server; either failed every workflow task of the session from its first call.
MAX_CALL_TIMEOUT_SECONDS = 366 * 24 * 3600


class ModelProfile(Model):
    """A named model choice, declared in agentrt.toml under ``[profiles.NAME]``.

    - ``provider``: ``openai`` (Chat Completions; any compatible ``base_url`` such as vLLM,
      Ollama, llama.cpp, Groq, Mistral, DeepSeek, OpenRouter, Azure), ``openai-responses``
      (OpenAI's Responses API), ``anthropic`` (Messages API) or ``scripted`` (offline script).
    - ``api_key_env``: the *name* of the worker's environment variable holding the key;
      the key itself never enters workflow history.
    - ``context_window`` and ``max_output_tokens`` are in tokens.
    - ``compact_threshold``: the fraction of the input budget (more than 0, at most 1) past which
      a session on this profile compacts at a turn's end; 1.0 turns automatic compaction by
      tokens off; None: 0.8 (``COMPACT_THRESHOLD``). A session's own ``compact_threshold`` wins.
    - ``script``: path to a scripted-model file (``scripted`` only).
    - ``timeout_seconds``: bound on one HTTP request (seconds).
    - ``stream_idle_timeout_seconds``: a stream that sends no byte for this long (seconds; the
      response's headers included) fails the attempt as ``StreamStalled`` (code ``stream_stalled``,
      retried), well before ``timeout_seconds``. Raise it for a model that thinks in silence.
    - ``system_prompt``: replaces (``system_prompt_mode = "replace"``) or extends (``"extend"``,
      the default) agentrt's default system prompt for sessions on this profile; a session's
      own ``system_prompt`` applies after the profile's.
    - ``token_limit_parameter``: the request field for ``max_output_tokens`` (Chat
      Completions). Unset, it follows the model family: ``max_completion_tokens`` for OpenAI
      reasoning models (o1, o3, o4, gpt-5 ...), which refuse ``max_tokens``, whatever host
      serves them; ``max_tokens`` for every other model, which is what compatible servers know.
    - ``reasoning_effort``: sent as ``reasoning_effort`` (Chat Completions) or
      ``reasoning.effort`` (Responses) when set.
    - ``thinking_budget_tokens``: Anthropic extended thinking, on when set (tokens, at least
      1,024 and less than ``max_output_tokens``, as the API requires); the thinking blocks are
      then sent back with the tool results, as the API requires.
    - ``prompt_cache``: Anthropic ``cache_control`` breakpoints on the system prompt, the tools
      and the conversation's stable prefix, with this TTL (``5m`` or ``1h``); ``off`` sends
      none. OpenAI caches long prompts by itself.
    - ``output_mode``: how a turn with an output spec asks for it: ``native`` (the default: OpenAI's
      ``response_format`` / Responses ``text.format``, Anthropic a forced output tool) or ``tool``
      (an output tool, ``final_result``, for a compatible server without ``json_schema``).
    - ``price``: US dollars per million tokens (``ModelPrice``, from the provider's price list);
      sessions and tasks count their cost with it (``Budget.max_cost_usd``). Unset costs 0.

    Sources: https://platform.openai.com/docs/guides/reasoning,
    https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking,
    https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching.
    """

    name: str
    provider: Literal["openai", "openai-responses", "anthropic", "scripted"]
    model: str = ""
    base_url: str | None = None
    api_key_env: str | None = None
    context_window: int = Field(default=128_000, ge=1)
    max_output_tokens: int = Field(default=4_096, ge=1)
    compact_threshold: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False)
    temperature: float | None = None
    script: str | None = None
    timeout_seconds: float = 600.0
    stream_idle_timeout_seconds: float = Field(default=60.0, gt=0, le=MAX_CALL_TIMEOUT_SECONDS, allow_inf_nan=False)
    system_prompt: str | None = None
    system_prompt_mode: Literal["replace", "extend"] = "extend"
    token_limit_parameter: Literal["max_tokens", "max_completion_tokens"] | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    price: ModelPrice | None = None
    thinking_budget_tokens: int | None = Field(default=None, ge=1024)
    prompt_cache: Literal["off", "5m", "1h"] = "5m"
    output_mode: Literal["native", "tool"] = "native"

    @model_validator(mode="after")
    def _output_fits_the_window(self) -> "ModelProfile":
        if self.max_output_tokens >= self.context_window:
            raise ValueError(
                f"max_output_tokens ({self.max_output_tokens}) must be smaller than context_window "
                f"({self.context_window}): the reply's tokens are reserved inside the window"
            )
        if self.thinking_budget_tokens is not None and self.thinking_budget_tokens >= self.max_output_tokens:
            raise ValueError(
                f"thinking_budget_tokens ({self.thinking_budget_tokens}) must be smaller than max_output_tokens "
                f"({self.max_output_tokens}): Anthropic counts thinking inside max_tokens"
            )
        return self


class ApprovalPolicy(Model):
    """What the policy engine does with a tool call, by the tool's risk class.

    Rules: ``allow`` runs it, ``ask`` waits for an approval signal, ``deny`` refuses it.
    ``tools`` overrides the rule for a named tool (e.g. ``{"shell.run": "ask"}``); for a call
    classified ``destructive`` or ``network`` the stricter of the two applies. Defaults:
    read-only calls run; idempotent, effectful, destructive and network ones need approval.
    ``mode`` (``ApprovalMode``): ``on_request`` (the default) follows the rules; ``always``
    asks about every call the sandbox and the rules allow but a read-only one; ``never`` asks
    no one: a call whose rule says ``ask`` runs when it is read-only, idempotent or effectful
    (the sandbox confines it) and is denied when destructive or network, unless the sandbox is
    ``danger_full_access``, where it runs too. A read-only call is never asked about (an ``ask``
    rule runs it; ``deny`` still refuses it). See ``agentrt.workflows.policy``.
    """

    read_only: ApprovalRule = "allow"
    idempotent: ApprovalRule = "ask"
    effectful: ApprovalRule = "ask"
    tools: dict[str, ApprovalRule] = Field(default_factory=dict)
    # Left out at their defaults: a worker of an earlier version still reads the policy.
    destructive: ApprovalRule = Field(default="ask", exclude_if=lambda v: v == "ask")
    network: ApprovalRule = Field(default="ask", exclude_if=lambda v: v == "ask")
    mode: ApprovalMode = Field(default="on_request", exclude_if=lambda v: v == "on_request")


AdvisorMode = Literal["off", "lightweight", "full"]


class AdvisorPolicy(Model):
    """When an advisor model reviews a batch of tool calls before the policy decides them
    (``[advisor]`` in agentrt.toml; ``agentrt run --advisor``).

    - ``mode``: ``off`` (the default: no review), ``lightweight`` (only batches with a high-risk
      call: a destructive shell command, ``sudo``, a write to ``.env`` or outside the workspace,
      network use; ``agentrt.workflows.policy.classify_call`` decides), ``full`` (every batch).
    - ``profile``: the model profile the advisor runs on; None uses the session's.
    - ``timeout_seconds``: bound on one review, its retry included (seconds); a review that takes
      longer approves (fail-open), recorded as ``AdvisorReviewCompleted`` with its ``error``.
    """

    mode: AdvisorMode = "off"
    profile: str | None = Field(default=None, exclude_if=lambda v: v is None)
    timeout_seconds: float = Field(default=60.0, gt=0, le=3600, allow_inf_nan=False)


class SessionParent(Model):
    """The workflow that started a session as its child, by ``kind``:

    - ``task``: an autonomous task (``id`` its task id); ``number``: the session's number in it
      (1, 2, ...; a scripted model's ``sessions`` section).
    - ``graph``: a task graph (``id`` its graph id); ``node``: the node it runs, ``number``: the
      attempt (a scripted model's ``nodes`` section ``node``, entry ``number``).
    - ``session``: a session that delegated to it (``id`` its session id); ``number``: the
      delegation's number in that session (a scripted model's ``sessions`` section).
    """

    kind: Literal["task", "graph", "session"] = "task"
    id: str
    number: int = Field(ge=1)
    node: str | None = Field(default=None, exclude_if=lambda v: v is None)


class SessionConfig(Model):
    """Everything a session needs to start; carried in the workflow input.

    - ``owner``: the principal who may send messages and decide approvals.
    - ``workspace``: absolute directory on the worker's machine; file tools are confined to it.
    - ``profile``: model profile name (see ``ModelProfile``); ``script``: a scripted-model
      file that overrides the profile's own (for ``--script``).
    - ``system_prompt``: extends (``system_prompt_mode = "extend"``, the default) or replaces
      (``"replace"``) the system prompt the profile gives: agentrt's default (workspace, tools,
      approval rules, date; see ``docs/system-prompt.md``) as the profile changed it.
    - ``tools``: tool names offered to the model; None offers every registered tool.
    - ``approval_timeout_seconds``: a pending approval is denied after this many seconds
      (finite, > 0, at most ``MAX_APPROVAL_TIMEOUT_SECONDS``, a year); None waits forever.
    - ``max_rounds_per_turn``: model calls per turn before the turn ends as ``round_limit``.
    - ``compact_threshold``: the fraction of the input budget (more than 0, at most 1) past which
      the session compacts at a turn's end; 1.0 turns automatic compaction by tokens off (the
      2,000-message bound still applies); None: the profile's, else 0.8.
    - ``model_timeout_seconds``, ``tool_timeout_seconds``: the bound on one attempt of a model or
      tool call (seconds; finite, > 0, at most ``MAX_CALL_TIMEOUT_SECONDS``, a year).
    - ``heartbeat_timeout_seconds``: how soon a dead worker's model or tool call is retried
      elsewhere (seconds). Those activities heartbeat about once a second while they run
      (``HEARTBEAT_THROTTLE``), so a worker whose event loop stalls for longer than this
      less a second has its calls retried; the default, 3 s, resumes a killed worker's
      turn within about 4 s of its restart (``python -m bench.recovery``).
    - ``sandbox``: how processes that tools start are confined (``SandboxPolicy``): under
      ``read_only`` and ``workspace_write`` (the default) ``shell.run`` runs in an OS sandbox
      (bubblewrap) that sees the system read-only, the workspace read-only or read-write and
      nothing else of the machine; ``danger_full_access`` runs it on the worker as it is.
      ``network``: whether sandboxed processes may use the network (default no).
    - ``operators``: principals (the ``[principals] operators`` of the configuration that
      started the session) who may decide its approvals and reconciles, cancel its turns and
      archive it although they are not its owner, each time with a reason; every such act is
      recorded as ``OperatorActed``. They may not send it messages.
    - ``tool_task_queue``: the task queue of the workers that run this session's tool calls
      (``agentrt worker --tools-only``: no provider keys in their environment); None runs them
      on the session's own task queue. With it, no tool runs as a local activity.
    - ``model_task_queue``: the task queue of the workers that run this session's model calls
      (its turns' calls, compaction and advisor reviews; ``agentrt worker --providers-only``, the
      only workers that need provider keys); None runs them on the session's own task queue.
    - ``interactive``: whether a person can answer this session's approvals; when False
      (a session run by an autonomous task, say) a call that needs one is denied with
      ``no_interactive_route`` instead of waiting forever.
    - ``advisor``: when an advisor model reviews a batch of tool calls first (``AdvisorPolicy``;
      off by default). A rejected batch runs no call; an advisor that fails approves.
    - ``mcp_servers``: names of the MCP servers (``[mcp.servers.NAME]`` of the workers' agentrt.toml)
      whose tools each turn offers, as ``<server>.<tool>``; listed once per turn.
    - ``budget``: limits on the session's spend (tokens, cost from the profile's price, tool
      calls, wall time; ``Budget``). A turn that reaches one ends ``budget_exceeded``; the model
      is told what is left in its system prompt; ``raise_budget`` lets the next turn run.
    - ``prompt``: a first message, sent by the owner when the session starts.
    - ``ends_after_turn``: the session ends (its workflow returns the turn's outcome) after its
      first turn, as a task's sessions do.
    - ``parent``: the workflow that started it as a child (``SessionParent``).
    - ``output``: the JSON object every final answer of the session must be (``OutputSpec``,
      docs/structured-output.md); a message's own ``output`` overrides it for its turn.
    - ``local_tools``: tools whose spec says ``local_activity`` (fast, read-only) run as
      Temporal local activities: no activity task and no extra workflow task per call. False
      runs every tool as a regular activity (each call then shows in the UI's timeline).
    - ``fused_rounds``: a model call may run the read-only calls its reply asks for (tools whose
      spec says ``local_activity``, that the policy allows without asking) and call the model
      again, up to the round limit, in one activity; the session records those rounds when the
      call returns (docs/round-cost.md). Only the first model call of such an activity streams
      its tokens. Off by default.
    - ``agent``: the name of an agent the worker registered (``Agent``; ``agentrt worker
      --agents``): its instructions, tools and settings apply at the session's start
      (``apply_agent``); a worker that does not know it fails the session at once
      (``AgentNotRegistered``).
    """

    session_id: str
    owner: str
    workspace: str
    profile: str = "default"
    script: str | None = None
    system_prompt: str | None = None
    system_prompt_mode: Literal["replace", "extend"] = Field(default="extend", exclude_if=lambda v: v == "extend")
    tools: list[str] | None = None
    approval: ApprovalPolicy = Field(default_factory=ApprovalPolicy)
    approval_timeout_seconds: float | None = Field(default=None, gt=0, le=MAX_APPROVAL_TIMEOUT_SECONDS, allow_inf_nan=False)
    max_rounds_per_turn: int = Field(default=250, ge=1)
    compact_threshold: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False, exclude_if=lambda v: v is None)
    model_timeout_seconds: float = Field(default=600.0, gt=0, le=MAX_CALL_TIMEOUT_SECONDS, allow_inf_nan=False)
    tool_timeout_seconds: float = Field(default=300.0, gt=0, le=MAX_CALL_TIMEOUT_SECONDS, allow_inf_nan=False)
    heartbeat_timeout_seconds: float = Field(default=3.0, gt=0, le=MAX_CALL_TIMEOUT_SECONDS, allow_inf_nan=False)
    title: str | None = None
    # Left out when True (the default): a worker of an earlier version still reads the config.
    local_tools: bool = Field(default=True, exclude_if=lambda v: v is True)
    # Left out when False (the default), for the same reason.
    fused_rounds: bool = Field(default=False, exclude_if=lambda v: v is False)
    # Left out at their defaults, for the same reason.
    sandbox: SandboxPolicy = Field(default="workspace_write", exclude_if=lambda v: v == "workspace_write")
    network: bool = Field(default=False, exclude_if=lambda v: v is False)
    interactive: bool = Field(default=True, exclude_if=lambda v: v is True)
    operators: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    tool_task_queue: str | None = Field(default=None, exclude_if=lambda v: v is None)
    model_task_queue: str | None = Field(default=None, exclude_if=lambda v: v is None)
    advisor: AdvisorPolicy = Field(default_factory=AdvisorPolicy, exclude_if=lambda v: v == AdvisorPolicy())
    mcp_servers: list[str] = Field(default_factory=list, exclude_if=lambda v: not v)
    budget: Budget | None = Field(default=None, exclude_if=lambda v: v is None)
    prompt: str | None = Field(default=None, exclude_if=lambda v: v is None)
    ends_after_turn: bool = Field(default=False, exclude_if=lambda v: v is False)
    parent: SessionParent | None = Field(default=None, exclude_if=lambda v: v is None)
    output: OutputSpec | None = Field(default=None, exclude_if=lambda v: v is None)
    agent: str | None = Field(default=None, exclude_if=lambda v: v is None)


SANDBOX_ORDER: dict[str, int] = {"read_only": 0, "workspace_write": 1, "danger_full_access": 2}


def narrowed_grants(
    parent: SessionConfig, *, tools: list[str] | None = None, sandbox: SandboxPolicy | None = None, network: bool | None = None
) -> dict[str, Any]:
    """The capability fields of a child session (a delegated or planned one) that gets at most
    ``parent``'s: ``tools`` (names; None keeps the parent's), ``sandbox`` (no wider than the
    parent's: ``read_only`` < ``workspace_write`` < ``danger_full_access``), ``network`` (only
    if the parent has it). Returns the fields to give the child's ``SessionConfig``. Raises
    ``CapabilityWidened`` when the child would get more: a session's grants are fixed when it
    starts and what it hands on can only be narrower."""
    wider: list[str] = []
    if tools is not None and parent.tools is not None:
        wider += [f"tool {name!r}" for name in tools if name not in parent.tools]
    child_sandbox = sandbox or parent.sandbox
    if SANDBOX_ORDER[child_sandbox] > SANDBOX_ORDER[parent.sandbox]:
        wider.append(f"sandbox {child_sandbox} (the parent has {parent.sandbox})")
    child_network = parent.network if network is None else network
    if child_network and not parent.network:
        wider.append("network")
    if wider:
        raise CapabilityWidened(parent.session_id, wider)
    return {"tools": parent.tools if tools is None else list(tools), "sandbox": child_sandbox, "network": child_network}

