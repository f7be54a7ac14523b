"""AgentClient: the typed Python client a backend service uses to drive sessions, autonomous tasks
and task graphs. One object over one shared ``Connection``, with a sub-client per kind:
``sessions``, ``decisions``, ``memories``, ``trajectories``, ``tasks`` and ``graphs``."""

from __future__ import annotations

import asyncio
import getpass
import os
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from temporalio.client import Client

from agentrt.client._connection import DECISION_SECONDS, MAX_DECISION_SECONDS, Connection, connect
from agentrt.client._decisions import Decisions
from agentrt.client._graphs import Graphs
from agentrt.client._mcp_servers import McpServerView, change_mcp_server, mcp_servers_view, revoke_mcp_server
from agentrt.client._mcp_trust import decide_mcp_trust
from agentrt.client._memories import Memories
from agentrt.client._owner_pause import change_owner
from agentrt.client._quotas import Quotas
from agentrt.client._session_calls import SessionCalls
from agentrt.client._sessions import Sessions
from agentrt.client._tasks import Tasks
from agentrt.client._trajectories import Trajectories
from agentrt.client._visibility import may_read
from agentrt.client._workers import workflow_pollers
from agentrt.schemas import (
    AdvisorPolicy,
    AuditEntry,
    ConfigurationError,
    Lanes,
    McpServerChange,
    McpServerConfig,
    McpTrustDecision,
    OwnerPauseReport,
    QuotaPolicy,
    ServerUnavailable,
)
from agentrt.store import Store
from agentrt.worker import AgentrtClientPlugin, AgentrtConfig

__all__ = ["AgentClient", "default_principal"]


def default_principal() -> str:
    """``$AGENTRT_PRINCIPAL``, else the OS user name, else ``local``."""
    try:
        return os.environ.get("AGENTRT_PRINCIPAL") or getpass.getuser()
    except Exception:  # noqa: BLE001 - getuser raises several types when no user is known
        return "local"


class AgentClient:
    """Start sessions, send messages, wait for turns, decide approvals, read state and events;
    start and steer autonomous tasks and task graphs. The calls of each kind are on its
    sub-client, all over the client's one ``Connection`` (Temporal client, task queue,
    principal, store):

    - ``sessions``: ``new_config``, ``start``, ``start_and_wait``, ``send``, ``send_and_wait``,
      ``wait``, ``cancel``, ``archive``, ``pause``, ``resume``, ``state``, ``switch_model``,
      ``raise_budget``, ``compact``, ``events``, ``all_events``, ``follow``, ``deltas``, ``list``, ``waits``;
    - ``decisions``: ``approve``, ``deny``, ``reconcile``, ``questions``, ``answer``;
    - ``memories``: ``list``, ``decide``, ``forget``; ``trajectories``: ``get``;
    - ``tasks``: ``start``, ``status``, ``events``, ``list``, ``wait``, ``pause``, ``resume``,
      ``nudge``, ``cancel``, ``amend_goal``, ``raise_budget``;
    - ``graphs``: ``start``, ``status``, ``events``, ``list``, ``wait``, ``approve``, ``reject``, ``cancel``,
      ``pause``, ``resume``, ``retry_node``;
    - ``quotas``: ``show``, ``raise_quota`` (and ``check_start``, which every start asks first).

    The flat methods of earlier releases are aliases of those (the same bound methods):
    ``client.start`` is ``client.sessions.start`` (and so on for every session call,
    ``list_sessions`` for ``sessions.list``), ``client.approve`` is ``client.decisions.approve``
    (the same for ``deny``, ``reconcile``, ``questions``, ``answer``), ``memories`` /
    ``decide_memory`` / ``forget_memory`` are ``memories.list`` / ``decide`` / ``forget``,
    ``trajectory`` is ``trajectories.get``, ``start_task`` / ``task_status`` / ``task_events`` /
    ``list_tasks`` / ``wait_task`` / ``pause_task`` / ``resume_task`` / ``nudge_task`` /
    ``cancel_task`` / ``amend_task_goal`` / ``raise_task_budget`` are the ``tasks`` calls, and
    ``start_graph`` / ``graph_status`` / ``graph_events`` / ``list_graphs`` / ``wait_graph`` /
    ``approve_graph`` / ``reject_graph`` / ``cancel_graph`` the ``graphs`` ones.

    ``pause_owner`` and ``resume_owner``: the kill switch, every running session, task and graph of
    one owner at once. ``audit`` lists the audit log: who did what, on what, when and why. ``trust_mcp_server``:
    an operator's decision on how far an MCP server is trusted.

    ``advisor`` and ``mcp_servers``: the ``AdvisorPolicy`` and MCP servers of the sessions ``new_config``
    makes (``for_config``: the configuration's, every ``[mcp.servers.NAME]``). ``default_profile``,
    ``operators`` and ``tool_task_queue``: the profile (when none is given), operators and tool task
    queue of the tasks and graphs it starts (``for_config``: the configuration's). ``model_task_queue``:
    where the sessions, tasks and graphs it starts send their model calls (``for_config``: the
    configuration's; ``new_config`` sets it, as it sets ``tool_task_queue``). ``quotas``: the
    tenants' quotas its starts are checked against (``for_config``: ``[quotas]`` and ``[tenants]``).
    ``lanes``: the Temporal priority and fairness key of what it starts (``for_config``: ``[lanes]``;
    default ``Lanes()``: sessions 2, tasks 3, graphs 4, the owner's tenant as the fairness key).
    ``decision_seconds``: how long a decision on a task or graph (approve, reject, cancel, pause,
    resume, nudge, amend, raise budget) waits for a worker to take it (default ``DECISION_SECONDS``,
    50; at most ``MAX_DECISION_SECONDS``): past it, and a few seconds of grace, the call raises
    ``WorkerUnavailable`` and the decision is never applied (docs/python-client.md). ``virtual_clock``:
    for workflows on a virtual clock (a time-skipping test server), whose time runs ahead of this
    client's: decisions then carry no expiry, and one no worker took in time may be applied later."""

    def __init__(
        self, temporal: Client, *, task_queue: str = "agentrt", principal: str | None = None, store: Store | None = None,
        advisor: AdvisorPolicy | None = None, mcp_servers: list[str] | None = None, default_profile: str = "default",
        operators: list[str] | None = None, tool_task_queue: str | None = None, quotas: QuotaPolicy | None = None,
        model_task_queue: str | None = None,
        lanes: Lanes | None = None, decision_seconds: float = DECISION_SECONDS, virtual_clock: bool = False,
    ) -> None:
        if not 0 < decision_seconds <= MAX_DECISION_SECONDS:
            raise ConfigurationError(f"decision_seconds must be over 0 and at most {MAX_DECISION_SECONDS:g}, not {decision_seconds!r}")
        self.connection = Connection(
            temporal=temporal, task_queue=task_queue, principal=principal or default_principal(), store=store,
            advisor=advisor or AdvisorPolicy(), mcp_servers=list(mcp_servers or []), default_profile=default_profile,
            operators=list(operators or []), tool_task_queue=tool_task_queue, quotas=quotas or QuotaPolicy(),
            model_task_queue=model_task_queue,
            lanes=lanes or Lanes(), decision_seconds=decision_seconds, virtual_clock=virtual_clock,
        )
        calls = SessionCalls(self.connection)
        self.sessions = Sessions(self.connection, calls)
        self.decisions = Decisions(self.connection, self.sessions, calls)
        self.memories = Memories(self.connection, calls)
        self.trajectories = Trajectories(self.connection, self.sessions)
        self.tasks = Tasks(self.connection)
        self.graphs = Graphs(self.connection)
        self.quotas = Quotas(self.connection)
        # The flat names of earlier releases: aliases of the sub-clients' methods.
        sessions, decisions, tasks, graphs = self.sessions, self.decisions, self.tasks, self.graphs
        self.new_config, self.start, self.start_and_wait = sessions.new_config, sessions.start, sessions.start_and_wait
        self.send, self.send_and_wait, self.wait = sessions.send, sessions.send_and_wait, sessions.wait
        self.cancel, self.archive, self.state = sessions.cancel, sessions.archive, sessions.state
        self.switch_model, self.raise_budget, self.compact = sessions.switch_model, sessions.raise_budget, sessions.compact
        self.events, self.all_events, self.follow = sessions.events, sessions.all_events, sessions.follow
        self.deltas, self.list_sessions = sessions.deltas, sessions.list
        self.approve, self.deny, self.reconcile = decisions.approve, decisions.deny, decisions.reconcile
        self.questions, self.answer = decisions.questions, decisions.answer
        self.decide_memory, self.forget_memory = self.memories.decide, self.memories.forget
        self.trajectory = self.trajectories.get
        self.start_task, self.task_status, self.task_events = tasks.start, tasks.status, tasks.events
        self.list_tasks, self.wait_task, self.pause_task = tasks.list, tasks.wait, tasks.pause
        self.resume_task, self.nudge_task, self.cancel_task = tasks.resume, tasks.nudge, tasks.cancel
        self.amend_task_goal, self.raise_task_budget = tasks.amend_goal, tasks.raise_budget
        self.start_graph, self.graph_status, self.graph_events = graphs.start, graphs.status, graphs.events
        self.list_graphs, self.wait_graph, self.approve_graph = graphs.list, graphs.wait, graphs.approve
        self.reject_graph, self.cancel_graph = graphs.reject, graphs.cancel

    @classmethod
    async def connect(
        cls, config: AgentrtConfig | None = None, *, principal: str | None = None, store: Store | None = None
    ) -> "AgentClient":
        """Connect with ``AgentrtClientPlugin(config, store)`` (``config`` default: ``AgentrtConfig.load()``);
        raises ``ServerUnavailable``.

        Pass ``store`` (``Store.open(config.database_url)``) to stream token deltas with ``deltas``; with
        ``config.codec`` keys the plugin gives it their cipher (content sealed at rest, read in clear).
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
        """A client on ``temporal`` with ``config``'s task queue, advisor, MCP servers (and those
        operators added at run time that ``store`` has, not revoked), default profile, operators, tool
        and model task queues, quotas and lanes (every client the CLI makes)."""
        added = store.added_mcp_servers() if store is not None else []
        return cls(
            temporal, task_queue=config.task_queue, principal=principal, store=store, advisor=config.advisor,
            mcp_servers=sorted({*config.mcp_servers, *added}), default_profile=config.default_profile, operators=config.operators,
            tool_task_queue=config.tool_task_queue, quotas=config.quotas, model_task_queue=config.model_task_queue,
            lanes=config.lanes,
        )

    def with_principal(self, principal: str) -> "AgentClient":
        """This client acting as ``principal``: a new client sharing its Temporal connection, store and
        settings, its list of MCP servers included (the HTTP gateway makes one per request, for the caller's bearer token)."""
        c = self.connection
        client = type(self)(
            c.temporal, task_queue=c.task_queue, principal=principal, store=c.store, advisor=c.advisor,
            mcp_servers=c.mcp_servers, default_profile=c.default_profile, operators=c.operators,
            tool_task_queue=c.tool_task_queue, quotas=c.quotas, model_task_queue=c.model_task_queue, lanes=c.lanes,
            decision_seconds=c.decision_seconds, virtual_clock=c.virtual_clock,
        )
        client.connection.mcp_servers = c.mcp_servers  # one list: a server one of them adds, all of them use
        return client

    async def audit(
        self,
        *,
        principal: str | None = None,
        target: str | None = None,
        action: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
    ) -> list[AuditEntry]:
        """The audit log (docs/audit.md): the latest ``limit`` acts of principals, newest first, by
        ``principal``, on ``target`` (a session, task, graph or memory id), of ``action``, at or after
        ``since``, each when given. One of the client's ``operators`` reads every act; any other
        principal only the acts on what it owns. Raises ``ConfigurationError`` without a store and
        ``ValueError`` for a ``limit`` outside 1..``agentrt.store.MAX_AUDIT_LIMIT``."""
        store = self.connection.needs_store("audit")
        owner = None if self.principal in self.operators else self.principal
        return await asyncio.to_thread(
            store.audit, principal=principal, target=target, action=action, owner=owner, since=since, limit=limit
        )

    async def pause_owner(self, owner: str, reason: str | None = None) -> OwnerPauseReport:
        """Pause every running session, task and graph of ``owner`` (its ``AgentOwner``): no model or
        tool call starts in any of them until ``resume_owner`` (or a resume of each). Their child
        sessions pause with them. The owner itself, or one of the client's ``operators`` with a
        ``reason`` (each workflow checks its own operators too); raises ``PauseNotAllowed`` otherwise,
        pausing nothing. What each workflow did is in the report: ``paused``, ``already`` (paused
        before), ``refused`` (with why), ``gone`` (ended meanwhile) or ``failed`` (no worker answered)."""
        return await change_owner(self.connection, owner, reason, paused=True, changes=self._pause_calls(True))

    async def resume_owner(self, owner: str, reason: str | None = None) -> OwnerPauseReport:
        """Resume every paused session, task and graph of ``owner`` (``AgentSessionStatus`` ``paused``),
        as ``pause_owner`` paused them; each goes on where it stopped. Raises ``PauseNotAllowed`` as
        ``pause_owner`` does."""
        return await change_owner(self.connection, owner, reason, paused=False, changes=self._pause_calls(False))

    def _pause_calls(self, paused: bool) -> dict:
        kinds = {"session": self.sessions, "task": self.tasks, "graph": self.graphs}
        return {kind: getattr(calls, "pause" if paused else "resume") for kind, calls in kinds.items()}

    async def trust_mcp_server(self, server: str, trust: str, *, reason: str) -> McpTrustDecision:
        """Set how far MCP server ``server`` is trusted, ``trusted`` (the policy decides by risk
        class) or ``untrusted`` (every call needs an approval), from every worker's next listing of
        its tools on, whatever agentrt.toml says (docs/mcp.md); recorded with this principal, the time
        and ``reason``, in the audit log too. Operators only (``[principals] operators``). Raises
        ``RequestRejected`` for another principal, an empty reason, another ``trust`` or a name that
        is no server name; ``ConfigurationError`` without a store."""
        store = self.connection.needs_store("trust_mcp_server")
        return await decide_mcp_trust(store, self.principal, self.operators, server, trust, reason)

    async def add_mcp_server(self, config: McpServerConfig | Mapping[str, Any], *, reason: str) -> McpServerChange:
        """Add MCP server ``config`` (an ``McpServerConfig``, or its ``[mcp.servers.NAME]`` table as a
        dict with its ``name``) for every worker, from its next listing of the server's tools on
        (no restart), recorded with this principal, the time and ``reason`` (audit action
        ``add_mcp_server``); this client's sessions use it from now on. Operators only.

        Raises ``RequestRejected`` (not an operator, no reason), ``InvalidMcpServer`` (not a valid
        table, or ``sandbox = "none"``), ``McpServerExists`` (agentrt.toml or the store has the
        name); ``ConfigurationError`` without a store. Nothing is recorded then."""
        store = self.connection.needs_store("add_mcp_server")
        configured = self.connection.mcp_servers
        change = await change_mcp_server(store, self.principal, self.operators, configured, "add", config, reason)
        if change.server not in configured:
            configured.append(change.server)
        return change

    async def change_mcp_server(self, config: McpServerConfig | Mapping[str, Any], *, reason: str) -> McpServerChange:
        """Replace the configuration of MCP server ``config.name`` (agentrt.toml's or an earlier
        change's) by ``config`` for every worker, from its next listing or call on: a worker starts
        the server anew (its old process ends once its calls in flight have). Recorded as
        ``add_mcp_server`` is (audit action ``change_mcp_server``). Operators only. Raises as
        ``add_mcp_server``, with ``McpServerNotFound`` for a name neither has."""
        store = self.connection.needs_store("change_mcp_server")
        return await change_mcp_server(store, self.principal, self.operators, self.connection.mcp_servers, "change", config, reason)

    async def revoke_mcp_server(self, server: str, *, reason: str) -> McpTrustDecision:
        """Revoke MCP server ``server``: no worker lists or calls its tools from now on (a turn that
        listed them fails their calls with ``McpServerUnavailable``) and workers stop it, until
        ``trust_mcp_server`` trusts it again. A trust decision ``revoked`` (audit action
        ``revoke_mcp_server``). Operators only. Raises ``RequestRejected`` (not an operator, no
        reason, not a server name), ``McpServerNotFound``; ``ConfigurationError`` without a store."""
        store = self.connection.needs_store("revoke_mcp_server")
        return await revoke_mcp_server(store, self.principal, self.operators, self.connection.mcp_servers, server, reason)

    async def mcp_server_views(self) -> list[McpServerView]:
        """The MCP servers of this client's configuration and of the store's registry as workers
        see them now: where each comes from, its change and trust decision (``McpServerView``)."""
        store = self.connection.needs_store("mcp_server_views")
        return await mcp_servers_view(store, {name: None for name in self.connection.mcp_servers})

    async def may_read(self, workflow_id: str) -> bool:
        """True when the workflow ``workflow_id`` (``session-ID``, ``task-ID``, ``graph-ID``) exists and
        this client's principal owns it or is one of its operators; False for a missing workflow and
        another owner's alike (the rule every call of the client keeps). One describe per id and
        client (the HTTP gateway makes a client per request). Raises ``temporalio.service.RPCError``
        for a failure other than not found."""
        return await may_read(self.connection, workflow_id)

    async def has_worker(self) -> bool:
        """True when some worker polls this client's task queue for workflow tasks."""
        return len(await workflow_pollers(self.temporal, self.task_queue)) > 0

    # The connection's fields, read through the client as before.

    @property
    def temporal(self) -> Client:
        return self.connection.temporal

    @property
    def task_queue(self) -> str:
        return self.connection.task_queue

    @property
    def principal(self) -> str:
        return self.connection.principal

    @property
    def store(self) -> Store | None:
        return self.connection.store

    @property
    def advisor(self) -> AdvisorPolicy:
        return self.connection.advisor

    @property
    def mcp_servers(self) -> list[str]:
        return self.connection.mcp_servers

    @property
    def default_profile(self) -> str:
        return self.connection.default_profile

    @property
    def operators(self) -> list[str]:
        return self.connection.operators

    @property
    def tool_task_queue(self) -> str | None:
        return self.connection.tool_task_queue

    @property
    def model_task_queue(self) -> str | None:
        return self.connection.model_task_queue
