"""One error hierarchy for agentrt, so callers can tell mistakes from run failures.

    AgentrtError
    ├── ConfigurationError          a developer or operator mistake; never retried
    │   ├── UnknownProfileError     a model profile name not in the configuration
    │   ├── InvalidScriptError      a scripted-model file that does not parse
    │   ├── InvalidTrajectoryFile   an exported trajectory file (json or jsonl) that does not parse
    │   ├── InvalidGraph            a task graph that is not a bounded DAG of well-formed nodes
    │   │   └── NodeCannotDecompose a worker node that would plan or delegate further
    │   ├── InvalidOutputSchema     an output type or JSON Schema that cannot be a turn's output spec
    │   ├── MissingSearchAttributes the namespace lacks the session search attributes (worker/_startup.py)
    │   ├── AgentNotRegistered      a session names an agent its worker did not register
    │   ├── ToolNotRegistered       a session names tools its worker did not register
    │   ├── InvalidMcpServer        an MCP server's configuration given at run time that does not validate
    │   └── SecretsMissing          at worker start: declared secrets no source has (_secrets.py)
    ├── ClientError                 a client request the runtime could not serve
    │   ├── SessionNotFound         no session workflow with that id
    │   ├── RequestRejected         the session refused an update (validator said why)
    │   │   └── SessionBusy         a send-only-if-idle message while a turn runs, a compaction runs or work is queued
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
    │   ├── PauseNotAllowed         an owner-wide pause or resume by a principal that is neither the owner nor an operator
    │   ├── McpServerExists         an MCP server added under a name a server has already
    │   ├── McpServerNotFound       an MCP server changed or revoked that neither agentrt.toml nor the store has
    │   └── InvalidStreamCursor     a stream position (Last-Event-ID) that is no item of the session's stream
    ├── WebhookSignatureInvalid     a webhook request whose signature, timestamp or headers do not check out
    └── RunError                    something failed while work was running
        ├── ActivityContractMismatch  an activity call from a build more than one activity contract apart
        ├── ProviderError           a model provider call failed
        │   ├── ProviderHTTPError   the provider answered with a non-2xx status (or an error event in the stream)
        │   ├── ProviderTransportError  no HTTP answer (connect, read, stream cut)
        │   │   └── StreamStalled   the stream went idle (no byte for the profile's stream_idle_timeout_seconds)
        │   ├── ProviderProtocolError   an answer the provider's API does not define (unknown chunk shape)
        │   ├── EmptyResponseError  the model answered with no text and no tool call
        │   └── ScriptExhaustedError    the scripted model has no reply left
        ├── ToolError               a tool call could not be carried out
        │   ├── WorkspaceEscapeError    a path leaves the session's workspace
        │   ├── ToolArgumentsError      arguments do not match the tool's schema
        │   ├── SecretNotFound          a declared secret is in no source of the worker (_secrets.py)
        │   ├── SecretSourceFailed      a declared secret could not be read (_secrets.py)
        │   └── MemoryLimitExceeded     an owner's live memories or a session's pending proposals are at their bound
        ├── PolicyDenied            the policy engine or an approver refused a call
        ├── BudgetExceeded          a round, token or time budget ran out
        ├── QuotaExceeded           a tenant is at a quota (sessions, or tokens, dollars, tool calls per UTC day)
        ├── EffectOutcomeUnknown    an effect was claimed but its outcome was never recorded
        ├── OutputInvalid           a turn's last allowed answer did not match its output schema
        ├── StoreFileChanged        the store's SQLite file was deleted or replaced while a process used it (store/_engine.py)
        ├── PayloadDecryptionError  an encrypted payload under a key this process lacks, or tampered (worker/_codec.py)
        └── PayloadStorageError     an externally stored payload could not be stored or read back (worker/_payload_errors.py)
            ├── PayloadNotFound     no payload under that key: reader and writer use different storage
            └── PayloadStorageUnavailable  the storage refused or did not answer (an S3 bucket, credentials, endpoint)

The ``RunError`` branch is defined in ``_run_errors``; the payload and search-attribute errors
where they are raised (``worker/``).
"""

from __future__ import annotations

__all__ = [
    "AgentNotRegistered",
    "AgentrtError",
    "CapabilityWidened",
    "ClientError",
    "ConfigurationError",
    "GraphNotFound",
    "InvalidGraph",
    "InvalidListFilter",
    "InvalidMcpServer",
    "InvalidScriptError",
    "InvalidStreamCursor",
    "InvalidTrajectoryFile",
    "McpServerExists",
    "McpServerNotFound",
    "MemoryAlreadyDecided",
    "MemoryNotFound",
    "NodeCannotDecompose",
    "PauseNotAllowed",
    "PayloadStorageMismatch",
    "RequestRejected",
    "ServerUnavailable",
    "SessionBusy",
    "SessionNotFound",
    "SessionStuck",
    "StoreUnavailable",
    "TaskNotFound",
    "ToolNotRegistered",
    "TurnNotFound",
    "UnknownProfileError",
    "WebhookSignatureInvalid",
    "WorkerUnavailable",
]



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


class SessionBusy(RequestRejected):
    """A message sent only if the session is idle (``if_idle``) was refused: nothing was queued.

    ``busy`` says what the session is doing: ``turn`` (turn ``turn_id`` runs), ``compaction`` (its
    context is being summarised) or ``queued`` (a message or operation waits to run, so the message
    would queue behind it). A ``RequestRejected``: callers that catch refusals catch it too."""

    def __init__(self, session_id: str, request: str, reason: str, busy: str = "turn", turn_id: str | None = None) -> None:
        super().__init__(session_id, request, reason)
        self.busy = busy
        self.turn_id = turn_id


class ServerUnavailable(ClientError):
    def __init__(self, address: str, reason: str) -> None:
        self.address = address
        self.reason = reason
        super().__init__(f"no Temporal server answers at {address}: {reason}")


class StoreUnavailable(ClientError):
    """The application store does not answer at ``url`` (its password hidden): ``reason`` is the
    driver's first line (connection refused, authentication failed, a file that cannot be opened)."""

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"the store does not answer at {url}: {reason}")


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
            "(driver \"store\"), or the same [payloads] path / AGENTRT_PAYLOAD_PATH (driver \"directory\"), or the same "
            "[payloads] bucket and endpoint_url / AGENTRT_PAYLOAD_BUCKET and AGENTRT_PAYLOAD_ENDPOINT_URL (driver \"s3\")."
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


class PauseNotAllowed(ClientError):
    """An owner-wide pause or resume (``AgentClient.pause_owner``, ``agentrt pause --owner``) that
    ``principal`` may not ask for: it is neither ``owner`` nor one of the client's operators, or it
    is an operator and gave no reason. Nothing was paused or resumed. HTTP: 403."""

    def __init__(self, principal: str, owner: str, action: str, reason: str) -> None:
        self.principal = principal
        self.owner = owner
        self.action = action
        self.reason = reason
        super().__init__(f"principal {principal!r} may not {action} the work of owner {owner!r}: {reason}")


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


class AgentNotRegistered(ConfigurationError):
    """A session names an agent (``SessionConfig.agent``) that the worker serving ``task_queue``
    did not register (``AgentrtPlugin(agents=...)``, ``agentrt worker --agents``). The session
    fails at its start, before any model call; ``registered``: the agents that worker has."""

    def __init__(self, name: str, task_queue: str, registered: list[str]) -> None:
        self.name = name
        self.task_queue = task_queue
        self.registered = registered
        import difflib  # here: only this error reads it

        known = ", ".join(registered) or "none"
        close = difflib.get_close_matches(name, registered, n=1)
        guess = f"; did you mean {close[0]!r}?" if close else ""
        super().__init__(
            f"agent {name!r} is not registered on the worker of task queue {task_queue!r} that took the session "
            f"(registered: {known}{guess}); a session of an agent needs every worker polling {task_queue!r} to "
            "register it (agentrt dev --agents MODULE, agentrt worker --agents MODULE, or AgentrtPlugin(agents=[...]))"
        )


class ToolNotRegistered(ConfigurationError):
    """A session offers tools (``SessionConfig.tools``, or its agent's) that the worker serving
    ``task_queue`` did not register. The session fails at its start, before any model call."""

    def __init__(self, names: list[str], task_queue: str) -> None:
        self.names = names
        self.task_queue = task_queue
        listed = ", ".join(repr(n) for n in names)
        super().__init__(
            f"tool{'s' if len(names) > 1 else ''} {listed} not registered on the worker of task queue {task_queue!r}; "
            f"every worker polling {task_queue!r} needs the module defining them "
            "(agentrt dev --agents MODULE, agentrt worker --agents MODULE)"
        )


class InvalidMcpServer(ConfigurationError):
    """An MCP server's configuration given at run time (``agentrt mcp add``/``change``,
    ``AgentClient.add_mcp_server``, ``POST /v1/mcp/servers``) that is no valid
    ``[mcp.servers.NAME]`` table, or asks what only agentrt.toml may (``sandbox = "none"``).
    ``server``: the name it was given under; ``problems``: each problem, with where."""

    def __init__(self, server: str, problems: list[str]) -> None:
        self.server = server
        self.problems = problems
        super().__init__(f"MCP server {server[:64]!r} is not a valid configuration: {'; '.join(problems)}")


class McpServerExists(ClientError):
    """An MCP server added (``agentrt mcp add``) under a name a server has already: ``where`` says
    whose (``agentrt.toml``, or ``the store``: an operator added it at run time). Change it
    instead (``agentrt mcp change``); nothing was recorded."""

    def __init__(self, server: str, where: str) -> None:
        self.server = server
        self.where = where
        super().__init__(f"MCP server {server!r} exists already ({where}); change it with agentrt mcp change")


class McpServerNotFound(ClientError):
    """An MCP server changed or revoked that neither the caller's agentrt.toml nor the
    store's registry has; ``known``: the names that are. Nothing was recorded."""

    def __init__(self, server: str, known: list[str]) -> None:
        self.server = server
        self.known = known
        listed = ", ".join(known[:20]) or "none"
        super().__init__(f"no MCP server {server[:64]!r} in agentrt.toml or the store (known: {listed}); add it with agentrt mcp add")
