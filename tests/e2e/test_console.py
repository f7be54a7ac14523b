"""The Temporal UI as agentrt's console (``console-v1``), on the real dev server: the workflow list
finds what waits for whom by search attributes, the attributes follow the work and are written only
when they change, and a waiting session's current details hold the JSON that approves it."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowExecution

from agentrt.client import AgentClient
from agentrt.schemas import (
    AGENT_KIND,
    AGENT_PROFILE,
    PENDING_APPROVALS,
    SEARCH_ATTRIBUTE_KEYS,
    SESSION_OWNER,
    SESSION_STATUS,
    SPEND_USD,
    Budget,
    GraphSpec,
    ModelPrice,
    ModelProfile,
    PermissionRequested,
    SessionConfig,
    session_workflow_id,
)
from tests.conftest import RECORDED_HISTORIES, Harness
from tests.e2e._graphs import GraphRig, answer, write_graph_script
from tests.e2e._support import ALLOW_ALL, session_config, wait_for_event, write_script
from tests.e2e._tasks import TaskRig, write_task_script

PRICE = ModelPrice(input_usd_per_mtok=3.0, output_usd_per_mtok=15.0)
WRITE = {"tool_calls": [{"name": "fs.write", "arguments": {"path": "NOTES.md", "content": "notes"}}]}
AGENTRT_KEYS = {key.name for key in SEARCH_ATTRIBUTE_KEYS}


def new_owner() -> str:
    """An owner no other test's workflows have: the list filters below see only this test's."""
    return f"owner-{uuid.uuid4().hex[:8]}"


async def listed(temporal: Client, query: str, expected: set[str], timeout: float = 30.0) -> list[WorkflowExecution]:
    """The workflows ``query`` lists, once they are exactly ``expected`` (workflow ids; visibility
    lags a moment behind an upsert)."""
    found: list[WorkflowExecution] = []

    async def poll() -> list[WorkflowExecution]:
        nonlocal found
        while True:
            found = [w async for w in temporal.list_workflows(query)]
            if {w.id for w in found} == expected:
                return found
            await asyncio.sleep(0.2)

    try:
        return await asyncio.wait_for(poll(), timeout)
    except TimeoutError:
        raise AssertionError(f"{query!r} lists {sorted(w.id for w in found)}, not {sorted(expected)}") from None


async def attributes(temporal: Client, workflow_id: str) -> dict[str, Any]:
    """The workflow's agentrt search attributes as its description shows them (name -> value)."""
    described = await temporal.get_workflow_handle(workflow_id).describe()
    return {pair.key.name: pair.value for pair in described.typed_search_attributes if pair.key.name in AGENTRT_KEYS}


async def current_details(temporal: Client, workflow_id: str) -> str:
    """What the UI shows under "Current Details" (the ``__temporal_workflow_metadata`` query)."""
    metadata = await temporal.get_workflow_handle(workflow_id).query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
    return metadata.current_details


def agentrt_upserts(events: list[HistoryEvent]) -> list[dict[str, Any]]:
    """The history's search attribute upserts of agentrt's attributes (not the SDK's TemporalChangeVersion)."""
    upserts = []
    for e in events:
        if e.event_type != EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            continue
        fields = e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        named = {k: json.loads(v.data) for k, v in fields.items() if k in AGENTRT_KEYS}
        if named:
            upserts.append(named)
    return upserts


async def start_waiting(harness: Harness, client: AgentClient, workspace: Path, tmp_path: Path, **fields: Any) -> tuple[SessionConfig, str, str]:
    """A session of ``client``'s principal whose first turn waits for the approval of a file write:
    (config, turn id, request id)."""
    script = write_script(tmp_path, [WRITE, {"text": "written"}], name=f"script-{uuid.uuid4().hex[:6]}.json")
    sid = harness.new_session_id()
    config = session_config(client, sid, workspace, script, **fields)
    started = await client.start(config, "write the notes")
    requested = await wait_for_event(client, sid, lambda e: isinstance(e, PermissionRequested))
    assert isinstance(requested, PermissionRequested)
    return config, started.turn_id, requested.request.request_id


async def test_a_session_waiting_for_approval_is_listed_by_its_owner_and_pending_approvals(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    owner = new_owner()
    client = harness.as_principal(owner)
    config, _, request_id = await start_waiting(harness, client, workspace, tmp_path)
    workflow_id = session_workflow_id(config.session_id)

    [found] = await listed(harness.temporal, f"AgentPendingApprovals > 0 AND AgentOwner = '{owner}'", {workflow_id})

    assert found.typed_search_attributes.get(AGENT_KIND) == "session"
    assert found.typed_search_attributes.get(AGENT_PROFILE) == "scripted"
    assert found.typed_search_attributes.get(PENDING_APPROVALS) == 1
    assert found.typed_search_attributes.get(SESSION_STATUS) == "awaiting_approval"
    await listed(harness.temporal, f"AgentKind = 'session' AND AgentProfile = 'scripted' AND AgentOwner = '{owner}'", {workflow_id})
    await client.deny(config.session_id, request_id)


async def test_an_approved_session_has_no_pending_approvals(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    owner = new_owner()
    client = harness.as_principal(owner)
    config, turn_id, request_id = await start_waiting(harness, client, workspace, tmp_path)

    await client.approve(config.session_id, request_id)
    assert (await client.wait(config.session_id, turn_id)).status == "completed"

    workflow_id = session_workflow_id(config.session_id)
    assert (await attributes(harness.temporal, workflow_id))[PENDING_APPROVALS.name] == 0
    await listed(harness.temporal, f"AgentPendingApprovals = 0 AND AgentSessionStatus = 'idle' AND AgentOwner = '{owner}'", {workflow_id})
    await listed(harness.temporal, f"AgentPendingApprovals > 0 AND AgentOwner = '{owner}'", set())


async def test_the_details_of_a_waiting_session_hold_the_json_that_approves_it_from_the_ui(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """The JSON shown beside "Send an Update `decide`" is what an operator pastes: sent as it
    stands (plain JSON, as the UI sends it), it approves the call."""
    owner = new_owner()
    client = harness.as_principal(owner)
    config, turn_id, request_id = await start_waiting(harness, client, workspace, tmp_path)
    workflow_id = session_workflow_id(config.session_id)

    details = await current_details(harness.temporal, workflow_id)

    approve = re.search(r"Approve: Send an Update `decide` \(or Send a Signal `permission_decision`\): `(\{.*?\})`", details)
    assert approve is not None, details
    body = json.loads(approve.group(1))
    assert body == {"request_id": request_id, "decision": "grant", "principal": owner}
    assert f"agentrt session approve {config.session_id} {request_id}" in details
    assert f"agentrt session deny {config.session_id} {request_id}" in details
    await harness.temporal.get_workflow_handle(workflow_id).execute_update("decide", body)
    assert (await client.wait(config.session_id, turn_id)).status == "completed"
    assert "**idle**" in await current_details(harness.temporal, workflow_id)


async def test_spend_shows_in_agent_spend_usd_when_the_profile_has_a_price(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    harness.config.profiles["priced"] = ModelProfile(name="priced", provider="scripted", model="scripted", price=PRICE)
    client = harness.as_principal(new_owner())
    script = write_script(tmp_path, [{"text": "done"}])
    priced = session_config(client, harness.new_session_id(), workspace, script, profile="priced", budget=Budget(max_cost_usd=5.0))
    unpriced = session_config(client, harness.new_session_id(), workspace, script, budget=Budget(max_cost_usd=5.0))

    for config in (priced, unpriced):
        started = await client.start(config, "hello")
        assert (await client.wait(config.session_id, started.turn_id)).status == "completed"

    state = await client.state(priced.session_id)
    assert state.spend is not None and state.spend.cost_usd > 0
    shown = await attributes(harness.temporal, session_workflow_id(priced.session_id))
    assert shown[SPEND_USD.name] == pytest.approx(state.spend.cost_usd)
    assert shown[AGENT_PROFILE.name] == "priced"
    assert SPEND_USD.name not in await attributes(harness.temporal, session_workflow_id(unpriced.session_id))


async def test_a_multi_round_turn_writes_search_attributes_only_when_they_change(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """Four rounds of tool calls, one of which waits for an approval: running, awaiting approval,
    running again and idle are written, each once; a round that changes nothing writes nothing."""
    (workspace / "a.txt").write_text("a")
    read = {"tool_calls": [{"name": "fs.read", "arguments": {"path": "a.txt"}}]}
    script = write_script(tmp_path, [read, read, WRITE, read, {"text": "done"}])
    sid = harness.new_session_id()
    started = await harness.client.start(session_config(harness.client, sid, workspace, script), "go")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    assert isinstance(requested, PermissionRequested)
    await harness.client.approve(sid, requested.request.request_id)
    assert (await harness.client.wait(sid, started.turn_id)).rounds == 5

    history = await harness.handle(sid).fetch_history()

    assert agentrt_upserts(list(history.events)) == [
        # The owner and the idle status were set when the client started it: not written again.
        {SESSION_STATUS.name: "running", AGENT_KIND.name: "session", AGENT_PROFILE.name: "scripted", PENDING_APPROVALS.name: 0},
        {SESSION_STATUS.name: "awaiting_approval", PENDING_APPROVALS.name: 1},
        {SESSION_STATUS.name: "running", PENDING_APPROVALS.name: 0},
        {SESSION_STATUS.name: "idle"},
    ]


async def test_a_task_is_listed_by_its_kind_with_its_spend(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    harness.config.profiles["priced"] = ModelProfile(name="priced", provider="scripted", model="scripted", price=PRICE)
    owner = new_owner()
    rig = TaskRig.on(harness)
    script = write_task_script(tmp_path, [[{"text": "all done"}]], reviews=[{"verdict": "pass", "summary": "met"}])
    config = rig.config(workspace, script).model_copy(update={"owner": owner, "profile": "priced"})
    task_id = await rig.start(config)
    result = await asyncio.wait_for(rig.as_principal(owner).wait_task(task_id), 60)  # the task is its owner's to see
    RECORDED_HISTORIES.extend(rig.workflow_handles())
    assert result.status == "completed"

    [found] = await listed(harness.temporal, f"AgentKind = 'task' AND AgentOwner = '{owner}'", {f"task-{task_id}"})

    assert found.typed_search_attributes.get(SESSION_STATUS) == "completed"
    assert found.typed_search_attributes.get(AGENT_PROFILE) == "priced"
    assert found.typed_search_attributes.get(PENDING_APPROVALS) == 0
    assert found.typed_search_attributes.get(SPEND_USD) == pytest.approx(result.spend.cost_usd)
    assert result.spend.cost_usd > 0
    session = session_workflow_id(rig.session_ids(task_id)[1])
    await listed(harness.temporal, f"AgentKind = 'session' AND AgentOwner = '{owner}'", {session})


async def test_a_graph_waiting_for_its_plan_approval_counts_it_as_pending(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    owner = new_owner()
    rig = GraphRig(harness.temporal, harness.task_queue)
    script = write_graph_script(tmp_path, {"a": [{"turns": [answer("notes written")]}]})
    graph = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "write the notes"}]})
    config = rig.config(workspace, script, graph=graph, approve_plan="ask", tools=["fs.write"]).model_copy(update={"owner": owner})
    graph_id = await rig.start(config)
    workflow_id = f"graph-{graph_id}"

    [waiting] = await listed(harness.temporal, f"AgentKind = 'graph' AND AgentPendingApprovals > 0 AND AgentOwner = '{owner}'", {workflow_id})
    assert waiting.typed_search_attributes.get(SESSION_STATUS) == "pending_approval"
    details = await current_details(harness.temporal, workflow_id)
    assert f'Approve the plan: Send an Update `approve_plan`: `{{"principal": "{owner}"}}`' in details
    assert f"agentrt graph approve {graph_id}" in details

    await rig.approve(graph_id, principal=owner)
    assert (await rig.wait(graph_id)).status == "completed"
    RECORDED_HISTORIES.extend(await rig.workflow_handles())
    shown = await attributes(harness.temporal, workflow_id)
    assert (shown[SESSION_STATUS.name], shown[PENDING_APPROVALS.name], shown[AGENT_KIND.name]) == ("completed", 0, "graph")
    [node] = await rig.session_ids(graph_id)
    await listed(harness.temporal, f"AgentKind = 'session' AND AgentOwner = '{owner}'", {session_workflow_id(node)})


async def test_a_session_started_without_search_attributes_gets_all_of_them(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """Any Temporal client may start a session with plain JSON and nothing else."""
    from agentrt.schemas import SendMessageInput, SessionInput
    from agentrt.workflows.session import SessionWorkflow

    owner = new_owner()
    client = harness.as_principal(owner)
    config = session_config(client, harness.new_session_id(), workspace, write_script(tmp_path, [{"text": "hi"}]), approval=ALLOW_ALL)
    handle = await harness.temporal.start_workflow(
        SessionWorkflow.run, SessionInput(config=config), id=session_workflow_id(config.session_id), task_queue=harness.task_queue
    )
    sent = await handle.execute_update(SessionWorkflow.send_message, SendMessageInput(text="hi", principal=owner))
    assert (await client.wait(config.session_id, sent.turn_id)).status == "completed"

    shown = await attributes(harness.temporal, handle.id)
    assert shown == {
        SESSION_STATUS.name: "idle", SESSION_OWNER.name: owner, AGENT_KIND.name: "session",
        AGENT_PROFILE.name: "scripted", PENDING_APPROVALS.name: 0,
    }


async def test_the_saved_views_in_the_docs_are_queries_the_server_accepts(harness: Harness) -> None:
    from tests._packages import REPO_ROOT

    table = (REPO_ROOT / "docs" / "console.md").read_text().split("## Saved views", 1)[1].split("## ", 1)[0]
    queries = re.findall(r"^\| [^|]+ \| `(.+)` \|$", table, re.MULTILINE)
    assert len(queries) >= 5
    for query in queries:
        [w async for w in harness.temporal.list_workflows(query, limit=1)]  # raises on a query the server refuses
