"""Versioned deploys (Temporal's Worker Deployment Versioning): workers started with a deployment
version run every session they start pinned to their build; a session started before a new
version was made current finishes its turn on the build that started it, then continues as new
onto the new build (an idle one at once: the new build's workers wake it); new ones start there."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import uuid
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.worker import WorkerDeploymentVersion
from typer.testing import CliRunner

from agentrt.cli import app
from agentrt.client import AgentClient
from agentrt.worker import AgentrtPlugin, build_worker
from agentrt.schemas import GraphSpec, PermissionRequested, SessionContinuedAsNew, graph_workflow_id, task_workflow_id
from tests.conftest import OWNER, RECORDED_HISTORIES, Harness
from tests.e2e._graphs import PASS, GraphRig, answer, write_graph_script
from tests.e2e._support import ALLOW_ALL, session_config, wait_for_event, write_script
from tests.e2e._tasks import TaskRig, write_file, write_task_script
from tests.e2e._versions import (
    WAIT, make_current, patch_markers, pinned_build, pinned_run_build, run_handles, settled_on, versioned_worker,
)

# The patches a pinned task or graph run asks all the same (workflows/_frame.py, ASKED_BY_PINNED_RUNS).
ASKED_BY_PINNED_RUNS = {"workspace-commit-v1", "ignore-dismisses-v1", "graph-error-answer-v1"}


def session_wf(session_id: str) -> str:
    return f"session-{session_id}"


async def continued(client: AgentClient, session_id: str) -> list[str]:
    return [e.reason for e in (await client.events(session_id)).events if isinstance(e, SessionContinuedAsNew)]


async def test_a_session_stays_on_the_build_that_started_it_and_new_ones_start_on_the_current_build(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    queue, deployment = f"{harness.task_queue}-versioned", f"agentrt-{uuid.uuid4().hex[:8]}"
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER, store=harness.store)
    script = write_script(tmp_path, [{"text": "one"}, {"text": "two"}])

    def worker(build_id: str):  # type: ignore[no-untyped-def]
        return versioned_worker(harness.temporal, harness.config, harness.store, queue, deployment, build_id)

    old, new = harness.new_session_id(), harness.new_session_id()
    async with worker("build-a"):
        await make_current(harness.temporal, deployment, "build-a")
        first = await client.start(session_config(client, old, workspace, script), "first")
        assert (await client.wait(old, first.turn_id, timeout_seconds=WAIT)).status == "completed"
        assert await pinned_build(harness.temporal, session_wf(old)) == "build-a"

        async with worker("build-b"):
            await make_current(harness.temporal, deployment, "build-b")
            started = await client.start(session_config(client, new, workspace, script), "first")
            assert (await client.wait(new, started.turn_id, timeout_seconds=WAIT)).status == "completed"
            # The idle session was woken by build B's workers and continued as new onto B.
            await settled_on(harness.temporal, session_wf(old), "build-b")
            again = await client.send(old, "second")
            assert (await client.wait(old, again.turn_id, timeout_seconds=WAIT)).answer == "two"
            assert (await pinned_build(harness.temporal, session_wf(old)), await pinned_build(harness.temporal, session_wf(new))) == ("build-b", "build-b")
            assert await continued(client, old) == ["new_build"]
            assert (await client.state(old)).turns_completed == 2
    # Runs started pinned ask none of the patches (workflows/_generation.py: LATEST).
    RECORDED_HISTORIES.extend(await run_handles(harness.temporal, session_wf(old)))
    assert await patch_markers(harness.temporal, session_wf(old)) == [[], []]
    assert await patch_markers(harness.temporal, session_wf(new)) == [[]]


async def test_a_session_started_unversioned_keeps_its_patches_when_a_versioned_build_takes_it_on(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """The move from unversioned workers: a run they started goes to the current version at its next
    workflow task, whose worker replays it with the patches its history recorded."""
    queue, deployment = f"{harness.task_queue}-versioned", f"agentrt-{uuid.uuid4().hex[:8]}"
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER, store=harness.store)
    script = write_script(tmp_path, [{"text": "one"}, {"text": "two"}, {"text": "three"}])
    sid = harness.new_session_id()
    async with build_worker(harness.temporal, harness.config, harness.store, task_queue=queue):
        first = await client.start(session_config(client, sid, workspace, script), "first")
        assert (await client.wait(sid, first.turn_id, timeout_seconds=WAIT)).answer == "one"
    async with versioned_worker(harness.temporal, harness.config, harness.store, queue, deployment, "build-a"):
        await make_current(harness.temporal, deployment, "build-a")
        assert (await client.send_and_wait(sid, "second")).answer == "two"
        assert (await client.send_and_wait(sid, "third")).answer == "three"
        assert (await client.state(sid)).turns_completed == 3
    RECORDED_HISTORIES.extend(await run_handles(harness.temporal, session_wf(sid)))
    markers = await patch_markers(harness.temporal, session_wf(sid))
    assert "lean-start-v1" in markers[0] and all(run == [] for run in markers[1:]), markers


async def test_a_turn_waiting_for_approval_across_a_deploy_ends_on_its_build_and_the_session_then_moves(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    queue, deployment = f"{harness.task_queue}-versioned", f"agentrt-{uuid.uuid4().hex[:8]}"
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER, store=harness.store)
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "notes.md", "content": "once\n"}}]},
        {"text": "written"},
        {"text": "next"},
    ])

    def worker(build_id: str):  # type: ignore[no-untyped-def]
        return versioned_worker(harness.temporal, harness.config, harness.store, queue, deployment, build_id)

    sid = harness.new_session_id()
    async with worker("build-a"):
        await make_current(harness.temporal, deployment, "build-a")
        started = await client.start(session_config(client, sid, workspace, script), "write it")
        asked = await wait_for_event(client, sid, lambda e: isinstance(e, PermissionRequested), timeout=WAIT)
        async with worker("build-b"):
            await make_current(harness.temporal, deployment, "build-b")
            await asyncio.sleep(4)  # B's workers look for pinned runs every 3 s: the waiting turn stays
            assert await pinned_build(harness.temporal, session_wf(sid)) == "build-a"
            await client.approve(sid, asked.request.request_id)
            outcome = await client.wait(sid, started.turn_id, timeout_seconds=WAIT)
            assert (outcome.status, outcome.answer) == ("completed", "written")
            # Sent at once: it meets the run continuing as new onto B (the server aborts an update
            # that arrives then, WorkflowNotReady; the client sends it again).
            assert (await client.send_and_wait(sid, "and then")).answer == "next"
            assert await pinned_build(harness.temporal, session_wf(sid)) == "build-b"
            assert await continued(client, sid) == ["new_build"]
    assert (workspace / "notes.md").read_text() == "once\n"
    RECORDED_HISTORIES.extend(await run_handles(harness.temporal, session_wf(sid)))
    assert await patch_markers(harness.temporal, session_wf(sid)) == [[], []]



async def test_a_task_asleep_between_sessions_moves_to_the_new_build_and_its_next_session_runs_there(
    harness: Harness, tmp_path: Path
) -> None:
    queue, deployment = f"{harness.task_queue}-versioned", f"agentrt-{uuid.uuid4().hex[:8]}"
    rig = TaskRig.on(harness, queue)
    (tmp_path / "ws").mkdir()
    script = write_task_script(tmp_path, [
        [write_file("one.txt", "1"), {"text": "first part"}],
        [write_file("two.txt", "2"), {"text": "second part"}],
    ])
    config = rig.config(
        tmp_path / "ws", script, acceptance={"command": "test -f two.txt"}, schedule={"every_seconds": 3600.0},
        approval=ALLOW_ALL,
    )
    workflow_id = task_workflow_id(config.task_id)

    def worker(build_id: str):  # type: ignore[no-untyped-def]
        return versioned_worker(harness.temporal, harness.config, harness.store, queue, deployment, build_id)

    async with worker("build-a"):
        await make_current(harness.temporal, deployment, "build-a")
        await rig.start(config, skipping=False)  # on the wall clock: it sleeps an hour after its first session
        await rig.wait_stored(config.task_id, lambda e: e.type == "AutonomousTaskCheckpointed", WAIT)
        assert await pinned_build(harness.temporal, workflow_id) == "build-a"
        async with worker("build-b"):
            await make_current(harness.temporal, deployment, "build-b")
            await settled_on(harness.temporal, workflow_id, "build-b")
            status = await rig.client.task_status(config.task_id)
            assert (status.status, status.sessions) == ("waiting", 1)
            await rig.client.nudge_task(config.task_id, reason="go on")
            result = await rig.wait(config.task_id, timeout=WAIT)
            assert (result.status, result.sessions) == ("completed", 2)
            second = rig.session_ids(config.task_id)[2]
            assert await pinned_build(harness.temporal, session_wf(second)) == "build-b"
    # A pinned run asks only the patches every run asks (workflows/_frame.py, ASKED_BY_PINNED_RUNS).
    task_markers = await patch_markers(harness.temporal, workflow_id)
    assert len(task_markers) == 2 and all(set(run) <= ASKED_BY_PINNED_RUNS for run in task_markers), task_markers
    RECORDED_HISTORIES.extend(await run_handles(harness.temporal, workflow_id))
    for session_id in rig.session_ids(config.task_id).values():
        RECORDED_HISTORIES.extend(await run_handles(harness.temporal, session_wf(session_id)))
        assert await patch_markers(harness.temporal, session_wf(session_id)) == [[]]  # none asked by a pinned session
    assert (tmp_path / "ws" / "one.txt").read_text() == "1" and (tmp_path / "ws" / "two.txt").read_text() == "2"


def test_a_deployment_and_a_build_id_are_given_together_or_the_worker_names_the_missing_one() -> None:
    # Parsed in this process: each is refused before a worker starts (tests/cli/test_cli_process.py runs the console script).
    for args, said in (
        (["--deployment", "agentrt"], "Invalid value for --deployment: a deployment needs a non-empty build id"),
        (["--build-id", "b1"], "Invalid value for --build-id: a build id needs a deployment name"),
        (["--deployment", "agentrt", "--build-id", " "], "a deployment needs a non-empty build id"),
        (["--deployment", "my.dep", "--build-id", "b1"], "deployment name 'my.dep' holds a '.'"),
    ):
        result = CliRunner().invoke(app, ["worker", *args], env={"COLUMNS": "300"}, terminal_width=300)
        assert result.exit_code == 2 and said in " ".join(result.output.replace("│", " ").split()), result.output


async def test_a_graph_moves_to_the_new_build_after_its_running_node_and_runs_the_next_one_there(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    queue, deployment = f"{harness.task_queue}-versioned", f"agentrt-{uuid.uuid4().hex[:8]}"
    rig = GraphRig(harness.temporal, queue)
    script = write_graph_script(tmp_path, {
        "a": [{"turns": [answer("foundation laid", 8.0)], "review": PASS}],
        "b": [{"turns": [answer("walls up")], "review": PASS}],
    })
    spec = GraphSpec.model_validate({"nodes": [
        {"id": "a", "prompt": "lay the foundation"}, {"id": "b", "prompt": "raise the walls", "depends_on": ["a"]},
    ]})

    def worker(build_id: str):  # type: ignore[no-untyped-def]
        return versioned_worker(harness.temporal, harness.config, harness.store, queue, deployment, build_id)

    async with worker("build-a"):
        await make_current(harness.temporal, deployment, "build-a")
        graph_id = await rig.start(rig.config(workspace, script, graph=spec, approve_plan="auto", tools=["fs.read"]))
        await rig.wait_until(graph_id, lambda view: any(n.id == "a" and n.status == "delegated" for n in view.nodes), timeout=WAIT)
        async with worker("build-b"):
            await make_current(harness.temporal, deployment, "build-b")
            result = await rig.wait(graph_id, timeout=WAIT * 2)
            assert await pinned_build(harness.temporal, graph_workflow_id(graph_id)) == "build-b"
            sessions = await rig.session_ids(graph_id)
            assert [await pinned_build(harness.temporal, session_wf(s)) for s in sessions] == ["build-a", "build-b"]
            events = await rig.events(graph_id)  # a query: a worker answers it
    assert result.status == "completed" and result.nodes == {"a": "completed", "b": "completed"}
    assert [e.type for e in events].count("TaskGraphCreated") == 1
    assert [(e.node_id, e.attempt) for e in events if e.type == "AgentTaskCompleted"] == [("a", 1), ("b", 1)]
    runs = await run_handles(harness.temporal, graph_workflow_id(graph_id))
    RECORDED_HISTORIES.extend(runs)
    for s in sessions:
        RECORDED_HISTORIES.extend(await run_handles(harness.temporal, session_wf(s)))
    # Started a moment after build-a was made current, the graph's first run is sometimes told the
    # target version changed before its first node (though the deployment's routing update says
    # COMPLETED): it moves onto build-a itself, and from there to build-b.
    builds = [await pinned_run_build(run) for run in runs]
    assert builds[0] == "build-a" and builds[-1] == "build-b" and set(builds[1:-1]) <= {"build-a"}, builds
    assert len(runs) <= 4, builds  # a move, and a bounded number of hops after it
    # Pinned runs ask no patch (workflows/_frame.py: Patches): the graph's runs, its nodes' sessions.
    assert await patch_markers(harness.temporal, graph_workflow_id(graph_id)) == [[]] * len(runs)
    assert [await patch_markers(harness.temporal, session_wf(s)) for s in sessions] == [[[]], [[]]]


async def test_a_pinned_sessions_tool_calls_go_to_the_tools_worker_of_its_own_build_while_another_is_current(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """Temporal sends a pinned run's activity on another task queue to that queue's workers of the
    run's own version when it has some: the tool call of a turn begun on build A runs on A's tools
    worker though B is current, and the next turn's (on B, after the move) on B's. A pinned session
    relies on it to send its staged events in the tool call's input (workflows/_generation.py,
    ``pinned-tools-writes-v1``)."""
    queue, deployment = f"{harness.task_queue}-versioned", f"agentrt-{uuid.uuid4().hex[:8]}"
    tools_queue = f"{queue}-tools"
    config = dataclasses.replace(harness.config, task_queue=queue, tool_task_queue=tools_queue)
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER, store=harness.store)
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.md", "content": "on a\n"}}]},
        {"text": "written"},
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "b.md", "content": "on b\n"}}]},
        {"text": "written again"},
    ])

    @contextlib.asynccontextmanager
    async def build(build_id: str):  # type: ignore[no-untyped-def]
        version = WorkerDeploymentVersion(deployment_name=deployment, build_id=build_id)
        tools_client = await Client.connect(
            harness.server.address, namespace=harness.temporal.namespace, identity=f"tools-{build_id}",
            plugins=[AgentrtPlugin(harness.config, harness.store)],
        )
        models = build_worker(harness.temporal, config, harness.store, task_queue=queue, role="models", deployment=version)
        tools = build_worker(tools_client, config, harness.store, task_queue=tools_queue, role="tools", deployment=version)
        async with models, tools:
            yield

    async def activities() -> list[tuple[str, str]]:
        """Each activity the session's runs scheduled, in order, with the identity of the worker that ran it."""
        ran: list[tuple[str, str]] = []
        for run in await run_handles(harness.temporal, session_wf(sid)):
            scheduled: dict[int, int] = {}
            async for event in run.fetch_history_events():
                if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                    scheduled[event.event_id] = len(ran)
                    ran.append((event.activity_task_scheduled_event_attributes.activity_type.name, ""))
                if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                    attributes = event.activity_task_started_event_attributes
                    index = scheduled[attributes.scheduled_event_id]
                    ran[index] = (ran[index][0], attributes.identity.split()[0])  # the client's, before its payload tags
        return ran

    async def tool_call_identities() -> list[str]:
        return [identity for name, identity in await activities() if name == "tool.execute"]

    sid = harness.new_session_id()
    async with build("build-a"):
        await make_current(harness.temporal, deployment, "build-a")
        started = await client.start(session_config(client, sid, workspace, script, tool_task_queue=tools_queue), "write a")
        asked = await wait_for_event(client, sid, lambda e: isinstance(e, PermissionRequested), timeout=WAIT)
        async with build("build-b"):
            await make_current(harness.temporal, deployment, "build-b")
            await asyncio.sleep(4)  # B's workers look for pinned runs every 3 s: the waiting turn stays
            await client.approve(sid, asked.request.request_id, for_session=True)
            assert (await client.wait(sid, started.turn_id, timeout_seconds=WAIT)).answer == "written"
            assert await tool_call_identities() == ["tools-build-a"]
            await settled_on(harness.temporal, session_wf(sid), "build-b")
            again = await client.send(sid, "write b")  # granted for the session: it runs without asking
            assert (await client.wait(sid, again.turn_id, timeout_seconds=WAIT)).answer == "written again"
            assert await tool_call_identities() == ["tools-build-a", "tools-build-b"]
    assert (workspace / "a.md").read_text() == "on a\n" and (workspace / "b.md").read_text() == "on b\n"
    # On B, the call's input carries the staged events: no store.append between the model call and it.
    second_run = [name for name, _ in await activities()][-4:]
    assert second_run == ["provider.complete", "tool.execute", "provider.complete", "store.append"], second_run
    RECORDED_HISTORIES.extend(await run_handles(harness.temporal, session_wf(sid)))
    assert await patch_markers(harness.temporal, session_wf(sid)) == [["pinned-tools-writes-v1"]] * 2
