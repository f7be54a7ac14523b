"""The tool interface and the registry that validates and dispatches model tool calls.

A ``Tool`` is plain synchronous Python: it gets validated arguments and a ``ToolContext``
(workspace, time bound, heartbeat and cancellation hooks) and returns a ``ToolOutput``.
The Temporal activity that wraps the registry lives elsewhere; nothing here imports it.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from agentrt.activities.tools._runtime import ToolRuntime

from agentrt.schemas import (
    AgentSpec,
    ConfigurationError,
    MemoryNote,
    SandboxPolicy,
    ToolArgumentsError,
    ToolCall,
    ToolCrashedError,
    ToolError,
    ToolSpec,
)

__all__ = ["CrashToRetry", "Tool", "ToolArgs", "ToolContext", "ToolOutput", "ToolRegistry", "format_validation_error"]

Risk = Literal["read_only", "idempotent", "effectful"]


def _noop() -> None:
    return None


def _never() -> bool:
    return False


@dataclass
class ToolContext:
    """What a running tool may use besides its arguments.

    - ``workspace``: the directory every path argument is confined to, by its real path (a tool
      refuses it once it resolves elsewhere: ``checked_workspace``).
    - ``timeout_seconds``: upper bound on the tool's run time (seconds); tools that take
      their own timeout argument clamp it to this.
    - ``sandbox``: how a process the tool starts is confined (``SandboxPolicy``: ``read_only``,
      ``workspace_write``, ``danger_full_access``); ``network``: whether it may use the network.
    - ``heartbeat``: call about once a second during long work, for a runner that needs it
      (the ``tool.execute`` activity heartbeats to Temporal by itself for the whole call).
    - ``is_cancelled``: poll during long work; when True, stop and raise ``ToolError``.
    - ``started``: ``time.monotonic()`` when the call began; ``check()`` compares it with
      ``timeout_seconds``.
    - ``session_id``, ``call_key`` (the call's idempotency key) and ``store`` (the worker's
      ``agentrt.store.Store``, None outside a worker): what the memory tools read and write.
    - ``skill_paths``: directories searched for skills besides the workspace's ``.agentrt/skills``
      (agentrt.toml ``[skills] paths``); ``shell.run`` lets a sandboxed command read them.
    - ``turn_id`` (``turn-N``), ``call_id`` (the model's id of the call) and ``principal`` (the
      session's owner, on whose behalf the call runs; read from the store when asked, ``principal_of``).
    - ``idempotency_key`` (= ``call_key``): for a tool that is not read-only,
      ``<workflow id>/<turn>/<position>/<call id>``, the same on every retry of this call and on no
      other call: pass it to the service the tool changes (a payment API's ``Idempotency-Key``) so a
      retried call cannot apply twice there either. A read-only tool's key is ``<turn>/<call id>``
      (it goes through no effect ledger): a model that sends one call id in two rounds of a turn
      gives both calls that key.
    - ``deps``: the worker's dependencies (``AgentrtPlugin(deps=...)``: a factory called once per
      worker); None without. Never serialized, never in history.
    - ``final_attempt``: this is the retry policy's last attempt (a crash now becomes the call's result).
    - ``secrets``: the values of the secrets the tool declares (``@tool(secrets=[...])``), by name,
      read by the worker for this call (``SecretValues``; another name raises ``ToolError``). Never
      serialized; any of them in the tool's output is recorded as ``[secret:NAME]``.
    - ``egress_allow``: internal destinations a sandboxed command with ``network`` may reach through
      the egress proxy (agentrt.toml ``[sandbox] egress_allow``: ``"host:port"`` entries).
    - ``cgroup``: a cgroup v2 directory delegated to the worker (``[sandbox] cgroup``), under which
      each sandboxed command gets a cgroup of its own (``_cgroup.CallCgroup``); None: none.
    """

    workspace: Path
    timeout_seconds: float = 300.0
    sandbox: SandboxPolicy = "workspace_write"
    network: bool = False
    heartbeat: Callable[[], None] = field(default=_noop)
    is_cancelled: Callable[[], bool] = field(default=_never)

    started: float = field(default_factory=time.monotonic)
    session_id: str = ""
    call_key: str = ""
    store: Any = None
    skill_paths: tuple[Path, ...] = ()
    turn_id: str = ""
    call_id: str = ""
    principal_of: Callable[[], str] = field(default=lambda: "", repr=False)
    final_attempt: bool = True
    runtime: ToolRuntime | None = field(default=None, repr=False)
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)
    egress_allow: tuple[str, ...] = ()
    cgroup: str | None = None

    @property
    def principal(self) -> str:
        """The session's owner, read when a tool asks (``principal_of``)."""
        return self.principal_of()

    @property
    def idempotency_key(self) -> str:
        return self.call_key

    @property
    def deps(self) -> Any:
        return self.runtime.deps() if self.runtime is not None else None

    def run_async(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run an async tool's ``coroutine`` on the worker's tool loop (``ToolRuntime``), bounded by
        what is left of ``timeout_seconds`` and stopped by a cancel; outside a worker, on a new loop."""
        if self.runtime is None:
            return asyncio.run(coroutine)
        if self.runtime.has_deps:
            self.runtime.deps()  # built here, not on the tool loop, which an async factory needs free
        left = max(0.0, self.timeout_seconds - (time.monotonic() - self.started))
        return self.runtime.run(coroutine, timeout=left, is_cancelled=self.is_cancelled, bound=self.timeout_seconds)

    def run_sync(self, function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Run a sync tool's ``function`` on a thread of its own (``ToolRuntime.call``), bounded by
        what is left of ``timeout_seconds`` and stopped by a cancel, so that one that never returns
        holds no activity slot of the worker; outside a worker, here."""
        if self.runtime is None:
            return function(*args, **kwargs)
        left = max(0.0, self.timeout_seconds - (time.monotonic() - self.started))
        return self.runtime.call(function, args, kwargs, timeout=left, is_cancelled=self.is_cancelled, bound=self.timeout_seconds)

    def __post_init__(self) -> None:
        self.workspace = Path(self.workspace)
        self.skill_paths = tuple(Path(p) for p in self.skill_paths)

    def check(self) -> None:
        """Raise ``ToolError`` when the call was cancelled or has run ``timeout_seconds``; long
        loops call it between steps so that no call holds a worker thread past its bound."""
        if self.is_cancelled():
            raise ToolError("cancelled")
        elapsed = time.monotonic() - self.started
        if elapsed >= self.timeout_seconds:
            raise ToolError(f"stopped after {elapsed:.1f} s: the call's time bound is {self.timeout_seconds:g} s")


@dataclass
class ToolOutput:
    """A tool's result; ``text`` is exactly what the model sees.

    ``state_keys`` name the state this result represents (e.g. ``file:notes.md``): a later
    result with the same keys supersedes this one in the model's context (state projection).
    ``memory``: the memory a ``memory.write`` stored, for the workflow.
    """

    text: str
    state_keys: list[str] = field(default_factory=list)
    memory: MemoryNote | None = None


class ToolArgs(BaseModel):
    """Base for a tool's ``Args`` model: unknown argument names are an error."""

    model_config = ConfigDict(extra="forbid")


def _strip_titles(schema: Any) -> Any:
    """Drop pydantic's generated ``title`` strings; keep properties that are named ``title``."""
    if isinstance(schema, dict):
        return {
            k: _strip_titles(v)
            for k, v in schema.items()
            if not (k == "title" and isinstance(v, str))
        }
    if isinstance(schema, list):
        return [_strip_titles(v) for v in schema]
    return schema


class Tool(ABC):
    """One built-in tool.

    Subclasses set ``name``, ``description``, ``risk`` (``read_only``, ``idempotent`` or
    ``effectful``), ``Args`` (a ``ToolArgs`` subclass) and, for a read-only tool that returns
    in well under a second, ``local_activity = True``, and implement ``run``, which
    raises ``ToolError`` (or a subclass) when the call cannot be carried out.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    risk: ClassVar[Risk]
    Args: ClassVar[type[BaseModel]]
    # Read-only and fast (well under a second): may run as a Temporal local activity.
    local_activity: ClassVar[bool] = False
    # An exception other than ToolError is retried by the activity's retry policy before it becomes
    # the call's ToolCrashedError (user tools: ``@tool``); built-ins report it at once.
    crash_retried: ClassVar[bool] = False
    # Names of the secrets the worker reads for each call (``ToolContext.secrets``); built-ins need none.
    secrets: tuple[str, ...] = ()

    def spec(self) -> ToolSpec:
        """The tool as the model sees it: ``parameters`` is the JSON Schema of ``Args``."""
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=_strip_titles(self.Args.model_json_schema()),
            risk=self.risk,
            local_activity=self.local_activity and self.risk == "read_only",
        )

    @abstractmethod
    def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        """Carry out the call with validated ``args``; raise ``ToolError`` on failure."""

    def state_keys(self, args: Any, ctx: ToolContext) -> list[str]:
        """Keys of the state a successful call with ``args`` replaces (none by default).

        A function of the arguments, not of the output, so a recorded effect replayed from
        the ledger gets the same keys as the original run.
        """
        return []

    def recorded(self, args: Any, ctx: ToolContext, text: str) -> ToolOutput:
        """The output of a successful call whose effect the ledger recorded with result ``text``
        (a retried attempt does not run it again): the text with the call's ``state_keys``.
        A tool whose output carries more (``memory.write``'s memory) rebuilds it here."""
        return ToolOutput(text, state_keys=self.state_keys(args, ctx))


def format_validation_error(error: ValidationError) -> list[str]:
    """Turn pydantic's errors into short problems a model can act on.

    ``{"loc": ("path",), "type": "missing"}`` becomes ``"path: field required"``;
    ``extra_forbidden`` becomes ``"extra field 'foo' not allowed"``.
    """
    problems: list[str] = []
    for err in error.errors(include_url=False):
        loc = ".".join(str(part) for part in err.get("loc", ()))
        kind = err.get("type", "")
        msg = str(err.get("msg", "invalid"))
        if kind == "missing":
            problems.append(f"{loc}: field required")
        elif kind == "extra_forbidden":
            problems.append(f"extra field '{loc}' not allowed")
        else:
            msg = msg.removeprefix("Value error, ")
            problems.append(f"{loc}: {msg}" if loc else msg)
    return problems


class CrashToRetry(Exception):
    """A ``crash_retried`` tool raised ``error`` (not a ``ToolError``) on an attempt that is not the
    last: the activity fails so that Temporal's retry policy runs the call again."""

    def __init__(self, tool: str, error: BaseException) -> None:
        self.tool = tool
        self.error = error
        # At most 500 characters of the exception's text, as ToolCrashedError: this message is the
        # attempt's failure, and one of megabytes exceeded the server's limits (the failure was
        # lost and the attempt ran on to its timeout).
        text = str(error)
        super().__init__(f"{tool} raised {type(error).__name__}: {text[:500] if text else '(no message)'}")


class ToolRegistry:
    """Tools by name, in registration order; validates and runs ``ToolCall``s. Also the worker's
    named agents (``AgentSpec`` by name) and its ``runtime`` (``ToolRuntime``: deps, async tools).
    A tool registered only through an agent (``register_agent``) is offered to the sessions that
    name it (the agent's), never to a session that names no tools (``specs(None)``): its
    secrets and effects are the agent's, not every session's on the worker."""

    def __init__(self, tools: list[Tool] | None = None, *, runtime: ToolRuntime | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        self._specs: dict[str, ToolSpec] = {}  # built once: a JSON Schema costs milliseconds, every model call asks
        self._agents: dict[str, AgentSpec] = {}
        self._agent_only: set[str] = set()  # tools an agent brought that nothing registered on their own
        self.runtime = runtime or ToolRuntime()
        for tool in tools or []:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add ``tool``; raises ``ConfigurationError`` if its name is already taken (by another tool
        object: registering the same one again is a no-op, as two agents may share a tool)."""
        if tool.name in self._tools:
            if self._tools[tool.name] is tool:
                self._agent_only.discard(tool.name)
                return
            raise ConfigurationError(f"tool {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._specs[tool.name] = tool.spec()

    def register_agent(self, spec: AgentSpec, tools: list[Tool]) -> None:
        """Add the agent ``spec`` and its tool objects (``Agent.spec()``, ``Agent.function_tools``);
        raises ``ConfigurationError`` when another agent has its name. The names it lists besides
        its tools (built-ins) are checked when a session starts (``ToolNotRegistered``)."""
        known = self._agents.get(spec.name)
        if known is not None and known != spec:
            raise ConfigurationError(f"agent {spec.name!r} is already registered")
        for tool in tools:
            if tool.name not in self._tools:
                self.register(tool)
                self._agent_only.add(tool.name)
            elif self._tools[tool.name] is not tool:
                raise ConfigurationError(f"tool {tool.name!r} is already registered")
        self._agents[spec.name] = spec

    def agent(self, name: str) -> AgentSpec | None:
        """The agent registered as ``name``, or None."""
        return self._agents.get(name)

    def agent_names(self) -> list[str]:
        """Registered agent names, in registration order."""
        return list(self._agents)

    def names(self) -> list[str]:
        """Registered tool names, in registration order."""
        return list(self._tools)

    def get(self, name: str) -> Tool:
        """The tool called ``name``; raises ``ToolError`` naming the available tools if unknown."""
        try:
            return self._tools[name]
        except KeyError:
            available = ", ".join(self._tools) or "(none)"
            raise ToolError(f"unknown tool {name!r}; available: {available}") from None

    def specs(self, names: list[str] | None = None) -> tuple[list[ToolSpec], list[str]]:
        """Specs of ``names`` and the names that are not registered; when None, of every tool but
        those only an agent brought (a session that names no tools gets none of an agent's)."""
        if names is None:
            return [spec for name, spec in self._specs.items() if name not in self._agent_only], []
        found = [self._specs[n] for n in names if n in self._specs]
        unknown = [n for n in names if n not in self._tools]
        return found, unknown

    def validate(self, name: str, arguments: dict[str, Any] | None) -> BaseModel:
        """Validate ``arguments`` (None counts as ``{}``) against the tool's ``Args``.

        Raises ``ToolError`` for an unknown tool and ``ToolArgumentsError`` listing every
        problem (``"path: field required"``, ``"extra field 'foo' not allowed"``).
        """
        tool = self.get(name)
        try:
            return tool.Args.model_validate(arguments or {})
        except ValidationError as e:
            raise ToolArgumentsError(name, format_validation_error(e)) from e

    def execute(self, call: ToolCall, ctx: ToolContext) -> ToolOutput:
        """Validate and run one model tool call.

        Raises ``ToolError`` for an unknown tool, ``ToolArgumentsError`` when the model's
        argument text was not a JSON object (``call.arguments`` None) or does not match the
        schema, whatever ``ToolError`` the tool raises, and ``ToolCrashedError`` (a
        ``ToolError``) for any other exception of the tool, so an effectful call that failed
        is recorded ``failed`` in the effect ledger; for a tool that says ``crash_retried`` (a
        user's ``@tool``), ``CrashToRetry`` instead until ``ctx.final_attempt``; a ``SystemExit`` or
        ``KeyboardInterrupt`` the tool raises counts as such an exception. Only an exception
        raised while ``ctx.is_cancelled()`` (the runner cancelling the call) propagates as it is.
        """
        tool = self.get(call.name)
        if call.arguments is None:
            reason = call.arguments_error or "arguments are not a JSON object"
            raise ToolArgumentsError(call.name, [f"arguments are not valid JSON: {reason}"])
        args = self.validate(call.name, call.arguments)
        try:
            output = tool.run(args, ctx)
            if not output.state_keys:
                output.state_keys = tool.state_keys(args, ctx)
        except ToolError:
            raise
        except (Exception, SystemExit, KeyboardInterrupt) as err:  # noqa: BLE001 - whatever a tool raises, the model gets a typed tool error
            # A tool calling sys.exit() (an argparse-based helper) or raising KeyboardInterrupt in a
            # worker thread has stopped, not the worker: treated as any crash, so an effectful call's
            # claim is released, not left to a person to reconcile.
            if ctx.is_cancelled():
                raise  # the runner cancelling the call (Temporal raises its CancelledError in the tool's thread)
            if tool.crash_retried and not ctx.final_attempt:
                raise CrashToRetry(call.name, err) from err
            raise ToolCrashedError(call.name, err) from err
        return output

    def recorded(self, call: ToolCall, ctx: ToolContext, text: str) -> ToolOutput:
        """The output of a successful ``call`` the effect ledger recorded with result ``text``
        (``Tool.recorded``); the bare text when the call is unknown or invalid."""
        try:
            args = self.validate(call.name, call.arguments)
            return self.get(call.name).recorded(args, ctx, text)
        except ToolError:
            return ToolOutput(text)
