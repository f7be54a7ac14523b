"""The application store: transcript, event projection, sessions and token deltas (SQLite or PostgreSQL)."""

from store._store import SessionSummary, Store, TokenDelta, database_url

__all__ = ["SessionSummary", "Store", "TokenDelta", "database_url"]
