"""What an AG-UI caller sees when a run cannot be what it asks (``POST /v1/agents/{agent}/ag-ui``):
problem responses for the token, the thread and the body; ``RUN_ERROR`` with a code for what
the AG-UI interrupt contract refuses; and a denial given in a resume, which the turn goes on with."""

from __future__ import annotations

import asyncio

from pathlib import Path
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from tests.conftest import Harness
from tests.e2e._support import write_script
from tests.e2e.test_agui_runs import Front, front  # noqa: F401 - the fixture
from tests.gateway.test_gateway import assert_problem

WRITE = [
    {"tool_calls": [{"name": "fs.write", "arguments": {"path": "notes.md", "content": "from the model"}}]},
    {"text": "done"},
]
PROPS = {"workspace": "ws", "script": "script.json"}


def run(thread: str, run_id: str, text: str | None = "write the notes", **fields: Any) -> dict[str, Any]:
    messages = [{"id": f"u-{run_id}", "role": "user", "content": text}] if text is not None else []
    return {"threadId": thread, "runId": run_id, "messages": messages, "forwardedProps": PROPS, **fields}


def answer(request_id: str, payload: Any = None, status: str = "resolved") -> dict[str, Any]:
    return {"interruptId": request_id, "status": status, **({"payload": payload} if payload is not None else {})}


async def waiting(harness: Harness, front: Front, tmp_path: Path) -> str:
    """A thread whose first run ended in an interrupt for ``req-1`` (fs.write)."""
    write_script(tmp_path, WRITE)
    thread = harness.new_session_id()
    _, events = await front.post(run(thread, "run-1"))
    assert events[-1]["outcome"]["type"] == "interrupt" and events[-1]["outcome"]["interrupts"][0]["id"] == "req-1"
    return thread


async def pending(harness: Harness, thread: str) -> list[str]:
    return [r.request_id for r in (await harness.client.state(thread)).pending_approvals]


@pytest.mark.parametrize(("resume", "code"), [
    ([answer("req-99")], "resume_incomplete"),
    ([answer("req-1", {"approved": True}), answer("req-99")], "unknown_interrupt"),
    ([answer("req-1", {"approved": "yes"})], "invalid_resume_payload"),
    ([answer("req-1", [True])], "invalid_resume_payload"),
    ([answer("req-1", {"approved": True, "editedArgs": {"path": "notes.md", "mode": "everything"}})], "resume_rejected"),
])
async def test_a_resume_the_thread_cannot_take_is_a_run_error_and_decides_nothing(
    harness: Harness, front: Front, tmp_path: Path, resume: list[dict[str, Any]], code: str
) -> None:
    thread = await waiting(harness, front, tmp_path)
    response, events = await front.post(run(thread, "run-2", None, resume=resume))
    assert response.status_code == 200
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"] and events[1]["code"] == code, events
    assert await pending(harness, thread) == ["req-1"]
    assert not (tmp_path / "ws" / "notes.md").exists()


async def test_a_resume_that_denies_runs_the_turn_on_without_the_call(harness: Harness, front: Front, tmp_path: Path) -> None:
    thread = await waiting(harness, front, tmp_path)
    _, events = await front.post(run(thread, "run-2", None, resume=[answer("req-1", {"approved": False, "reason": "not now"})]))
    [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert "denied" in result["content"] and "not now" in result["content"]
    assert events[-1]["type"] == "RUN_FINISHED" and not (tmp_path / "ws" / "notes.md").exists()


async def test_a_cancelled_interrupt_denies_the_call(harness: Harness, front: Front, tmp_path: Path) -> None:
    thread = await waiting(harness, front, tmp_path)
    _, events = await front.post(run(thread, "run-2", None, resume=[answer("req-1", status="cancelled")]))
    [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert "cancelled in the front end" in result["content"] and events[-1]["type"] == "RUN_FINISHED"


async def test_a_resume_posted_again_answers_the_same_run_and_decides_nothing_twice(
    harness: Harness, front: Front, tmp_path: Path
) -> None:
    thread = await waiting(harness, front, tmp_path)
    body = run(thread, "run-2", None, resume=[answer("req-1", {"approved": True})])
    _, first = await front.post(body)
    _, again = await front.post(body)
    assert first[-1]["type"] == again[-1]["type"] == "RUN_FINISHED"
    assert [e["type"] for e in again] == [e["type"] for e in first]
    assert (tmp_path / "ws" / "notes.md").read_text() == "from the model"


@pytest.mark.parametrize(("change", "status", "words"), [
    ({"threadId": "../etc"}, 422, "threadId must be"),
    ({"threadId": "t-1\n"}, 422, "threadId must be"),  # a session no other route could name
    ({"messages": [{"id": "a1", "role": "assistant", "content": "hi"}]}, 422, "the last of messages must be"),
    ({"messages": [{"id": "u1", "role": "user", "content": "  "}]}, 422, "is empty"),
    ({"messages": [{"id": "u1", "role": "user", "content": [{"type": "image", "source": {"type": "url", "value": "http://x/y.png"}}]}]},
     422, "text parts only"),
    ({"forwardedProps": {"workspace": "../.."}}, 422, "not under the gateway's workspace root"),
    ({"forwardedProps": {"workspace": 7}}, 422, "are paths"),
    ({"messages": [], "resume": [{"interruptId": "req-1", "status": "resolved"}]}, 404, "no session"),
    ({"runId": None}, 422, ""),
])
async def test_a_run_the_gateway_cannot_start_is_a_problem_and_starts_nothing(
    harness: Harness, front: Front, tmp_path: Path, change: dict[str, Any], status: int, words: str
) -> None:
    write_script(tmp_path, WRITE)
    thread = harness.new_session_id()
    response, _ = await front.post(run(thread, "run-1") | change)
    assert words in assert_problem(response, status)["detail"]
    with pytest.raises(RPCError) as raised:
        await harness.handle(thread).describe()
    assert raised.value.status == RPCStatusCode.NOT_FOUND


async def test_a_run_without_a_token_is_unauthenticated(harness: Harness, front: Front) -> None:
    response, _ = await front.post(run(harness.new_session_id(), "run-1"), principal=None)
    assert_problem(response, 401)


async def test_a_run_with_a_token_without_the_sessions_scope_is_forbidden(harness: Harness, front: Front) -> None:
    response, _ = await front.post(run(harness.new_session_id(), "run-1"), principal="carol")
    assert "'sessions'" in assert_problem(response, 403)["detail"]



async def test_a_name_that_is_no_profile_is_a_named_agent_and_one_no_worker_registered_ends_the_run_with_an_error(
    harness: Harness, front: Front, tmp_path: Path
) -> None:
    """``/v1/agents/{agent}/ag-ui``: a profile's name is an app; any other names an agent."""
    write_script(tmp_path, WRITE)
    missing = Front(front.http, "billing", tmp_path)
    response, events = await missing.post(run(harness.new_session_id(), "run-1"))
    assert response.status_code == 200 and events[-1]["type"] == "RUN_ERROR", response.text
    assert "billing" in events[-1]["message"] and harness.task_queue in events[-1]["message"], events[-1]


async def test_a_registered_agent_runs_over_ag_ui_with_its_own_tools(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    from agentrt.client import AgentClient, create_app
    from agentrt.worker import GatewayConfig, GatewayToken, build_worker, token_sha256
    from tests.e2e.agent_tools import support
    from tests.e2e.test_agui_runs import TOKENS
    from tests.gateway.test_gateway import serving

    queue = harness.task_queue + "-agents"
    write_script(tmp_path, [{"tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "A-1"}}]}, {"text": "it shipped"}])
    config = GatewayConfig(tokens=[GatewayToken(sha256=token_sha256(TOKENS["alice"]), principal="alice", scopes=("sessions",))])
    client = AgentClient(harness.temporal, task_queue=queue, principal="gateway", store=harness.store)
    async with build_worker(harness.temporal, harness.config, harness.store, task_queue=queue, agents=[support]):
        for _ in range(300):  # the gateway answers 503 until the new worker's first poll reaches the server
            if await client.has_worker():
                break
            await asyncio.sleep(0.1)
        async with serving(create_app(client, config, workspace_root=workspace.parent, profiles=list(harness.config.profiles))) as http:
            response, events = await Front(http, "support", tmp_path).post(run(harness.new_session_id(), "run-1", "where is A-1?") | {
                "forwardedProps": {"workspace": "ws", "script": "script.json"}
            })
    assert events and events[-1]["type"] == "RUN_FINISHED", (response.status_code, response.text)
    [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert '"total_cents": 1250' in result["content"] or '"total_cents":1250' in result["content"]


async def test_a_thread_posted_to_another_agent_s_path_is_refused_and_its_session_gets_nothing(
    harness: Harness, front: Front, tmp_path: Path
) -> None:
    """A front end that routes a thread to another agent would otherwise be answered by the
    thread's own agent, with its instructions and tools, as if it were the one it named."""
    write_script(tmp_path, [{"text": "one"}, {"text": "two"}])
    thread = harness.new_session_id()
    _, events = await front.post(run(thread, "run-1", "hi"))
    assert events[-1]["type"] == "RUN_FINISHED"

    response, _ = await Front(front.http, "billing", tmp_path).post(run(thread, "run-2", "refund me"))

    assert "is a session of 'app scripted', not of 'billing'" in assert_problem(response, 409)["detail"]
    texts = [m.text for _, m in harness.store.messages(thread) if m.role == "user"]
    assert texts == ["hi"]
    _, events = await front.post(run(thread, "run-3", "hi again"))  # its own path still runs it
    assert events[-1]["type"] == "RUN_FINISHED"


async def test_a_resume_answering_one_interrupt_twice_is_a_run_error_and_decides_nothing(
    harness: Harness, front: Front, tmp_path: Path
) -> None:
    """Given in turn, the approval would take effect (the file written) and the denial then fail:
    a RUN_ERROR for a resume whose first answer ran the call."""
    thread = await waiting(harness, front, tmp_path)
    twice = [answer("req-1", {"approved": True}), answer("req-1", {"approved": False})]

    _, events = await front.post(run(thread, "run-2", None, resume=twice))

    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"] and events[1]["code"] == "duplicate_interrupt", events
    assert "req-1 more than once" in events[1]["message"]
    assert await pending(harness, thread) == ["req-1"]
    assert not (tmp_path / "ws" / "notes.md").exists()


async def test_a_resume_whose_last_answer_is_no_decision_gives_none_of_its_answers(
    harness: Harness, front: Front, tmp_path: Path
) -> None:
    write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.md", "content": "a"}},
                        {"name": "fs.write", "arguments": {"path": "b.md", "content": "b"}}]},
        {"text": "done"},
    ])
    thread = harness.new_session_id()
    _, events = await front.post(run(thread, "run-1"))
    assert sorted(i["id"] for i in events[-1]["outcome"]["interrupts"]) == ["req-1", "req-2"], events[-1]

    resume = [answer("req-1", {"approved": True}), answer("req-2", {"approved": "sure"})]
    _, events = await front.post(run(thread, "run-2", None, resume=resume))

    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "invalid_resume_payload", events
    assert sorted(await pending(harness, thread)) == ["req-1", "req-2"]
    assert not (tmp_path / "ws" / "a.md").exists()
