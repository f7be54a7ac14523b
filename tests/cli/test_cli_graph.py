"""`agentrt graph ...` in process (typer's CliRunner), no Temporal server: option validation, graph
files, following a run (its plan, its approval at a terminal or from elsewhere, its events), the
JSON shapes and the lines people read (the client is a stand-in that records calls)."""

from __future__ import annotations

import json
import re
from contextlib import asynccontextmanager
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any, AsyncIterator

import pytest
from typer.testing import CliRunner

from agentrt.client import GraphListing
from agentrt.cli._app import app
from agentrt.client import GRAPH_STATUSES
from agentrt.cli._graph import GraphStatusOption
from agentrt.cli._graph_render import dag_lines, graph_event_line, graph_lines, graph_result_lines, node_depths
from agentrt.schemas import (
    AgentTaskCompleted,
    AgentTaskFailed,
    AgentTaskStarted,
    CapabilityToken,
    EventsPage,
    GraphNode,
    GraphNotFound,
    GraphSnapshot,
    GraphSpec,
    NodeView,
    RequestRejected,
    Spend,
    TaskBlocked,
    TaskCancelled,
    TaskDecomposed,
    TaskGraphCompleted,
    TaskGraphCreated,
    TaskGraphFailed,
    TaskGraphResult,
    TaskPlanApproved,
    TaskPlanRejected,
    TaskRetried,
    TaskReviewed,
    Usage,
)

runner = CliRunner()
AT = datetime(2030, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def plain(text: str) -> str:
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def node(node_id: str, status: str = "pending", **fields: Any) -> NodeView:
    return NodeView(id=node_id, role=fields.pop("role", "worker"), prompt=f"do {node_id}", status=status, **fields)  # type: ignore[arg-type]


def a_snapshot(status: str = "executing", **fields: Any) -> GraphSnapshot:
    values: dict[str, Any] = dict(
        graph_id="g1", owner="alice", status=status, goal="write the release notes", workspace="/w", risk_level="low",
        max_parallel=2, nodes=[node("a", "completed", attempts=1), node("b", "delegated", attempts=1, depends_on=["a"],
        session_id="g1-b-a1-0000abcd"), node("c", depends_on=["a"])], running=1,
        spend=Spend(usage=Usage(input_tokens=100, output_tokens=20), tool_calls=2),
    )
    values.update(fields)
    return GraphSnapshot(**values)


EVENTS = [
    TaskGraphCreated(seq=1, at=AT, graph_id="g1", owner="alice", goal="write the release notes"),
    TaskDecomposed(seq=2, at=AT, source="planner", nodes=[GraphNode(id="a", prompt="p"), GraphNode(id="b", prompt="p", depends_on=["a"])]),
]


class FakeClient:
    """Stands in for ``AgentClient``: records each call; ``graph_status`` walks ``timeline`` one
    snapshot per call (staying at ``pending_approval`` while ``hold`` until a decision)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.timeline = [a_snapshot("planning", nodes=[]), a_snapshot("pending_approval"), a_snapshot("executing"),
                         a_snapshot("completed", answer="the notes are written")]
        self.step = 0
        self.hold = False
        self.result = TaskGraphResult(graph_id="g1", status="completed", nodes={"a": "completed"}, answer="done")
        self.worker = True

    def _record(self, name: str, *args: Any, **kwargs: Any) -> None:
        self.calls.append((name, args, kwargs))

    def names(self) -> list[str]:
        return [name for name, _, _ in self.calls]

    async def start_graph(self, **kwargs: Any) -> str:
        self._record("start_graph", **kwargs)
        return kwargs.get("graph_id") or "g1"

    async def has_worker(self) -> bool:
        return self.worker

    async def graph_status(self, graph_id: str) -> GraphSnapshot:
        self._record("graph_status", graph_id)
        if graph_id == "missing":
            raise GraphNotFound(graph_id)
        snapshot = self.timeline[min(self.step, len(self.timeline) - 1)]
        if not (self.hold and snapshot.status == "pending_approval"):
            self.step += 1
        return snapshot

    async def graph_events(self, graph_id: str, since_seq: int = 0, limit: int = 1000) -> EventsPage:
        self._record("graph_events", graph_id, since_seq)
        return EventsPage(events=[e for e in EVENTS if e.seq > since_seq], last_seq=len(EVENTS))

    async def approve_graph(self, graph_id: str, reason: str | None = None, *, approve: bool = True) -> GraphSnapshot:
        self._record("approve_graph", graph_id, reason, approve=approve)
        self.hold = False
        self.step += 1
        return self.timeline[2]

    async def reject_graph(self, graph_id: str, reason: str | None = None) -> GraphSnapshot:
        self._record("reject_graph", graph_id, reason)
        self.hold = False
        self.timeline, self.step = [a_snapshot("rejected")], 0
        return self.timeline[0]

    async def cancel_graph(self, graph_id: str, reason: str | None = None) -> GraphSnapshot:
        self._record("cancel_graph", graph_id, reason)
        return a_snapshot("cancelled")

    async def list_graphs(self, status: str | None = None, limit: int = 50) -> list[GraphListing]:
        self._record("list_graphs", status, limit)
        return [GraphListing("g1", "graph-g1", "executing", "alice", AT, False)]

    async def wait_graph(self, graph_id: str) -> TaskGraphResult:
        self._record("wait_graph", graph_id)
        return self.result


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClient:
    client = FakeClient()

    @asynccontextmanager
    async def fake_runtime(config: Any) -> AsyncIterator[Any]:
        yield SimpleNamespace(client=client)

    monkeypatch.setattr("agentrt.cli._graph._graph_runtime", fake_runtime)
    monkeypatch.setattr("agentrt.cli._graph.POLL_SECONDS", 0.001)
    monkeypatch.setattr("agentrt.cli._graph._interactive", lambda: False)
    return client


@pytest.fixture
def files(tmp_path: Path) -> SimpleNamespace:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "done"}]}))
    graph = tmp_path / "graph.json"
    graph.write_text(json.dumps({"max_parallel": 2, "nodes": [
        {"id": "a", "prompt": "collect", "script": "script.json"},
        {"id": "b", "prompt": "write", "depends_on": ["a"]},
    ]}))
    return SimpleNamespace(dir=tmp_path, script=script, graph=graph)


def run(files: SimpleNamespace, *args: str, input: str | None = None) -> Any:
    return runner.invoke(app, ["graph", "run", *args, "--workspace", str(files.dir)], input=input)


# ---------------------------------------------------------------- option validation


@pytest.mark.parametrize(
    "command",
    [["graph"], ["graph", "run"], ["graph", "approve"], ["graph", "status"], ["graph", "events"], ["graph", "cancel"],
     ["graph", "list"], ["graph", "wait"]],
)
def test_every_graph_command_has_help(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0 and "Usage" in result.output


def test_the_status_option_lists_every_graph_status() -> None:
    assert tuple(s.value for s in GraphStatusOption) == GRAPH_STATUSES


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "give a graph FILE or --goal TEXT, not both and not neither"),
        (["{graph}", "--goal", "g"], "give a graph FILE or --goal TEXT, not both and not neither"),
        (["--goal", " "], "the goal is empty"),
        (["--goal", "g", "--profile", "x", "--script", "{script}"], "give --profile or --script, not both"),
        (["--goal", "g"], "unknown model profile 'default'"),
        (["--goal", "g", "--profile", "gpt-9"], "unknown model profile 'gpt-9'"),
        (["--goal", "g", "--script", "{script}", "--reviewer-profile", "gpt-9"], "unknown model profile 'gpt-9'"),
        (["--goal", "g", "--script", "{script}", "--planner-profile", "gpt-9"], "unknown model profile 'gpt-9'"),
        (["--goal", "g", "--script", "{script}", "--max-parallel", "17"], "--max-parallel': Input should be less than or equal to 16"),
        (["--goal", "g", "--script", "{script}", "--max-retries", "6"], "--max-retries': Input should be less than or equal to 5"),
        (["--goal", "g", "--script", "{script}", "--approve-plan", "maybe"], "'maybe' is not one of"),
        (["--goal", "g", "--script", "{script}", "--failure-policy", "shrug"], "'shrug' is not one of"),
        (["--goal", "g", "--script", "{script}", "--risk-level", "extreme"], "'extreme' is not one of"),
    ],
)
def test_graph_run_refuses_bad_options_with_the_reason(files: SimpleNamespace, fake: FakeClient, args: list[str], message: str) -> None:
    args = [a.replace("{script}", str(files.script)).replace("{graph}", str(files.graph)) for a in args]

    result = run(files, *args)

    assert result.exit_code == 2, result.output
    assert message in plain(result.output)
    assert fake.calls == []


def test_graph_run_without_a_profile_or_script_says_how_to_get_one(files: SimpleNamespace, fake: FakeClient) -> None:
    result = run(files, "--goal", "g")
    assert result.exit_code == 2 and "give --script FILE" in plain(result.output)


@pytest.mark.parametrize(
    "body, message",
    [
        ({"nodes": [{"id": "a", "prompt": "p", "depends_on": ["b"]}, {"id": "b", "prompt": "p", "depends_on": ["a"]}]},
         "the dependencies form a cycle through a, b"),
        ({"nodes": [{"id": "a"}]}, "node 1 ('a') prompt: Field required"),
        ({"nodes": [{"id": "a", "prompt": "p", "role": "planner"}]}, "node 'a' may not decompose further"),
        ({"nodes": [{"id": "a", "prompt": "p", "script": "missing.json"}]}, "node 'a': scripted model file"),
        ({"nodes": [{"id": "a", "prompt": "p", "profile": "gpt-9"}]}, "unknown model profile 'gpt-9'"),
    ],
)
def test_graph_run_refuses_a_graph_file_that_cannot_run(files: SimpleNamespace, fake: FakeClient, body: Any, message: str) -> None:
    files.graph.write_text(json.dumps(body))

    result = run(files, str(files.graph), "--script", str(files.script))

    assert result.exit_code == 2, result.output
    assert message in plain(result.output)
    assert fake.calls == []


# ---------------------------------------------------------------- graph run


def test_graph_run_json_prints_only_the_graph_id_and_does_not_follow(files: SimpleNamespace, fake: FakeClient) -> None:
    result = run(
        files, str(files.graph), "--script", str(files.script), "--approve-plan", "auto", "--id", "nightly", "--max-parallel", "3",
        "--max-retries", "2", "--failure-policy", "fail_fast", "--risk-level", "medium", "--tool", "fs.read", "--tool", "fs.write",
        "--reviewer-profile", "scripted", "--json",
    )

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"graph_id": "nightly"}
    [(name, _, kwargs)] = fake.calls
    assert name == "start_graph" and kwargs["goal"] is None
    spec: GraphSpec = kwargs["graph"]
    assert [n.id for n in spec.nodes] == ["a", "b"] and spec.node("a").script == str(files.script.resolve())
    assert kwargs["profile"] == "scripted" and kwargs["script"] == str(files.script.resolve())
    assert kwargs["approve_plan"] == "auto" and kwargs["graph_id"] == "nightly" and kwargs["max_parallel"] == 3
    assert kwargs["max_retries"] == 2 and kwargs["failure_policy"] == "fail_fast" and kwargs["risk_level"] == "medium"
    assert kwargs["tools"] == ["fs.read", "fs.write"] and kwargs["reviewer_profile"] == "scripted"
    assert kwargs["workspace"] == str(files.dir.resolve()) and kwargs["sandbox"] == "workspace_write"


def test_a_graph_file_whose_nodes_all_name_a_script_needs_no_profile(files: SimpleNamespace, fake: FakeClient) -> None:
    files.graph.write_text(json.dumps({"nodes": [{"id": "a", "prompt": "p", "script": "script.json"}]}))

    result = run(files, str(files.graph), "--json")

    assert result.exit_code == 0, result.output
    [(_, _, kwargs)] = fake.calls
    assert kwargs["profile"] == "scripted" and kwargs["script"] is None


def test_graph_run_with_a_goal_sends_the_goal_and_no_graph(files: SimpleNamespace, fake: FakeClient) -> None:
    result = run(files, "--goal", "write the release notes", "--script", str(files.script), "--json")
    assert result.exit_code == 0, result.output
    [(_, _, kwargs)] = fake.calls
    assert kwargs["goal"] == "write the release notes" and kwargs["graph"] is None and kwargs["tools"] is None


def test_graph_run_follows_the_plan_says_how_to_approve_it_without_a_terminal_and_exits_0(
    files: SimpleNamespace, fake: FakeClient
) -> None:
    fake.timeline = [
        a_snapshot("planning", nodes=[]),
        a_snapshot("pending_approval", nodes=[node("a"), node("b", depends_on=["a"])]),
        a_snapshot("executing", nodes=[node("a", "delegated", attempts=1, session_id="s-a"), node("b", depends_on=["a"])]),
        a_snapshot("completed", nodes=[node("a", "completed", attempts=1), node("b", "completed", attempts=1, depends_on=["a"])],
                   answer="the notes are written", running=0),
    ]
    result = run(files, "--goal", "write the release notes", "--script", str(files.script))

    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "graph g1 started (workflow graph-g1): write the release notes" in out
    assert "TaskGraphCreated" in out and "planned 2 node(s) [planner]: a, b" in out
    assert "plan:" in out and "the plan waits for approval: agentrt graph approve g1" in out
    # The plan, again when a node's status changed, then the final snapshot (not the DAG twice at the end).
    assert out.count("· a") == 1 and out.count("▶ a") == 1 and out.count("✓ a") == 1
    assert out.index("plan:") < out.index("· a") < out.index("nodes:") < out.index("▶ a") < out.index("✓ a")
    assert "graph      g1 (completed) owner alice" in out and "the notes are written" in out
    assert "approve_graph" not in fake.names() and "reject_graph" not in fake.names()


def test_graph_run_approves_the_plan_when_the_person_at_the_terminal_says_y(
    files: SimpleNamespace, fake: FakeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agentrt.cli._graph._interactive", lambda: True)
    fake.hold = True

    result = run(files, "--goal", "g", "--script", str(files.script), input="y\n")

    assert result.exit_code == 0, result.output
    assert "Approve this plan? [y/N]" in result.stderr
    assert ("approve_graph", ("g1", "approved at the terminal"), {"approve": True}) in fake.calls


@pytest.mark.parametrize("answer", ["n\n", "\n", "maybe\n"])
def test_graph_run_rejects_the_plan_on_any_other_answer_and_exits_1(
    files: SimpleNamespace, fake: FakeClient, monkeypatch: pytest.MonkeyPatch, answer: str
) -> None:
    monkeypatch.setattr("agentrt.cli._graph._interactive", lambda: True)
    fake.hold = True

    result = run(files, "--goal", "g", "--script", str(files.script), input=answer)

    assert result.exit_code == 1, result.output
    assert ("reject_graph", ("g1", "rejected at the terminal"), {}) in fake.calls
    assert "graph      g1 (rejected)" in result.stdout


def test_graph_run_says_when_no_worker_runs(files: SimpleNamespace, fake: FakeClient) -> None:
    fake.worker = False
    result = run(files, "--goal", "g", "--script", str(files.script), "--json")
    assert result.exit_code == 0 and "the graph waits until one runs" in result.stderr


# ---------------------------------------------------------------- the other commands


def test_graph_status_json_is_the_snapshot(fake: FakeClient) -> None:
    fake.timeline = [a_snapshot("executing")]
    result = runner.invoke(app, ["graph", "status", "g1", "--json"])

    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert GraphSnapshot.model_validate(body) == fake.timeline[0]
    assert body["status"] == "executing" and [(n["id"], n["status"]) for n in body["nodes"]] == [
        ("a", "completed"), ("b", "delegated"), ("c", "pending")]


def test_graph_status_shows_the_header_and_the_dag(fake: FakeClient) -> None:
    fake.timeline = [a_snapshot("executing")]
    result = runner.invoke(app, ["graph", "status", "g1"])
    assert result.exit_code == 0, result.output
    assert "graph      g1 (executing) owner alice" in result.stdout and "▶ b" in result.stdout


def test_an_unknown_graph_is_a_clear_error_with_exit_code_2(fake: FakeClient) -> None:
    result = runner.invoke(app, ["graph", "status", "missing"])
    assert result.exit_code == 2
    assert "error: no task graph 'missing' (workflow id graph-missing)" in result.stderr


def test_graph_events_prints_one_line_per_event_and_json_with_since(fake: FakeClient) -> None:
    result = runner.invoke(app, ["graph", "events", "g1"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert [line.split()[3] for line in lines] == ["TaskGraphCreated", "TaskDecomposed"]

    result = runner.invoke(app, ["graph", "events", "g1", "--since", "1", "--json"])
    [line] = result.stdout.splitlines()
    assert json.loads(line)["type"] == "TaskDecomposed"


@pytest.mark.parametrize("args, call, line", [
    (["--reason", "fine"], ("approve_graph", ("g1", "fine"), {"approve": True}), "graph g1: plan approved; the graph is executing"),
    (["--reject"], ("approve_graph", ("g1", None), {"approve": False}), "graph g1: plan rejected; the graph is executing"),
])
def test_graph_approve_sends_the_decision(fake: FakeClient, args: list[str], call: Any, line: str) -> None:
    result = runner.invoke(app, ["graph", "approve", "g1", *args])
    assert result.exit_code == 0, result.output
    assert fake.calls == [call] and result.stdout.strip() == line


def test_a_refused_approval_is_one_line_and_exit_code_2(fake: FakeClient, monkeypatch: pytest.MonkeyPatch) -> None:
    async def refuse(*args: Any, **kwargs: Any) -> GraphSnapshot:
        raise RequestRejected("g1", "approve_plan", "the plan is already approved")

    monkeypatch.setattr(fake, "approve_graph", refuse)
    result = runner.invoke(app, ["graph", "approve", "g1"])
    assert result.exit_code == 2 and "already approved" in result.stderr


def test_graph_cancel_json_is_the_snapshot(fake: FakeClient) -> None:
    result = runner.invoke(app, ["graph", "cancel", "g1", "--reason", "stop", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "cancelled"
    assert fake.calls == [("cancel_graph", ("g1", "stop"), {})]


def test_graph_list_json_has_a_row_per_graph(fake: FakeClient) -> None:
    result = runner.invoke(app, ["graph", "list", "--status", "executing", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {"graph_id": "g1", "workflow_id": "graph-g1", "status": "executing", "owner": "alice", "started_at": AT.isoformat(), "closed": False}
    ]
    assert fake.calls == [("list_graphs", ("executing", 50), {})]


def test_graph_list_refuses_an_unknown_status(fake: FakeClient) -> None:
    result = runner.invoke(app, ["graph", "list", "--status", "asleep"])
    assert result.exit_code == 2 and "'asleep' is not one of" in plain(result.output)


@pytest.mark.parametrize("status, code", [("completed", 0), ("failed", 1), ("rejected", 1), ("cancelled", 1)])
def test_graph_wait_exits_0_only_for_a_completed_graph(fake: FakeClient, status: str, code: int) -> None:
    fake.result = TaskGraphResult(graph_id="g1", status=status)  # type: ignore[arg-type]
    result = runner.invoke(app, ["graph", "wait", "g1", "--json"])
    assert result.exit_code == code, result.output
    assert json.loads(result.stdout)["status"] == status


def test_graph_wait_says_when_the_plan_waits_for_approval(fake: FakeClient) -> None:
    fake.timeline = [a_snapshot("pending_approval")]
    result = runner.invoke(app, ["graph", "wait", "g1"])
    assert "waits for its plan's approval: agentrt graph approve g1" in result.stderr
    assert "graph g1 completed (1 completed)" in result.stdout and "done" in result.stdout


# ---------------------------------------------------------------- rendering


def test_the_dag_lists_nodes_in_dependency_order_indented_by_level() -> None:
    snapshot = a_snapshot(nodes=[node("c", depends_on=["b"]), node("b", depends_on=["a"]), node("a"), node("d", depends_on=["a", "c"])])
    lines = dag_lines(snapshot)
    assert [line.split()[1] for line in lines] == ["a", "b", "c", "d"]
    assert lines[0].startswith("  · a") and lines[1].startswith("    · b") and lines[3].startswith("        · d")
    assert "<- a, c" in lines[3]
    assert node_depths(snapshot.nodes) == {"a": 0, "b": 1, "c": 2, "d": 3}


def test_a_node_line_has_its_mark_role_status_attempts_deps_and_running_session() -> None:
    [_, b_line, c_line] = dag_lines(a_snapshot())
    assert b_line.split() == ["▶", "b", "worker", "delegated", "1", "attempt", "<-", "a", "session", "g1-b-a1-0000abcd"]
    assert c_line.split() == ["·", "c", "worker", "pending", "<-", "a"]


def test_findings_errors_and_blockers_show_under_their_node() -> None:
    snapshot = a_snapshot(status="failed", nodes=[
        node("a", "failed", attempts=2, findings=["missing dates", "no links", "typo", "tone"], error="the reviewer failed it twice",
             session_ids=["s1", "s2"]),
        node("b", "blocked", depends_on=["a"], blocked_by="a"),
    ], failure="node a failed", failure_reason="node_failed")
    text = "\n".join(graph_lines(snapshot))
    assert "finding: missing dates" in text and "finding: typo" in text and "finding: tone" not in text
    assert "(and 1 more finding(s))" in text and "error: the reviewer failed it twice" in text
    assert "blocked: a failed" in text and "failure    node_failed: node a failed" in text
    assert "agentrt session events s2   (node a)" in text


def test_a_pending_plan_shows_how_to_approve_or_reject_it() -> None:
    text = "\n".join(graph_lines(a_snapshot("pending_approval", risk_level="medium", risk_reasons=["fs.write is effectful"])))
    assert "next steps" in text and "agentrt graph approve g1" in text and "agentrt graph approve g1 --reject" in text
    assert "risk       medium (fs.write is effectful)" in text


def test_a_completed_graph_shows_its_answer_with_its_lines() -> None:
    text = "\n".join(graph_lines(a_snapshot(
        "completed", answer="line one\nline two", approved_by="alice", token_id="tok-1", nodes=[node("a", "completed")], running=0,
    )))
    assert "answer\n  line one\n  line two" in text and "approved by alice (token tok-1)" in text
    assert "next steps" not in text


def test_model_text_reaches_the_terminal_escaped() -> None:
    snapshot = a_snapshot("failed", goal="g\x1b[2J", answer="a\x1b]0;pwned\x07", failure="f\x1b[31m", nodes=[
        node("a", "failed", findings=["x\x1b[31m"], error="e\u202e", session_ids=["s1"]),
    ])
    text = "\n".join(graph_lines(snapshot) + graph_result_lines(TaskGraphResult(graph_id="g1", status="failed", answer="\x1b[2J")))
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "\\u001b[2J" in text
    line = graph_event_line(AgentTaskCompleted(seq=1, at=AT, node_id="a", attempt=1, session_id="s", answer="ok\x1b[2J"))
    assert "\x1b" not in line


def test_every_graph_event_reads_as_one_line() -> None:
    token = CapabilityToken(token_id="tok-1", graph_id="g1", plan_digest="d", approved_by="alice", approved_at=AT, risk_level="low", grants={})
    cases = [
        (TaskGraphCreated(seq=1, at=AT, graph_id="g1", owner="alice"), "graph g1 created by alice from a given graph; plan approval ask"),
        (TaskDecomposed(seq=2, at=AT, source="planner", direct_answer="42"), "the planner answered without a plan: 42"),
        (TaskPlanApproved(seq=3, at=AT, principal="alice", reason="ok", token=token), "plan approved by alice: ok; token tok-1 (risk low)"),
        (TaskPlanApproved(seq=3, at=AT, principal="graph", token=token.model_copy(update={"automatic": True})), "plan approved automatically"),
        (TaskPlanRejected(seq=4, at=AT, principal="bob", reason="too broad"), "plan rejected by bob: too broad"),
        (AgentTaskStarted(seq=5, at=AT, node_id="a", attempt=1, session_id="s1", tools=["fs.read"]),
         "node a attempt 1 started as session s1 (worker; tools: fs.read)"),
        (AgentTaskFailed(seq=6, at=AT, node_id="a", attempt=2, error="boom", final=True), "node a attempt 2 failed for good: boom"),
        (TaskReviewed(seq=7, at=AT, node_id="a", attempt=1, passed=False, findings=["no dates"]), "node a attempt 1 review failed: no dates"),
        (TaskRetried(seq=8, at=AT, node_id="a", attempt=2, feedback="add dates"), "node a retried as attempt 2: add dates"),
        (TaskBlocked(seq=9, at=AT, node_id="b", blocked_by="a"), "node b blocked: a failed"),
        (TaskCancelled(seq=10, at=AT, principal="alice", reason="stop"), "graph cancelled by alice: stop"),
        (TaskCancelled(seq=10, at=AT, node_id="b"), "node b cancelled"),
        (TaskGraphCompleted(seq=11, at=AT), "graph completed · spent 0 in / 0 out tokens"),
        (TaskGraphFailed(seq=12, at=AT, reason="node_failed", error="node a failed"), "graph failed (node_failed): node a failed"),
    ]
    for event, text in cases:
        line = graph_event_line(event)
        assert "\n" not in line and text in line, line
        assert line.split()[3] == event.type


def test_the_plan_an_approver_sees_has_each_nodes_prompt_check_and_tools_and_the_risk() -> None:
    from agentrt.cli._graph_render import plan_lines
    from agentrt.schemas import GraphSnapshot, NodeView

    snapshot = GraphSnapshot(
        graph_id="g1", owner="alice", status="pending_approval", risk_level="medium", risk_reasons=["fs.write (effectful) for b"],
        nodes=[
            NodeView(id="a", role="worker", prompt="read it", tools=["fs.read"], status="pending"),
            NodeView(id="b", role="worker", prompt="write \x1b[31mit", depends_on=["a"], acceptance="it exists", tools=[], status="pending"),
        ],
    )
    text = "\n".join(plan_lines(snapshot))
    assert "risk medium (fs.write (effectful) for b)" in text
    assert "  b (worker) <- a" in text and "checked against: it exists" in text
    assert "tools: fs.read" in text and "tools: (none)" in text
    assert "\x1b" not in text


def waiting_snapshot() -> GraphSnapshot:
    """A graph whose node a failed for good and b is blocked, waiting for a retry by hand."""
    return a_snapshot(
        nodes=[node("a", "failed", attempts=1, error="the reviewer failed it", session_ids=["s-a"]),
               node("b", "blocked", depends_on=["a"], blocked_by="a"), node("x", "completed", attempts=1)],
        running=0, retry_until=AT,
    )


def test_a_graph_waiting_for_a_retry_by_hand_says_so_with_its_deadline_and_the_retry_command() -> None:
    lines = graph_lines(waiting_snapshot())
    text = "\n".join(lines)
    assert lines[0] == "graph      g1 (executing · waiting for a retry by hand) owner alice"
    assert (
        "retry      node a failed for good: waiting until 2030-01-02 03:04:05 UTC for a retry by hand "
        "(agentrt graph retry g1 NODE), else the graph ends failed"
    ) in text
    steps = text.split("next steps\n", 1)[1].splitlines()
    assert steps[0] == "  agentrt graph retry g1 a"
    assert "  agentrt graph cancel g1" in steps


def test_a_graph_that_does_not_wait_for_a_retry_names_no_retry() -> None:
    text = "\n".join(graph_lines(a_snapshot()))
    assert "waiting for a retry" not in text and "graph retry" not in text


def test_graph_run_says_when_the_graph_waits_for_a_retry_by_hand(files: SimpleNamespace, fake: FakeClient) -> None:
    waiting = waiting_snapshot()
    fake.timeline = [waiting, waiting, a_snapshot("failed", nodes=waiting.nodes, running=0, failure="node a failed")]
    result = run(files, "--goal", "g", "--script", str(files.script), "--approve-plan", "auto")

    out = result.stdout
    assert out.count("node a failed for good: waiting until 2030-01-02 03:04:05 UTC for a retry by hand (agentrt graph retry g1 NODE)") == 1
