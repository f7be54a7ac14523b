"""SignalArityGuard: a signal whose arguments its handler cannot take is dropped, not retried forever.

The SDK drops a signal whose payloads it cannot decode, but calls a handler with whatever number
of arguments the signal carried: ``temporal workflow signal --name cancel_turn`` without
``--input`` calls ``cancel_turn()`` with none, the ``TypeError`` fails the workflow task, and the
task fails the same way at every retry (the signal is in history), so the session is stuck for good.
This guard checks the arguments against the handler's signature first and drops a signal that does
not fit, with a warning in the worker's log. Deterministic: the decision reads only the signal.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Any

import temporalio.workflow
from temporalio import workflow
from temporalio.worker import HandleSignalInput, Interceptor, WorkflowInboundInterceptor, WorkflowInterceptorClassInput

__all__ = ["SignalArityGuard", "arity_problem", "signal_signatures"]


def arity_problem(signature: inspect.Signature, args: Sequence[Any]) -> str | None:
    """Why a handler of ``signature`` cannot be called with ``args`` (they do not bind), or None."""
    try:
        signature.bind(*args)
    except TypeError as err:
        return str(err)
    return None


def signal_signatures(workflows: Sequence[type]) -> dict[str, dict[str, inspect.Signature]]:
    """Each workflow type's signal handlers' signatures as its class defines them, without ``self``
    (the SDK wraps an async handler in one taking ``*args``), read once when the worker starts."""
    signatures: dict[str, dict[str, inspect.Signature]] = {}
    for cls in workflows:
        defn = temporalio.workflow._Definition.from_class(cls)  # the SDK's own reading of @workflow.defn
        if defn is None or defn.name is None:
            continue
        signatures[defn.name] = {
            name: inspect.signature(functools.partial(signal.fn, None) if signal.is_method else signal.fn)
            for name, signal in defn.signals.items()
            if name is not None
        }
    return signatures


class SignalArityGuard(Interceptor):
    """A worker interceptor: each of ``workflows`` drops a signal its handler cannot take (see module)."""

    def __init__(self, workflows: Sequence[type]) -> None:
        handlers = signal_signatures(workflows)

        class _Inbound(WorkflowInboundInterceptor):
            async def handle_signal(self, input: HandleSignalInput) -> None:
                signature = handlers.get(workflow.info().workflow_type, {}).get(input.signal)
                problem = None if signature is None else arity_problem(signature, input.args)
                if problem is not None:
                    workflow.logger.warning(
                        "signal %r dropped: %d argument(s) its handler cannot take (%s)",
                        input.signal[:100], len(input.args), problem,
                    )
                    return
                await super().handle_signal(input)

        self._workflow_class = _Inbound

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        return self._workflow_class
