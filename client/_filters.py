"""Session listings from Temporal visibility: the filters a caller adds, kept inside their group,
and a listing row per workflow execution."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from temporalio.client import WorkflowExecution

from agentrt.schemas import SESSION_ID_PREFIX, SESSION_OWNER, SESSION_STATUS, InvalidListFilter

__all__ = ["MAX_LIST_FILTER_CHARS", "SessionListing", "check_list_filter", "session_listing"]


@dataclass
class SessionListing:
    """One session in ``AgentClient.list_sessions``: ``status`` is its ``AgentSessionStatus``
    search attribute, ``started_at`` when its latest run started."""

    session_id: str
    workflow_id: str
    status: str
    owner: str | None
    started_at: datetime | None
    closed: bool

MAX_LIST_FILTER_CHARS = 2000


def check_list_filter(query: str) -> None:
    """Raise ``InvalidListFilter`` unless ``query``, put in ``AND (query)``, stays a filter of that
    group: quotes closed, and parentheses outside quotes balanced without closing the group
    early (``x) OR (y`` would widen the listing beyond sessions). At most
    ``MAX_LIST_FILTER_CHARS`` characters. Temporal's list filter syntax quotes with ``'``,
    ``"`` and backticks, and doubles nothing: a quote ends at the same quote character."""
    if len(query) > MAX_LIST_FILTER_CHARS:
        raise InvalidListFilter(query, f"longer than {MAX_LIST_FILTER_CHARS} characters")
    depth = 0
    quote: str | None = None
    for char in query:
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "'\"`":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise InvalidListFilter(query, "a ')' closes more than it opened: the filter must stay inside its group")
    if quote is not None:
        raise InvalidListFilter(query, f"an unclosed {quote} quote")
    if depth:
        raise InvalidListFilter(query, "an unclosed '('")


def session_listing(execution: WorkflowExecution) -> SessionListing:
    """A session's row from its workflow execution's search attributes: ``status`` is
    ``AgentSessionStatus`` (``closed`` or ``starting`` when the session wrote none yet)."""
    attrs = execution.search_attributes or {}
    status_values = attrs.get(SESSION_STATUS.name) or []
    owner_values = attrs.get(SESSION_OWNER.name) or []
    closed = execution.close_time is not None
    return SessionListing(
        session_id=execution.id.removeprefix(SESSION_ID_PREFIX),
        workflow_id=execution.id,
        status=str(status_values[0]) if status_values else ("closed" if closed else "starting"),
        owner=str(owner_values[0]) if owner_values else None,
        started_at=execution.start_time,
        closed=closed,
    )
