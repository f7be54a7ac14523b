"""AgentClient: the typed Python client a backend service uses to drive sessions."""

from __future__ import annotations

import asyncio
import copy
import getpass
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, AsyncIterator

from pydantic import ValidationError
from temporalio.client import (
    Client,
    RPCError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCStatusCode

from agentrt.client import _starts as starts
from agentrt.client._connection import connect
from agentrt.client._decisions import DecisionMethods
from agentrt.client._filters import SessionListing, list_session_rows
from agentrt.client._graphs import GraphMethods
from agentrt.client._memories import MemoryMethods
from agentrt.client._outcomes import ended_error, message_outcome
from agentrt.client._patience import Patience
from agentrt.client._queries import query_workflow
from agentrt.client._tasks import TaskMethods
from agentrt.client._trajectories import TrajectoryMethods
from agentrt.client._turns import update_failure_cause as _cause
from agentrt.client._turns import wait_for_turn
from agentrt.client._updates import UPDATE_PATIENCE_SECONDS, execute_session_update
from agentrt.client._workers import workflow_pollers
from agentrt.schemas import (
    SESSION_OWNER,
    AdvisorPolicy,
    ArchiveInput,
    Budget,
    CancelTurnInput,
    CompactOutcome,
    CompactRequest,
    Event,
    EventsPage,
    EventsQuery,
    RaiseBudgetInput,
    RequestRejected,
    SendMessageResult,
    ServerUnavailable,
    SessionConfig,
    SessionNotFound,
    SessionStateView,
    SessionStuck,
    SwitchModelInput,
    SwitchModelResult,
    TurnOutcome,
    WorkerUnavailable,
    session_workflow_id,
)
from agentrt.store import Store, TokenDelta
from agentrt.worker import AgentrtClientPlugin, AgentrtConfig
from agentrt.client._session_handlers import SessionHandlers


def default_principal() -> str:
    """``$AGENTRT_PRINCIPAL``, else the OS user name, else ``local``."""
    try:
        return os.environ.get("AGENTRT_PRINCIPAL") or getpass.getuser()
    except Exception:  # noqa: BLE001 - getuser raises several types when no user is known
        return "local"


@dataclass
class StartedSession:
    session_id: str
    turn_id: str
    workflow_id: str


class AgentClient(MemoryMethods, TrajectoryMethods, DecisionMethods, TaskMethods, GraphMethods):
    """Start sessions, send messages, wait for turns, decide approvals, read state and events;
    start and steer autonomous tasks (``TaskMethods``) and task graphs (``GraphMethods``).

    Every method raises ``SessionNotFound`` for an unknown session and ``RequestRejected``
    when the session's update validator refuses the request (the message says why).
    ``advisor`` and ``mcp_servers``: the ``AdvisorPolicy`` and MCP servers of the sessions ``new_config``
    makes (``for_config``: the configuration's, every ``[mcp.servers.NAME]``). ``default_profile``,
    ``operators`` and ``tool_task_queue``: the profile (when none is given), operators and tool task
    queue of the tasks ``start_task`` and graphs ``start_graph`` start (``for_config``: the configuration's)."""

    def __init__(
        self, temporal: Client, *, task_queue: str = "agentrt", principal: str | None = None, store: Store | None = None,
        advisor: AdvisorPolicy | None = None, mcp_servers: list[str] | None = None, default_profile: str = "default",
        operators: list[str] | None = None, tool_task_queue: str | None = None,
    ) -> None:
        self.temporal = temporal
        self.task_queue = task_queue
        self.principal = principal or default_principal()
        self.store = store
        self.advisor = advisor or AdvisorPolicy()
        self.mcp_servers = list(mcp_servers or [])
        self.default_profile = default_profile
        self.operators = list(operators or [])
        self._readable_sessions: set[str] = set()  # sessions this principal may see (checked once each)
        self.tool_task_queue = tool_task_queue

    @classmethod
    async def connect(
        cls, config: AgentrtConfig | None = None, *, principal: str | None = None, store: Store | None = None
    ) -> "AgentClient":
        """Connect with ``AgentrtClientPlugin(config, store)`` (``config`` default: ``AgentrtConfig.load()``);
        raises ``ServerUnavailable``.

        Pass ``store`` (``Store.open(config.database_url)``) to stream token deltas with ``deltas``.
        """
        config = config or AgentrtConfig.load()
        try:
            temporal = await connect(config.temporal_address, config.namespace, plugin=AgentrtClientPlugin(config, store))
        except RuntimeError as err:
            raise ServerUnavailable(config.temporal_address, str(err)) from err
        return cls.for_config(temporal, config, principal=principal, store=store)

    @classmethod
    def for_config(
        cls, temporal: Client, config: AgentrtConfig, *, principal: str | None = None, store: Store | None = None
    ) -> "AgentClient":
        """A client on ``temporal`` with ``config``'s task queue, advisor, MCP servers, default profile,
        operators and tool task queue (every client the CLI makes)."""
        return cls(
            temporal, task_queue=config.task_queue, principal=principal, store=store, advisor=config.advisor,
            mcp_servers=sorted(config.mcp_servers), default_profile=config.default_profile, operators=config.operators,
            tool_task_queue=config.tool_task_queue,
        )

    def with_principal(self, principal: str) -> "AgentClient":
        """This client acting as ``principal``: a copy sharing its Temporal connection, store and
        settings (the HTTP gateway makes one per request, for the caller's bearer token)."""
        other = copy.copy(self)
        other.principal, other._readable_sessions = principal, set()
        return other

    # ------------------------------------------------------------ sessions

    def new_config(
        self,
        workspace: str,
        *,
        session_id: str | None = None,
        profile: str = "default",
        script: str | None = None,
        idempotency_key: str | None = None,
        **fields: object,
    ) -> SessionConfig:
        """A ``SessionConfig`` owned by this client's principal, workspace made real (``os.path.realpath``:
        no symlink on its path; tools refuse it once it resolves elsewhere); ``advisor`` and ``mcp_servers``
        default to the client's (``connect``: the config's). ``session_id``: default derived from
        ``idempotency_key`` (the same on every retry), else new and random."""
        fields.setdefault("advisor", self.advisor)
        fields.setdefault("mcp_servers", self.mcp_servers)
        return SessionConfig(
            session_id=session_id or starts.new_session_id(self.principal, idempotency_key),
            owner=self.principal,
            workspace=os.path.realpath(workspace),
            profile=profile,
            script=os.path.abspath(script) if script else None,
            **fields,  # type: ignore[arg-type]
        )

    async def start(self, config: SessionConfig, text: str, *, idempotency_key: str | None = None) -> StartedSession:
        """Start the session and send its first message in one round trip (update-with-start).

        Without ``idempotency_key``, if the session already runs the message is sent to it. With
        one, a repeat returns the first message's turn and queues nothing (``send``), and a session
        this principal did not start with this key and config is ``RequestRejected`` (nothing sent:
        ``starts.start_session``). Returns the session and turn ids. Raises ``PayloadStorageMismatch``
        (nothing started or sent) for a message that would leave history for payload storage the
        task queue's workers do not read.
        """
        message = await starts.first_message(self, config.session_id, text, "send_message", idempotency_key)
        try:
            result = await starts.start_session(
                self, config, idempotency_key,
                lambda operation: self.temporal.execute_update_with_start_workflow(
                    SessionHandlers.send_message, message, start_workflow_operation=operation,
                    id=starts.message_update_id("send_message", message),
                ),
            )
        except WorkflowUpdateFailedError as err:
            raise RequestRejected(config.session_id, "send_message", _cause(err)) from err
        return StartedSession(config.session_id, result.turn_id, session_workflow_id(config.session_id))

    async def start_and_wait(
        self, config: SessionConfig, text: str, *, on_accepted: Callable[[], object] | None = None,
        idempotency_key: str | None = None,
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
        message = await starts.first_message(self, config.session_id, text, "send_and_wait", idempotency_key)
        update_id = starts.message_update_id("send_and_wait", message)
        send = starts.start_and_send(self, config, message, update_id, idempotency_key, on_accepted)
        outcome = await message_outcome(
            self.temporal, config.session_id, update_id, send, keyed=message.idempotency_key is not None, starts=True
        )
        started = StartedSession(config.session_id, outcome.turn_id, session_workflow_id(config.session_id))
        return started, await self._settled(config.session_id, outcome)

    async def send_and_wait(self, session_id: str, text: str, *, idempotency_key: str | None = None) -> TurnOutcome:
        """Send a message and wait for its turn's outcome in one update (``send_and_wait``); the
        turn id is the outcome's. Waits without a bound, as ``start_and_wait`` does; raises what
        ``send`` and ``wait`` raise. A repeat with ``idempotency_key`` answers the first message's outcome.
        Through server restarts it asks again; an update the server lost before the session took it
        is sent again with ``idempotency_key``, else ``RequestRejected`` (``_outcomes.message_outcome``)."""
        message = await starts.message_input(self, session_id, text, "send_and_wait", idempotency_key)
        handle = self._handle(session_id)
        update_id = starts.message_update_id("send_and_wait", message)
        outcome = await message_outcome(
            self.temporal, session_id, update_id,
            lambda: handle.execute_update(SessionHandlers.send_and_wait, message, id=update_id),
            keyed=message.idempotency_key is not None,
        )
        return await self._settled(session_id, outcome)

    async def _settled(self, session_id: str, outcome: TurnOutcome) -> TurnOutcome:
        """``outcome``, or, when ``pending`` (the session continued as new first), ``wait``'s."""
        if outcome.status != "pending":
            return outcome
        return await self.wait(session_id, outcome.turn_id)

    async def send(self, session_id: str, text: str, *, idempotency_key: str | None = None) -> SendMessageResult:
        """Queue a message; it runs after the active turn. Returns its turn id.

        ``idempotency_key`` (1 to 200 characters of ``A-Z a-z 0-9 . _ : -``): a repeat answers the first
        message's turn and queues nothing (the session keeps its last 1,000 keys); ``RequestRejected`` for
        another text under the same key or a malformed key (docs/idempotency.md).
        Raises ``PayloadStorageMismatch`` (nothing sent) as ``start`` does.
        """
        message = await starts.message_input(self, session_id, text, "send_message", idempotency_key)
        update_id = starts.message_update_id("send_message", message)
        return await self._execute(session_id, "send_message", SessionHandlers.send_message, message, update_id)

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
        address = self.temporal.service_client.config.target_host
        await patience.retried(lambda: self._check_session_visible(session_id), address)
        left = None if timeout_seconds is None else max(0.0, patience.remaining() or 0.0)
        return await wait_for_turn(self._handle(session_id), self.store, session_id, turn_id, left)

    async def _signal(self, session_id: str, signal: Any, argument: Any) -> None:
        try:
            await self._handle(session_id).signal(signal, argument)
        except RPCError as err:
            raise _translate(session_id, err) from err

    async def _execute(self, session_id: str, name: str, update: Any, argument: Any, update_id: str | None = None) -> Any:
        patience = Patience(session_id, f"update {name}", UPDATE_PATIENCE_SECONDS)
        address = self.temporal.service_client.config.target_host
        await patience.retried(lambda: self._check_session_visible(session_id), address)
        handle = self._handle(session_id)

        async def translate(err: RPCError) -> Exception:
            return await self._translate_closed(session_id, handle, name, err)

        return await execute_session_update(
            handle, session_id, name, update, argument, update_id, translate, patience, address
        )

    async def _translate_closed(self, session_id: str, handle: WorkflowHandle, name: str, err: RPCError) -> Exception:
        """An update to a closed workflow fails NOT_FOUND; say the session ended instead of 'no session'."""
        if err.status == RPCStatusCode.NOT_FOUND:
            try:
                description = await handle.describe()
            except RPCError:
                return SessionNotFound(session_id)
            if description.close_time is not None:
                return ended_error(session_id, name, description)
        return _translate(session_id, err)

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
        await self._execute(
            session_id,
            "cancel",
            SessionHandlers.cancel,
            CancelTurnInput(turn_id=turn_id, principal=self.principal, reason=reason, include_queued=include_queued),
        )

    async def archive(self, session_id: str, reason: str | None = None) -> SessionStateView:
        """End the session: a running turn and queued ones are cancelled; the workflow completes."""
        return await self._execute(
            session_id, "archive", SessionHandlers.archive, ArchiveInput(principal=self.principal, reason=reason)
        )

    async def state(self, session_id: str) -> SessionStateView:
        await self._check_session_visible(session_id)
        try:
            return await query_workflow(self._handle(session_id), SessionHandlers.state)
        except RPCError as err:
            raise _translate(session_id, err) from err
        except WorkflowQueryFailedError as err:
            raise _query_failed(session_id, "state", err) from err

    async def switch_model(self, session_id: str, profile: str) -> SwitchModelResult:
        """Switch the session to ``profile`` once the active and queued turns are done; waits for it.

        Compacts first when the conversation does not fit the new profile's window (tokens).
        Raises ``RequestRejected`` for a non-owner, an archived session or an unknown profile.
        """
        return await self._execute(
            session_id, "switch_model", SessionHandlers.switch_model, SwitchModelInput(profile=profile, principal=self.principal)
        )

    async def raise_budget(self, session_id: str, budget: Budget, reason: str | None = None) -> SessionStateView:
        """Raise the session's budget: every limit ``budget`` sets replaces the current one (a session
        without a budget gets one); a turn after one that ended ``budget_exceeded`` runs. Returns the
        session's state (``budget``, ``spend``, ``remaining``). Raises ``RequestRejected`` for a
        stranger, an operator without a ``reason``, an archived session or an empty ``budget``."""
        try:
            request = RaiseBudgetInput(principal=self.principal, budget=budget, reason=reason)
        except ValidationError as err:
            raise RequestRejected(session_id, "raise_budget", "give at least one limit to raise") from err
        return await self._execute(session_id, "raise_budget", SessionHandlers.raise_budget, request)

    async def compact(self, session_id: str) -> CompactOutcome:
        """Compact the session's context now (after the active turn); waits for the outcome.

        The transcript stays whole in the store; the summary replaces the older part in what
        the model sees. Raises ``RequestRejected`` for a non-owner or an archived session.
        """
        return await self._execute(
            session_id, "compact", SessionHandlers.compact, CompactRequest(principal=self.principal)
        )

    async def events(self, session_id: str, since_seq: int = 0, limit: int = 1000) -> EventsPage:
        """Events with ``seq > since_seq`` (at most ``limit``), in order, across every run of the session.

        The workflow holds the events of its current run; older ones (before a
        continue-as-new) are read from the store's event projection, which needs the client
        to be built with ``store``; without it they are skipped and ``first_seq`` says where
        the page starts.
        """
        await self._check_session_visible(session_id)
        try:
            page = await query_workflow(
                self._handle(session_id), SessionHandlers.events, EventsQuery(since_seq=since_seq, limit=limit)
            )
        except RPCError as err:
            raise _translate(session_id, err) from err
        except WorkflowQueryFailedError as err:
            raise _query_failed(session_id, "events", err) from err
        if since_seq + 1 >= page.first_seq or self.store is None:
            return page
        older = await asyncio.to_thread(self.store.events, session_id, since_seq, limit)
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
        """Yield events as they happen, until the session's workflow closes."""
        handle = self._handle(session_id)
        while True:
            page = await self.events(session_id, since_seq)
            for event in page.events:
                since_seq = event.seq
                yield event
            if not page.events:
                if await self._is_closed(handle):
                    return
                await asyncio.sleep(poll_seconds)

    async def deltas(
        self, session_id: str, turn_id: str | None = None, poll_seconds: float = 0.1
    ) -> AsyncIterator[TokenDelta]:
        """Stream the model's token deltas (text chunks) from the store as they are written.

        Stops when ``turn_id`` (or, without one, the session's active turn) has ended.
        Needs the client to be built with the worker's ``store``; raises ``ConfigurationError``
        otherwise. Deltas never enter workflow history.
        """
        store = self._needs_store("deltas")
        if turn_id is None:
            turn_id = (await self.state(session_id)).active_turn_id
        after = 0
        while True:
            done = turn_id is None or (await query_workflow(self._handle(session_id), SessionHandlers.turn, turn_id)) is not None
            for delta in await asyncio.to_thread(store.deltas, session_id, after):
                after = delta.id
                if turn_id is None or delta.turn_id == turn_id:
                    yield delta
            if done:
                return
            await asyncio.sleep(poll_seconds)

    async def list_sessions(
        self, query: str | None = None, limit: int = 50, *, include_archived: bool = False
    ) -> list[SessionListing]:
        """Sessions known to Temporal visibility, one per session: its latest run (runs that
        continued as new are left out), the most recently started run first, so ``started_at``
        is when that run started. Archived sessions only with ``include_archived``; ``query``
        adds a visibility filter, which must stay inside its group (``InvalidListFilter``
        otherwise: unbalanced parentheses or quotes, or a filter Temporal refuses, with its
        reason); only session workflows are listed."""
        return await list_session_rows(self.temporal, query, limit, include_archived)

    async def has_worker(self) -> bool:
        """True when some worker polls this client's task queue for workflow tasks."""
        return len(await workflow_pollers(self.temporal, self.task_queue)) > 0

    def _handle(self, session_id: str) -> WorkflowHandle:
        return self.temporal.get_workflow_handle(session_workflow_id(session_id))

    async def _check_session_visible(self, session_id: str) -> None:
        """A child session (started by a task, a graph or a delegating session) shows itself only to
        its owner (``AgentOwner``) and this client's operators: anyone else gets ``SessionNotFound``,
        as for a missing session, from its reads (state, events, wait) and updates. Checked once
        per session and client (one describe)."""
        if session_id in self._readable_sessions:
            return
        try:
            description = await self._handle(session_id).describe()
        except RPCError as err:
            raise _translate(session_id, err) from err
        owner = description.typed_search_attributes.get(SESSION_OWNER)
        if description.parent_id is not None and self.principal != owner and self.principal not in self.operators:
            raise SessionNotFound(session_id)
        self._readable_sessions.add(session_id)

    async def _is_closed(self, handle: WorkflowHandle) -> bool:
        description = await handle.describe()
        return description.close_time is not None


# What a query to a workflow whose task keeps failing meets: the server's refusal, or the
# worker's non-determinism error when the query itself replays the history.
STUCK_QUERY_SIGNS = ("Workflow Task in failed state", "[TMPRL1100]")


def _translate(session_id: str, err: RPCError) -> Exception:
    if err.status == RPCStatusCode.NOT_FOUND:
        return SessionNotFound(session_id)
    if "no poller" in err.message:
        return WorkerUnavailable(session_id, err.message)
    if any(sign in err.message for sign in STUCK_QUERY_SIGNS):
        return SessionStuck(session_id, err.message)
    if "Workflow execution closed" in err.message:  # ended (terminated, say) while the query waited
        return RequestRejected(session_id, "query", f"the session's workflow has ended ({err.message})")
    return err


def _query_failed(session_id: str, request: str, err: WorkflowQueryFailedError) -> Exception:
    """``SessionStuck`` when the query failed because the workflow task does, else ``RequestRejected``."""
    if any(sign in str(err) for sign in STUCK_QUERY_SIGNS):
        return SessionStuck(session_id, str(err))
    return RequestRejected(session_id, request, str(err))
