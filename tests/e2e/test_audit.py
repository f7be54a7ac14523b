"""The audit log end to end: every act of a principal lands in it once, with who, what, on what,
when and why, whatever carried it: the Python client, the CLI, or a signal or update sent with a
plain Temporal client (as the Temporal UI's "Send a Signal" does); and only operators read it all."""

from __future__ import annotations

import asyncio
import json
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from agentrt.client import AgentClient, create_app
from agentrt.schemas import (
    AuditEntry,
    AutonomousTaskCheckpointed,
    Budget,
    CancelTurnInput,
    ElicitationAnswer,
    ModelProfile,
    PermissionDecision,
    PermissionRequested,
    TurnStarted,
)
from agentrt.workflows.session import SessionWorkflow
from agentrt.worker import GatewayConfig, GatewayToken, temporal_binary, token_sha256
from tests.cli.test_cli import agentrt
from tests.conftest import OWNER, RECORDED_HISTORIES, Harness
from tests.e2e._graphs import GraphRig, answer, write_graph_script
from tests.e2e._support import ALLOW_ALL, session_config, wait_for_event, write_script
from tests.e2e._tasks import TaskRig, write_task_script
from tests.e2e.test_effects import APPEND, first_call_key
from tests.e2e.test_gateway import gateway_client
from tests.gateway.test_gateway import assert_problem, serving

OPERATOR = "ops-oliver"
PASS = {"verdict": "pass", "summary": "done"}
FAIL = {"verdict": "fail", "findings": ["not finished"], "summary": "more to do"}
DAY = 24 * 3600


def with_store(harness: Harness, principal: str = OWNER, operators: list[str] | None = None) -> AgentClient:
    return AgentClient(
        harness.temporal, task_queue=harness.task_queue, principal=principal, store=harness.store, operators=operators or [OPERATOR]
    )


def acts(entries: list[AuditEntry]) -> list[tuple[str, str, str | None, str | None]]:
    """(principal, action, request or turn, reason) of each entry, oldest first."""
    return [(e.principal, e.action, e.detail.get("request_id") or e.detail.get("turn_id"), e.reason) for e in reversed(entries)]


async def audited(client: AgentClient, target: str, count: int, timeout: float = 30.0) -> list[AuditEntry]:
    """The acts on ``target`` once there are ``count`` of them (an archive or a cancel is written as
    the workflow ends, after its update answered)."""

    async def poll() -> list[AuditEntry]:
        while len(entries := await client.audit(target=target)) < count:
            await asyncio.sleep(0.1)
        return entries

    return await asyncio.wait_for(poll(), timeout)


def write(path: str) -> dict[str, object]:
    return {"name": "fs.write", "arguments": {"path": path, "content": path}}


async def test_an_approval_a_denial_and_an_edit_are_recorded_whichever_client_sent_them(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"tool_calls": [write("a.txt"), write("b.txt"), write("c.txt")]}, {"text": "done"}])
    sid = harness.new_session_id()
    owner = with_store(harness)
    started = await owner.start(session_config(owner, sid, workspace, script, operators=[OPERATOR]), "write three files")
    await wait_for_event(owner, sid, lambda e: isinstance(e, PermissionRequested) and e.request.request_id == "req-3")
    before = datetime.now(timezone.utc)

    await owner.approve(sid, "req-1", "fine")
    # A plain Temporal client, as an operator would from the Temporal UI or `temporal workflow update`:
    # the owner grants req-2 with other arguments.
    edit = PermissionDecision(request_id="req-2", decision="grant", principal=OWNER, arguments={"path": "b2.txt", "content": "b2"})
    await harness.handle(sid).execute_update(SessionWorkflow.decide, edit)
    await with_store(harness, OPERATOR).deny(sid, "req-3", "not this one")
    outcome = await owner.wait(sid, started.turn_id)

    assert outcome.status == "completed"
    entries = await owner.audit(target=sid)
    assert acts(entries) == [
        (OWNER, "approve", "req-1", "fine"),
        (OWNER, "approve", "req-2", None),
        (OPERATOR, "deny", "req-3", "not this one"),
        (OWNER, "edit", "req-2", None),
    ]
    assert {(e.target_kind, e.target_id, e.owner) for e in entries} == {("session", sid, OWNER)}
    assert all(e.at >= before.replace(microsecond=0) for e in entries)
    edited = next(e for e in entries if e.action == "edit")
    assert edited.detail["fields"] == ["content", "path"] and "b2" not in json.dumps(edited.detail)
    denied = next(e for e in entries if e.action == "deny")
    assert denied.detail["as"] == "operator"


async def test_a_cancel_signalled_by_a_plain_temporal_client_a_budget_raise_and_an_archive_are_recorded(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "slow", "delay_seconds": 30}])
    sid = harness.new_session_id()
    owner = with_store(harness)
    started = await owner.start(session_config(owner, sid, workspace, script, operators=[OPERATOR]), "go")
    await wait_for_event(owner, sid, lambda e: isinstance(e, TurnStarted))

    await owner.raise_budget(sid, Budget(max_tokens=50_000), reason="a bigger job")
    await harness.handle(sid).signal(SessionWorkflow.cancel_turn, CancelTurnInput(principal=OPERATOR, reason="runaway turn"))
    outcome = await owner.wait(sid, started.turn_id)
    await owner.archive(sid, "done with it")

    assert outcome.status == "cancelled"
    entries = await audited(owner, sid, 3)
    assert acts(entries) == [
        (OWNER, "raise_budget", None, "a bigger job"),
        (OPERATOR, "cancel", started.turn_id, "runaway turn"),
        (OWNER, "archive", None, "done with it"),
    ]
    assert entries[-1].detail["budget"]["max_tokens"] == 50_000


async def test_reconciling_an_effect_of_unknown_outcome_is_recorded_with_its_note(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    harness.store.claim_effect(first_call_key(sid), sid, "fs.write")  # claimed, then the worker died
    script = write_script(tmp_path, [{"tool_calls": [APPEND]}, {"text": "done"}])
    owner = with_store(harness)
    started = await owner.start(session_config(owner, sid, workspace, script, approval=ALLOW_ALL), "go")
    requested = await wait_for_event(owner, sid, lambda e: isinstance(e, PermissionRequested) and e.request.kind == "reconcile")

    await owner.reconcile(sid, requested.request.request_id, "not_applied", note="file has no line")
    await owner.wait(sid, started.turn_id)

    [entry] = await owner.audit(target=sid, action="reconcile")
    assert (entry.principal, entry.reason, entry.detail["outcome"]) == (OWNER, "file has no line", "not_applied")


async def checkpoints(rig: TaskRig, task_id: str, count: int, timeout: float = 60.0) -> None:
    async def poll() -> None:
        while sum(isinstance(e, AutonomousTaskCheckpointed) for e in rig.stored_events(task_id)) < count:
            await asyncio.sleep(0.1)

    await asyncio.wait_for(poll(), timeout)


async def test_task_controls_are_recorded(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    rig = TaskRig.on(harness)
    sessions = [[{"text": "a third done"}], [{"text": "two thirds done"}], [{"text": "all done"}]]
    script = write_task_script(tmp_path, sessions, reviews=[FAIL, FAIL, PASS])
    task_id = await rig.start(rig.config(workspace, script, schedule={"every_seconds": DAY}, operators=[OPERATOR]), skipping=False)
    await checkpoints(rig, task_id, 1)
    await rig.wait_status(task_id, "waiting")

    await rig.client.nudge_task(task_id, reason="try again now")
    await checkpoints(rig, task_id, 2)
    await rig.wait_status(task_id, "waiting")
    await rig.as_principal(OPERATOR, operators=[OPERATOR]).pause_task(task_id, reason="maintenance window")
    await rig.client.resume_task(task_id)
    await rig.client.amend_task_goal(task_id, "build the smaller thing", reason="scope cut")
    await rig.client.raise_task_budget(task_id, Budget(max_tokens=10**6), reason="more room")
    await rig.client.cancel_task(task_id, reason="enough")
    RECORDED_HISTORIES.extend(rig.workflow_handles())

    entries = await audited(with_store(harness), task_id, 6)
    assert acts(entries) == [
        (OWNER, "nudge", None, "try again now"),
        (OPERATOR, "pause", None, "maintenance window"),
        (OWNER, "resume", None, None),
        (OWNER, "amend_goal", None, "scope cut"),
        (OWNER, "raise_budget", None, "more room"),
        (OWNER, "cancel", None, "enough"),
    ]
    assert {e.target_kind for e in entries} == {"task"}
    assert entries[2].detail["goal"] == "build the smaller thing"


async def test_a_graph_plan_approved_with_a_plain_temporal_update_is_recorded(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    rig = GraphRig(harness.temporal, harness.task_queue)
    plan = {"graph": {"nodes": [{"id": "survey", "prompt": "list what is there", "tools": ["fs.read"]}]}}
    script = write_graph_script(tmp_path, {"survey": [{"turns": [answer("README.md only")]}]}, plan=[plan])
    graph_id = await rig.start(rig.config(workspace, script, goal="survey the project", tools=["fs.read"], approve_plan="ask"))
    await rig.wait_until(graph_id, lambda v: v.status == "pending_approval")

    await rig.approve(graph_id, reason="looks right")  # update approve_plan on the graph's handle
    result = await rig.wait(graph_id)
    RECORDED_HISTORIES.extend(await rig.workflow_handles())

    assert result.status == "completed"
    [entry] = await with_store(harness).audit(target=graph_id)
    assert (entry.principal, entry.action, entry.target_kind, entry.reason) == (OWNER, "approve_plan", "graph", "looks right")
    assert entry.detail["nodes"] == ["survey"]


async def test_a_memory_decided_through_its_session_and_one_forgotten_on_the_store_are_recorded(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    from tests.e2e.test_memory_decisions import propose

    sid, memory_id = await propose(harness, workspace, tmp_path)
    owner = with_store(harness)

    await owner.decide_memory(memory_id, "accept", "right command")
    await owner.forget_memory(memory_id)

    entries = await owner.audit(target=memory_id)
    assert [(e.principal, e.action, e.reason, e.target_kind) for e in reversed(entries)] == [
        (OWNER, "accept_memory", "right command", "memory"), (OWNER, "forget_memory", None, "memory"),
    ]
    assert entries[-1].detail["session_id"] == sid and "run make test" not in json.dumps([e.detail for e in entries])


async def test_only_an_operator_reads_acts_on_what_another_principal_owns(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "slow", "delay_seconds": 30}])
    sid = harness.new_session_id()
    owner = with_store(harness)
    await owner.start(session_config(owner, sid, workspace, script), "go")
    await owner.archive(sid, "not needed")

    assert [e.action for e in await audited(owner, sid, 1)] == ["archive"]
    assert [e.action for e in await with_store(harness, OPERATOR).audit(target=sid)] == ["archive"]
    assert await with_store(harness, "mallory").audit(target=sid) == []
    with pytest.raises(Exception, match="needs the store"):
        await harness.client.audit()


async def test_the_cli_approves_and_agentrt_audit_lists_it(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"tool_calls": [write("a.txt")]}, {"text": "done"}])
    sid = harness.new_session_id()
    owner = with_store(harness)
    started = await owner.start(session_config(owner, sid, workspace, script), "write")
    await wait_for_event(owner, sid, lambda e: isinstance(e, PermissionRequested))

    approved = await agentrt(harness, "session", "approve", sid, "req-1", "--reason", "from the shell", cwd=tmp_path)
    assert approved.returncode == 0, approved.stderr
    await owner.wait(sid, started.turn_id)
    listed = await agentrt(harness, "audit", "--target", sid, "--json", cwd=tmp_path)
    shown = await agentrt(harness, "audit", "--target", sid, "--since", "1h", cwd=tmp_path)

    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert (row["principal"], row["action"], row["target_id"], row["reason"]) == (OWNER, "approve", sid, "from the shell")
    assert f"{OWNER}  approve  session {sid} req-1  reason: from the shell" in shown.stdout
    # A stranger's `agentrt audit` answers another owner's session as `session state` does: nothing.
    stranger = await agentrt(harness, "audit", "--target", sid, "--json", cwd=tmp_path, env={"AGENTRT_PRINCIPAL": "mallory"})
    assert (stranger.returncode, json.loads(stranger.stdout)) == (0, [])


async def test_an_approval_over_http_is_listed_by_get_v1_audit_to_an_admin_token_only(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    tokens = {"alice": ("alice-audit-token-0123456789", ("sessions",)), "root": ("root-audit-token-0123456789", ("admin",))}
    config = GatewayConfig(tokens=[GatewayToken(sha256=token_sha256(t), principal=p, scopes=s) for p, (t, s) in tokens.items()])
    headers = {p: {"Authorization": f"Bearer {t}"} for p, (t, _) in tokens.items()}
    script = write_script(tmp_path, [{"tool_calls": [write("a.txt")]}, {"text": "done"}])
    async with serving(create_app(await gateway_client(harness), config, workspace_root=workspace.parent)) as http:
        created = await http.post("/v1/sessions", json={"text": "write", "workspace": "ws", "script": script}, headers=headers["alice"])
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        harness.session_ids.append(sid)
        await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
        decided = await http.post(
            f"/v1/sessions/{sid}/approvals/req-1", json={"decision": "approve", "reason": "over http"}, headers=headers["alice"]
        )
        assert decided.status_code == 202, decided.text
        await harness.client.wait(sid, created.json()["turn_id"])

        listed = await http.get("/v1/audit", params={"target": sid, "action": "approve"}, headers=headers["root"])
        refused = await http.get("/v1/audit", headers=headers["alice"])
        too_many = await http.get("/v1/audit", params={"limit": 10**6}, headers=headers["root"])

    assert listed.status_code == 200, listed.text
    [row] = listed.json()
    assert (row["principal"], row["action"], row["target_kind"], row["target_id"], row["reason"]) == (
        "alice", "approve", "session", sid, "over http",
    )
    assert assert_problem(refused, 403)["type"].endswith("forbidden")
    assert too_many.status_code == 422


async def test_a_model_switch_is_recorded(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    harness.config.profiles["other"] = ModelProfile(name="other", provider="scripted", context_window=100_000, max_output_tokens=4_000)
    sid = harness.new_session_id()
    owner = with_store(harness)
    started, _ = await owner.start_and_wait(session_config(owner, sid, workspace, write_script(tmp_path, [{"text": "hi"}])), "hello")

    await owner.switch_model(started.session_id, "other")

    [entry] = await owner.audit(target=sid)
    assert (entry.principal, entry.action, entry.detail["from_profile"], entry.detail["profile"]) == (
        OWNER, "switch_model", "scripted", "other",
    )


async def test_a_workflow_cancelled_from_temporal_is_recorded_as_an_archive_by_temporal(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    sid = harness.new_session_id()
    owner = with_store(harness)
    await owner.start(session_config(owner, sid, workspace, write_script(tmp_path, [{"text": "slow", "delay_seconds": 30}])), "go")
    await wait_for_event(owner, sid, lambda e: isinstance(e, TurnStarted))

    await harness.handle(sid).cancel()  # as `temporal workflow cancel` or the UI's "Request Cancellation"

    [entry] = await audited(owner, sid, 1)
    assert (entry.principal, entry.action, entry.detail["as"]) == ("temporal", "archive", "temporal")
    assert entry.reason is not None and entry.reason.startswith("workflow cancelled")


async def test_an_answer_to_an_mcp_servers_question_signalled_by_a_plain_temporal_client_is_recorded(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    from tests.e2e.test_mcp import asking_for_a_name

    async with asking_for_a_name(harness, workspace, tmp_path) as (client, sid, turn, asked):
        answer_ = ElicitationAnswer(request_id=asked.request.request_id, principal=OWNER, content={"name": "Lin"})
        await harness.handle(sid).signal(SessionWorkflow.elicitation_answer, answer_)
        assert (await client.wait(sid, turn)).status == "completed"

    [entry] = await with_store(harness).audit(target=sid)
    assert (entry.principal, entry.action, entry.detail["answer"]) == (OWNER, "answer", "accept")
    assert "Lin" not in json.dumps(entry.detail)


async def test_a_rejected_plan_and_a_cancelled_graph_are_recorded(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    rig = GraphRig(harness.temporal, harness.task_queue)
    plan = {"graph": {"nodes": [{"id": "survey", "prompt": "list what is there", "tools": ["fs.read"]}]}}
    graph_ids = []
    for _ in range(2):
        script = write_graph_script(tmp_path, {"survey": [{"turns": [answer("README.md only")]}]}, plan=[plan])
        graph_id = await rig.start(rig.config(workspace, script, goal="survey the project", tools=["fs.read"], approve_plan="ask"))
        await rig.wait_until(graph_id, lambda v: v.status == "pending_approval")
        graph_ids.append(graph_id)
    rejected, cancelled = graph_ids

    await rig.approve(rejected, approve=False, reason="not this plan")
    await with_store(harness).cancel_graph(cancelled, reason="not now")
    RECORDED_HISTORIES.extend(await rig.workflow_handles())

    [reject] = await audited(with_store(harness), rejected, 1)
    [cancel] = await audited(with_store(harness), cancelled, 1)
    assert (reject.principal, reject.action, reject.reason) == (OWNER, "reject_plan", "not this plan")
    assert (cancel.principal, cancel.action, cancel.reason, cancel.target_kind) == (OWNER, "cancel", "not now", "graph")


async def test_a_denial_sent_with_the_temporal_cli_by_an_operator_is_recorded(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"tool_calls": [write("a.txt")]}, {"text": "done"}])
    sid = harness.new_session_id()
    owner = with_store(harness)
    started = await owner.start(session_config(owner, sid, workspace, script, operators=[OPERATOR]), "write")
    await wait_for_event(owner, sid, lambda e: isinstance(e, PermissionRequested))

    body = {"request_id": "req-1", "decision": "deny", "principal": OPERATOR, "reason": "typed into the temporal CLI"}
    sent = await asyncio.to_thread(
        subprocess.run,
        [temporal_binary(), "workflow", "update", "execute", "--address", harness.server.address,
         "--workflow-id", f"session-{sid}", "--name", "decide", "--input", json.dumps(body)],
        capture_output=True, text=True, timeout=60,
    )
    assert sent.returncode == 0, sent.stderr
    await owner.wait(sid, started.turn_id)

    [entry] = await owner.audit(target=sid)
    assert (entry.principal, entry.action, entry.reason, entry.detail["as"]) == (
        OPERATOR, "deny", "typed into the temporal CLI", "operator",
    )
    assert not (workspace / "a.txt").exists()


async def test_a_strangers_decisions_sent_by_signal_add_no_row(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"tool_calls": [write("a.txt")]}, {"text": "done"}])
    sid = harness.new_session_id()
    owner = with_store(harness)
    started = await owner.start(session_config(owner, sid, workspace, script), "write")
    await wait_for_event(owner, sid, lambda e: isinstance(e, PermissionRequested))
    handle = harness.handle(sid)

    for _ in range(30):
        await handle.signal(SessionWorkflow.permission_decision, PermissionDecision(request_id="req-1", decision="grant", principal="mallory"))
    await handle.signal(SessionWorkflow.cancel_turn, CancelTurnInput(principal="mallory", reason="mine now"))
    await owner.deny(sid, "req-1", "no")
    await owner.wait(sid, started.turn_id)

    assert [(e.principal, e.action) for e in await owner.audit(target=sid)] == [(OWNER, "deny")]
    assert not (workspace / "a.txt").exists()
