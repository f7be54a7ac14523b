"""The workflow modules stay deterministic without the sandbox: what they import and call.

``SessionWorkflow`` runs unsandboxed (``workflow.defn(sandboxed=False)``): the sandbox's
per-run re-import and proxies cost about half of a round's worker CPU. What the sandbox
would refuse at run time, this test refuses in the source: every module of
``agentrt.workflows`` imports only the names below (``temporalio``'s workflow API,
``agentrt.schemas``, each other and pure standard-library modules) and calls no clock,
randomness, environment or I/O. Replaying the committed histories checks the rest.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests._packages import REPO_ROOT, package_dirs

# Module -> the names a workflow module may import from it (None: the module itself, any name).
ALLOWED_IMPORTS: dict[str, frozenset[str] | None] = {
    "__future__": None,
    "asyncio": None,  # inside a workflow, asyncio runs on Temporal's deterministic event loop
    "collections.abc": None,
    "dataclasses": None,
    "datetime": frozenset({"datetime", "timedelta"}),  # types; the clock is workflow.now()
    "json": None,
    "math": None,
    "types": frozenset({"MappingProxyType"}),  # read-only module constants
    "typing": None,
    "temporalio": frozenset({"workflow"}),
    "temporalio.common": None,
    "temporalio.exceptions": None,
    "temporalio.workflow": None,
    "agentrt.schemas": None,
}
# Calls that read a clock, randomness, the environment or the outside world.
FORBIDDEN_CALLS = frozenset({
    "now", "utcnow", "today", "time", "monotonic", "perf_counter", "sleep_for", "random", "uuid4", "getenv",
    "urandom", "open", "input", "print", "system", "get_running_loop", "run_in_executor", "to_thread",
})


def workflow_modules() -> list[Path]:
    return sorted((REPO_ROOT / package_dirs()["agentrt.workflows"]).glob("*.py"))


def violations(source: str) -> list[str]:
    """What in ``source`` (a workflow module) the sandbox would refuse or replay could not repeat."""
    found = []
    tree = ast.parse(source)
    for node in tree.body:  # module state shared by every workflow run of the worker
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(
            node.value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)
        ):
            names = [t.id for t in (node.targets if isinstance(node, ast.Assign) else [node.target]) if isinstance(t, ast.Name)]
            if names != ["__all__"]:
                found.append(f"line {node.lineno}: mutable module state {', '.join(names)}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name not in ALLOWED_IMPORTS or ALLOWED_IMPORTS[alias.name] is not None:
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level or module.startswith("agentrt.workflows"):
                continue
            allowed = ALLOWED_IMPORTS.get(module, frozenset())
            for alias in node.names:
                if allowed is not None and alias.name not in allowed:
                    found.append(f"line {node.lineno}: from {module} import {alias.name}")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "workflow":
                continue  # workflow.now(), workflow.random(), workflow.uuid4(): deterministic by design
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in FORBIDDEN_CALLS:
                found.append(f"line {node.lineno}: call of {name}()")
        elif isinstance(node, ast.Global):
            found.append(f"line {node.lineno}: global {', '.join(node.names)}")
    return found


@pytest.mark.parametrize("path", workflow_modules(), ids=lambda p: p.name)
def test_a_workflow_module_imports_and_calls_only_deterministic_things(path: Path) -> None:
    assert violations(path.read_text()) == []


def test_the_session_workflow_is_the_unsandboxed_one_the_check_covers() -> None:
    from agentrt.workflows.session import SessionWorkflow

    assert SessionWorkflow.__temporal_workflow_definition.sandboxed is False  # type: ignore[attr-defined]
    assert SessionWorkflow.__module__.startswith("agentrt.workflows.")
    assert any(p.name == "session.py" for p in workflow_modules())


@pytest.mark.parametrize(
    "source, expected",
    [
        ("import time\n", "import time"),
        ("import random\n", "import random"),
        ("from datetime import date\n", "from datetime import date"),
        ("import uuid\n", "import uuid"),
        ("from os import environ\n", "from os import environ"),
        ("from temporalio import activity\n", "from temporalio import activity"),
        ("x = datetime.now()\n", "call of now()"),
        ("x = time.time()\n", "call of time()"),
        ("data = open('f').read()\n", "call of open()"),
        ("await asyncio.to_thread(f)\n", "call of to_thread()"),
        ("def f():\n    global counter\n", "global counter"),
        ("SEEN: dict[str, int] = {}\n", "mutable module state SEEN"),
        ("cache = []\n", "mutable module state cache"),
    ],
)
def test_the_check_finds_what_it_looks_for(source: str, expected: str) -> None:
    assert any(expected in v for v in violations(source))


def test_the_workflow_api_and_plain_imports_pass() -> None:
    source = "from datetime import timedelta\nfrom temporalio import workflow\nx = workflow.now()\ny = workflow.uuid4()\n"
    assert violations(source) == []
