"""Table definitions of the application store, shared by queries and Alembic's autogenerate.

The migrations in ``store/migrations/versions`` are the source of truth for the schema;
these definitions must match them.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)

__all__ = [
    "EFFECT_STATES",
    "MEMORY_SCOPES",
    "MEMORY_STATUSES",
    "USAGE_STATUSES",
    "WEBHOOK_DELIVERY_STATES",
    "WEBHOOK_WATCH_KINDS",
    "WEBHOOK_WATCH_STATES",
    "audit_log",
    "context_summaries",
    "effects",
    "events",
    "graph_events",
    "graphs",
    "mcp_server_changes",
    "mcp_server_events",
    "mcp_trust_decisions",
    "memories",
    "messages",
    "metadata",
    "payloads",
    "quota_raises",
    "reasoning",
    "sessions",
    "task_checkpoints",
    "task_events",
    "tasks",
    "token_deltas",
    "tool_listings",
    "usage_receipts",
    "webhook_deliveries",
    "webhook_watches",
    "workflow_owners",
    "workspace_owners",
]

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# One row per session; ``config_json`` is the SessionConfig as JSON text.
sessions = Table(
    "sessions",
    metadata,
    Column("session_id", String(255), primary_key=True),
    Column("owner", String(255), nullable=False),
    Column("workspace", Text, nullable=False),
    Column("profile", String(255), nullable=False),
    Column("title", Text, nullable=True),
    Column("config_json", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Index(None, "created_at"),
)

# The transcript: one Message (JSON) per (session_id, position).
messages = Table(
    "messages",
    metadata,
    Column("session_id", String(255), nullable=False),
    Column("position", Integer, nullable=False),
    Column("turn_id", String(255), nullable=True),
    Column("role", String(32), nullable=False),
    Column("content_json", Text, nullable=False),
    PrimaryKeyConstraint("session_id", "position"),
)

# The event projection: one Event (JSON) per (session_id, seq).
events = Table(
    "events",
    metadata,
    Column("session_id", String(255), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("type", String(64), nullable=False),
    Column("turn_id", String(255), nullable=True),
    Column("at", DateTime(timezone=True), nullable=True),
    Column("body_json", Text, nullable=False),
    PrimaryKeyConstraint("session_id", "seq"),
    Index(None, "session_id", "turn_id"),  # a turn's events: its end, for AgentClient.wait
)

# Streamed model output, read by subscribers in ``id`` order; never in workflow history.
token_deltas = Table(
    "token_deltas",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("session_id", String(255), nullable=False),
    Column("turn_id", String(255), nullable=False),
    Column("round", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("idx", Integer, nullable=False),
    Column("text", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Index(None, "session_id", "id"),
    Index(None, "session_id", "turn_id", "round"),  # one model call's deltas, for streams (migration 0010)
)

EFFECT_STATES = ("claimed", "applied", "failed", "not_applied")
USAGE_STATUSES = ("started", "completed", "interrupted")

# The effect ledger: at-most-once bookkeeping for effectful tool calls, one row per
# idempotency key. ``claimed`` before the effect, ``applied``/``failed`` after it;
# ``not_applied`` when an operator reconciled an unknown outcome as "did not happen".
effects = Table(
    "effects",
    metadata,
    Column("idempotency_key", Text, primary_key=True),
    Column("session_id", String(255), nullable=False),
    Column("tool", String(255), nullable=False),
    Column("state", String(32), nullable=False),
    Column("result_text", Text, nullable=True),
    Column("note", Text, nullable=True),
    Column("claimed_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    CheckConstraint("state IN ('claimed', 'applied', 'failed', 'not_applied')", name="state"),
    Index(None, "session_id"),
)

# Usage receipts: token usage per model call attempt, written when it starts and ends.
usage_receipts = Table(
    "usage_receipts",
    metadata,
    Column("session_id", String(255), nullable=False),
    Column("turn_id", String(255), nullable=False),
    Column("round", Integer, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("status", String(32), nullable=False),
    Column("input_tokens", Integer, nullable=False),
    Column("output_tokens", Integer, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    # Subsets of the two counts above (migration 0005).
    Column("cache_read_tokens", Integer, nullable=False, server_default="0"),
    Column("cache_write_tokens", Integer, nullable=False, server_default="0"),
    Column("reasoning_tokens", Integer, nullable=False, server_default="0"),
    # The attempt's cost (US dollars, by its profile's price) and the tool calls its reply asked
    # for (migration 0014): a tenant's day is summed from receipts.
    Column("cost_usd", Float, nullable=False, server_default="0"),
    Column("tool_calls", Integer, nullable=False, server_default="0"),
    PrimaryKeyConstraint("session_id", "turn_id", "round", "attempt"),
    CheckConstraint("status IN ('started', 'completed', 'interrupted')", name="status"),
    Index(None, "created_at"),
)

# Operators' quota raises (migration 0014): one row per raise of one tenant's quota, with who and why.
# The latest row of a (tenant, quota) is its limit.
quota_raises = Table(
    "quota_raises",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("tenant", String(255), nullable=False),
    Column("quota", String(64), nullable=False),
    Column("limit_value", Float, nullable=False),
    Column("principal", String(255), nullable=False),
    Column("reason", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Index(None, "tenant", "created_at"),
)

# Reasoning blocks (``[ReasoningBlock]`` as JSON) of the assistant message at (session_id,
# position), written by the model call that produced it; never in workflow history. The
# attempt whose result the workflow took writes last.
reasoning = Table(
    "reasoning",
    metadata,
    Column("session_id", String(255), nullable=False),
    Column("position", Integer, nullable=False),
    Column("turn_id", String(255), nullable=True),
    Column("round", Integer, nullable=True),
    Column("attempt", Integer, nullable=False),
    Column("blocks_json", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("session_id", "position"),
)

# Compaction summaries: summary ``summary_id`` stands for the transcript at positions
# < ``upto_position``; the transcript itself is never rewritten.
context_summaries = Table(
    "context_summaries",
    metadata,
    Column("session_id", String(255), nullable=False),
    Column("summary_id", Integer, nullable=False),
    Column("upto_position", Integer, nullable=False),
    Column("profile", String(255), nullable=False),
    Column("text", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("session_id", "summary_id"),
)

MEMORY_SCOPES = ("session", "workspace", "user")
MEMORY_STATUSES = ("proposed", "accepted", "rejected", "superseded")

# Memories that outlive a session, one row per memory (migration 0006). ``owner`` is the
# session owner who wrote it; ``session_id`` the writing session; ``workspace`` the workspace
# of a workspace-scope memory (else the writing session's). ``decided_*``/``reason``: the
# owner's decision on a proposal (None for a session-scope write, accepted as written).
memories = Table(
    "memories",
    metadata,
    Column("memory_id", String(255), primary_key=True),
    Column("owner", String(255), nullable=False),
    Column("scope", String(16), nullable=False),
    Column("key", String(255), nullable=False),
    Column("text", Text, nullable=False),
    Column("status", String(16), nullable=False),
    Column("session_id", String(255), nullable=False),
    Column("workspace", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("decided_at", DateTime(timezone=True), nullable=True),
    Column("decided_by", String(255), nullable=True),
    Column("reason", Text, nullable=True),
    CheckConstraint("scope IN ('session', 'workspace', 'user')", name="scope"),
    CheckConstraint("status IN ('proposed', 'accepted', 'rejected', 'superseded')", name="status"),
    Index(None, "owner", "status"),
    Index(None, "session_id"),
)

# Temporal payloads above the external-storage threshold, keyed by their content hash
# (driver ``agentrt.store``; see ``worker/_payloads.py``).
payloads = Table(
    "payloads",
    metadata,
    Column("key", String(128), primary_key=True),
    Column("data", LargeBinary, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# MCP server connections as each worker process saw them change (migration 0007): starting,
# ready, stopped, failed; ``agentrt mcp list`` reads the latest row per server.
mcp_server_events = Table(
    "mcp_server_events",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("server", String(64), nullable=False),
    Column("worker", String(255), nullable=False),
    Column("type", String(32), nullable=False),
    Column("tools", Integer, nullable=True),
    Column("diagnostic", Text, nullable=True),
    Column("protocol_version", String(32), nullable=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Index(None, "server", "id"),
)

# Operators' decisions on how far an MCP server is trusted (migration 0016): one row per
# decision; the latest row of a server overrides its ``trust`` in agentrt.toml.
mcp_trust_decisions = Table(
    "mcp_trust_decisions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("server", String(64), nullable=False),
    Column("trust", String(16), nullable=False),
    Column("principal", String(255), nullable=False),
    Column("reason", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    CheckConstraint("trust IN ('trusted', 'untrusted', 'revoked')", name="trust"),
    Index(None, "server", "id"),
)

# Operators' MCP server configurations given at run time (migration 0017): one row per add or
# change; the latest row of a server is its configuration (``config``: its JSON, sealed).
mcp_server_changes = Table(
    "mcp_server_changes",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("server", String(64), nullable=False),
    Column("action", String(16), nullable=False),
    Column("config", Text, nullable=False),
    Column("principal", String(255), nullable=False),
    Column("reason", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    CheckConstraint("action IN ('add', 'change')", name="action"),
    Index(None, "server", "id"),
)

# The tool specs a turn's ``mcp.list_tools`` offered the model, keyed by the SHA-256 of their
# canonical JSON (migration 0007): history holds the specs once per turn, each model call of
# the turn names them by digest.
tool_listings = Table(
    "tool_listings",
    metadata,
    Column("digest", String(64), primary_key=True),
    Column("specs", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# Autonomous tasks (migration 0008): one row per task (its latest status, goal and spend as
# ``Spend`` JSON), written by the task workflow's ``task.record``; ``workspace`` is the task's.
tasks = Table(
    "tasks",
    metadata,
    Column("task_id", String(255), primary_key=True),
    Column("owner", String(255), nullable=False),
    Column("goal", Text, nullable=False),
    Column("status", String(32), nullable=False),
    Column("workspace", Text, nullable=False),
    Column("spend_json", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Index(None, "owner", "created_at"),
    Index(None, "created_at"),
)

# A task's events (one ``Event`` as JSON per (task_id, seq), the task's own sequence) and its
# checkpoints (one ``TaskCheckpoint`` as JSON per (task_id, number), the session's number).
task_events = Table(
    "task_events",
    metadata,
    Column("task_id", String(255), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("type", String(64), nullable=False),
    Column("at", DateTime(timezone=True), nullable=True),
    Column("body_json", Text, nullable=False),
    PrimaryKeyConstraint("task_id", "seq"),
)

task_checkpoints = Table(
    "task_checkpoints",
    metadata,
    Column("task_id", String(255), nullable=False),
    Column("number", Integer, nullable=False),
    Column("body_json", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("task_id", "number"),
)

# Task graphs (migration 0011): one row per graph (its latest status, goal and spend as ``Spend``
# JSON) and its events (one ``Event`` as JSON per (graph_id, seq)), written by the graph
# workflow's ``graph.record``.
graphs = Table(
    "graphs",
    metadata,
    Column("graph_id", String(255), primary_key=True),
    Column("owner", String(255), nullable=False),
    Column("goal", Text, nullable=False),
    Column("status", String(32), nullable=False),
    Column("workspace", Text, nullable=False),
    Column("spend_json", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Index(None, "owner", "created_at"),
)

graph_events = Table(
    "graph_events",
    metadata,
    Column("graph_id", String(255), nullable=False),
    Column("seq", Integer, nullable=False),
    Column("type", String(64), nullable=False),
    Column("at", DateTime(timezone=True), nullable=True),
    Column("body_json", Text, nullable=False),
    PrimaryKeyConstraint("graph_id", "seq"),
)

# Workflow owners (migration 0012): the principal that first started each workflow id
# (``session-ID``, ``task-ID``, ``graph-ID``). Written once, never changed: an id never passes to
# another owner, also after Temporal has forgotten the workflow (its retention).
workflow_owners = Table(
    "workflow_owners",
    metadata,
    Column("workflow_id", String(1024), primary_key=True),
    Column("owner", String(255), nullable=False),
    Column("claimed_at", DateTime(timezone=True), nullable=False),
)

WEBHOOK_WATCH_KINDS = ("session", "task", "run")
WEBHOOK_WATCH_STATES = ("active", "ended")
WEBHOOK_DELIVERY_STATES = ("pending", "delivered", "failed")

# Webhook watches (migration 0009): one row per watched session, task or run (``watch_id`` is a
# digest of kind and id). ``cursor``: for a session the last event seq turned into notifications,
# for a task or run the number of status changes seen, ``last_status`` the latest of them.
webhook_watches = Table(
    "webhook_watches",
    metadata,
    Column("watch_id", String(64), primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("target_id", Text, nullable=False),
    Column("principal", String(255), nullable=False),
    Column("cursor", Integer, nullable=False),
    Column("last_status", String(64), nullable=True),
    Column("state", String(16), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("ended_at", DateTime(timezone=True), nullable=True),
    CheckConstraint("kind IN ('session', 'task', 'run')", name="kind"),
    CheckConstraint("state IN ('active', 'ended')", name="state"),
    Index(None, "state"),
)

# The webhook delivery log: one row per (notification, target URL), in the order notifications
# were made (``id``). ``body`` is the exact JSON posted on every attempt; ``webhook_id`` is the
# notification's id, the same on every redelivery. ``next_attempt_at``: when a ``pending`` row is
# due (a claim moves it past the attempt in flight).
webhook_deliveries = Table(
    "webhook_deliveries",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("webhook_id", String(64), nullable=False),
    Column("target_url", Text, nullable=False),
    Column("watch_id", String(64), nullable=False),
    Column("type", String(64), nullable=False),
    Column("body", Text, nullable=False),
    Column("state", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", DateTime(timezone=True), nullable=False),
    Column("last_status_code", Integer, nullable=True),
    Column("last_error", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("delivered_at", DateTime(timezone=True), nullable=True),
    UniqueConstraint("webhook_id", "target_url"),
    CheckConstraint("state IN ('pending', 'delivered', 'failed')", name="state"),
    Index(None, "target_url", "state", "next_attempt_at"),
    Index(None, "watch_id"),
)

# The audit log (migration 0013): one row per act of a principal on a session, task, graph or
# memory, recorded once by ``key`` (``<kind>:<id>:<what>``: the event that records the act, or
# the row it changed) in the transaction that records the act. ``detail_json``: a bounded JSON object.
audit_log = Table(
    "audit_log",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("key", String(600), nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("principal", String(255), nullable=False),
    Column("action", String(32), nullable=False),
    Column("target_kind", String(16), nullable=False),
    Column("target_id", String(255), nullable=False),
    Column("owner", String(255), nullable=False),
    Column("reason", Text, nullable=True),
    Column("detail_json", Text, nullable=False),
    UniqueConstraint("key"),
    Index(None, "at"),
    Index(None, "principal", "at"),
    Index(None, "target_id", "at"),
    Index(None, "owner", "at"),
)


workspace_owners = Table(
    "workspace_owners",
    metadata,
    Column("path_sha256", String(64), nullable=False),
    Column("path", Text, nullable=False),
    Column("principal", String(255), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("path_sha256"),
)
