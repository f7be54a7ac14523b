"""``Store``: the one object callers hold, composed of the store's table groups over one
engine, and how it is opened (connect, then migrate to the latest schema).

Activities write here (idempotently, so retries are harmless) and the client reads here,
so a session's content never has to travel through workflow history. SQLite under
``$AGENTRT_HOME`` (default ``~/.agentrt``) by default; PostgreSQL when ``AGENTRT_DATABASE_URL`` says so.
"""

from __future__ import annotations

from agentrt.store._cipher import StoreCipher
from agentrt.store._deltas import DeltaTable
from agentrt.store._effects import EffectLedger
from agentrt.store._engine import database_url, make_engine, upgrade
from agentrt.store._graphs import GraphTables
from agentrt.store._mcp import McpTables
from agentrt.store._memory import MemoryTable
from agentrt.store._owners import WorkflowOwnerTable
from agentrt.store._quotas import QuotaTables
from agentrt.store._reasoning import ReasoningTable
from agentrt.store._tasks import TaskTables
from agentrt.store._transcript import TranscriptTables
from agentrt.store._usage import UsageReceiptTable
from agentrt.store._webhooks import WebhookTables
from agentrt.store._workspaces import WorkspaceOwners


class Store(
    TranscriptTables, DeltaTable, EffectLedger, UsageReceiptTable, ReasoningTable, MemoryTable, McpTables, TaskTables,
    WebhookTables, GraphTables, WorkflowOwnerTable, QuotaTables, WorkspaceOwners,
):
    """Synchronous access to the application store; thread-safe (one pooled engine).

    Transcript, events, sessions and compaction summaries; token deltas; the effect ledger;
    usage receipts; reasoning blocks; memories; MCP server events and tool listings; autonomous
    tasks, their events and checkpoints; task graphs and their events; webhook watches and deliveries; the
    audit log of principals' acts; the owner of every workflow id; tenants' quota raises and daily use;
    workspace owners. Open with ``Store.open()``;
    close with ``close()`` or use it as a context manager.
    """

    @classmethod
    def open(cls, url: str | None = None, *, cipher: StoreCipher | None = None) -> Store:
        """Connect to ``database_url(url)`` and bring the schema to the latest migration.

        With ``cipher`` (a ``StoreCipher``; ``agentrt.worker.open_store`` builds one from the
        ``[codec]`` keys) the transcript, events, token deltas, reasoning, compaction summaries and
        recorded tool results are sealed at rest and opened on read; rows written without one read
        as they are. Without it, a sealed value read raises ``ConfigurationError``.

        Creates the SQLite file's directory when needed. Migrations run under a lock
        (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: a transaction-scoped advisory lock), so
        several processes may open the same database at once; re-opening is a no-op.
        """
        engine = make_engine(database_url(url))
        try:
            upgrade(engine)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine, cipher)

    def close(self) -> None:
        """Release every pooled connection."""
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
