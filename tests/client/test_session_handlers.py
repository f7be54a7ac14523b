"""The client's declaration of the session workflow's handlers (client/_session_handlers.py) is
the workflow's own: the same names, kinds, argument and result types, and the same
``FORGOTTEN_TURN`` wording, so a call by name reaches the handler it means and decodes its answer."""

from __future__ import annotations

import inspect
import typing

import pytest
from temporalio import workflow

from agentrt.client._session_handlers import FORGOTTEN_TURN, SESSION_RESULT, SessionHandlers
from agentrt.schemas import SESSION_WORKFLOW
from agentrt.workflows import session
from agentrt.workflows.session import SessionWorkflow


def handlers(cls: type) -> dict[str, tuple[str, object]]:
    """``{handler name: (kind, method)}`` for every update, signal and query declared on ``cls``."""
    found: dict[str, tuple[str, object]] = {}
    for _, method in inspect.getmembers(cls, callable):
        for kind, definition in (
            ("update", getattr(method, "_defn", None)),
            ("signal", getattr(method, "__temporal_signal_definition", None)),
            ("query", getattr(method, "__temporal_query_definition", None)),
        ):
            if definition is not None and definition.name is not None:
                found[definition.name] = (kind, method)
    return found


def test_the_declared_handlers_are_the_session_workflow_s() -> None:
    declared, real = handlers(SessionHandlers), handlers(SessionWorkflow)
    assert sorted(declared) == sorted(real)
    assert {name: kind for name, (kind, _) in declared.items()} == {name: kind for name, (kind, _) in real.items()}


@pytest.mark.parametrize("name", sorted(handlers(SessionWorkflow)))
def test_a_declared_handler_takes_and_returns_what_the_workflow_s_does(name: str) -> None:
    (_, declared), (_, real) = handlers(SessionHandlers)[name], handlers(SessionWorkflow)[name]
    declared_fn, real_fn = getattr(declared, "_defn", None), getattr(real, "_defn", None)
    declared_fn = declared_fn.fn if declared_fn is not None else declared
    real_fn = real_fn.fn if real_fn is not None else real
    assert typing.get_type_hints(declared_fn) == typing.get_type_hints(real_fn, vars(session))
    assert inspect.iscoroutinefunction(declared_fn) == inspect.iscoroutinefunction(real_fn)


def test_the_type_name_result_and_forgotten_turn_wording_are_the_workflow_s() -> None:
    assert SESSION_WORKFLOW == workflow._Definition.must_from_class(SessionWorkflow).name
    assert typing.get_type_hints(SessionWorkflow.run, vars(session))["return"] is SESSION_RESULT
    assert FORGOTTEN_TURN == session.FORGOTTEN_TURN
