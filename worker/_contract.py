"""ActivityContractInterceptor: activity calls carry the caller's activity contract, and a worker
refuses one from a build outside its window (schemas/_contract.py).

A header rather than a field of each input: every activity, agentrt's and any other the worker
runs, gets it at once, and no input changes shape. On the workflow side it stamps every activity
the workflow schedules (``ACTIVITY_CONTRACT_HEADER``, JSON ``{"version": N, "oldest": M}``);
local activities run on the worker of the workflow task, the same build, and carry none. On the
activity side it reads the header (none: a build from before contracts, contract 1) and, when the
two contracts do not accept each other, fails the call before it runs with a non-retryable
``ApplicationError`` of type ``ActivityContractMismatch`` naming both. Headers are not part of the
commands a replay compares, so stamping them changes no history.
"""

from __future__ import annotations

import json
from typing import Any

import temporalio.api.common.v1
from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    StartActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

from agentrt.schemas import ACTIVITY_CONTRACT_HEADER, ActivityContract, ActivityContractMismatch

__all__ = ["ActivityContractInterceptor"]

MISMATCH_TYPE = "ActivityContractMismatch"
# Bigger than any header this code writes: a caller's header past it is not read.
HEADER_BYTES = 256


def contract_header(contract: ActivityContract) -> temporalio.api.common.v1.Payload:
    """The header payload of ``contract``, as the JSON payload converter writes a dict."""
    return temporalio.api.common.v1.Payload(
        metadata={"encoding": b"json/plain"}, data=json.dumps(contract.model_dump(), separators=(",", ":")).encode()
    )


def caller_contract(headers: Any) -> ActivityContract | None:
    """The contract an activity call's headers carry: ``before_contracts()`` without the header, None
    when it is there but does not parse as one."""
    payload = headers.get(ACTIVITY_CONTRACT_HEADER) if headers else None
    if payload is None:
        return ActivityContract.before_contracts()
    if len(payload.data) > HEADER_BYTES:
        return None
    try:
        return ActivityContract.model_validate_json(payload.data)
    except ValidationError:
        return None


class ActivityContractInterceptor(Interceptor):
    """Stamps the activities a worker's workflows call with ``contract`` (default: this build's) and
    refuses, in its activities, calls from builds whose contract ``contract`` does not accept."""

    def __init__(self, contract: ActivityContract | None = None) -> None:
        self.contract = contract or ActivityContract.this_build()
        header = contract_header(self.contract)

        class _Outbound(WorkflowOutboundInterceptor):
            def start_activity(self, input: StartActivityInput) -> Any:
                input.headers = {**input.headers, ACTIVITY_CONTRACT_HEADER: header}
                return super().start_activity(input)

        class _Inbound(WorkflowInboundInterceptor):
            def init(self, outbound: WorkflowOutboundInterceptor) -> None:
                super().init(_Outbound(outbound))

        self._workflow_class = _Inbound

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        return self._workflow_class

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ContractCheck(next, self.contract)


class _ContractCheck(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, contract: ActivityContract) -> None:
        super().__init__(next)
        self._contract = contract

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        if info.is_local:
            return await self.next.execute_activity(input)
        caller = caller_contract(input.headers)
        if caller is not None and self._contract.accepts(caller):
            return await self.next.execute_activity(input)
        mine = (self._contract.version, self._contract.oldest)
        theirs = None if caller is None else (caller.version, caller.oldest)
        err = ActivityContractMismatch(info.activity_type, mine, theirs)
        details = {
            "activity": info.activity_type,
            "worker": {"version": mine[0], "oldest": mine[1]},
            "caller": None if caller is None else caller.model_dump(),
        }
        raise ApplicationError(str(err), details, type=MISMATCH_TYPE, non_retryable=True) from err
