"""Task graphs on the client side (``AgentClient.graphs``): read a graph file, start a graph (from a
goal the planner decomposes, or a given DAG), approve or reject its plan, cancel it, read it
(``snapshot`` and ``events`` queries), wait for its result and list a principal's graphs.

The workflow is addressed by its type name (``TASK_GRAPH_WORKFLOW``) and its id
``graph-<graph_id>``, so this module does not import the workflow class.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import yaml
from pydantic import BaseModel, ValidationError
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowHandle,
)

from agentrt.client._addressed import WorkflowKind, listing_fields
from agentrt.client._connection import Connection
from agentrt.client._quotas import Quotas
from agentrt.client._visibility import check_visible, may_see
from agentrt.schemas import (
    GRAPH_ID_PREFIX,
    MAX_GRAPH_ID_BYTES,
    MAX_NODE_ID_CHARS,
    TASK_GRAPH_WORKFLOW,
    TERMINAL_GRAPH_STATUSES,
    ApprovePlanInput,
    Budget,
    EventsPage,
    EventsQuery,
    GraphConfig,
    GraphControlInput,
    GraphNotFound,
    GraphSnapshot,
    RetryNodeInput,
    GraphSpec,
    GraphStatus,
    InvalidGraph,
    SandboxPolicy,
    TaskGraphInput,
    TaskGraphResult,
    code_span,
    graph_workflow_id,
    validate_graph,
)

__all__ = ["GRAPH_STATUSES", "GraphListing", "Graphs", "graph_details", "graph_summary", "load_graph_file"]

GRAPH_STATUSES: tuple[str, ...] = get_args(GraphStatus)
# Characters of the goal in a graph's static summary (the Temporal UI's one-line label).
SUMMARY_GOAL_CHARS = 80
# Characters of a node's prompt, and of the goal, in a graph's static details (each a code span:
# text a caller or a planner chose is never rendered as markdown).
DETAILS_PROMPT_CHARS = 160
DETAILS_GOAL_CHARS = 2000


@dataclass
class GraphListing:
    """One graph in ``AgentClient.list_graphs``: ``status`` is its ``AgentSessionStatus`` search
    attribute (a graph status), or, for a workflow that closed without completing, how it closed
    (``terminated``, ``timed_out``, ``failed``, ``canceled``); ``started_at`` is when it started (UTC)."""

    graph_id: str
    workflow_id: str
    status: str
    owner: str | None
    started_at: datetime | None
    closed: bool


# ---------------------------------------------------------------- graph files


def load_graph_file(path: str | os.PathLike[str]) -> GraphSpec:
    """The ``GraphSpec`` in a graph file: YAML for ``.yaml``/``.yml``, JSON otherwise, shaped
    ``{"max_parallel": N, "nodes": [{"id", "prompt", "depends_on", "acceptance", "role",
    "profile", "script", "tools"}, ...]}``. A node's relative ``script`` is taken from the file's
    directory.

    Raises ``InvalidGraph`` naming the file and each problem (unreadable, not JSON or YAML, a wrong
    shape, a cycle, a dependency on no node ...), or ``NodeCannotDecompose`` for a planner node or
    one asking for the ``delegate`` tool."""
    where = f"graph file {os.fspath(path)}"
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise InvalidGraph([f"cannot read it: {reason}"], where) from err
    try:
        data = yaml.safe_load(text) if file.suffix.lower() in (".yaml", ".yml") else json.loads(text)
    except (yaml.YAMLError, ValueError) as err:
        raise InvalidGraph([f"does not parse: {' '.join(str(err).split())}"], where) from err
    if not isinstance(data, dict):
        raise InvalidGraph([f"the top level is {type(data).__name__}, not an object with 'nodes'"], where)
    nodes = data.get("nodes")
    if isinstance(nodes, list):
        data = {**data, "nodes": [_script_from(file.parent, node) for node in nodes]}
    try:
        spec = GraphSpec.model_validate(data)
    except ValidationError as err:
        raise InvalidGraph([_field_problem(problem, nodes) for problem in err.errors()], where) from err
    validate_graph(spec, source=where)
    return spec


def _script_from(directory: Path, node: Any) -> Any:
    """``node`` with its relative ``script`` taken from ``directory``."""
    if isinstance(node, dict) and isinstance(node.get("script"), str) and node["script"]:
        script = os.path.expanduser(node["script"])
        return {**node, "script": os.path.normpath(os.path.join(directory.resolve(), script))}
    return node


def _field_problem(problem: Any, nodes: Any) -> str:
    """A pydantic error as ``node 2 ('b') prompt: String should have at least 1 character``."""
    loc = list(problem["loc"])
    message = str(problem["msg"]).removeprefix("Value error, ")
    if len(loc) >= 2 and loc[0] == "nodes" and isinstance(loc[1], int):
        index = loc[1]
        node = nodes[index] if isinstance(nodes, list) and index < len(nodes) else None
        node_id = node.get("id") if isinstance(node, dict) else None
        name = f"node {index + 1}" + (f" ({str(node_id)[:64]!r})" if isinstance(node_id, str) else "")
        rest = ".".join(str(p) for p in loc[2:])
        return f"{name} {rest}: {message}" if rest else f"{name}: {message}"
    where = ".".join(str(p) for p in loc)
    return f"{where}: {message}" if where else message


# ---------------------------------------------------------------- what the Temporal UI shows


def graph_summary(config: GraphConfig) -> str:
    """The workflow's static summary: ``graph <id> · <goal on one line, cut>`` or ``graph <id> · graph of N nodes``."""
    if config.goal is not None:
        what = code_span(config.goal, SUMMARY_GOAL_CHARS)
    else:
        count = len(config.graph.nodes) if config.graph is not None else 0
        what = f"graph of {count} node{'s' if count != 1 else ''}"
    return f"graph {config.graph_id} · {what}"


def graph_details(config: GraphConfig) -> str:
    """The workflow's static details (markdown): the goal or the nodes (with their dependencies),
    how the plan is approved, the risk level, parallelism, retries, failure policy, owner and workspace."""
    lines: list[str] = []
    if config.goal is not None:
        lines += [f"**Goal**: {code_span(config.goal, DETAILS_GOAL_CHARS)}", "", "**Plan**: made by the planner, shown before approval"]
    elif config.graph is not None:
        lines.append(f"**Nodes** ({len(config.graph.nodes)}):")
        for node in config.graph.nodes:
            deps = f" ← {', '.join(code_span(d, 80) for d in node.depends_on)}" if node.depends_on else ""
            lines.append(f"- {code_span(node.id, 80)} ({node.role}){deps}: {code_span(node.prompt, DETAILS_PROMPT_CHARS)}")
    approval = (
        "a person approves the plan (`agentrt graph approve`)" if config.approve_plan == "ask"
        else "automatic unless the plan's risk is high"
    )
    parallel = config.max_parallel or (config.graph.max_parallel if config.graph is not None else None)
    lines += [
        "",
        f"**Plan approval**: {approval}",
        f"**Risk level**: at least {config.risk_level}",
        f"**Parallel**: {parallel or 'as planned'} node(s) at once; {config.max_retries} retr{'y' if config.max_retries == 1 else 'ies'} per node",
        f"**Failure policy**: {config.failure_policy}",
        f"**Owner**: {code_span(config.owner, 200)}",
        f"**Workspace**: {code_span(config.workspace, 500)}",
    ]
    return "\n".join(lines)


class Graphs:
    """A client's task graphs (``AgentClient.graphs``), over its ``Connection``.

    Every method that names a graph raises ``GraphNotFound`` when no workflow ``graph-<graph_id>``
    exists, ``RequestRejected`` when the graph refuses the request (its message names the graph
    and says why: not the owner, an operator without a reason, the plan is not pending approval,
    already approved, the graph has ended), and ``WorkerUnavailable`` when no worker answers
    (queries and updates need one). Reads (``status``, ``events``, ``wait``) are the owner's and
    this client's operators': anyone else gets ``GraphNotFound``, as for a graph that does not exist.
    """

    def __init__(self, connection: Connection) -> None:
        self._connection = connection

    # ------------------------------------------------------------ start

    async def start(
        self,
        *,
        goal: str | None = None,
        graph: GraphSpec | None = None,
        workspace: str,
        graph_id: str | None = None,
        profile: str | None = None,
        script: str | None = None,
        planner_profile: str | None = None,
        reviewer_profile: str | None = None,
        approve_plan: str = "ask",
        risk_level: str = "low",
        max_parallel: int | None = None,
        max_retries: int = 1,
        failure_policy: str = "block_dependents",
        retry_window_seconds: float = 0.0,
        tools: Sequence[str] | None = None,
        sandbox: SandboxPolicy = "workspace_write",
        network: bool = False,
        max_rounds_per_node: int = 50,
        idempotency_key: str | None = None,
        budget: Budget | None = None,
    ) -> str:
        """Start a task graph owned by this client's principal; returns its graph id (the workflow
        id is ``graph-<graph_id>``).

        - ``goal`` (the planner decomposes it into nodes) or ``graph`` (a ``GraphSpec``, e.g. from
          ``load_graph_file``): exactly one. A node's relative ``script`` is made absolute.
        - ``workspace``: the directory the nodes' sessions work in (made real: ``os.path.realpath``); ``graph_id``:
          default one derived from ``idempotency_key``, else a new random 12-character id.
        - ``idempotency_key`` (1 to 200 characters of ``A-Z a-z 0-9 . _ : -``): a repeat of this start
          returns the first one's graph id and starts nothing; the same key with other arguments raises
          ``RequestRejected`` (docs/idempotency.md).
        - ``profile`` (default: ``scripted`` with a ``script`` or when every node names its own,
          else the client's ``default_profile``) and ``script`` (a scripted-model file, made
          absolute): the model of the nodes that name none, of the planner and of the reviewer
          unless ``planner_profile`` / ``reviewer_profile``.
        - ``approve_plan``: ``ask`` (the plan waits for ``approve_graph``) or ``auto`` (approved
          unless its risk is high); ``risk_level``: the least risk the plan is taken to have.
        - ``max_parallel`` (overrides the graph's), ``max_retries`` per node, ``failure_policy``
          (``block_dependents``, ``fail_fast``, ``allow_orphans``), ``tools`` the nodes may be
          granted (None: every tool but ``delegate``), ``sandbox``, ``network``,
          ``max_rounds_per_node``. Operators and the tool task queue are the client's.
        - ``retry_window_seconds``: how long a graph whose nodes failed for good waits for
          ``retry_node`` before it ends ``failed`` (0, the default: it ends at once; at most a week).
        - ``budget``: the graph's own (``Budget``), which its planner, nodes and reviews draw from;
          once spent no node starts or retries and the graph fails ``budget_exceeded`` (docs/task-graphs.md).

        Raises ``QuotaExceeded`` (nothing started) when the principal's tenant is at a quota;
        ``InvalidGraph`` / ``NodeCannotDecompose`` for a given graph that cannot run, and
        ``RequestRejected`` (request ``start``, nothing started) for other invalid arguments or a
        graph id already used (by a running graph or one that ended: ids are not reused);
        ``PayloadCodecMismatch`` (nothing started) when the task queue's workers hold no key of this
        client's, or encrypt and this client has no codec keys (docs/encryption.md).
        """
        await Quotas(self._connection).check_start()
        graph_id = GRAPH.start_id(graph_id, self._connection.principal, idempotency_key)
        if not graph_id or len(graph_id.encode()) > MAX_GRAPH_ID_BYTES:
            size = len(graph_id.encode())
            raise graph_rejected(graph_id[:40], "start", f"a graph id has 1 to {MAX_GRAPH_ID_BYTES} bytes (UTF-8), this one {size}")
        if goal is not None and not goal.strip():
            raise graph_rejected(graph_id, "start", "the goal is empty")
        if isinstance(tools, str):
            raise graph_rejected(graph_id, "start", "tools is a list of tool names, not one text")
        if graph is not None:
            if not isinstance(graph, GraphSpec):
                raise graph_rejected(graph_id, "start", f"graph is a GraphSpec, not {type(graph).__name__}")
            validate_graph(graph, granted=list(tools) if tools is not None else None)
            graph = graph.model_copy(update={"nodes": [
                n.model_copy(update={"script": os.path.realpath(n.script)}) if n.script else n for n in graph.nodes
            ]})
        config = _build(
            graph_id, "start", GraphConfig,
            graph_id=graph_id,
            owner=self._connection.principal,
            workspace=os.path.realpath(workspace),
            goal=goal,
            graph=graph,
            profile=profile or ("scripted" if script or _all_scripted(graph) else self._connection.default_profile),
            script=os.path.realpath(script) if script else None,  # a worker opens it by its real path only
            planner_profile=planner_profile,
            reviewer_profile=reviewer_profile,
            approve_plan=approve_plan,
            risk_level=risk_level,
            max_parallel=max_parallel,
            max_retries=max_retries,
            failure_policy=failure_policy,
            retry_window_seconds=retry_window_seconds,
            tools=list(tools) if tools is not None else None,
            sandbox=sandbox,
            network=network,
            max_rounds_per_node=max_rounds_per_node,
            budget=budget,
            operators=list(self._connection.operators),
            tool_task_queue=self._connection.tool_task_queue,
            model_task_queue=self._connection.model_task_queue,
        )
        await GRAPH.start(
            self._connection.temporal, TASK_GRAPH_WORKFLOW, TaskGraphInput(config=config), graph_id,
            workflow_id=graph_workflow_id(graph_id), task_queue=self._connection.task_queue,
            owner=config.owner, status="planning", summary=graph_summary(config), details=graph_details(config),
            idempotency_key=idempotency_key, store=self._connection.store,
            priority=self._connection.lane("graph", config.owner),
        )
        return graph_id

    # ------------------------------------------------------------ reads

    async def status(self, graph_id: str) -> GraphSnapshot:
        """Query ``snapshot``: the graph's status, plan (nodes in dependency order, each with its
        status, attempts, session, findings), risk, approval, spend, answer or failure. Works on a
        graph that has ended too."""
        await self._check_visible(graph_id)  # before the query: a stranger learns nothing, not even of a missing worker
        snapshot: GraphSnapshot = await self._query(graph_id, "snapshot", None, GraphSnapshot)
        if not self._may_read(snapshot.owner):
            raise GraphNotFound(graph_id)
        return snapshot

    async def events(self, graph_id: str, since_seq: int = 0, limit: int = 1000) -> EventsPage:
        """The graph's events with ``seq > since_seq`` (at most ``limit``, 1 to 10,000), in order:
        from the store, where the graph writes them (``graph.record``); the ones a running graph has
        not written yet, and every event of a graph from before that, by query ``events``."""
        query = _build(graph_id, "events", EventsQuery, since_seq=since_seq, limit=limit)
        await self._check_visible(graph_id)
        progress = None if self._connection.store is None else await asyncio.to_thread(self._connection.store.graph_progress, graph_id)
        if self._connection.store is None or progress is None:
            return await self._query(graph_id, "events", query, EventsPage)
        status, stored = progress
        events = await asyncio.to_thread(self._connection.store.graph_events, graph_id, since_seq, limit)
        if status in TERMINAL_GRAPH_STATUSES or len(events) >= limit:
            return EventsPage(events=events, last_seq=stored, first_seq=1)
        rest = query.model_copy(update={"since_seq": max(since_seq, stored), "limit": limit - len(events)})
        page: EventsPage = await self._query(graph_id, "events", rest, EventsPage)
        return EventsPage(events=events + page.events, last_seq=page.last_seq, first_seq=1)

    async def wait(self, graph_id: str) -> TaskGraphResult:
        """Wait, without a bound, until the graph ends and return how: ``completed`` (with its
        answer), ``failed`` (``failure_reason``), ``rejected`` or ``cancelled``; each node's status
        and the spend. Raises ``RequestRejected`` (request ``wait``) when its workflow ended
        without a result (terminated, timed out)."""
        await self._check_visible(graph_id)
        handle = self._connection.temporal.get_workflow_handle(graph_workflow_id(graph_id), result_type=TaskGraphResult)
        return await GRAPH.result(handle, graph_id)

    async def list(self, status: str | None = None, limit: int = 50) -> builtins.list[GraphListing]:
        """This client's principal's graphs (``AgentOwner``), most recently started first, at most
        ``limit``; ``status``: only graphs whose ``AgentSessionStatus`` is that graph status
        (``GRAPH_STATUSES``). Raises ``ConfigurationError`` for an unknown status."""
        executions = await GRAPH.listed(self._connection.temporal, TASK_GRAPH_WORKFLOW, self._connection.principal, status, GRAPH_STATUSES, limit)
        return [graph_listing(e) for e in executions]

    # ------------------------------------------------------------ changes

    async def approve(self, graph_id: str, reason: str | None = None, *, approve: bool = True) -> GraphSnapshot:
        """Update ``approve_plan``: a graph pending approval mints its capability token and runs
        (``approve=False``: its plan is rejected and the graph ends ``rejected``). Returns the
        snapshot after it. The owner, or an operator with a ``reason``."""
        decision = ApprovePlanInput(principal=self._connection.principal, approve=approve, reason=reason)
        await self._check_visible(graph_id)
        return await self._update(graph_id, "approve_plan", decision)

    async def reject(self, graph_id: str, reason: str | None = None) -> GraphSnapshot:
        """Update ``approve_plan`` with ``approve=False``: the plan is rejected, the graph ends ``rejected``."""
        return await self.approve(graph_id, reason, approve=False)

    async def cancel(self, graph_id: str, reason: str | None = None) -> GraphSnapshot:
        """Update ``cancel``: running nodes' sessions are cancelled and the graph ends ``cancelled``;
        answers once it has. The owner, or an operator with a ``reason``."""
        await self._check_visible(graph_id)
        return await self._update(graph_id, "cancel", GraphControlInput(principal=self._connection.principal, reason=reason))

    async def pause(self, graph_id: str, reason: str | None = None) -> GraphSnapshot:
        """Update ``pause``: no node, retry or review starts and the running nodes' sessions pause (a
        model or tool call in flight finishes) until ``resume``. Returns the snapshot (status
        ``paused``). A pause of a paused graph changes nothing. The owner, or an operator with a ``reason``."""
        await self._check_visible(graph_id)
        return await self._update(graph_id, "pause", GraphControlInput(principal=self._connection.principal, reason=reason))

    async def resume(self, graph_id: str, reason: str | None = None) -> GraphSnapshot:
        """Update ``resume``: the paused sessions go on and ready nodes start. A resume of a graph that
        is not paused changes nothing."""
        await self._check_visible(graph_id)
        return await self._update(graph_id, "resume", GraphControlInput(principal=self._connection.principal, reason=reason))

    async def retry_node(self, graph_id: str, node_id: str, reason: str | None = None) -> GraphSnapshot:
        """Update ``retry_node``: node ``node_id``, which failed for good, runs again (``1 +
        max_retries`` attempts more) and the dependants it blocked wait for it again. Returns the
        snapshot after it. The owner, or an operator with a ``reason``; at most ``MAX_HAND_RETRIES``
        times a node. Raises ``RequestRejected`` (request ``retry_node``, nothing changed) for a node
        that is not failed, an unknown node, a graph that has ended (set ``retry_window_seconds`` to
        keep one open after its nodes fail) and a principal without standing; ``GraphNotFound``."""
        await self._check_visible(graph_id)
        if not node_id or len(node_id) > MAX_NODE_ID_CHARS:
            raise graph_rejected(graph_id, "retry_node", f"a node id has 1 to {MAX_NODE_ID_CHARS} characters, this one {len(node_id)}")
        request = RetryNodeInput(principal=self._connection.principal, node_id=node_id, reason=reason)
        return await self._update(graph_id, "retry_node", request)

    # ------------------------------------------------------------ plumbing

    def _handle(self, graph_id: str) -> WorkflowHandle[Any, Any]:
        return self._connection.temporal.get_workflow_handle(graph_workflow_id(graph_id))

    def _may_read(self, owner: str | None) -> bool:
        return may_see(self._connection, owner)

    async def _check_visible(self, graph_id: str) -> None:
        """Raise ``GraphNotFound`` unless the graph exists and this principal may read it (its
        owner search attribute, set at the start: no worker needed; ``check_visible``)."""
        await check_visible(
            self._connection, graph_workflow_id(graph_id), lambda: GraphNotFound(graph_id),
            lambda err: _graph_error(graph_id, err),
        )

    async def _update(self, graph_id: str, update: str, argument: BaseModel) -> GraphSnapshot:
        return await GRAPH.update(
            self._handle(graph_id), graph_id, update, argument, GraphSnapshot, self._connection.decision_seconds,
            expire=not self._connection.virtual_clock,
        )

    async def _query(self, graph_id: str, query: str, argument: BaseModel | None, result_type: type[Any]) -> Any:
        return await GRAPH.query(self._handle(graph_id), graph_id, query, argument, result_type)

def _all_scripted(graph: GraphSpec | None) -> bool:
    return graph is not None and all(n.script for n in graph.nodes)


GRAPH = WorkflowKind("graph", GraphNotFound)
graph_rejected = GRAPH.rejected
_no_worker = GRAPH.no_worker
_graph_error = GRAPH.error
_build = GRAPH.build

def graph_listing(execution: WorkflowExecution) -> GraphListing:
    """A graph's row from its workflow execution's search attributes (see ``GraphListing``)."""
    return GraphListing(graph_id=execution.id.removeprefix(GRAPH_ID_PREFIX), **listing_fields(execution, "planning"))
