"""``AgentClient``'s task-graph methods: graph files (``load_graph_file``), the arguments ``start_graph``
refuses before anything starts, what the Temporal UI shows, and, against a real Temporal server with
a stand-in workflow registered under the task graph's type name, what the client sends (start
options, search attributes, update and query names and inputs) and how it reports what comes back
(refusals, a missing graph, a graph a stranger may not see). The real workflow's behaviour is
tested in tests/workflows and tests/e2e."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any, AsyncIterator, cast

import pytest
from temporalio import workflow
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from agentrt.client import AgentClient, GraphListing, load_graph_file
from agentrt.client._graphs import GRAPH_STATUSES, graph_details, graph_summary
from agentrt.schemas import (
    SESSION_OWNER,
    SESSION_STATUS,
    TASK_GRAPH_WORKFLOW,
    TERMINAL_GRAPH_STATUSES,
    ApprovePlanInput,
    ConfigurationError,
    Event,
    EventsPage,
    EventsQuery,
    GraphConfig,
    GraphControlInput,
    GraphNode,
    GraphNotFound,
    GraphSnapshot,
    GraphSpec,
    GraphStatus,
    InvalidGraph,
    NodeCannotDecompose,
    NodeView,
    RequestRejected,
    TaskGraphCreated,
    TaskGraphInput,
    TaskGraphResult,
    graph_workflow_id,
)
from agentrt.worker import DevServer

# ---------------------------------------------------------------- graph files


def write(path: Path, body: Any) -> Path:
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return path


THREE_NODES = {
    "max_parallel": 2,
    "nodes": [
        {"id": "a", "prompt": "collect the facts"},
        {"id": "b", "prompt": "write the summary", "depends_on": ["a"], "acceptance": "under 200 words"},
        {"id": "c", "prompt": "check the links", "depends_on": ["a"], "role": "reviewer", "tools": ["fs.read"]},
    ],
}


def test_a_json_graph_file_reads_as_a_graph_spec(tmp_path: Path) -> None:
    spec = load_graph_file(write(tmp_path / "g.json", THREE_NODES))

    assert spec.max_parallel == 2
    assert [n.id for n in spec.nodes] == ["a", "b", "c"]
    assert spec.node("b").depends_on == ["a"] and spec.node("b").acceptance == "under 200 words"
    assert spec.node("c").role == "reviewer" and spec.node("c").tools == ["fs.read"]


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".YAML"])
def test_a_yaml_graph_file_reads_as_the_same_graph(tmp_path: Path, suffix: str) -> None:
    text = (
        "max_parallel: 2\nnodes:\n"
        "  - {id: a, prompt: collect the facts}\n"
        "  - id: b\n    prompt: write the summary\n    depends_on: [a]\n    acceptance: under 200 words\n"
        "  - {id: c, prompt: check the links, depends_on: [a], role: reviewer, tools: [fs.read]}\n"
    )
    assert load_graph_file(write(tmp_path / f"g{suffix}", text)) == load_graph_file(write(tmp_path / "g.json", THREE_NODES))


def test_a_node_s_relative_script_is_taken_from_the_file_s_directory(tmp_path: Path) -> None:
    folder = tmp_path / "graphs"
    folder.mkdir()
    body = {"nodes": [
        {"id": "a", "prompt": "p", "script": "scripts/a.json"},
        {"id": "b", "prompt": "p", "script": "../b.yaml"},
        {"id": "c", "prompt": "p", "script": "/abs/c.json"},
        {"id": "d", "prompt": "p"},
    ]}
    spec = load_graph_file(write(folder / "g.json", body))

    assert spec.node("a").script == str(folder.resolve() / "scripts" / "a.json")
    assert spec.node("b").script == str(tmp_path.resolve() / "b.yaml")
    assert spec.node("c").script == "/abs/c.json"
    assert spec.node("d").script is None


def test_a_graph_file_read_from_a_relative_path_still_resolves_scripts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "g.json", {"nodes": [{"id": "a", "prompt": "p", "script": "a.json"}]})
    monkeypatch.chdir(tmp_path)
    assert load_graph_file("g.json").node("a").script == str(tmp_path.resolve() / "a.json")


@pytest.mark.parametrize(
    "name, body, problem",
    [
        ("g.json", "{not json", "does not parse"),
        ("g.yaml", "nodes: [a, {", "does not parse"),
        ("g.json", "[1, 2]", "the top level is list, not an object with 'nodes'"),
        ("g.yaml", "", "the top level is NoneType"),
        ("g.json", {"max_parallel": 2}, "nodes: Field required"),
        ("g.json", {"nodes": []}, "nodes: List should have at least 1 item"),
        ("g.json", {"nodes": [{"id": "a"}]}, "node 1 ('a') prompt: Field required"),
        ("g.json", {"nodes": [{"id": "a", "prompt": "p"}, {"id": "b c", "prompt": "p"}]}, "node 2 ('b c') id: node id 'b c' must be letters"),
        ("g.json", {"nodes": [{"id": "a", "prompt": "  "}]}, "node 1 ('a') prompt: prompt is empty"),
        ("g.json", {"nodes": [{"id": "a", "prompt": "p", "colour": "red"}]}, "node 1 ('a') colour: Extra inputs are not permitted"),
        ("g.json", {"max_parallel": 99, "nodes": [{"id": "a", "prompt": "p"}]}, "max_parallel: Input should be less than or equal to 16"),
        ("g.json", {"nodes": [{"id": "a", "prompt": "p", "depends_on": ["b"]}, {"id": "b", "prompt": "p", "depends_on": ["a"]}]},
         "the dependencies form a cycle through a, b"),
        ("g.json", {"nodes": [{"id": "a", "prompt": "p", "depends_on": ["zz"]}]}, "node 'a' depends on 'zz', which is no node of the graph"),
        ("g.json", {"nodes": [{"id": "a", "prompt": "p"}, {"id": "a", "prompt": "q"}]}, "duplicate node ids: a"),
        ("g.json", {"nodes": [{"id": "a", "prompt": "p", "role": "boss"}]}, "node 'a' has role 'boss'"),
    ],
)
def test_a_bad_graph_file_is_invalid_graph_naming_the_file_and_the_problem(tmp_path: Path, name: str, body: Any, problem: str) -> None:
    path = write(tmp_path / name, body)

    with pytest.raises(InvalidGraph) as caught:
        load_graph_file(path)

    assert str(caught.value).startswith(f"invalid graph file {path}: ")
    assert problem in str(caught.value)
    assert not isinstance(caught.value, NodeCannotDecompose)


def test_every_problem_of_a_file_is_listed(tmp_path: Path) -> None:
    path = write(tmp_path / "g.json", {"nodes": [{"id": "a"}, {"id": "b", "prompt": ""}]})
    with pytest.raises(InvalidGraph) as caught:
        load_graph_file(path)
    assert len(caught.value.problems) == 2
    assert "node 1 ('a') prompt" in caught.value.problems[0] and "node 2 ('b') prompt" in caught.value.problems[1]


def test_a_missing_graph_file_says_it_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(InvalidGraph, match="cannot read it: No such file or directory"):
        load_graph_file(tmp_path / "nope.json")


@pytest.mark.parametrize(
    "node, why",
    [({"id": "p", "prompt": "plan", "role": "planner"}, "role 'planner'"), ({"id": "d", "prompt": "x", "tools": ["delegate"]}, "'delegate' tool")],
)
def test_a_node_that_would_decompose_is_node_cannot_decompose(tmp_path: Path, node: dict[str, Any], why: str) -> None:
    with pytest.raises(NodeCannotDecompose, match=why) as caught:
        load_graph_file(write(tmp_path / "g.json", {"nodes": [node]}))
    assert caught.value.node_id == node["id"]


# ---------------------------------------------------------------- start_graph refuses before anything starts


class NoServer:
    """A Temporal client stand-in for calls that must not reach the server."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the server was asked ({name}) although the arguments are invalid")


def offline_client() -> AgentClient:
    return AgentClient(cast(Client, NoServer()), principal="alice")


def a_spec(**fields: Any) -> GraphSpec:
    nodes = fields.pop("nodes", [GraphNode(id="a", prompt="do a"), GraphNode(id="b", prompt="do b", depends_on=["a"])])
    return GraphSpec(nodes=nodes, **fields)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "give a goal (the planner makes the graph) or a graph, not both and not neither"),
        ({"goal": "g", "graph": "SPEC"}, "give a goal (the planner makes the graph) or a graph, not both and not neither"),
        ({"goal": "  "}, "the goal is empty"),
        ({"goal": "g", "approve_plan": "maybe"}, "approve_plan: Input should be 'ask' or 'auto'"),
        ({"goal": "g", "risk_level": "extreme"}, "risk_level: Input should be 'low', 'medium' or 'high'"),
        ({"goal": "g", "failure_policy": "shrug"}, "failure_policy: Input should be 'block_dependents', 'fail_fast' or 'allow_orphans'"),
        ({"goal": "g", "max_retries": 9}, "max_retries: Input should be less than or equal to 5"),
        ({"goal": "g", "max_parallel": 0}, "max_parallel: Input should be greater than or equal to 1"),
        ({"goal": "g", "max_rounds_per_node": 0}, "max_rounds_per_node: Input should be greater than or equal to 1"),
        ({"goal": "g", "tools": ["fs.read", "delegate"]}, "a graph may not grant 'delegate'"),
        ({"goal": "g", "tools": "fs.read"}, "tools is a list of tool names, not one text"),
        ({"goal": "g", "sandbox": "none"}, "sandbox: Input should be"),
        ({"goal": "g", "graph_id": ""}, "a graph id has 1 to"),
        ({"goal": "g", "graph_id": "x" * 2000}, "a graph id has 1 to"),
        ({"graph": {"nodes": []}}, "graph is a GraphSpec, not dict"),
    ],
)
async def test_start_graph_refuses_invalid_arguments_with_request_rejected(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    if kwargs.get("graph") == "SPEC":
        kwargs["graph"] = a_spec()
    kwargs.setdefault("graph_id", "never-started")

    with pytest.raises(RequestRejected) as caught:
        await offline_client().start_graph(workspace=str(tmp_path), **kwargs)

    assert caught.value.request == "start"
    assert message in str(caught.value)
    assert str(caught.value).startswith(f"graph {kwargs['graph_id'][:40]} rejected start: ")


async def test_start_graph_refuses_a_cyclic_graph_with_invalid_graph(tmp_path: Path) -> None:
    cyclic = a_spec(nodes=[GraphNode(id="a", prompt="p", depends_on=["b"]), GraphNode(id="b", prompt="p", depends_on=["a"])])
    with pytest.raises(InvalidGraph, match="the dependencies form a cycle through a, b"):
        await offline_client().start_graph(graph=cyclic, workspace=str(tmp_path))


async def test_start_graph_refuses_a_node_asking_for_a_tool_the_graph_does_not_grant(tmp_path: Path) -> None:
    spec = a_spec(nodes=[GraphNode(id="a", prompt="p", tools=["shell.run"])])
    with pytest.raises(InvalidGraph, match=r"node 'a' asks for tools the graph does not grant \(.*\): shell.run"):
        await offline_client().start_graph(graph=spec, workspace=str(tmp_path), tools=["fs.read"])


async def test_start_graph_refuses_a_node_that_would_decompose(tmp_path: Path) -> None:
    spec = a_spec(nodes=[GraphNode(id="a", prompt="p", role="planner")])
    with pytest.raises(NodeCannotDecompose):
        await offline_client().start_graph(graph=spec, workspace=str(tmp_path))


class RecordingTemporal:
    """A Temporal client stand-in that keeps what ``start_workflow`` was given."""

    def __init__(self) -> None:
        self.started: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    async def start_workflow(self, *args: Any, **kwargs: Any) -> None:
        self.started.append((args, kwargs))

    def config(self) -> dict[str, Any]:  # no plugin: nothing for the payload checks to ask
        return {}


async def test_a_graph_whose_nodes_all_name_a_script_runs_on_the_scripted_profile(tmp_path: Path) -> None:
    temporal = RecordingTemporal()
    client = AgentClient(cast(Client, temporal), principal="alice", default_profile="gpt")
    spec = a_spec(nodes=[GraphNode(id="a", prompt="p", script="/s/a.json"), GraphNode(id="b", prompt="p", script="/s/b.json")])
    mixed = a_spec(nodes=[GraphNode(id="a", prompt="p", script="/s/a.json"), GraphNode(id="b", prompt="p")])

    await client.start_graph(graph=spec, workspace=str(tmp_path), graph_id="g1")
    await client.start_graph(graph=mixed, workspace=str(tmp_path), graph_id="g2")

    [((workflow_type, first), options), ((_, second), _)] = temporal.started
    assert workflow_type == TASK_GRAPH_WORKFLOW and options["id"] == "graph-g1"
    assert first.config.profile == "scripted" and second.config.profile == "gpt"


# ---------------------------------------------------------------- what operators see in the Temporal UI


def test_the_summary_of_a_goal_graph_is_its_goal_on_one_line_cut() -> None:
    config = GraphConfig(graph_id="g1", owner="alice", workspace="/w", goal="ship\n" + "x" * 200)
    summary = graph_summary(config)
    assert summary.startswith("graph g1 · `ship xxx") and "\n" not in summary and len(summary) < 100


def test_the_summary_of_a_given_graph_counts_its_nodes() -> None:
    config = GraphConfig(graph_id="g1", owner="alice", workspace="/w", graph=a_spec())
    assert graph_summary(config) == "graph g1 · graph of 2 nodes"


def test_the_details_list_the_nodes_the_approval_and_the_owner() -> None:
    config = GraphConfig(
        graph_id="g1", owner="alice", workspace="/w", graph=a_spec(max_parallel=2), approve_plan="auto", max_retries=2,
        failure_policy="fail_fast",
    )
    details = graph_details(config)
    for part in ("**Nodes** (2):", "- `a` (worker): `do a`", "- `b` (worker) ← `a`: `do b`",
                 "**Plan approval**: automatic unless the plan's risk is high", "**Parallel**: 2 node(s) at once; 2 retries per node",
                 "**Failure policy**: fail_fast", "**Owner**: `alice`", "**Workspace**: `/w`"):
        assert part in details


def test_the_details_of_a_goal_graph_say_the_planner_makes_the_plan() -> None:
    details = graph_details(GraphConfig(graph_id="g1", owner="alice", workspace="/w", goal="ship it"))
    assert "**Goal**: `ship it`" in details and "made by the planner" in details and "`agentrt graph approve`" in details


# ---------------------------------------------------------------- against a server: a stand-in workflow


@workflow.defn(name=TASK_GRAPH_WORKFLOW, sandboxed=False)
class StandInGraphWorkflow:
    """The task graph's interface and nothing else: waits for its plan's approval, then completes
    every node at once; ``cancel`` ends it."""

    @workflow.init
    def __init__(self, input: TaskGraphInput) -> None:
        c = input.config
        self._config = c
        self._status: GraphStatus = "pending_approval"  # an update may come with the first workflow task
        self._approved_by: str | None = None
        nodes = c.graph.nodes if c.graph is not None else [GraphNode(id="only", prompt=c.goal or "-")]
        self._nodes = [NodeView(id=n.id, role=n.role, prompt=n.prompt, depends_on=n.depends_on, status="pending") for n in nodes]
        self._events: list[Event] = []

    @workflow.run
    async def run(self, input: TaskGraphInput) -> TaskGraphResult:
        c = input.config
        self._events.append(TaskGraphCreated(seq=1, at=workflow.now(), graph_id=c.graph_id, owner=c.owner, goal=c.goal))
        if self._status == "pending_approval":
            workflow.upsert_search_attributes([SESSION_STATUS.value_set("pending_approval")])
        await workflow.wait_condition(lambda: self._status in TERMINAL_GRAPH_STATUSES)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return TaskGraphResult(
            graph_id=c.graph_id, status=self._status, nodes={n.id: n.status for n in self._nodes},
            answer="all done" if self._status == "completed" else None,
        )

    def _set(self, status: GraphStatus) -> GraphSnapshot:
        self._status = status
        workflow.upsert_search_attributes([SESSION_STATUS.value_set(status)])
        return self.snapshot()

    def _check(self, principal: str, reason: str | None) -> None:
        if principal != self._config.owner and not (principal in self._config.operators and (reason or "").strip()):
            raise ValueError(f"principal {principal!r} is not the owner of this graph")

    @workflow.update
    def approve_plan(self, input: ApprovePlanInput) -> GraphSnapshot:
        if not input.approve:
            return self._set("rejected")
        self._approved_by = input.principal
        for node in self._nodes:
            node.status = "completed"
        return self._set("completed")

    @approve_plan.validator
    def _validate_approve_plan(self, input: ApprovePlanInput) -> None:
        self._check(input.principal, input.reason)
        if self._status != "pending_approval":
            raise ValueError(f"the graph is {self._status}, not pending approval")

    @workflow.update
    def cancel(self, input: GraphControlInput) -> GraphSnapshot:
        for node in self._nodes:
            node.status = "cancelled"
        return self._set("cancelled")

    @cancel.validator
    def _validate_cancel(self, input: GraphControlInput) -> None:
        self._check(input.principal, input.reason)

    @workflow.query
    def snapshot(self) -> GraphSnapshot:
        c = self._config
        return GraphSnapshot(
            graph_id=c.graph_id, owner=c.owner, status=self._status, goal=c.goal, workspace=c.workspace,
            approve_plan=c.approve_plan, approved_by=self._approved_by, nodes=self._nodes,
        )

    @workflow.query
    def events(self, input: EventsQuery) -> EventsPage:
        return EventsPage(events=[e for e in self._events if e.seq > input.since_seq][: input.limit], last_seq=len(self._events))


class StandIn:
    """A worker of the stand-in workflow on a fresh task queue, and clients for it."""

    def __init__(self, temporal: Client, task_queue: str) -> None:
        self.temporal = temporal
        self.task_queue = task_queue
        self.client = self.as_principal("alice")

    def as_principal(self, principal: str, **options: Any) -> AgentClient:
        return AgentClient(self.temporal, task_queue=self.task_queue, principal=principal, **options)


@pytest.fixture
async def stand_in(temporal_server: DevServer) -> AsyncIterator[StandIn]:
    # A client without the agentrt plugin: its worker runs the stand-in only, not agentrt's workflows.
    temporal = await Client.connect(temporal_server.address, data_converter=pydantic_data_converter)
    task_queue = f"graphs-{uuid.uuid4().hex[:8]}"
    worker = Worker(temporal, task_queue=task_queue, workflows=[StandInGraphWorkflow], workflow_runner=UnsandboxedWorkflowRunner())
    async with worker:
        yield StandIn(temporal, task_queue)


async def test_a_graph_starts_with_its_summary_details_owner_and_config(stand_in: StandIn, tmp_path: Path) -> None:
    client = stand_in.as_principal("alice", operators=["ops"], default_profile="fast", tool_task_queue="tools")
    spec = a_spec(nodes=[GraphNode(id="a", prompt="do a", script="a.json"), GraphNode(id="b", prompt="do b", depends_on=["a"])])
    graph_id = await client.start_graph(graph=spec, workspace=".", max_parallel=2, approve_plan="auto")

    handle = stand_in.temporal.get_workflow_handle(graph_workflow_id(graph_id))
    description = await handle.describe()
    assert description.workflow_type == TASK_GRAPH_WORKFLOW and description.task_queue == stand_in.task_queue
    assert await description.static_summary() == f"graph {graph_id} · graph of 2 nodes"
    details = await description.static_details() or ""
    assert "- `b` (worker) ← `a`: `do b`" in details and "`alice`" in details
    assert description.typed_search_attributes.get(SESSION_OWNER) == "alice"
    history = await handle.fetch_history()
    [started] = [e for e in history.events if e.HasField("workflow_execution_started_event_attributes")]
    config = TaskGraphInput.model_validate_json(started.workflow_execution_started_event_attributes.input.payloads[0].data).config
    assert config.owner == "alice" and config.operators == ["ops"] and config.tool_task_queue == "tools"
    assert config.profile == "fast" and config.workspace == os.path.abspath(".") and config.max_parallel == 2
    assert config.approve_plan == "auto" and config.goal is None and config.graph is not None
    assert config.graph.node("a").script == os.path.abspath("a.json")
    await client.cancel_graph(graph_id)


async def test_a_goal_graph_runs_on_the_scripted_model_when_given_a_script(stand_in: StandIn, tmp_path: Path) -> None:
    graph_id = await stand_in.client.start_graph(goal="write the notes", workspace=str(tmp_path), script="s.json")

    snapshot = await stand_in.client.graph_status(graph_id)
    assert snapshot.goal == "write the notes" and snapshot.owner == "alice"
    history = await stand_in.temporal.get_workflow_handle(graph_workflow_id(graph_id)).fetch_history()
    [started] = [e for e in history.events if e.HasField("workflow_execution_started_event_attributes")]
    config = TaskGraphInput.model_validate_json(started.workflow_execution_started_event_attributes.input.payloads[0].data).config
    assert config.profile == "scripted" and config.script == os.path.abspath("s.json")
    await stand_in.client.cancel_graph(graph_id)


async def test_a_used_graph_id_is_refused_while_running_and_after_it_ended(stand_in: StandIn, tmp_path: Path) -> None:
    client = stand_in.client
    graph_id = await client.start_graph(goal="g", workspace=str(tmp_path), graph_id=f"dup-{uuid.uuid4().hex[:6]}")

    with pytest.raises(RequestRejected, match=f"graph {graph_id} rejected start: a graph with this id is running"):
        await client.start_graph(goal="g", workspace=str(tmp_path), graph_id=graph_id)
    await client.cancel_graph(graph_id)
    await client.wait_graph(graph_id)
    with pytest.raises(RequestRejected, match="has ended \\(graph ids are not reused\\)"):
        await client.start_graph(goal="g", workspace=str(tmp_path), graph_id=graph_id)


async def test_approving_a_plan_returns_the_snapshot_and_the_graph_s_result(stand_in: StandIn, tmp_path: Path) -> None:
    client = stand_in.client
    graph_id = await client.start_graph(graph=a_spec(), workspace=str(tmp_path))

    snapshot = await client.approve_graph(graph_id, "looks right")
    assert snapshot.status == "completed" and snapshot.approved_by == "alice"
    assert [(n.id, n.status) for n in snapshot.nodes] == [("a", "completed"), ("b", "completed")]
    result = await client.wait_graph(graph_id)
    assert result.status == "completed" and result.answer == "all done" and result.nodes == {"a": "completed", "b": "completed"}
    [created] = (await client.graph_events(graph_id)).events
    assert isinstance(created, TaskGraphCreated) and created.graph_id == graph_id


async def test_a_strangers_approval_and_cancel_get_the_error_of_a_missing_graph(stand_in: StandIn, tmp_path: Path) -> None:
    graph_id = await stand_in.client.start_graph(graph=a_spec(), workspace=str(tmp_path))
    await _until(stand_in.client, graph_id, "pending_approval")
    mallory = stand_in.as_principal("mallory")

    with pytest.raises(GraphNotFound) as approving:
        await mallory.approve_graph(graph_id)
    with pytest.raises(GraphNotFound) as cancelling:
        await mallory.cancel_graph(graph_id)

    assert str(approving.value) == str(cancelling.value) == f"no task graph {graph_id!r} (workflow id graph-{graph_id})"
    assert (await stand_in.client.graph_status(graph_id)).status == "pending_approval"  # nothing changed
    await stand_in.client.cancel_graph(graph_id)


async def test_a_refused_approval_names_the_graph_and_the_reason(stand_in: StandIn, tmp_path: Path) -> None:
    owner = stand_in.as_principal("alice", operators=["ops"])
    graph_id = await owner.start_graph(graph=a_spec(), workspace=str(tmp_path))
    await _until(owner, graph_id, "pending_approval")

    with pytest.raises(RequestRejected) as caught:
        await stand_in.as_principal("ops", operators=["ops"]).approve_graph(graph_id)  # an operator gives no reason

    assert str(caught.value) == f"graph {graph_id} rejected approve_plan: principal 'ops' is not the owner of this graph"
    assert caught.value.request == "approve_plan" and caught.value.session_id == graph_id
    await owner.cancel_graph(graph_id)


async def test_a_rejected_plan_ends_the_graph_and_a_later_approval_says_it_ended(stand_in: StandIn, tmp_path: Path) -> None:
    client = stand_in.client
    graph_id = await client.start_graph(goal="g", workspace=str(tmp_path))
    await _until(client, graph_id, "pending_approval")

    assert (await client.reject_graph(graph_id, "too broad")).status == "rejected"
    assert (await client.wait_graph(graph_id)).status == "rejected"
    with pytest.raises(RequestRejected, match="the graph has ended \\(its workflow completed\\)"):
        await client.approve_graph(graph_id)
    assert (await client.graph_status(graph_id)).status == "rejected"  # reads still work


async def test_cancel_returns_the_cancelled_snapshot(stand_in: StandIn, tmp_path: Path) -> None:
    graph_id = await stand_in.client.start_graph(graph=a_spec(), workspace=str(tmp_path))
    snapshot = await stand_in.client.cancel_graph(graph_id, "changed my mind")
    assert snapshot.status == "cancelled" and {n.status for n in snapshot.nodes} == {"cancelled"}
    assert (await stand_in.client.wait_graph(graph_id)).status == "cancelled"


async def test_a_stranger_cannot_tell_a_graph_exists(stand_in: StandIn, tmp_path: Path) -> None:
    graph_id = await stand_in.client.start_graph(graph=a_spec(), workspace=str(tmp_path))
    stranger = stand_in.as_principal("mallory")

    for call in (stranger.graph_status(graph_id), stranger.graph_events(graph_id), stranger.wait_graph(graph_id)):
        with pytest.raises(GraphNotFound) as caught:
            await call
        assert str(caught.value) == str(GraphNotFound(graph_id))
    await stand_in.client.cancel_graph(graph_id)


async def test_an_operator_of_the_client_reads_another_owner_s_graph(stand_in: StandIn, tmp_path: Path) -> None:
    graph_id = await stand_in.client.start_graph(graph=a_spec(), workspace=str(tmp_path))
    operator = stand_in.as_principal("ops", operators=["ops"])

    assert (await operator.graph_status(graph_id)).owner == "alice"
    assert (await operator.graph_events(graph_id)).last_seq == 1
    await stand_in.client.cancel_graph(graph_id)
    assert (await operator.wait_graph(graph_id)).status == "cancelled"


async def test_a_missing_graph_is_graph_not_found_for_every_method(stand_in: StandIn) -> None:
    client = stand_in.client
    calls = [
        client.graph_status("nope"), client.graph_events("nope"), client.wait_graph("nope"), client.approve_graph("nope"),
        client.reject_graph("nope"), client.cancel_graph("nope"),
    ]
    for call in calls:
        with pytest.raises(GraphNotFound, match="no task graph 'nope' \\(workflow id graph-nope\\)"):
            await call


async def test_list_graphs_shows_the_principal_s_graphs_only_and_filters_by_status(stand_in: StandIn, tmp_path: Path) -> None:
    owner = f"lister-{uuid.uuid4().hex[:6]}"
    client = stand_in.as_principal(owner)
    waiting = await client.start_graph(goal="g", workspace=str(tmp_path))
    cancelled = await client.start_graph(goal="g", workspace=str(tmp_path))
    await client.cancel_graph(cancelled)
    other = stand_in.as_principal(f"other-{owner}")
    stranger = await other.start_graph(goal="g", workspace=str(tmp_path))

    async def listed(status: str | None = None) -> dict[str, str]:
        rows: dict[str, str] = {}
        for _ in range(100):  # visibility is eventually consistent
            rows = {g.graph_id: g.status for g in await client.list_graphs(status)}
            if rows == ({waiting: "pending_approval", cancelled: "cancelled"} if status is None else {cancelled: "cancelled"}):
                return rows
            await asyncio.sleep(0.1)
        return rows

    assert await listed() == {waiting: "pending_approval", cancelled: "cancelled"}
    assert await listed("cancelled") == {cancelled: "cancelled"}
    [row] = [g for g in await client.list_graphs("cancelled")]
    assert isinstance(row, GraphListing) and row.workflow_id == graph_workflow_id(cancelled) and row.owner == owner and row.closed
    await client.cancel_graph(waiting)
    await other.cancel_graph(stranger)


async def test_list_graphs_refuses_an_unknown_status() -> None:
    with pytest.raises(ConfigurationError, match="unknown graph status 'asleep'; one of planning, pending_approval"):
        await offline_client().list_graphs("asleep")
    assert "pending_approval" in GRAPH_STATUSES


async def _until(client: AgentClient, graph_id: str, status: str) -> GraphSnapshot:
    for _ in range(100):
        snapshot = await client.graph_status(graph_id)
        if snapshot.status == status:
            return snapshot
        await asyncio.sleep(0.05)
    raise AssertionError(f"graph {graph_id} is {snapshot.status}, not {status}")


def test_the_flat_graph_methods_are_the_graphs_sub_client_s(temporal_client: Client) -> None:
    client = AgentClient(temporal_client, principal="alice")
    flat = {
        "start_graph": "start", "graph_status": "status", "graph_events": "events", "list_graphs": "list",
        "wait_graph": "wait", "approve_graph": "approve", "reject_graph": "reject", "cancel_graph": "cancel",
    }
    assert {name: getattr(client, name) for name in flat} == {name: getattr(client.graphs, verb) for name, verb in flat.items()}
