"""SignalArityGuard reads the handler a workflow class defines (the SDK wraps an async one in ``*args``)."""

from __future__ import annotations

import pytest

from agentrt.schemas import SET_PAUSED_SIGNAL
from agentrt.worker._signal_guard import arity_problem, signal_signatures
from agentrt.workflows.session import SessionWorkflow


@pytest.mark.parametrize("args, fits", [([], False), ([{"paused": True}], True), ([1, 2], False)])
def test_the_guard_reads_the_handler_the_class_defines_even_an_async_one(args: list[object], fits: bool) -> None:
    signature = signal_signatures([SessionWorkflow])["SessionWorkflow"][SET_PAUSED_SIGNAL]  # async def set_paused(self, input)
    assert (arity_problem(signature, args) is None) is fits
