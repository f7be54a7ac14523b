"""A signal whose arguments its handler cannot take (sent by any Temporal client: `temporal workflow
signal --name cancel_turn` without `--input`) is dropped by the worker (worker/_signal_guard.py), not
retried with every workflow task of the run: the session, task or graph goes on."""

from __future__ import annotations

from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.worker import Replayer

from agentrt.schemas import CHILD_SPEND_SIGNAL, SET_PAUSED_SIGNAL, UPGRADE_SIGNAL, graph_workflow_id
from agentrt.worker import AgentrtConfig, AgentrtPlugin
from tests.conftest import Harness
from tests.e2e._graphs import PASS, GraphRig, answer, write_graph_script
from tests.e2e._support import session_config, write_script

MALFORMED = [
    ("cancel_turn", []),
    ("cancel_turn", [{"turn_id": "t"}, {"extra": 1}]),
    (SET_PAUSED_SIGNAL, []),
    (CHILD_SPEND_SIGNAL, []),
    ("permission_decision", []),
    ("reconcile", []),
    ("elicitation_answer", []),
    (UPGRADE_SIGNAL, [1, 2]),
]


async def failed_workflow_tasks(harness: Harness, workflow_id: str) -> int:
    history = await harness.temporal.get_workflow_handle(workflow_id).fetch_history()
    return sum(e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED for e in history.events)


async def test_a_session_given_signals_its_handlers_cannot_take_drops_them_and_answers_its_next_message(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "first"}, {"text": "second"}])
    sid = harness.new_session_id()
    client = harness.client
    started = await client.start(session_config(client, sid, workspace, script), "one")
    assert (await client.wait(sid, started.turn_id)).answer == "first"
    handle = harness.handle(sid)
    for name, args in MALFORMED:
        await handle.signal(name, args=args)

    assert (await client.send_and_wait(sid, "two")).answer == "second"
    assert await failed_workflow_tasks(harness, f"session-{sid}") == 0
    assert (await client.state(sid)).turns_completed == 2
    # A replay (agentrt replay, a deploy's check) drops them the same way.
    history = await handle.fetch_history()
    replayer = Replayer(workflows=[], plugins=[AgentrtPlugin(AgentrtConfig(database_url=harness.config.database_url))])
    assert (await replayer.replay_workflow(history, raise_on_replay_failure=False)).replay_failure is None


async def test_a_graph_given_a_child_spend_signal_without_its_report_drops_it_and_completes(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    rig = GraphRig(harness.temporal, harness.task_queue)
    script = write_graph_script(tmp_path, {"a": [{"turns": [answer("done", 1.0)], "review": PASS}]})
    graph_id = await rig.start(rig.config(workspace, script, graph={"nodes": [{"id": "a", "prompt": "do it"}]}, approve_plan="auto", tools=["fs.read"]))
    await rig.handle(graph_id).signal(CHILD_SPEND_SIGNAL, args=[])
    await rig.handle(graph_id).signal(UPGRADE_SIGNAL, args=["x", "y"])
    assert (await rig.wait(graph_id)).status == "completed"
    assert await failed_workflow_tasks(harness, graph_workflow_id(graph_id)) == 0
