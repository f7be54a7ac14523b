"""Session listings from Temporal visibility: the filters a caller adds, kept inside their group,
and a listing row per workflow execution."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from temporalio.client import Client, WorkflowExecution
from temporalio.service import RPCError, RPCStatusCode

from agentrt.client._addressed import visibility_literal
from agentrt.schemas import SESSION_ID_PREFIX, SESSION_OWNER, SESSION_STATUS, SESSION_WORKFLOW, InvalidListFilter

# The system search attribute Temporal 1.28+ keeps on a workflow whose workflow task keeps failing.
REPORTED_PROBLEMS = "TemporalReportedProblems"

__all__ = ["MAX_LIST_FILTER_CHARS", "SessionListing", "check_list_filter", "list_session_rows", "session_listing"]


@dataclass
class SessionListing:
    """One session in ``AgentClient.list_sessions``: ``status`` is its ``AgentSessionStatus``
    search attribute, ``started_at`` when its latest run started, ``title`` its title in the
    store (``SessionConfig.title``, as ``rename`` last set it; None without one, or on a client
    without a store)."""

    session_id: str
    workflow_id: str
    status: str
    owner: str | None
    started_at: datetime | None
    closed: bool
    title: str | None = None

MAX_LIST_FILTER_CHARS = 2000


def check_list_filter(query: str) -> None:
    """Raise ``InvalidListFilter`` unless ``query``, put in ``AND (query)``, stays a filter of that
    group: quotes closed, and parentheses outside quotes balanced without closing the group
    early (``x) OR (y`` would widen the listing beyond sessions). At most
    ``MAX_LIST_FILTER_CHARS`` characters of UTF-8 text without control characters. Temporal's
    list filter syntax quotes with ``'``, ``"`` and backticks; inside a quote a backslash
    escapes the next character (``'o\\'brien'``), and the quote ends at the same quote character."""
    if len(query) > MAX_LIST_FILTER_CHARS:
        raise InvalidListFilter(query, f"longer than {MAX_LIST_FILTER_CHARS} characters")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidListFilter(query.encode("utf-8", "backslashreplace").decode(), "not UTF-8 text") from err
    if any(ord(char) < 32 and char not in "\t\n\r" or ord(char) == 127 for char in query):
        raise InvalidListFilter(query, "a control character")
    depth = 0
    quote: str | None = None
    escaped = False
    for char in query:
        if quote is not None:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
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
    ``AgentSessionStatus`` (``closed`` or ``starting`` when the session wrote none yet), or
    ``stuck`` while Temporal flags its workflow task as failing again and again
    (``TemporalReportedProblems``: the session's own status is stale then)."""
    attrs = execution.search_attributes or {}
    status_values = attrs.get(SESSION_STATUS.name) or []
    owner_values = attrs.get(SESSION_OWNER.name) or []
    closed = execution.close_time is not None
    status = str(status_values[0]) if status_values else ("closed" if closed else "starting")
    if not closed and attrs.get(REPORTED_PROBLEMS):
        status = "stuck"
    return SessionListing(
        session_id=execution.id.removeprefix(SESSION_ID_PREFIX),
        workflow_id=execution.id,
        status=status,
        owner=str(owner_values[0]) if owner_values else None,
        started_at=execution.start_time,
        closed=closed,
    )


async def list_session_rows(
    temporal: Client, query: str | None, limit: int, include_archived: bool, owner: str | None = None
) -> list[SessionListing]:
    """``AgentClient.list_sessions``: one row per session, the latest run, newest first; only
    ``owner``'s sessions (``AgentOwner``) when given."""
    filter_ = f"WorkflowType = '{SESSION_WORKFLOW}' AND ExecutionStatus != 'ContinuedAsNew'"
    if owner is not None:
        filter_ += f" AND {SESSION_OWNER.name} = {visibility_literal(owner)}"
    if not include_archived:
        filter_ += f" AND ({SESSION_STATUS.name} IS NULL OR {SESSION_STATUS.name} != 'archived')"
    if query:
        check_list_filter(query)
        filter_ += f" AND ({query})"
    found: dict[str, SessionListing] = {}
    try:
        async for execution in temporal.list_workflows(filter_, limit=limit):
            if execution.id in found or execution.workflow_type != SESSION_WORKFLOW:
                continue  # a run continuing as new shows briefly; only sessions, whatever the filter
            found[execution.id] = session_listing(execution)
    except RPCError as err:
        if query and err.status == RPCStatusCode.INVALID_ARGUMENT:
            raise InvalidListFilter(query, f"Temporal refused it ({err.message.split(': ')[-1]}); "
                                    "a filter is a condition, e.g. \"AgentSessionStatus = 'idle'\", without ORDER BY") from err
        raise
    never = datetime.min.replace(tzinfo=timezone.utc)
    return sorted(found.values(), key=lambda s: s.started_at or never, reverse=True)
