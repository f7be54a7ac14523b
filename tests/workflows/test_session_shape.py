"""The session workflow is composed: a workflow class with no base, steps that get what they use.

``SessionWorkflow`` holds a ``SessionRun`` and its steps; no step inherits from another or
reaches back into the workflow, per-turn fields live on ``Turn`` only, and the session's
patch ids are asked in one module (``_generation``). Read from the source, as
``test_determinism`` reads it.
"""

from __future__ import annotations

import ast
import inspect

from agentrt.workflows import (
    _context_steps,
    _delegate_steps,
    _generation,
    _mcp_steps,
    _session_control,
    _session_run,
    _tool_steps,
    _turn,
    session,
)

STEP_MODULES = [_session_run, _turn, _tool_steps, _mcp_steps, _delegate_steps, _context_steps, _session_control, _generation]
SESSION_MODULES = [session, *STEP_MODULES]


def _classes(module: object) -> list[type]:
    return [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == module.__name__]  # type: ignore[attr-defined]


def test_the_session_workflow_and_its_steps_have_no_base_class() -> None:
    assert session.SessionWorkflow.__bases__ == (object,)
    for module in STEP_MODULES:
        for cls in _classes(module):
            assert cls.__bases__ == (object,), f"{cls.__qualname__} inherits from {cls.__bases__}"


def test_no_step_imports_the_workflow_module() -> None:
    for module in STEP_MODULES:
        tree = ast.parse(inspect.getsource(module))
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert "agentrt.workflows.session" not in imported, module.__name__


def test_per_turn_fields_live_on_the_turn_only() -> None:
    per_turn = {
        "_active_turn", "_turn_task", "_cancel_request", "_cancel_announced", "_round", "_turn_request",
        "_steps_in_flight", "_tool_listing", "_mcp_failures", "_mcp_tokens", "_advisor_usage", "_trajectory",
    }
    for module in SESSION_MODULES:
        tree = ast.parse(inspect.getsource(module))
        written = {
            t.attr for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Attribute) and getattr(t.value, "id", "") == "self"
        }
        assert not written & per_turn, f"{module.__name__} keeps per-turn fields {sorted(written & per_turn)}"


def test_the_session_asks_its_patches_in_one_module() -> None:
    for module in SESSION_MODULES:
        if module is _generation:
            continue
        assert "workflow.patched(" not in inspect.getsource(module), module.__name__


def test_each_session_module_stays_under_500_lines() -> None:
    for module in SESSION_MODULES:
        lines = len(inspect.getsource(module).splitlines())
        assert lines <= 500, f"{module.__name__}: {lines} lines"
