"""The activity contract (schemas/_contract.py, worker/_contract.py): builds one contract apart run
each other's activities, builds further apart refuse them before they run, typed and not retried,
naming both contracts. The previous release against this one, for real: tests/e2e/test_activity_contracts.py."""

from __future__ import annotations

import concurrent.futures
import uuid
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.worker import Worker

from agentrt.activities import build_activities
from agentrt.activities.tools import default_registry
from agentrt.client import AgentClient
from agentrt.schemas import (
    ACTIVITY_CONTRACT,
    ACTIVITY_CONTRACT_HEADER,
    ACTIVITY_CONTRACT_OLDEST,
    ActivityContract,
    ActivityContractMismatch,
)
from agentrt.worker import WORKFLOWS, ActivityContractInterceptor, AgentrtConfig
from agentrt.worker._contract import caller_contract, contract_header
from tests.conftest import OWNER, Harness
from tests.e2e._support import ALLOW_ALL, session_config, write_script

THIS = ActivityContract.this_build()


def contract(version: int, oldest: int) -> ActivityContract:
    return ActivityContract(version=version, oldest=oldest)


def test_this_build_reads_and_writes_for_the_contract_before_its_own() -> None:
    assert (THIS.version, THIS.oldest) == (ACTIVITY_CONTRACT, ACTIVITY_CONTRACT_OLDEST)
    assert ACTIVITY_CONTRACT_OLDEST in (ACTIVITY_CONTRACT - 1, ACTIVITY_CONTRACT)


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        pytest.param(contract(1, 1), contract(2, 1), id="before-contracts-and-2"),
        pytest.param(contract(2, 1), contract(3, 2), id="2-and-3"),
        pytest.param(contract(3, 2), contract(3, 2), id="same"),
    ],
)
def test_builds_one_contract_apart_run_each_others_activities(older: ActivityContract, newer: ActivityContract) -> None:
    assert newer.accepts(older) and older.accepts(newer)


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        pytest.param(contract(1, 1), contract(3, 2), id="two-apart"),
        pytest.param(contract(2, 1), contract(3, 3), id="one-apart-after-a-change-2-cannot-read"),
        pytest.param(contract(1, 1), contract(9, 8), id="far-apart"),
    ],
)
def test_builds_further_apart_refuse_each_others_activities_both_ways(
    older: ActivityContract, newer: ActivityContract
) -> None:
    # The older build refuses too, though it cannot know what the newer one changed: the newer says
    # in its header the oldest contract it still writes for.
    assert not newer.accepts(older) and not older.accepts(newer)


def test_a_contract_whose_oldest_is_newer_than_its_version_is_refused() -> None:
    with pytest.raises(ValueError, match="newer than version"):
        contract(2, 3)


def test_a_call_without_the_header_comes_from_a_build_before_contracts() -> None:
    assert caller_contract({}) == contract(1, 1)
    assert caller_contract({ACTIVITY_CONTRACT_HEADER: contract_header(contract(5, 4))}) == contract(5, 4)


@pytest.mark.parametrize(
    "data",
    [b"not json", b'{"version": 2}', b'{"version": 2, "oldest": 1, "extra": 0}', b'{"version": 0, "oldest": 0}', b"9" * 300],
    ids=["not-json", "no-oldest", "extra-field", "zero", "too-long"],
)
def test_a_header_that_is_no_contract_is_unreadable(data: bytes) -> None:
    assert caller_contract({ACTIVITY_CONTRACT_HEADER: Payload(metadata={"encoding": b"json/plain"}, data=data)}) is None


def test_the_refusal_names_the_activity_and_both_contracts() -> None:
    err = ActivityContractMismatch("tool.execute", (2, 1), (4, 3))
    assert "tool.execute" in str(err) and "2 (back to 1)" in str(err) and "4 (back to 3)" in str(err)
    assert (err.activity, err.worker, err.caller) == ("tool.execute", (2, 1), (4, 3))
    assert "unreadable" in str(ActivityContractMismatch("tool.execute", (2, 1), None))


def worker_with(
    harness: Harness, config: AgentrtConfig, role: str, queue: str, contract: ActivityContract
) -> Worker:
    """A worker of ``role`` (``models``: the workflows and the model side; ``tools``) speaking ``contract``."""
    return Worker(
        harness.temporal,
        task_queue=queue,
        workflows=[] if role == "tools" else WORKFLOWS,
        activities=build_activities(config, harness.store, default_registry(), role),  # type: ignore[arg-type]
        activity_executor=concurrent.futures.ThreadPoolExecutor(max_workers=8),
        interceptors=[ActivityContractInterceptor(contract)],
    )


@pytest.mark.parametrize(
    ("caller", "worker"),
    [
        pytest.param(contract(ACTIVITY_CONTRACT + 2, ACTIVITY_CONTRACT + 1), THIS, id="workflow-two-contracts-ahead"),
        pytest.param(THIS, contract(ACTIVITY_CONTRACT + 2, ACTIVITY_CONTRACT + 1), id="tools-worker-two-contracts-ahead"),
    ],
)
async def test_a_tool_call_from_a_build_outside_the_window_is_refused_once_typed_naming_both_and_the_turn_goes_on(
    harness: Harness, workspace: Path, tmp_path: Path, caller: ActivityContract, worker: ActivityContract
) -> None:
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    config = AgentrtConfig(
        temporal_address=harness.server.address, task_queue=queue, tool_task_queue=f"{queue}-tools",
        database_url=harness.config.database_url,
    )
    client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER)
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "out.txt", "content": "x"}}]},
        {"text": "done"},
    ])
    sid = uuid.uuid4().hex[:12]
    models = worker_with(harness, config, "models", queue, caller)
    tools = worker_with(harness, config, "tools", f"{queue}-tools", worker)
    async with models, tools:
        started = await client.start(
            session_config(client, sid, workspace, script, approval=ALLOW_ALL, tool_task_queue=config.tool_task_queue), "go"
        )
        outcome = await client.wait(sid, started.turn_id, timeout_seconds=60)

    assert outcome.status == "completed" and not (workspace / "out.txt").exists()  # refused before it ran
    history = await harness.temporal.get_workflow_handle(f"session-{sid}").fetch_history()
    started_attempts = [
        e.activity_task_started_event_attributes.attempt for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        and history.events[e.activity_task_started_event_attributes.scheduled_event_id - 1]
        .activity_task_scheduled_event_attributes.activity_type.name == "tool.execute"
    ]
    assert started_attempts == [1], "refused once, not retried"
    (failed,) = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED]
    failure = failed.activity_task_failed_event_attributes.failure
    assert failure.application_failure_info.type == "ActivityContractMismatch"
    assert failure.application_failure_info.non_retryable
    assert caller.describe() in failure.message and worker.describe() in failure.message and "tool.execute" in failure.message
