"""The application store: transcript, event projection, sessions, token deltas, the effect
ledger, usage receipts and externally stored Temporal payloads (SQLite or PostgreSQL)."""

from agentrt.store._payloads import get_payloads, put_payloads
from agentrt.store._store import EffectRecord, SessionSummary, Store, TokenDelta, UsageReceipt, agentrt_home, database_url

__all__ = [
    "EffectRecord",
    "SessionSummary",
    "Store",
    "TokenDelta",
    "UsageReceipt",
    "agentrt_home",
    "database_url",
    "get_payloads",
    "put_payloads",
]
