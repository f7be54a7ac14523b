"""Child sessions derived from one SessionTemplate, end to end: a task's session and a graph node's
session both start with the template's system prompt and advisor (their ``SessionInitialized``
says so), and a graph's events reach the store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrt.client import AgentClient
from agentrt.schemas import AdvisorPolicy, ApprovalPolicy, GraphSpec, SessionInitialized, SessionTemplate, TaskGraphCompleted
from tests.conftest import RECORDED_HISTORIES, Harness
from tests.e2e._graphs import PASS as NODE_PASS
from tests.e2e._graphs import GraphRig, answer, write_graph_script
from tests.e2e._tasks import OWNER, TaskRig, write_task_script

SYSTEM_PROMPT = "Answer in one short sentence."
ADVISOR = AdvisorPolicy(mode="full", timeout_seconds=30)


def template(script: str) -> SessionTemplate:
    return SessionTemplate(
        profile="scripted", script=script, system_prompt=SYSTEM_PROMPT, advisor=ADVISOR, model_timeout_seconds=120,
        tools=["fs.read"], approval=ApprovalPolicy(mode="never"),
    )


@pytest.fixture
def tasks(harness: Harness) -> Iterator[TaskRig]:
    rig = TaskRig.on(harness)
    yield rig
    RECORDED_HISTORIES.extend(rig.workflow_handles())  # tests/test_replay.py replays them


@pytest.fixture
def graphs(harness: Harness) -> GraphRig:
    return GraphRig(harness.temporal, harness.task_queue)


def initialized(harness: Harness, session_id: str) -> SessionInitialized:
    return next(e for e in harness.store.events(session_id) if isinstance(e, SessionInitialized))


async def test_a_task_child_and_a_graph_child_started_from_a_session_template_keep_its_system_prompt_and_advisor(
    harness: Harness, tasks: TaskRig, graphs: GraphRig, workspace: Path, tmp_path: Path
) -> None:
    task_script = write_task_script(tmp_path, [[{"text": "done"}]], reviews=[{"verdict": "pass", "summary": "met"}])
    task_id = await tasks.start(tasks.config(workspace, task_script, session=template(task_script)))
    assert (await tasks.wait(task_id)).status == "completed"

    graph_script = write_graph_script(tmp_path, {"a": [{"turns": [answer("hi")], "review": NODE_PASS}]})
    spec = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "say hi"}]})
    graph_id = await graphs.start(graphs.config(workspace, graph_script, graph=spec, approve_plan="auto", session=template(graph_script)))
    assert (await graphs.wait(graph_id)).status == "completed"
    RECORDED_HISTORIES.extend(await graphs.workflow_handles())

    task_child = initialized(harness, tasks.session_ids(task_id)[1]).config
    graph_child = initialized(harness, (await graphs.session_ids(graph_id))[0]).config
    for child in (task_child, graph_child):
        assert (child.system_prompt, child.advisor, child.model_timeout_seconds) == (SYSTEM_PROMPT, ADVISOR, 120)
        assert (child.interactive, child.ends_after_turn) == (False, True)
    assert (task_child.parent and task_child.parent.kind, graph_child.parent and graph_child.parent.kind) == ("task", "graph")


async def test_a_graphs_events_are_in_the_store_and_the_client_reads_them_there(
    harness: Harness, graphs: GraphRig, workspace: Path, tmp_path: Path
) -> None:
    script = write_graph_script(tmp_path, {"a": [{"turns": [answer("hi")], "review": NODE_PASS}]})
    spec = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "say hi"}]})
    graph_id = await graphs.start(graphs.config(workspace, script, graph=spec, approve_plan="auto", tools=["fs.read"]))
    assert (await graphs.wait(graph_id)).status == "completed"
    RECORDED_HISTORIES.extend(await graphs.workflow_handles())

    stored = harness.store.graph_events(graph_id)
    assert [e.seq for e in stored] == list(range(1, len(stored) + 1))
    assert isinstance(stored[-1], TaskGraphCompleted)
    assert harness.store.graph_progress(graph_id) == ("completed", len(stored))
    client = AgentClient(harness.temporal, task_queue=harness.task_queue, principal=OWNER, store=harness.store)
    page = await client.graph_events(graph_id, since_seq=1)
    assert [e.seq for e in page.events] == [e.seq for e in stored[1:]]
    assert [e.seq for e in page.events] == [e.seq for e in await graphs.events(graph_id) if e.seq > 1]  # the query agrees
