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
    "hashlib": None,  # digests of data the workflow holds: pure functions
    "json": None,
    "math": None,
    "posixpath": frozenset({"basename", "join", "normpath"}),  # string operations only (no cwd, no ~)
    "re": None,
    "shlex": frozenset({"shlex", "quote"}),  # splitting and quoting strings, never a stream
    "types": frozenset({"MappingProxyType"}),  # read-only module constants
    "typing": None,
    "temporalio": frozenset({"workflow"}),
    "temporalio.common": None,
    "temporalio.exceptions": None,
    "temporalio.workflow": None,
    "agentrt.schemas": None,
}
# Calls that read a clock, randomness, the environment or the outside world.
# Built-ins that read or write the outside world, import behind the check's back, or differ
# between processes (``hash`` of a str is salted per process).
FORBIDDEN_BUILTINS = frozenset({"open", "print", "exec", "eval", "breakpoint", "__import__", "hash"})


def workflow_modules() -> list[Path]:
    return sorted((REPO_ROOT / package_dirs()["agentrt.workflows"]).glob("*.py"))


# Attributes whose use (a call, or a reference kept to call later) reads a clock, randomness,
# the environment or another thread: ``datetime.now``, ``os.urandom``, ``asyncio.to_thread``.
FORBIDDEN_ATTRIBUTES = frozenset({
    "now", "utcnow", "today", "monotonic", "perf_counter", "urandom", "getenv", "uuid4", "to_thread",
    "run_in_executor", "get_running_loop",
})
MUTABLE_FACTORIES = frozenset({"dict", "list", "set", "defaultdict", "deque", "OrderedDict", "Counter"})
PACKAGE = "agentrt.workflows"


def _mutable(value: ast.expr | None) -> bool:
    if isinstance(value, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return True
    return isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", "")) in MUTABLE_FACTORIES


def _shared_state(body: list[ast.stmt], where: str) -> list[str]:
    """Assignments of mutable values in a module's or a class's body: shared by every workflow run."""
    found = []
    for node in body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and _mutable(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if names != ["__all__"]:
                found.append(f"line {node.lineno}: mutable {where} state {', '.join(names)}")
    return found


def _absolute(node: ast.ImportFrom) -> str:
    """The module an import names, relative imports resolved against agentrt.workflows.<module>."""
    if not node.level:
        return node.module or ""
    parts = PACKAGE.split(".")[: len(PACKAGE.split(".")) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def violations(source: str) -> list[str]:
    """What in ``source`` (a workflow module) the sandbox would refuse or replay could not repeat."""
    tree = ast.parse(source)
    found = _shared_state(tree.body, "module")
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            found += _shared_state(node.body, "class")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name not in ALLOWED_IMPORTS or ALLOWED_IMPORTS[alias.name] is not None:
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node)
            if module == PACKAGE or module.startswith(PACKAGE + "."):
                continue
            allowed = ALLOWED_IMPORTS.get(module, frozenset())
            for alias in node.names:
                if allowed is not None and alias.name not in allowed:
                    found.append(f"line {node.lineno}: from {module} import {alias.name}")
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "workflow":
                continue  # workflow.now(), workflow.random(), workflow.uuid4(): deterministic by design
            if node.attr in FORBIDDEN_ATTRIBUTES:
                found.append(f"line {node.lineno}: use of .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in FORBIDDEN_BUILTINS:
            found.append(f"line {node.lineno}: use of {node.id}")
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
        ("x = datetime.now()\n", "use of .now"),
        ("from time import time\n", "from time import time"),
        ("data = open('f').read()\n", "use of open"),
        ("await asyncio.to_thread(f)\n", "use of .to_thread"),
        ("def f():\n    global counter\n", "global counter"),
        ("SEEN: dict[str, int] = {}\n", "mutable module state SEEN"),
        ("cache = []\n", "mutable module state cache"),
        ("CACHE = dict()\n", "mutable module state CACHE"),
        ("class A:\n    seen = set()\n", "mutable class state seen"),
        ("from ..store import Store\n", "from agentrt.store import Store"),
        ("from ..activities._attempts import WORKER_PROCESS\n", "from agentrt.activities._attempts import WORKER_PROCESS"),
        ("clock = datetime.now\nclock()\n", "use of .now"),
        ("t = __import__('time')\n", "use of __import__"),
        ("k = hash('a')\n", "use of hash"),
    ],
)
def test_the_check_finds_what_it_looks_for(source: str, expected: str) -> None:
    assert any(expected in v for v in violations(source))


def test_the_workflow_api_and_plain_imports_pass() -> None:
    source = (
        "from datetime import timedelta\nfrom temporalio import workflow\nfrom . import context\n"
        "from ._journal import EventJournal\nx = workflow.now()\ny = workflow.uuid4()\nLIMITS = (1, 2)\n"
    )
    assert violations(source) == []
