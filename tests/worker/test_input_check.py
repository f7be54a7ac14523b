"""invalid_workflow_input: which decoding failures end a run (worker/_input_check.py)."""

from __future__ import annotations

import json

import pydantic
import pytest
from temporalio.api.common.v1 import Payload

from agentrt.schemas import SessionInput, SessionResult
from agentrt.worker._input_check import invalid_workflow_input


def refusal(data: bytes, kind: type[pydantic.BaseModel] = SessionInput) -> pydantic.ValidationError:
    with pytest.raises(pydantic.ValidationError) as err:
        kind.model_validate_json(data)
    return err.value


@pytest.mark.parametrize("data", [b"[" * 200_000, b'{"config": ' * 50_000, b"\xff\xfe not utf-8", b'"a string"'])
def test_hostile_inputs_of_a_new_run_are_refused_as_invalid_input(data: bytes) -> None:
    error = invalid_workflow_input(refusal(data), [Payload(data=data)], [SessionInput])
    assert error is not None and error.type == "InvalidWorkflowInput" and error.non_retryable
    assert error.message.startswith("the workflow's input is not a valid SessionInput: ")
    assert len(error.message) <= 4000


def test_a_hundred_reasons_are_listed_up_to_twenty_and_counted() -> None:
    data = json.dumps({"config": {f"unknown_{i}": i for i in range(100)}}).encode()
    error = invalid_workflow_input(refusal(data), [Payload(data=data)], [SessionInput])
    assert error is not None and error.message.endswith("more")
    assert error.message.count("config.") <= 21


def test_other_types_and_other_errors_and_continuing_runs_stay_workflow_task_failures() -> None:
    data = b"{}"
    assert invalid_workflow_input(refusal(data, SessionResult), [Payload(data=data)], [SessionResult]) is None
    assert invalid_workflow_input(RuntimeError("storage down"), [Payload(data=data)], [SessionInput]) is None
    continuing = json.dumps({"config": {}, "state": {"run": 2}}).encode()
    assert invalid_workflow_input(refusal(continuing), [Payload(data=continuing)], [SessionInput]) is None
