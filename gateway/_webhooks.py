"""``WebhookDispatcher``: signed notifications to the ``[[gateway.webhooks]]`` targets when a
watched session's turn ends or asks for an approval, and when a watched task's or run's status
changes.

Watches and the notifications they owe live in the store (``webhook_watches``,
``webhook_deliveries``), so a dispatcher that restarts resumes from each watch's cursor. Delivery
is at least once: a notification is posted until a target answers 2xx (or its attempts run out),
always under the same ``Agentrt-Webhook-Id`` and body, so a receiver drops what it has already
handled. Each target has its own delivery loop: one that is down or slow delays only its own
notifications.

Where the changes are read: a session's events from the store's event projection (no worker
needed); a task's or run's statuses from the status events of its event log in the store, every
one however short it lasted, and from its workflow's description (``describe``) only what that log
cannot tell: that it closed otherwise (terminated, timed out), or the status of a run whose log
records none (``gateway/_webhook_status.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Literal, Protocol, get_args

import httpx
from temporalio.client import WorkflowExecutionDescription
from temporalio.service import RPCError, RPCStatusCode

from agentrt.gateway._webhook_delivery import Attempt, http_client, post_once, printable, retry_at
from agentrt.gateway._webhook_notes import (
    Note,
    approval_requested,
    notification_body,
    turn_ended,
    webhook_id,
)
from agentrt.gateway._webhook_signing import signed_headers
from agentrt.gateway._webhook_status import StatusReader
from agentrt.schemas import (
    SESSION_OWNER,
    AssistantMessageCompleted,
    ConfigurationError,
    Event,
    GraphNotFound,
    PermissionRequested,
    SessionArchived,
    SessionNotFound,
    TaskNotFound,
    TurnEnded,
    graph_workflow_id,
    session_workflow_id,
    task_workflow_id,
)
from agentrt.store import NewWebhookDelivery, Store, WebhookDelivery, WebhookWatch

if TYPE_CHECKING:
    from agentrt.client import AgentClient

__all__ = ["WatchKind", "WebhookDispatcher", "WebhookTargetLike"]

log = logging.getLogger("agentrt.webhooks")

WatchKind = Literal["session", "task", "run"]
WATCH_KINDS: tuple[str, ...] = get_args(WatchKind)
# Events read per session and query; a poll reads on while pages come back full.
EVENTS_PAGE = 500
# Seconds between two checks that a quiet session's workflow has closed without an archive.
CLOSED_CHECK_SECONDS = 30.0
# Deliveries a target's loop claims at a time: one, so a claim's lease need outlast one attempt only.
CLAIM_BATCH = 1
# Bytes of a workflow id (Temporal's limit).
MAX_WORKFLOW_ID_BYTES = 1_000
_NOT_FOUND = {"session": SessionNotFound, "task": TaskNotFound, "run": GraphNotFound}
_WORKFLOW_ID = {"session": session_workflow_id, "task": task_workflow_id, "run": graph_workflow_id}


class WebhookTargetLike(Protocol):
    """A target: a ``[[gateway.webhooks]]`` entry (``AgentrtConfig.gateway.webhooks``) or anything
    with its fields: ``url`` (http or https), ``secret`` (HMAC key), ``events`` (the types it gets)."""

    # Read-only, so that a frozen ``WebhookTarget`` matches.
    @property
    def url(self) -> str: ...
    @property
    def secret(self) -> str: ...
    @property
    def events(self) -> Sequence[str]: ...


async def wait_for_event(event: asyncio.Event, seconds: float) -> None:
    """Wait until ``event`` is set or ``seconds`` pass. ``asyncio.timeout``, not ``wait_for``: on
    Python 3.11, ``wait_for`` returns when the event is set at the moment its task is cancelled
    and drops the cancel (CPython gh-86296), so ``stop`` waited forever on the loop."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        pass


class WebhookDispatcher:
    """Watch sessions, tasks and runs and post signed notifications about them to ``targets``.

    - ``store``: where watches, cursors and the delivery log live (the gateway's ``Store``).
    - ``client``: the ``AgentClient`` whose Temporal connection and operators are used to find
      watched workflows and check who may watch them.
    - ``targets``: the ``[[gateway.webhooks]]`` entries; a URL given twice is used once.
    - ``poll_seconds``: how often watches are read (seconds), and the longest a target's loop sleeps.
    - ``request_timeout_seconds``: one attempt's bound, from connect to the answer's status (seconds).
    - ``max_attempts``: attempts per notification and target before it is ``failed`` (>= 1).
    - ``retry_base_seconds`` / ``retry_max_seconds``: the wait after the first failed attempt,
      doubled after each next one, and its cap (a target's Retry-After is honoured up to the cap).
    - ``gap_seconds``: how long a missing event seq holds a session's cursor before it is passed
      over (events reach the store in batches, rarely out of order).
    - ``log_wait_seconds``: how long a task's or run's empty event log holds its watch before its
      status is read from its workflow's description instead (a run from before ``frame-v1``).

    ``start()`` runs the poll loop and one delivery loop per target; ``stop()`` ends them (an
    attempt cut short is due again at once). Also an async context manager. Raises
    ``ConfigurationError`` for an option out of its range.
    """

    def __init__(
        self,
        store: Store,
        client: AgentClient,
        targets: Sequence[WebhookTargetLike],
        *,
        poll_seconds: float = 1.0,
        request_timeout_seconds: float = 10.0,
        max_attempts: int = 10,
        retry_base_seconds: float = 2.0,
        retry_max_seconds: float = 600.0,
        gap_seconds: float = 30.0,
        log_wait_seconds: float = 30.0,
    ) -> None:
        if poll_seconds <= 0 or request_timeout_seconds <= 0 or max_attempts < 1:
            raise ConfigurationError("poll_seconds and request_timeout_seconds must be > 0 and max_attempts >= 1")
        if retry_base_seconds < 0 or retry_max_seconds < retry_base_seconds or min(gap_seconds, log_wait_seconds) < 0:
            raise ConfigurationError(
                "retry_base_seconds must be >= 0, retry_max_seconds >= retry_base_seconds, gap_seconds and"
                " log_wait_seconds >= 0"
            )
        for target in targets:
            if not target.secret:
                source = getattr(target, "secret_env", None)
                raise ConfigurationError(
                    f"webhook target {target.url}: no secret"
                    + (f" (environment variable {source!r}, its secret_env, is not set in this process)" if source else "")
                )
        self._store = store
        self._client = client
        unique: dict[str, WebhookTargetLike] = {}
        for target in targets:
            unique.setdefault(target.url, target)
        self._targets = list(unique.values())
        self._poll_seconds = poll_seconds
        self._timeout = request_timeout_seconds
        self._max_attempts = max_attempts
        self._retry_base = retry_base_seconds
        self._retry_max = retry_max_seconds
        self._gap_seconds = gap_seconds
        # A claim outlasts an attempt, so a crashed dispatcher's claims come due again soon after.
        self._lease_seconds = request_timeout_seconds + 5.0
        self._gaps: dict[str, float] = {}  # watch id -> when a missing seq was first seen (loop time)
        self._closed_checked: dict[str, float] = {}  # watch id -> when its workflow was last described
        self._statuses = StatusReader(
            store, self._describe, log_wait_seconds=log_wait_seconds, closed_check_seconds=CLOSED_CHECK_SECONDS
        )
        self._wakes = {t.url: asyncio.Event() for t in self._targets}
        self._poll_now = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._http: httpx.AsyncClient | None = None

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Start polling watches and delivering (a no-op when started)."""
        if self._tasks:
            return
        self._http = http_client(self._timeout)
        self._tasks = [asyncio.create_task(self._poll_loop(), name="webhooks poll")]
        self._tasks += [asyncio.create_task(self._deliver_loop(t), name=f"webhooks to {t.url}") for t in self._targets]

    async def stop(self) -> None:
        """Stop the loops and close connections; what is pending stays in the store for the next start."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def __aenter__(self) -> WebhookDispatcher:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------ watches

    async def watch(self, kind: WatchKind, target_id: str, principal: str, *, since_seq: int = 0) -> WebhookWatch:
        """Notify the targets about session, task or run ``target_id`` until it ends (a session
        archived, a task or run in a final status or its workflow closed). Returns the watch; a
        target already watched keeps its watch (and its cursor).

        ``since_seq`` (sessions): notify about events after this seq (default 0: every turn end and
        approval request of the session so far). A task or run is notified of every status it has
        taken, from its first (``previous_status`` null; one that records no status events: its
        current status first). Raises ``ConfigurationError`` for an unknown ``kind`` or
        a negative ``since_seq``; ``SessionNotFound`` / ``TaskNotFound`` / ``GraphNotFound`` when no
        such workflow exists or ``principal`` may not read it (a session, task or run is its owner's
        and the operators').
        """
        if kind not in WATCH_KINDS:
            raise ConfigurationError(f"a webhook watch is of a {' / '.join(WATCH_KINDS)}, not {kind!r}")
        if since_seq < 0:
            raise ConfigurationError(f"since_seq is an event seq >= 0, not {since_seq}")
        await self._check_visible(kind, target_id, principal)
        cursor = since_seq if kind == "session" else 0
        _, watch = await asyncio.to_thread(self._store.add_webhook_watch, kind, target_id, principal, cursor)
        self._poll_now.set()
        return watch

    async def _check_visible(self, kind: str, target_id: str, principal: str) -> None:
        not_found = _NOT_FOUND[kind]
        workflow_id = _WORKFLOW_ID[kind](target_id)
        if not target_id or len(workflow_id.encode()) > MAX_WORKFLOW_ID_BYTES:
            raise not_found(target_id[:200])
        description = await self._describe(workflow_id)
        if description is None:
            raise not_found(target_id)
        owner = description.typed_search_attributes.get(SESSION_OWNER)
        if principal != owner and principal not in self._client.operators:
            raise not_found(target_id)  # another owner's work answers as missing work does

    async def _describe(self, workflow_id: str) -> WorkflowExecutionDescription | None:
        """The workflow's description, or None when there is no such workflow."""
        try:
            return await self._client.temporal.get_workflow_handle(workflow_id).describe()
        except RPCError as err:
            if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
                return None
            raise

    # ------------------------------------------------------------ polling

    async def poll(self) -> int:
        """Read every active watch once and queue what it owes; returns how many notifications were
        made (before fan-out to targets). A watch whose read fails is logged and read again next time."""
        made = 0
        for watch in await asyncio.to_thread(self._store.webhook_watches, "active"):
            try:
                async with asyncio.timeout(self._timeout + self._poll_seconds):
                    if watch.kind == "session":
                        made += await self._poll_session(watch)
                    else:
                        made += await self._poll_status(watch)
            except Exception as err:  # noqa: BLE001 - one watch's failure (Temporal, the store) stops no other
                log.warning("webhook watch %s %s not read: %s", watch.kind, watch.target_id, err)
        return made

    async def _poll_loop(self) -> None:
        while True:
            self._poll_now.clear()
            try:
                await self.poll()
            except Exception:  # noqa: BLE001 - the loop outlives one failed pass (a store down)
                log.exception("webhook poll failed")
            await wait_for_event(self._poll_now, self._poll_seconds)

    async def _poll_session(self, watch: WebhookWatch) -> int:
        made = 0
        while True:
            notes, cursor, ended, full = await asyncio.to_thread(self._session_step, watch)
            if cursor == watch.cursor and not ended:
                if not full and await self._session_closed(watch):
                    await self._advance(watch, [], cursor, None, ended=True)
                return made
            if not await self._advance(watch, notes, cursor, None, ended=ended):
                return made
            made += len(notes)
            if ended or not full:
                return made
            watch = await asyncio.to_thread(self._store.webhook_watch, watch.watch_id)  # type: ignore[assignment]

    def _session_step(self, watch: WebhookWatch) -> tuple[list[Note], int, bool, bool]:
        """Read one page of the session's events after the cursor: ``(notes, new cursor, ended,
        page was full)``. Only events that follow the cursor without a gap are taken."""
        events = self._store.events(watch.target_id, watch.cursor, EVENTS_PAGE)
        taken = self._contiguous(watch, events)
        notes: list[Note] = []
        ended = False
        for event in taken:
            if isinstance(event, TurnEnded):
                notes.append(turn_ended(watch.target_id, event, self._answer(watch.target_id, event.turn_id)))
            elif isinstance(event, PermissionRequested):
                notes.append(approval_requested(watch.target_id, event))
            elif isinstance(event, SessionArchived):
                ended = True
        cursor = taken[-1].seq if taken else watch.cursor
        return notes, cursor, ended, len(events) == EVENTS_PAGE and len(taken) == len(events)

    def _contiguous(self, watch: WebhookWatch, events: list[Event]) -> list[Event]:
        """The events that follow the cursor seq by seq. A missing seq (its batch not yet written)
        holds them back, for at most ``gap_seconds``; then the rest is taken from the next there is."""
        expected = watch.cursor + 1
        if events and events[0].seq != expected:
            first_seen = self._gaps.setdefault(watch.watch_id, time.monotonic())
            if time.monotonic() - first_seen < self._gap_seconds:
                return []
            log.warning("webhook watch session %s: events %d..%d never reached the store; going on",
                        watch.target_id, expected, events[0].seq - 1)
            expected = events[0].seq
        self._gaps.pop(watch.watch_id, None)
        taken = []
        for event in events:
            if event.seq != expected:
                break
            taken.append(event)
            expected += 1
        return taken

    def _answer(self, session_id: str, turn_id: str | None) -> str | None:
        if turn_id is None:
            return None
        events = self._store.turn_events(session_id, turn_id)
        texts = [e.text for e in events if isinstance(e, AssistantMessageCompleted)]
        return texts[-1] if texts and texts[-1] else None

    async def _session_closed(self, watch: WebhookWatch) -> bool:
        """True when the quiet session's workflow is gone or closed (checked at most every
        ``CLOSED_CHECK_SECONDS``) and no event came meanwhile."""
        now = time.monotonic()
        if now - self._closed_checked.get(watch.watch_id, float("-inf")) < CLOSED_CHECK_SECONDS:
            return False
        self._closed_checked[watch.watch_id] = now
        description = await self._describe(session_workflow_id(watch.target_id))
        if description is not None and description.close_time is None:
            return False
        later = await asyncio.to_thread(self._store.events, watch.target_id, watch.cursor, 1)
        return not later

    async def _poll_status(self, watch: WebhookWatch) -> int:
        step = await self._statuses.step(watch)
        if step is None:
            return 0
        await self._advance(watch, step.notes, step.cursor, step.last_status, ended=step.ended)
        return len(step.notes)

    async def _advance(
        self, watch: WebhookWatch, notes: list[Note], cursor: int, last_status: str | None, *, ended: bool
    ) -> bool:
        """Move the watch to ``cursor`` and queue ``notes`` for the targets that take their type."""
        now = datetime.now(timezone.utc)
        deliveries = []
        for note in notes:
            note_id = webhook_id(watch.watch_id, note.key)
            body = notification_body(note_id, note.type, now, note.data)
            takers = [t for t in self._targets if note.type in t.events]
            deliveries += [NewWebhookDelivery(note_id, t.url, note.type, body) for t in takers]
        moved = await asyncio.to_thread(
            self._store.advance_webhook_watch, watch.watch_id, watch.cursor, cursor,
            last_status=last_status, ended=ended, deliveries=deliveries,
        )
        if moved:
            for url in {d.target_url for d in deliveries}:
                self._wakes[url].set()
            if ended:
                self._closed_checked.pop(watch.watch_id, None)
                self._statuses.forget(watch.watch_id)
                log.info("webhook watch %s %s ended", watch.kind, watch.target_id)
        return moved

    # ------------------------------------------------------------ delivery

    async def _deliver_loop(self, target: WebhookTargetLike) -> None:
        wake = self._wakes[target.url]
        while True:
            wake.clear()
            try:
                batch = await self._claim(target.url)
                await self._deliver_batch(target, batch)
                if batch:
                    continue
                due = await asyncio.to_thread(self._store.next_webhook_due, target.url)
            except Exception:  # noqa: BLE001 - the loop outlives a failed store call
                log.exception("webhook delivery to %s failed", target.url)
                due = None
            delay = self._poll_seconds
            if due is not None:
                delay = min(max((due - datetime.now(timezone.utc)).total_seconds(), 0.0), delay)
            await wait_for_event(wake, delay)

    async def _claim(self, url: str) -> list[WebhookDelivery]:
        """Claim due deliveries to ``url``; claims made while the dispatcher stops are released."""
        claiming = asyncio.ensure_future(
            asyncio.to_thread(
                self._store.claim_webhook_deliveries, url, lease_seconds=self._lease_seconds, limit=CLAIM_BATCH
            )
        )
        try:
            return await asyncio.shield(claiming)
        except asyncio.CancelledError:
            for delivery in await claiming:
                self._store.release_webhook_delivery(delivery.id)
            raise

    async def _deliver_batch(self, target: WebhookTargetLike, batch: list[WebhookDelivery]) -> None:
        """Deliver ``batch`` in order; stopping makes the attempt in flight and the rest due again at once."""
        remaining = list(batch)
        try:
            while remaining:
                await self._deliver(target, remaining[0])
                remaining.pop(0)
        except asyncio.CancelledError:
            for delivery in remaining:
                self._store.release_webhook_delivery(delivery.id)
            raise

    async def _deliver(self, target: WebhookTargetLike, delivery: WebhookDelivery) -> None:
        """One attempt of ``delivery``, recorded whatever happens in it: delivered, due again, or
        ``failed`` once its attempts (counted when it was claimed) reach ``max_attempts``.

        An attempt that raises (a target's secret that cannot sign, a fault in the HTTP stack) is
        a failed attempt like any other, so ``max_attempts`` ends every delivery; a claim whose
        count is already past it (attempts cut short by crashes) fails without another POST."""
        assert self._http is not None
        if delivery.attempts > self._max_attempts:
            cut_short = f"no attempt left (the last ones were cut short); before: {delivery.last_error or 'no error'}"
            await self._record_failure(target, delivery, delivery.last_status_code, cut_short, None)
            return
        try:
            body = delivery.body.encode()
            headers = signed_headers(target.secret, delivery.webhook_id, body)
            attempt = await post_once(self._http, target.url, headers, body, self._timeout)
        except Exception as err:  # noqa: BLE001 - any fault of one attempt is that attempt's failure
            attempt = Attempt(delivered=False, error=printable(f"{type(err).__name__}: {err or 'no detail'}"))
        if attempt.delivered:
            await asyncio.to_thread(
                self._store.finish_webhook_delivery, delivery.id, delivered=True, status_code=attempt.status_code
            )
            return
        await self._record_failure(target, delivery, attempt.status_code, attempt.error, attempt.retry_after)

    async def _record_failure(
        self,
        target: WebhookTargetLike,
        delivery: WebhookDelivery,
        status_code: int | None,
        error: str | None,
        retry_after: float | None,
    ) -> None:
        final = delivery.attempts >= self._max_attempts
        again = None if final else retry_at(delivery.attempts, self._retry_base, self._retry_max, retry_after)
        await asyncio.to_thread(
            self._store.finish_webhook_delivery, delivery.id, delivered=False, status_code=status_code,
            error=error, retry_at=again,
        )
        log.warning(
            "webhook %s (%s) to %s: attempt %d of %d failed: %s%s", delivery.webhook_id, delivery.type, target.url,
            delivery.attempts, self._max_attempts, error, "; giving up" if final else "",
        )
