"""Sessions on the client side (``AgentClient.sessions``): start one, send it messages, wait for
its turns, steer it (cancel, archive, switch model, raise budget, compact), read its state and
events, and list sessions. Every call goes through one ``SessionCalls`` (client/_session_calls.py)."""

from __future__ import annotations

import asyncio
import builtins
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import AsyncIterator

from pydantic import ValidationError
from temporalio.client import RPCError, WorkflowExecutionStatus, WorkflowQueryFailedError, WorkflowUpdateFailedError

from agentrt.client import _starts as starts
from agentrt.client._addressed import validation_text
from agentrt.client._connection import Connection
from agentrt.client._filters import SessionListing, list_session_rows
from agentrt.client._outcomes import message_outcome
from agentrt.client._patience import Patience, is_aborted_update, is_unprocessed_update
from agentrt.client._quotas import Quotas
from agentrt.client._queries import query_workflow
from agentrt.client._session_calls import SessionCalls, query_failed
from agentrt.client._session_handlers import SessionHandlers
from agentrt.client._store_wait import StoreWait
from agentrt.client._turns import update_failure_cause as _cause
from agentrt.client._turns import outcome_from_store, wait_for_turn
from agentrt.client._waits import activity_waits
from agentrt.schemas import (
    ActivityWait,
    ArchiveInput,
    Budget,
    CancelTurnInput,
    CompactOutcome,
    CompactRequest,
    Event,
    EventsPage,
    EventsQuery,
    OutputSpec,
    PauseInput,
    RaiseBudgetInput,
    RenameInput,
    RequestRejected,
    SendMessageResult,
    SessionConfig,
    SessionStateView,
    SwitchModelInput,
    SwitchModelResult,
    TurnOutcome,
    session_workflow_id,
)
from agentrt.store import StreamWakeups, TokenDelta

__all__ = ["Sessions", "StartedSession"]

# How often ``deltas`` also asks whether the session's workflow still runs (seconds): the store
# says when a turn ends; a workflow that ended without writing it (terminated) only Temporal does.
ASK_SESSION_SECONDS = 2.0
# Delta rows ``Sessions.deltas`` reads from the store at once.
_DELTA_PAGE = 1000


@dataclass
class StartedSession:
    session_id: str
    turn_id: str
    workflow_id: str


class Sessions:
    """A client's sessions (``AgentClient.sessions``), over its ``Connection``.

    Every method raises ``SessionNotFound`` for an unknown session and for another owner's alike
    (only its owner and the client's operators see a session: ``SessionCalls.check_visible``),
    and ``RequestRejected`` when the session's update validator refuses the request (the message
    says why)."""

    def __init__(self, connection: Connection, calls: SessionCalls) -> None:
        self._connection = connection
        self._calls = calls

    def new_config(
        self,
        workspace: str,
        *,
        session_id: str | None = None,
        profile: str = "default",
        script: str | None = None,
        idempotency_key: str | None = None,
        agent: str | None = None,
        **fields: object,
    ) -> SessionConfig:
        """A ``SessionConfig`` owned by this client's principal, workspace made real (``os.path.realpath``:
        no symlink on its path; tools refuse it once it resolves elsewhere); ``advisor`` and ``mcp_servers``
        default to the client's (``connect``: the config's). ``session_id``: default derived from
        ``idempotency_key`` (the same on every retry), else new and random. ``agent``: the name of
        an agent the task queue's workers registered (``SessionConfig.agent``, docs/agents.md).
        ``model_task_queue`` defaults to the client's (where its model calls run)."""
        if agent is not None:
            fields["agent"] = agent
        fields.setdefault("advisor", self._connection.advisor)
        fields.setdefault("mcp_servers", self._connection.mcp_servers)
        fields.setdefault("model_task_queue", self._connection.model_task_queue)
        return SessionConfig(
            session_id=session_id or starts.new_session_id(self._connection.principal, idempotency_key),
            owner=self._connection.principal,
            workspace=os.path.realpath(workspace),
            profile=profile,
            script=os.path.realpath(script) if script else None,  # a worker opens it by its real path only
            **fields,  # type: ignore[arg-type]
        )

    async def start(
        self, config: SessionConfig, text: str, *, idempotency_key: str | None = None, output: OutputSpec | None = None
    ) -> StartedSession:
        """Start the session and send its first message in one round trip (update-with-start).

        Without ``idempotency_key``, if the session already runs the message is sent to it. With
        one, a repeat returns the first message's turn and queues nothing (``send``), and a session
        this principal did not start with this key and config is ``RequestRejected`` (nothing sent:
        ``starts.start_session``). Returns the session and turn ids. Raises ``QuotaExceeded`` (nothing
        started) when the principal's tenant is at a quota (``Quotas.check_start``); ``PayloadStorageMismatch``
        (nothing started or sent) for a message that would leave history for payload storage the
        task queue's workers do not read.
        """
        await Quotas(self._connection).check_start()
        message = await starts.first_message(self._connection, config.session_id, text, "send_message", idempotency_key, output)
        update_id = starts.message_update_id("send_message", message)
        try:
            result = await starts.start_session(
                self._connection, config, idempotency_key,
                lambda operation: self._connection.temporal.execute_update_with_start_workflow(
                    SessionHandlers.send_message, message, start_workflow_operation=operation, id=update_id,
                ),
            )
        except WorkflowUpdateFailedError as err:
            if not is_unprocessed_update(err):
                raise RequestRejected(config.session_id, "send_message", _cause(err)) from err
            # Started, but the worker that took the message did not process it: send it again.
            result = await self._calls.execute(config.session_id, "send_message", SessionHandlers.send_message, message, update_id)
        except RPCError as err:
            if not is_aborted_update(err):
                raise
            # Started, but the message's workflow task failed before the session saw it: send it again.
            result = await self._calls.execute(config.session_id, "send_message", SessionHandlers.send_message, message, update_id)
        return StartedSession(config.session_id, result.turn_id, session_workflow_id(config.session_id))

    async def start_and_wait(
        self, config: SessionConfig, text: str, *, on_accepted: Callable[[], object] | None = None,
        idempotency_key: str | None = None, output: OutputSpec | None = None,
    ) -> tuple[StartedSession, TurnOutcome]:
        """Start the session, send its first message and wait for that turn's outcome, in one call
        (update-with-start of the ``send_and_wait`` update, answered in the workflow task that
        ends the turn: no second request, no polling). If the session already runs, the message
        queues behind its turns and this waits for its own.

        Waits without a bound (cancel the call to stop waiting; the turn goes on): for a bounded
        wait use ``start`` and ``wait(timeout_seconds=...)``. The update counts against the
        server's limit of updates in flight per workflow (``history.maxInFlightUpdates``, 10 by
        default). ``on_accepted`` is called once the session has accepted the message (its
        first workflow task ran), before the turn ends; the call then takes one more request.
        ``idempotency_key`` as in ``send_and_wait``; through server restarts and lost updates as
        ``send_and_wait`` goes. Raises what ``start`` and ``wait`` raise.
        """
        await Quotas(self._connection).check_start()
        message = await starts.first_message(self._connection, config.session_id, text, "send_and_wait", idempotency_key, output)
        update_id = starts.message_update_id("send_and_wait", message)
        send = starts.start_and_send(self._connection, config, message, update_id, idempotency_key, on_accepted)
        outcome = await message_outcome(
            self._connection.temporal, config.session_id, update_id, send, keyed=message.idempotency_key is not None, starts=True
        )
        started = StartedSession(config.session_id, outcome.turn_id, session_workflow_id(config.session_id))
        return started, await self._settled(config.session_id, outcome)

    async def send_and_wait(
        self, session_id: str, text: str, *, idempotency_key: str | None = None, output: OutputSpec | None = None,
        if_idle: bool = False,
    ) -> TurnOutcome:
        """Send a message and wait for its turn's outcome in one update (``send_and_wait``); the
        turn id is the outcome's. Waits without a bound, as ``start_and_wait`` does; raises what
        ``send`` and ``wait`` raise (``SessionBusy`` with ``if_idle``, as ``send``). A repeat with
        ``idempotency_key`` answers the first message's outcome.
        Through server restarts it asks again; an update the server lost before the session took it
        is sent again with ``idempotency_key``, else ``RequestRejected`` (``_outcomes.message_outcome``)."""
        message = await starts.message_input(
            self._connection, session_id, text, "send_and_wait", idempotency_key, output, if_idle
        )
        await self._calls.check_visible(session_id)
        handle = self._calls.handle(session_id)
        update_id = starts.message_update_id("send_and_wait", message)
        outcome = await message_outcome(
            self._connection.temporal, session_id, update_id,
            lambda: handle.execute_update(SessionHandlers.send_and_wait, message, id=update_id),
            keyed=message.idempotency_key is not None,
        )
        return await self._settled(session_id, outcome)

    async def _settled(self, session_id: str, outcome: TurnOutcome) -> TurnOutcome:
        """``outcome``, or, when ``pending`` (the session continued as new first), ``wait``'s."""
        if outcome.status != "pending":
            return outcome
        return await self.wait(session_id, outcome.turn_id)

    async def send(
        self, session_id: str, text: str, *, idempotency_key: str | None = None, output: OutputSpec | None = None,
        if_idle: bool = False,
    ) -> SendMessageResult:
        """Queue a message; it runs after the active turn. Returns its turn id.

        ``if_idle``: send only if the session is idle: while a turn runs, a compaction runs or
        anything is queued, raises ``SessionBusy`` (a ``RequestRejected``; ``busy`` says which,
        ``turn_id`` names the running turn) and queues nothing.

        ``output``: the JSON object this turn's final answer must be (``OutputSpec.from_type(Triage)``);
        overrides the session's ``config.output`` for this turn. The outcome's ``output`` holds the
        validated object (``outcome.output_as(Triage)``; docs/structured-output.md). The same
        ``output`` is taken by ``send_and_wait``, ``start`` and ``start_and_wait``.

        ``idempotency_key`` (1 to 200 characters of ``A-Z a-z 0-9 . _ : -``): a repeat answers the first
        message's turn and queues nothing (the session keeps its last 1,000 keys); ``RequestRejected`` for
        another text under the same key or a malformed key (docs/idempotency.md).
        Raises ``PayloadStorageMismatch`` (nothing sent) as ``start`` does.
        """
        message = await starts.message_input(
            self._connection, session_id, text, "send_message", idempotency_key, output, if_idle
        )
        update_id = starts.message_update_id("send_message", message)
        return await self._calls.execute(session_id, "send_message", SessionHandlers.send_message, message, update_id)

    async def wait(self, session_id: str, turn_id: str, timeout_seconds: float | None = None) -> TurnOutcome:
        """Wait until the turn ends; a ``pending`` outcome means ``timeout_seconds`` passed first.

        Reads the store first when the client has one, else asks the ``turn`` query (either
        way a turn that has ended costs nothing in history, nor the worker anything with a
        store), then long-polls the ``wait_turn`` update, which answers in the workflow task
        that records the turn's end (tens of milliseconds, not a polling interval). An accepted
        update is in history, so it survives a worker restart; while no worker or server
        answers (a server restart), the store (or query) and the update are asked again with
        backoff until the timeout, warning once a minute while the session's workflow task fails.
        Raises ``RequestRejected`` for a negative timeout or an unknown turn, ``SessionNotFound``,
        ``ServerUnavailable`` when no server answered before the timeout.
        """
        if timeout_seconds is not None and timeout_seconds < 0:
            raise RequestRejected(session_id, "wait_turn", f"timeout_seconds must be >= 0, got {timeout_seconds:g}")
        patience = Patience(session_id, f"turn {turn_id}", timeout_seconds)
        address = self._connection.temporal.service_client.config.target_host
        await patience.retried(lambda: self._calls.check_visible(session_id), address)
        left = None if timeout_seconds is None else max(0.0, patience.remaining() or 0.0)
        return await wait_for_turn(self._calls.handle(session_id), self._connection.store, session_id, turn_id, left)

    async def cancel(
        self, session_id: str, turn_id: str | None = None, reason: str | None = None, *, include_queued: bool = False
    ) -> None:
        """Cancel the running turn (or, when none runs yet, the one about to start), or the queued
        turn ``turn_id``; a model or tool call in flight is cancelled too. ``include_queued``
        drops every queued turn as well. Returns once the session accepted the cancel; the turn
        ends ``cancelled`` within about a second (``wait`` for it).

        Raises ``RequestRejected`` (with the reason) when the cancel would change nothing: not
        the owner, an unknown or finished turn, nothing running or queued, already cancelling.
        """
        await self._calls.execute(
            session_id,
            "cancel",
            SessionHandlers.cancel,
            CancelTurnInput(turn_id=turn_id, principal=self._connection.principal, reason=reason, include_queued=include_queued),
        )

    async def archive(self, session_id: str, reason: str | None = None) -> SessionStateView:
        """End the session: a running turn and queued ones are cancelled; the workflow completes
        (so this client asks again who may see the session at its next call)."""
        view = await self._calls.execute(
            session_id, "archive", SessionHandlers.archive, ArchiveInput(principal=self._connection.principal, reason=reason)
        )
        self._calls.forget(session_id)
        return view

    async def rename(self, session_id: str, title: str | None, reason: str | None = None) -> SessionStateView:
        """Give the session the title ``title`` (1 to ``MAX_TITLE_CHARS`` characters, no control
        characters; None clears it), recorded as ``SessionRenamed`` and in the store's session row
        before this returns. Returns its state (``title``). Raises ``SessionNotFound`` (a stranger's
        call too), ``RequestRejected`` for a title that is not one, an operator without a ``reason``
        or an archived session. The title it has already changes nothing (no event)."""
        try:
            request = RenameInput(principal=self._connection.principal, title=title, reason=reason)
        except ValidationError as err:
            raise RequestRejected(session_id, "rename", validation_text(err)) from err
        return await self._calls.execute(session_id, "rename", SessionHandlers.rename, request)

    async def pause(self, session_id: str, reason: str | None = None) -> SessionStateView:
        """Pause the session: no model or tool call starts (one in flight finishes) until ``resume``;
        messages sent meanwhile queue, decisions and cancels are taken. Returns its state (status
        ``paused``, ``paused``: who, why, since when). A pause of a paused session changes nothing.
        Raises ``SessionNotFound`` (a stranger's call too), ``RequestRejected`` for an operator without
        a ``reason`` or an archived session."""
        return await self._calls.execute(
            session_id, "pause", SessionHandlers.pause, PauseInput(principal=self._connection.principal, reason=reason)
        )

    async def resume(self, session_id: str, reason: str | None = None) -> SessionStateView:
        """Resume a paused session where it stopped: the call it held, then the queued messages. A
        resume of a session that is not paused changes nothing. Raises as ``pause`` does."""
        return await self._calls.execute(
            session_id, "resume", SessionHandlers.resume, PauseInput(principal=self._connection.principal, reason=reason)
        )

    async def state(self, session_id: str, *, waits: bool = False) -> SessionStateView:
        """The session's ``SessionStateView`` (its ``state`` query). With ``waits``, also its
        running activities that wait for the store or are being retried (``view.waits``, from one
        more server call: ``waits``). Raises ``SessionNotFound`` for a session the caller may not see."""
        await self._calls.check_visible(session_id)
        try:
            view = await query_workflow(self._calls.handle(session_id), SessionHandlers.state)
        except RPCError as err:
            raise self._calls.error(session_id, err) from err
        except WorkflowQueryFailedError as err:
            raise query_failed(session_id, "state", err) from err
        if waits:
            view.waits = await activity_waits(self._connection.temporal, session_workflow_id(session_id))
        return view

    async def waits(self, session_id: str) -> list[ActivityWait]:
        """The session's running model, tool and store calls that wait for the store (an attempt met a
        store that does not answer: ``kind`` ``store_unavailable``, since when) or are being retried
        (``retrying``, the last failure), read from its workflow's description: the session itself
        cannot know. Empty when none does. Raises ``SessionNotFound`` for a session the caller may not see."""
        await self._calls.check_visible(session_id)
        return await activity_waits(self._connection.temporal, session_workflow_id(session_id))

    async def switch_model(self, session_id: str, profile: str) -> SwitchModelResult:
        """Switch the session to ``profile`` once the active and queued turns are done; waits for it.

        Compacts first when the conversation does not fit the new profile's window (tokens).
        Raises ``RequestRejected`` for a non-owner, an archived session or an unknown profile.
        """
        return await self._calls.execute(
            session_id, "switch_model", SessionHandlers.switch_model, SwitchModelInput(profile=profile, principal=self._connection.principal)
        )

    async def raise_budget(self, session_id: str, budget: Budget, reason: str | None = None) -> SessionStateView:
        """Raise the session's budget: every limit ``budget`` sets replaces the current one (a session
        without a budget gets one); a turn after one that ended ``budget_exceeded`` runs. Returns the
        session's state (``budget``, ``spend``, ``remaining``). Raises ``RequestRejected`` for a
        stranger, an operator without a ``reason``, an archived session or an empty ``budget``."""
        try:
            request = RaiseBudgetInput(principal=self._connection.principal, budget=budget, reason=reason)
        except ValidationError as err:
            raise RequestRejected(session_id, "raise_budget", "give at least one limit to raise") from err
        return await self._calls.execute(session_id, "raise_budget", SessionHandlers.raise_budget, request)

    async def compact(self, session_id: str) -> CompactOutcome:
        """Compact the session's context now (after the active turn); waits for the outcome.

        The transcript stays whole in the store; the summary replaces the older part in what
        the model sees. Raises ``RequestRejected`` for a non-owner or an archived session.
        """
        return await self._calls.execute(
            session_id, "compact", SessionHandlers.compact, CompactRequest(principal=self._connection.principal)
        )

    async def events(self, session_id: str, since_seq: int = 0, limit: int = 1000) -> EventsPage:
        """Events with ``seq > since_seq`` (at most ``limit``), in order, across every run of the session.

        The workflow holds the events of its current run; older ones (before a
        continue-as-new) are read from the store's event projection, which needs the client
        to be built with ``store``; without it they are skipped and ``first_seq`` says where
        the page starts.
        """
        await self._calls.check_visible(session_id)
        try:
            page = await query_workflow(
                self._calls.handle(session_id), SessionHandlers.events, EventsQuery(since_seq=since_seq, limit=limit)
            )
        except RPCError as err:
            raise self._calls.error(session_id, err) from err
        except WorkflowQueryFailedError as err:
            raise query_failed(session_id, "events", err) from err
        if since_seq + 1 >= page.first_seq or self._connection.store is None:
            return page
        older = await asyncio.to_thread(self._connection.store.events, session_id, since_seq, limit)
        older = [e for e in older if e.seq < page.first_seq]
        combined = (older + page.events)[:limit]
        return EventsPage(events=combined, last_seq=page.last_seq, first_seq=min(since_seq + 1, page.first_seq))

    async def all_events(self, session_id: str, since_seq: int = 0, page_size: int = 10_000) -> AsyncIterator[Event]:
        """Yield every event with ``seq > since_seq`` recorded so far, across all runs, page by page
        (``page_size`` events per query); ends at the latest one. Earlier runs need the store."""
        while True:
            page = await self.events(session_id, since_seq, page_size)
            if not page.events:
                return
            for event in page.events:
                yield event
            since_seq = page.events[-1].seq

    async def follow(self, session_id: str, since_seq: int = 0, poll_seconds: float = 0.25) -> AsyncIterator[Event]:
        """Yield events as they happen, until the session's workflow closes. A store that does not
        answer (PostgreSQL stopped) is waited out, with a warning of logger ``agentrt.client`` when
        the wait begins, once a minute and when it ends."""
        handle = self._calls.handle(session_id)
        store = self._connection.store
        store_wait = StoreWait(store) if store is not None else None  # a store that does not answer is waited out
        while True:
            reading = lambda: self.events(session_id, since_seq)  # noqa: E731
            page = await (store_wait.call(reading) if store_wait is not None else reading())
            for event in page.events:
                since_seq = event.seq
                yield event
            if not page.events:
                if await self._calls.is_closed(handle):
                    return
                await asyncio.sleep(poll_seconds)

    async def deltas(
        self, session_id: str, turn_id: str | None = None, poll_seconds: float = 0.05
    ) -> AsyncIterator[TokenDelta]:
        """Stream the model's token deltas (text chunks) from the store as they are written.

        Stops when ``turn_id`` (or, without one, the session's active turn) has ended, or the
        session's workflow has (terminated). Reads as soon as the store says the session's stream
        grew (a write in this process, or any on PostgreSQL; at most one read per 0.05 s), else
        every ``poll_seconds`` (seconds). Needs the client to be built with the worker's
        ``store``; raises ``ConfigurationError`` otherwise. A store that does not answer is waited
        out (``StoreWait``: a warning when the wait begins, once a minute and when it ends).
        Deltas never enter workflow history.
        """
        store = self._connection.needs_store("deltas")
        await self._calls.check_visible(session_id)
        if turn_id is None:
            turn_id = (await self.state(session_id)).active_turn_id
        after = 0
        loop = asyncio.get_running_loop()
        asked_at = loop.time()  # when Temporal was last asked whether the session's workflow runs
        # A write heard (this process, or PostgreSQL) ends the wait; at most one read per 0.05 s.
        wakeups = StreamWakeups(store.changes, min_interval=0.05)
        wakeups.watch(session_id)
        store_wait = StoreWait(store)  # a store that does not answer is waited out (a warning a minute)
        try:
            done = False
            while True:
                # Read first (a woken wait means deltas to show now), every row of the turn there
                # is, page by page; once the turn is known to have ended, one more read takes all
                # it wrote. Earlier turns' rows are never read.
                while True:
                    page = await store_wait.read(store.deltas, session_id, after, _DELTA_PAGE, turn_id=turn_id)
                    for delta in page:
                        after = delta.id
                        yield delta
                    if len(page) < _DELTA_PAGE:
                        break
                if done:
                    return
                done = turn_id is None or await store_wait.read(outcome_from_store, store, session_id, turn_id) is not None
                if not done and loop.time() - asked_at >= ASK_SESSION_SECONDS:
                    # The store says when a turn ends while the session runs; a run that closed may not have.
                    asked_at = loop.time()
                    done = (await self._calls.handle(session_id).describe()).status != WorkflowExecutionStatus.RUNNING
                if not done:
                    await wakeups.wait(session_id, poll_seconds)
        finally:
            wakeups.close()

    async def list(
        self, query: str | None = None, limit: int = 50, *, include_archived: bool = False
    ) -> builtins.list[SessionListing]:
        """Sessions known to Temporal visibility, one per session: its latest run (runs that
        continued as new are left out), the most recently started run first, so ``started_at``
        is when that run started. Archived sessions only with ``include_archived``; ``query``
        adds a visibility filter, which must stay inside its group (``InvalidListFilter``
        otherwise: unbalanced parentheses or quotes, or a filter Temporal refuses, with its
        reason); only session workflows are listed. Only this client's principal's sessions, unless
        it is one of the client's operators (who see everyone's). With a store, each row has the
        session's ``title`` (one read of the store for the page)."""
        connection = self._connection
        owner = None if connection.principal in connection.operators else connection.principal
        rows = await list_session_rows(connection.temporal, query, limit, include_archived, owner)
        if connection.store is not None and rows:
            titles = await asyncio.to_thread(connection.store.session_titles, [r.session_id for r in rows])
            rows = [replace(r, title=titles.get(r.session_id)) for r in rows]
        return rows
