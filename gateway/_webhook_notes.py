"""What a watch turns into notifications, and their ids and bodies: a session's ``TurnEnded`` and
``PermissionRequested`` events, a task's or run's status changes. Pure functions over events and
statuses, so the same input always makes the same notification under the same id.

Bodies (``{"id", "type", "created_at", "data"}``; ``data`` by type)::

    turn.ended          kind, target_id, session_id, turn_id, seq, at, status, rounds, error,
                        error_type, usage, answer (the turn's last assistant text, cut), answer_truncated
    approval.requested  kind, target_id, session_id, turn_id, seq, at, request (the PermissionRequest;
                        its arguments null and arguments_truncated true beyond MAX_ARGUMENTS_BYTES)
    run.status          kind (task or run), target_id, task_id or run_id, status, previous_status
                        (null the first time), change (1, 2, ...), owner, closed
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentrt.schemas import PermissionRequested, TurnEnded

__all__ = [
    "APPROVAL_REQUESTED",
    "MAX_ANSWER_CHARS",
    "MAX_ARGUMENTS_BYTES",
    "RUN_STATUS",
    "TURN_ENDED",
    "WEBHOOK_TYPES",
    "Note",
    "approval_requested",
    "notification_body",
    "status_changed",
    "turn_ended",
    "webhook_id",
]

TURN_ENDED = "turn.ended"
APPROVAL_REQUESTED = "approval.requested"
RUN_STATUS = "run.status"
WEBHOOK_TYPES = (TURN_ENDED, APPROVAL_REQUESTED, RUN_STATUS)
# Characters of a turn's answer in ``turn.ended``.
MAX_ANSWER_CHARS = 16_000
# Bytes (JSON) of a tool call's arguments ``approval.requested`` carries; larger ones are left out.
MAX_ARGUMENTS_BYTES = 16_384


@dataclass(frozen=True)
class Note:
    """One notification a watch owes: ``key`` names it within its watch (``seq:7``, ``status:3:completed``)."""

    key: str
    type: str
    data: dict[str, Any]


def webhook_id(watch_id: str, key: str) -> str:
    """The notification's id: ``wh_`` and 32 hex digits of the SHA-256 of its watch and key, so a
    poll repeated after a crash makes the same id."""
    return "wh_" + hashlib.sha256(f"{watch_id}\x00{key}".encode()).hexdigest()[:32]


def notification_body(webhook_id: str, type_: str, created_at: datetime, data: dict[str, Any]) -> str:
    """The JSON text posted (compact, UTF-8): ``{"id", "type", "created_at" (ISO 8601 UTC), "data"}``."""
    body = {"id": webhook_id, "type": type_, "created_at": created_at.isoformat().replace("+00:00", "Z"), "data": data}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _session_fields(session_id: str, event: TurnEnded | PermissionRequested) -> dict[str, Any]:
    return {
        "kind": "session", "target_id": session_id, "session_id": session_id, "turn_id": event.turn_id,
        "seq": event.seq, "at": event.at.isoformat().replace("+00:00", "Z") if event.at else None,
    }


def turn_ended(session_id: str, event: TurnEnded, answer: str | None) -> Note:
    """``turn.ended`` for ``event``; ``answer`` is the turn's last assistant text (None when it had none)."""
    cut = answer is not None and len(answer) > MAX_ANSWER_CHARS
    data = {
        **_session_fields(session_id, event),
        "status": event.status, "rounds": event.rounds, "error": event.error, "error_type": event.error_type,
        "usage": event.usage.model_dump(mode="json"),
        "answer": answer[:MAX_ANSWER_CHARS] if cut and answer is not None else answer, "answer_truncated": cut,
    }
    return Note(key=f"seq:{event.seq}", type=TURN_ENDED, data=data)


def approval_requested(session_id: str, event: PermissionRequested) -> Note:
    """``approval.requested`` for ``event``: the request (id, tool, arguments and their SHA-256,
    risk, reason, kind) a person decides with ``approve``/``deny``."""
    request = event.request.model_dump(mode="json")
    size = len(json.dumps(request["arguments"], ensure_ascii=False).encode())
    request["arguments_truncated"] = size > MAX_ARGUMENTS_BYTES
    if request["arguments_truncated"]:
        request["arguments"] = None
    data = {**_session_fields(session_id, event), "request": request}
    return Note(key=f"seq:{event.seq}", type=APPROVAL_REQUESTED, data=data)


def status_changed(
    kind: str, target_id: str, change: int, status: str, previous: str | None, owner: str | None, closed: bool
) -> Note:
    """``run.status`` for change number ``change`` (1, 2, ...) of a task's or run's status."""
    id_field = "task_id" if kind == "task" else "run_id"
    data = {
        "kind": kind, "target_id": target_id, id_field: target_id, "status": status, "previous_status": previous,
        "change": change, "owner": owner, "closed": closed,
    }
    return Note(key=f"status:{change}:{status}", type=RUN_STATUS, data=data)
