"""Run failures: what goes wrong while work runs (a provider call, a tool call, the policy, a
budget, an effect). The branch ``RunError`` of the hierarchy drawn in ``_errors``."""

from __future__ import annotations

from datetime import datetime

from agentrt.schemas._errors import AgentrtError

__all__ = [
    "ActivityContractMismatch",
    "BudgetExceeded",
    "EffectOutcomeUnknown",
    "EmptyResponseError",
    "FileTooLargeError",
    "InvalidPathError",
    "McpServerUnavailable",
    "McpToolError",
    "MemoryLimitExceeded",
    "NotARegularFileError",
    "OutputInvalid",
    "PolicyDenied",
    "ProviderError",
    "ProviderHTTPError",
    "ProviderProtocolError",
    "ProviderTransportError",
    "QuotaExceeded",
    "RunError",
    "ScriptExhaustedError",
    "SkillNotFound",
    "StoreFileChanged",
    "StreamStalled",
    "ToolArgumentsError",
    "ToolCrashedError",
    "ToolError",
    "ToolTimedOut",
    "WorkspaceEscapeError",
    "status_is_retryable",
]


class RunError(AgentrtError):
    """A failure while work was running (provider, tool, policy, budget, effect)."""


class ActivityContractMismatch(RunError):
    """A worker refused an activity call from a build outside its activity contract's window
    (schemas/_contract.py): the two builds are more than one contract apart, so neither may read
    what the other writes. Raised before the activity runs (nothing done), as a non-retryable
    ``ApplicationError`` of this type; the other build's workers, or the end of the rollout, serve it.

    Fields: ``activity`` (its name), ``worker`` and ``caller`` (``(version, oldest)`` of each side's
    contract; the caller's is None when its header did not parse).
    """

    def __init__(self, activity: str, worker: tuple[int, int], caller: tuple[int, int] | None) -> None:
        self.activity = activity
        self.worker = worker
        self.caller = caller
        theirs = "unreadable" if caller is None else f"{caller[0]} (back to {caller[1]})"
        super().__init__(
            f"activity {activity}: this worker's activity contract is {worker[0]} (back to {worker[1]}), the calling "
            f"workflow's is {theirs}: builds more than one contract apart do not run each other's activities; "
            "the caller's own build must run it (finish or roll back the rollout: deploy/RUNBOOK.md, \"Upgrades\")"
        )


class ProviderError(RunError):
    """A model provider call failed.

    ``partial_usage`` (a ``schemas.Usage`` or None) is the usage the provider reported
    before the failure, e.g. Anthropic's input tokens from ``message_start``.
    """

    partial_usage: object | None = None


# Statuses a provider call may succeed on when retried: request timeout, conflict,
# rate limit, server errors and Anthropic's 529 "overloaded" (docs.anthropic.com/en/api/errors).
RETRYABLE_STATUSES = frozenset({408, 409, 429, 529})


def status_is_retryable(status: int) -> bool:
    """True for 408, 409, 429, 529 and every 5xx; other statuses are final."""
    return status in RETRYABLE_STATUSES or 500 <= status <= 599


class ProviderHTTPError(ProviderError):
    """The provider answered with an error status (or an error event inside a 200 stream).

    Fields: ``status`` (HTTP status), ``url``, ``body`` (response text, truncated to
    4,096 characters), ``retry_after`` (seconds, from the Retry-After header, or None).
    """

    def __init__(self, status: int, url: str, body: str, retry_after: float | None = None) -> None:
        self.status = status
        self.url = url
        self.body = body[:4096]
        self.retry_after = retry_after
        super().__init__(f"provider returned HTTP {status} for {url}: {self.body}")

    @property
    def retryable(self) -> bool:
        return status_is_retryable(self.status)


class ProviderTransportError(ProviderError):
    """No usable HTTP answer: connection refused, timeout, stream cut. Always retryable."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"provider request to {url} failed: {reason}")

    retryable = True


class StreamStalled(ProviderTransportError):
    """A model stream that went idle: no byte for ``idle_seconds`` (``ModelProfile.stream_idle_timeout_seconds``)
    after the request was sent, well before the call's whole bound. Retryable; its failure code is
    ``stream_stalled``."""

    def __init__(self, url: str, idle_seconds: float) -> None:
        self.idle_seconds = idle_seconds
        super().__init__(url, f"stream_stalled: no bytes for {idle_seconds:g} s (stream_idle_timeout_seconds)")


class ProviderProtocolError(ProviderError):
    """The provider answered, but with something its API does not define: a chunk of an unknown
    shape, a field of the wrong type. Not retryable: the same request gets the same answer.

    Fields: ``provider`` (adapter name), ``model``, ``url``, ``line`` (the offending event
    data, cut to ``LINE_CHARS`` characters) and ``reason``.
    """

    LINE_CHARS = 500
    retryable = False

    def __init__(self, provider: str, model: str, url: str, line: str, reason: str) -> None:
        self.provider = provider
        self.model = model
        self.url = url
        self.line = line if len(line) <= self.LINE_CHARS else line[: self.LINE_CHARS] + "…"
        self.reason = reason
        super().__init__(f"{provider} model {model!r} at {url} sent what its API does not define ({reason}): {self.line}")


class EmptyResponseError(ProviderError):
    """The model answered with neither text nor a tool call (outcome ``empty_response``).
    Not retryable here: the turn fails with this cause instead of completing with an empty answer."""

    retryable = False

    def __init__(self, provider: str, model: str, stop_reason: str | None) -> None:
        self.provider = provider
        self.model = model
        self.stop_reason = stop_reason
        super().__init__(
            f"{provider} model {model!r} answered with no text and no tool call (stop reason {stop_reason or 'none'})"
        )


class ScriptExhaustedError(ProviderError):
    """The scripted model was asked for reply ``reply_index`` (0-based) but its script has only
    ``replies`` replies (outcome ``script_exhausted``). Not retryable."""

    retryable = False

    def __init__(self, script: str, reply_index: int, replies: int) -> None:
        self.script = script
        self.reply_index = reply_index
        self.replies = replies
        super().__init__(
            f"script {script} has {replies} model replies; reply {reply_index + 1} was asked for (script exhausted)"
        )


class ToolError(RunError):
    """A tool call could not be carried out; the message goes back to the model."""


class WorkspaceEscapeError(ToolError):
    def __init__(self, path: str, workspace: str) -> None:
        self.path = path
        self.workspace = workspace
        super().__init__(f"path {path!r} resolves outside the workspace {workspace!r}")


class InvalidPathError(ToolError):
    """A path argument no file system call can take: a NUL byte, a name or path too long for the
    OS (``ENAMETOOLONG``), a symlink loop. ``reason`` says which."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        shown = path if len(path) <= 200 else path[:200] + f"... ({len(path)} characters)"
        super().__init__(f"invalid path {shown!r}: {reason}")


class NotARegularFileError(ToolError):
    """The path names a FIFO, a device, a socket or another file that is not a regular file:
    reading or writing it could block the worker or reach outside the workspace. ``kind`` is
    what it is (``fifo``, ``character device`` ...)."""

    def __init__(self, path: str, kind: str) -> None:
        self.path = path
        self.kind = kind
        super().__init__(f"{path!r} is a {kind}, not a regular file; only regular files are read or written")


class FileTooLargeError(ToolError):
    """A file the worker reads for a session (a script, a skill, a workspace file) holds more
    than ``limit`` bytes: ``size`` is what it holds (or, for one that grew while it was read, the
    bytes read when the read stopped). Nothing of it is used."""

    def __init__(self, path: str, size: int, limit: int) -> None:
        self.path = path
        self.size = size
        self.limit = limit
        super().__init__(f"{path!r} holds {size:,} bytes, more than the {limit:,} a file read for a session may hold")


class ToolTimedOut(ToolError):
    """An async ``@tool`` call outlived its time bound (``seconds``) and was cancelled. A read-only
    or idempotent call's model reads it as the call's error; an effectful call's effect may have
    happened, so its effect ledger claim stays open and a person reconciles it (docs/effects.md)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(f"stopped after {seconds:g} s: the call's time bound")


class ToolCrashedError(ToolError):
    """A tool raised something other than ``ToolError``: the call failed (nothing is retried) and
    the model is told the exception's type and message; ``error_type`` is that type's name."""

    def __init__(self, tool: str, error: BaseException) -> None:
        self.tool = tool
        self.error_type = type(error).__name__
        text = str(error)
        super().__init__(f"{tool} failed unexpectedly: {self.error_type}: {text[:500] if text else '(no message)'}")


class McpServerUnavailable(ToolError):
    """An MCP server could not be reached: it failed to start, its connection broke (the call in
    flight fails with this), or the worker has no ``[mcp.servers.NAME]`` for it. ``server``
    names it, ``diagnostic`` says why; ``in_flight`` is True when the connection broke while a
    call was in flight, so the server may have done that call's work (an effectful call's
    outcome is unknown). The worker restarts a failed server with backoff on next use."""

    def __init__(self, server: str, diagnostic: str, *, in_flight: bool = False) -> None:
        self.server = server
        self.diagnostic = diagnostic
        self.in_flight = in_flight
        super().__init__(f"MCP server {server!r} is unavailable: {diagnostic}")


class McpToolError(ToolError):
    """An MCP server answered a call with a protocol error (JSON-RPC ``code`` and message), not
    a result: an unknown tool, arguments it rejects. The model sees it as the call's error."""

    def __init__(self, server: str, tool: str, code: int | None, message: str) -> None:
        self.server = server
        self.tool = tool
        self.code = code
        super().__init__(f"MCP server {server!r} refused {tool!r}: {message}" + (f" (code {code})" if code is not None else ""))


class SkillNotFound(ToolError):
    """``skill.activate`` named no skill the session can see; ``available`` lists those it can."""

    def __init__(self, name: str, available: list[str]) -> None:
        self.name = name
        self.available = available
        super().__init__(f"no skill {name!r}; available: {', '.join(available) or '(none)'}")


class ToolArgumentsError(ToolError):
    def __init__(self, tool: str, problems: list[str]) -> None:
        self.tool = tool
        self.problems = problems
        super().__init__(f"invalid arguments for tool {tool!r}: {'; '.join(problems)}")


class MemoryLimitExceeded(ToolError):
    """A memory was not written: ``holder`` (an owner, or a session) already has ``limit`` of
    ``what`` (``live memories``: proposed or accepted; ``pending proposals``). A model that writes
    in a loop meets this error, not an unbounded store."""

    def __init__(self, holder: str, what: str, limit: int) -> None:
        self.holder = holder
        self.what = what
        self.limit = limit
        super().__init__(f"{holder} already has {limit} {what}, the most allowed: nothing was stored")


class PolicyDenied(RunError):
    def __init__(self, tool: str, reason: str) -> None:
        self.tool = tool
        self.reason = reason
        super().__init__(f"tool call {tool!r} denied: {reason}")


class BudgetExceeded(RunError):
    def __init__(self, budget: str, limit: float) -> None:
        self.budget = budget
        self.limit = limit
        super().__init__(f"{budget} budget of {limit:g} exceeded")


class QuotaExceeded(RunError):
    """A tenant is at one of its quotas (``schemas.Quota``): a start or a model call over it is refused.

    Fields: ``tenant``, ``quota`` (``concurrent_sessions``, ``tokens_per_day``,
    ``cost_usd_per_day`` or ``tool_calls_per_day``), ``limit``, ``used`` (today, or sessions
    open now), ``resets_at`` (the next UTC midnight for a daily quota; None for concurrent
    sessions, which free up as sessions end), ``estimated`` (a refused model call's prompt
    estimate, or None). An operator raises a quota with ``agentrt quota raise``."""

    def __init__(
        self, tenant: str, quota: str, limit: float, used: float, resets_at: datetime | None, *, estimated: float | None = None
    ) -> None:
        self.tenant = tenant
        self.quota = quota
        self.limit = limit
        self.used = used
        self.resets_at = resets_at
        self.estimated = estimated
        prompt = f", and the next model call's prompt is ~{estimated:,.6g} more" if estimated else ""
        when = (
            f"it resets at {resets_at.strftime('%Y-%m-%dT%H:%M:%SZ')} (UTC midnight)"
            if resets_at is not None
            else "it frees up as the tenant's sessions end"
        )
        super().__init__(
            f"tenant {tenant!r} is at its {quota} quota of {limit:,.6g} (used {used:,.6g}{prompt}): {when}, "
            f"or an operator raises it (agentrt quota raise {tenant} --{quota.replace('_', '-')} N --reason ...)"
        )

    def details(self) -> dict[str, object]:
        """The fields as JSON values (``resets_at`` as ISO 8601), as an activity's refusal carries them."""
        return {
            "tenant": self.tenant, "quota": self.quota, "limit": self.limit, "used": self.used,
            "resets_at": self.resets_at.isoformat() if self.resets_at is not None else None, "estimated": self.estimated,
        }


class EffectOutcomeUnknown(RunError):
    def __init__(self, idempotency_key: str) -> None:
        self.idempotency_key = idempotency_key
        super().__init__(f"effect {idempotency_key!r} was claimed but its outcome was never recorded")


class StoreFileChanged(RunError):
    """The store's SQLite file at ``path`` was deleted or replaced (``how``) while this process
    used it: reading on would give a shorter transcript, or one of another store, and writes
    would go to a file nobody reads. Every later use of the store raises it; restore the file
    (or restart with the file meant) and start the process again."""

    def __init__(self, path: str, how: str) -> None:
        self.path = path
        self.how = how
        super().__init__(
            f"the store's SQLite file {path} was {how} while this process used it; agentrt will not read or write "
            "another file under its name: put the file back, or restart the process on the file you mean"
        )


class OutputInvalid(RunError):
    """A turn with an output spec ended ``output_invalid``: the model's last allowed answer still
    did not match the schema. Fields: ``turn_id``, ``errors`` (the validation errors, as the
    turn's ``error``), ``answer`` (the last answer's text, kept). Raised by
    ``TurnOutcome.output_as``."""

    def __init__(self, turn_id: str, errors: str, answer: str | None) -> None:
        self.turn_id = turn_id
        self.errors = errors
        self.answer = answer
        super().__init__(f"turn {turn_id} has no valid structured output: {errors}")
