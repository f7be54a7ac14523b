"""One error hierarchy for agentrt, so callers can tell mistakes from run failures.

    AgentrtError
    ├── ConfigurationError          a developer or operator mistake; never retried
    │   ├── UnknownProfileError     a model profile name not in the configuration
    │   ├── InvalidScriptError      a scripted-model file that does not parse
    │   ├── InvalidTrajectoryFile   an exported trajectory file (json or jsonl) that does not parse
    │   ├── InvalidGraph            a task graph that is not a bounded DAG of well-formed nodes
    │   │   └── NodeCannotDecompose a worker node that would plan or delegate further
    │   └── MissingSearchAttributes the namespace lacks the session search attributes (worker/_startup.py)
    ├── ClientError                 a client request the runtime could not serve
    │   ├── SessionNotFound         no session workflow with that id
    │   ├── RequestRejected         the session refused an update (validator said why)
    │   ├── ServerUnavailable       no Temporal server answers at the address
    │   ├── WorkerUnavailable       no worker polls the session's task queue (queries need one)
    │   ├── SessionStuck            the session's workflow task keeps failing: it cannot answer (`agentrt doctor`)
    │   ├── PayloadStorageMismatch  a big payload would go where the task queue's workers cannot read it
    │   ├── PayloadCodecMismatch    no worker holds the client's current codec key, or they encrypt and it has none (worker/_codec.py)
    │   ├── MemoryNotFound          no memory with that id that the caller owns
    │   ├── MemoryAlreadyDecided    the memory is not a pending proposal (accepted, rejected or superseded)
    │   ├── TurnNotFound            the session has no such turn (or no trajectory of it)
    │   ├── TaskNotFound            no autonomous task workflow with that id
    │   ├── GraphNotFound           no task graph workflow with that id
    │   └── InvalidStreamCursor     a stream position (Last-Event-ID) that is no item of the session's stream
    ├── WebhookSignatureInvalid     a webhook request whose signature, timestamp or headers do not check out
    └── RunError                    something failed while work was running
        ├── ProviderError           a model provider call failed
        │   ├── ProviderHTTPError   the provider answered with a non-2xx status (or an error event in the stream)
        │   ├── ProviderTransportError  no HTTP answer (connect, read, stream cut)
        │   ├── ProviderProtocolError   an answer the provider's API does not define (unknown chunk shape)
        │   ├── EmptyResponseError  the model answered with no text and no tool call
        │   └── ScriptExhaustedError    the scripted model has no reply left
        ├── ToolError               a tool call could not be carried out
        │   ├── WorkspaceEscapeError    a path leaves the session's workspace
        │   ├── ToolArgumentsError      arguments do not match the tool's schema
        │   └── MemoryLimitExceeded     an owner's live memories or a session's pending proposals are at their bound
        ├── PolicyDenied            the policy engine or an approver refused a call
        ├── BudgetExceeded          a round, token or time budget ran out
        ├── EffectOutcomeUnknown    an effect was claimed but its outcome was never recorded
        ├── PayloadDecryptionError  an encrypted payload under a key this process lacks, or tampered (worker/_codec.py)
        └── PayloadStorageError     an externally stored payload could not be read back (worker/_payloads.py)
            └── PayloadNotFound     no payload under that key: reader and writer use different storage
"""

from __future__ import annotations


class AgentrtError(Exception):
    """Root of every error agentrt raises on purpose."""


class ConfigurationError(AgentrtError):
    """A configuration mistake (bad agentrt.toml, unknown profile, bad script). Not retried."""


class UnknownProfileError(ConfigurationError):
    """``name`` is not among the ``known`` profiles; ``where`` says where they came from (a worker
    reads agentrt.toml once, at its start), when known."""

    def __init__(self, name: str, known: list[str], where: str = "") -> None:
        self.name = name
        self.known = known
        self.where = where
        listed = ", ".join(sorted(known)) or "(none)"
        super().__init__(f"unknown model profile {name!r}; configured profiles: {listed}{f' ({where})' if where else ''}")


class InvalidScriptError(ConfigurationError):
    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"scripted model file {path!r} is invalid: {reason}")


class InvalidTrajectoryFile(ConfigurationError):
    """``path`` is not a trajectory export (``agentrt session trajectory``, json or jsonl):
    ``reason`` says what is wrong, with the line number for jsonl."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"trajectory file {path!r} is invalid: {reason}")


class ClientError(AgentrtError):
    """A client request (start, send, approve, query) the runtime could not serve."""


class SessionNotFound(ClientError):
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"no session {session_id!r} (workflow id session-{session_id})")


class InvalidListFilter(ClientError):
    """A ``list_sessions`` filter that would not stay a filter of sessions: parentheses that close
    the group it is put in (``1=1) OR (WorkflowType != 'x'``), an unclosed quote, or more than
    ``limit`` characters. ``query`` is the filter, ``reason`` what is wrong with it."""

    def __init__(self, query: str, reason: str) -> None:
        self.query = query
        self.reason = reason
        super().__init__(f"invalid session filter {query[:200]!r}: {reason}")


class RequestRejected(ClientError):
    """The session refused an update; ``reason`` is the validator's message."""

    def __init__(self, session_id: str, request: str, reason: str) -> None:
        self.session_id = session_id
        self.request = request
        self.reason = reason
        super().__init__(f"session {session_id} rejected {request}: {reason}")


class ServerUnavailable(ClientError):
    def __init__(self, address: str, reason: str) -> None:
        self.address = address
        self.reason = reason
        super().__init__(f"no Temporal server answers at {address}: {reason}")


class SessionStuck(ClientError):
    """The session's workflow task keeps failing (a non-determinism error, an exception in workflow
    code), so its workflow cannot answer a query. Fields: ``session_id``, ``reason`` (the server's or
    the worker's words). ``agentrt doctor`` / ``find_stuck_workflows`` tell the cause and the remedy."""

    def __init__(self, session_id: str, reason: str) -> None:
        self.session_id = session_id
        self.reason = reason
        super().__init__(f"session {session_id} is stuck: its workflow task keeps failing ({reason}); run `agentrt doctor`")


class WorkerUnavailable(ClientError):
    def __init__(self, session_id: str, reason: str) -> None:
        self.session_id = session_id
        self.reason = reason
        super().__init__(
            f"session {session_id}: no worker is running for its task queue ({reason}); "
            "start one with `agentrt worker` or `agentrt dev`"
        )


class PayloadStorageMismatch(ClientError):
    """A message big enough to leave workflow history would be stored where no worker of the
    task queue reads; it was not sent (the session is unchanged).

    Fields: ``session_id``, ``task_queue``, ``size_bytes`` (the serialized message),
    ``threshold_bytes``, ``client_storage`` (driver and location this client writes to),
    ``client_fingerprint``, ``worker_fingerprints`` (worker identity -> the fingerprints of
    the storage it reads).
    """

    def __init__(
        self,
        session_id: str,
        task_queue: str,
        size_bytes: int,
        threshold_bytes: int,
        client_storage: str,
        client_fingerprint: str,
        worker_fingerprints: dict[str, list[str]],
    ) -> None:
        self.session_id = session_id
        self.task_queue = task_queue
        self.size_bytes = size_bytes
        self.threshold_bytes = threshold_bytes
        self.client_storage = client_storage
        self.client_fingerprint = client_fingerprint
        self.worker_fingerprints = worker_fingerprints
        workers = "; ".join(f"{identity.split()[0]} reads {', '.join(prints)}" for identity, prints in worker_fingerprints.items())
        super().__init__(
            f"session {session_id}: message not sent. At {size_bytes:,} bytes it would leave workflow history "
            f"(threshold {threshold_bytes:,} bytes) and be stored in this client's payload storage, "
            f"{client_storage} ({client_fingerprint}), which no worker on task queue {task_queue!r} reads "
            f"(worker {workers}; a worker logs the location of each at start). Give this client the "
            "workers' payload storage: the same AGENTRT_HOME, or the same [store] url / AGENTRT_DATABASE_URL "
            "(driver \"store\"), or the same [payloads] path / AGENTRT_PAYLOAD_PATH (driver \"directory\")."
        )


class MemoryNotFound(ClientError):
    """No memory ``memory_id`` that the caller may see: unknown, or another principal's (the same
    error either way, so a stranger learns nothing about other owners' memories)."""

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id
        super().__init__(f"no memory {memory_id!r}")


class MemoryAlreadyDecided(ClientError):
    """Memory ``memory_id`` is no longer a proposal: its ``status`` is ``accepted``, ``rejected``
    or ``superseded`` (``decided_by`` decided it, when known). Nothing was changed."""

    def __init__(self, memory_id: str, status: str, decided_by: str | None = None) -> None:
        self.memory_id = memory_id
        self.status = status
        self.decided_by = decided_by
        by = f" by {decided_by}" if decided_by else ""
        super().__init__(f"memory {memory_id!r} is not a pending proposal: it is {status}{by}")


class TurnNotFound(ClientError):
    """Session ``session_id`` has no turn ``turn_id`` (or none with a trajectory: a turn recorded
    before trajectories existed, or one not started yet)."""

    def __init__(self, session_id: str, turn_id: str) -> None:
        self.session_id = session_id
        self.turn_id = turn_id
        super().__init__(f"session {session_id} has no turn {turn_id!r} with a trajectory")


class TaskNotFound(ClientError):
    """No autonomous task ``task_id``: no workflow ``task-<task_id>`` exists."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(f"no task {task_id!r} (workflow id task-{task_id})")


class GraphNotFound(ClientError):
    """No task graph ``graph_id`` (or one the caller may not see): no workflow ``graph-<graph_id>``."""

    def __init__(self, graph_id: str) -> None:
        self.graph_id = graph_id
        super().__init__(f"no task graph {graph_id!r} (workflow id graph-{graph_id})")


class InvalidStreamCursor(ClientError):
    """A position to resume a session's stream after (SSE ``Last-Event-ID``) that names no item of
    it: not an id of the stream's grammar, or an item the session does not have. ``cursor`` is
    the position as given, cut to 64 characters; ``reason`` says what is wrong. HTTP: 400."""

    def __init__(self, session_id: str, cursor: str, reason: str) -> None:
        self.session_id = session_id
        self.cursor = cursor[:64]
        self.reason = reason
        shown = repr(self.cursor) + ("..." if len(cursor) > 64 else "")
        super().__init__(f"invalid stream position {shown} for session {session_id!r}: {reason}")


class InvalidGraph(ConfigurationError):
    """A task graph (a file, or a planner's answer) that cannot run: ``problems`` lists each
    (a cycle, a dependency on no node, a duplicate id, too many nodes, a tool not granted ...)."""

    def __init__(self, problems: list[str], source: str = "graph") -> None:
        self.problems = problems
        self.source = source
        super().__init__(f"invalid {source}: {'; '.join(problems)}")


class NodeCannotDecompose(InvalidGraph):
    """Node ``node_id`` would decompose its work further (role ``planner``, or the ``delegate``
    tool): a graph's nodes are workers and reviewers, planned once, before approval."""

    def __init__(self, node_id: str, why: str) -> None:
        self.node_id = node_id
        self.why = why
        super().__init__([f"node {node_id!r} may not decompose further: {why}"], "graph")


class RunError(AgentrtError):
    """A failure while work was running (provider, tool, policy, budget, effect)."""


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
    names it, ``diagnostic`` says why. The worker restarts a failed server with backoff on
    next use."""

    def __init__(self, server: str, diagnostic: str) -> None:
        self.server = server
        self.diagnostic = diagnostic
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


class WebhookSignatureInvalid(AgentrtError):
    """A webhook request that does not prove it comes from agentrt (``verify_webhook``): ``reason``
    is ``missing_header``, ``malformed_header``, ``stale_timestamp``, ``future_timestamp``,
    ``signature_mismatch`` or ``malformed_body``; ``detail`` says more. Answer it with 400 or 401
    and trust nothing in its body."""

    def __init__(self, reason: str, detail: str) -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"webhook signature invalid ({reason}): {detail}")


class CapabilityWidened(AgentrtError):
    """A child session asked for more than its parent holds (``narrowed_grants``): ``wider``
    lists what (tools, a wider sandbox, network). Nothing was started."""

    def __init__(self, parent_session_id: str, wider: list[str]) -> None:
        self.parent_session_id = parent_session_id
        self.wider = wider
        super().__init__(f"a child of session {parent_session_id} may not get more than it holds: {', '.join(wider)}")


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


class EffectOutcomeUnknown(RunError):
    def __init__(self, idempotency_key: str) -> None:
        self.idempotency_key = idempotency_key
        super().__init__(f"effect {idempotency_key!r} was claimed but its outcome was never recorded")
