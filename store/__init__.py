"""The application store: transcript, event projection, sessions, token deltas, the effect
ledger and usage receipts (SQLite or PostgreSQL)."""

from store._store import EffectRecord, SessionSummary, Store, TokenDelta, UsageReceipt, database_url

__all__ = ["EffectRecord", "SessionSummary", "Store", "TokenDelta", "UsageReceipt", "database_url"]
