"""The application store: transcript, event projection, sessions, token deltas, the effect
ledger, usage receipts, memories, autonomous tasks and externally stored Temporal payloads
(SQLite or PostgreSQL)."""

from agentrt.store._base import text_column
from agentrt.store._deltas import TokenDelta
from agentrt.store._effects import EffectRecord
from agentrt.store._engine import agentrt_home, database_url
from agentrt.store._mcp import listing_digest
from agentrt.store._payloads import get_payloads, put_payloads
from agentrt.store._store import Store
from agentrt.store._tasks import TaskSummary
from agentrt.store._transcript import SessionSummary
from agentrt.store._usage import UsageReceipt

__all__ = [
    "EffectRecord",
    "SessionSummary",
    "Store",
    "TaskSummary",
    "TokenDelta",
    "UsageReceipt",
    "agentrt_home",
    "database_url",
    "get_payloads",
    "listing_digest",
    "put_payloads",
    "text_column",
]
