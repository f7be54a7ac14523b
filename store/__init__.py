"""The application store: transcript, event projection, sessions, token deltas, the effect
ledger, usage receipts, memories, autonomous tasks, webhook watches and deliveries, the audit
log and externally stored Temporal payloads (SQLite or PostgreSQL); a session's events and token deltas read as one
resumable stream. With a cipher (``Store.open(url, cipher=...)``) a session's content is sealed at rest."""

from agentrt.store._audit import MAX_AUDIT_LIMIT
from agentrt.store._base import text_column
from agentrt.store._changes import StreamChanges, StreamWakeups, on_loop
from agentrt.store._cipher import CLEAR_PREFIX, SEALED_PREFIX, StoreCipher, is_sealed
from agentrt.store._deltas import TokenDelta
from agentrt.store._effects import EffectRecord
from agentrt.store._engine import agentrt_home, database_url, head_revision, schema_revision
from agentrt.store._mcp import listing_digest
from agentrt.store._payloads import get_payloads, put_payloads
from agentrt.store._reachability import error_chain, raising_engine, takes_writes, unreachable_reason
from agentrt.store._store import Store
from agentrt.store._stream import (
    SessionStream,
    StreamCall,
    StreamDelta,
    StreamEntry,
    StreamKey,
    StreamOpenText,
    parse_stream_id,
    stream_id,
)
from agentrt.store._tasks import TaskSummary
from agentrt.store._transcript import SessionSummary
from agentrt.store._usage import UsageReceipt
from agentrt.store._webhooks import NewWebhookDelivery, WebhookDelivery, WebhookWatch, webhook_watch_id

__all__ = [
    "CLEAR_PREFIX",
    "EffectRecord",
    "MAX_AUDIT_LIMIT",
    "NewWebhookDelivery",
    "SEALED_PREFIX",
    "SessionStream",
    "SessionSummary",
    "Store",
    "StoreCipher",
    "StreamCall",
    "StreamChanges",
    "StreamDelta",
    "StreamEntry",
    "StreamKey",
    "StreamOpenText",
    "StreamWakeups",
    "TaskSummary",
    "TokenDelta",
    "UsageReceipt",
    "WebhookDelivery",
    "WebhookWatch",
    "agentrt_home",
    "database_url",
    "error_chain",
    "get_payloads",
    "head_revision",
    "is_sealed",
    "listing_digest",
    "on_loop",
    "parse_stream_id",
    "put_payloads",
    "raising_engine",
    "schema_revision",
    "stream_id",
    "takes_writes",
    "text_column",
    "unreachable_reason",
    "webhook_watch_id",
]
