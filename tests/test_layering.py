"""The layering, read from the source: schemas <- workflows <- activities <- worker,
store <- activities; client -> worker (configuration and converter only), schemas, store;
cli, gateway -> client; no module imports another package's private module; nothing is
imported under a bare top-level name (``schemas`` instead of ``agentrt.schemas``). And, in a
fresh process, ``import agentrt.client`` loads no gateway, MCP, provider, tool, activity or
workflow module.

Imports are found with ``ast`` wherever they are: at module level, inside functions and
inside ``if TYPE_CHECKING:`` blocks, which count like any other import.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests._packages import REPO_ROOT, package_dirs

# Which agentrt packages each agentrt package may import (its own included).
ALLOWED = {
    "agentrt.schemas": {"agentrt.schemas"},
    "agentrt.workflows": {"agentrt.schemas", "agentrt.workflows"},
    "agentrt.store": {"agentrt.schemas", "agentrt.store"},
    "agentrt.activities": {"agentrt.schemas", "agentrt.workflows", "agentrt.store", "agentrt.activities"},
    "agentrt.worker": {"agentrt.schemas", "agentrt.workflows", "agentrt.store", "agentrt.activities", "agentrt.worker"},
    # The Python API: it addresses workflows by type name (schemas/_names.py), so it imports
    # neither the workflows nor the activities; from the worker package only the light names below.
    "agentrt.client": {"agentrt.schemas", "agentrt.store", "agentrt.worker", "agentrt.client"},
    "agentrt.gateway": {"agentrt.schemas", "agentrt.store", "agentrt.worker", "agentrt.client", "agentrt.gateway"},
    # The command line runs workers in its own process (`agentrt run`, `worker`, `dev`) and serves the gateway.
    # The top-level package (sdk/): the names an agent's author imports, each from its package.
    "agentrt": {"agentrt.schemas", "agentrt.activities", "agentrt.worker", "agentrt.client"},
    "agentrt.cli": {
        "agentrt.schemas", "agentrt.store", "agentrt.activities", "agentrt.worker", "agentrt.client", "agentrt.gateway",
        "agentrt.cli",
    },
}

# What the client may take from agentrt.worker: configuration, the light plugin and payload
# storage, whose modules import no workflow, activity or tool.
CLIENT_WORKER_NAMES = {
    "AgentrtClientPlugin", "AgentrtConfig", "PayloadCodecMismatch", "PayloadStorage", "driver_location",
    "payload_fingerprints_of", "plugin_of",
}
# Third-party packages the client never imports: the gateway's, MCP's and the command line's.
CLIENT_FORBIDDEN_LIBRARIES = {"fastapi", "starlette", "uvicorn", "fastapi_offline", "ag_ui", "mcp", "typer", "click"}


@dataclass(frozen=True)
class Import:
    """One module an import statement names: ``importer`` (a module name) imports ``target``."""

    path: Path
    line: int
    importer: str
    target: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(REPO_ROOT)}:{self.line}: {self.importer} imports {self.target}"


def module_name(path: Path, root: Path, prefix: str) -> str:
    """The module name of ``path`` under ``root`` (a folder imported as ``prefix``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([prefix, *parts])


def scanned_files() -> Iterator[tuple[Path, str]]:
    """``(file, module name)`` for every Python file of the product, ``bench/`` and ``tests/``."""
    for package, folder in package_dirs().items():
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            yield path, module_name(path, REPO_ROOT / folder, package)
    for folder in ("bench", "tests"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            yield path, module_name(path, REPO_ROOT / folder, folder)


def imports_in(source: str, importer: str, is_package: bool, known_modules: frozenset[str] = frozenset()) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for every module ``source`` imports, anywhere in its tree.

    ``from M import n`` names ``M``, and also ``M.n`` when that is one of ``known_modules``
    (``from agentrt.worker import _payloads`` imports the module ``agentrt.worker._payloads``).
    Relative imports are resolved against ``importer``.
    """
    package = importer if is_package else importer.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield node.lineno, module
            for alias in node.names:
                if f"{module}.{alias.name}" in known_modules:
                    yield node.lineno, f"{module}.{alias.name}"


# Every test of this module in one process: the scan below (every file of the repository) is made once.
pytestmark = pytest.mark.xdist_group("test_layering")


@cache
def all_imports() -> tuple[Import, ...]:
    files = list(scanned_files())
    known = frozenset(name for _, name in files)
    found = []
    for path, importer in files:
        for line, target in imports_in(path.read_text(), importer, path.name == "__init__.py", known):
            found.append(Import(path, line, importer, target))
    return tuple(found)


def top_package(module: str) -> str | None:
    """The agentrt package (``agentrt.schemas``, ...) that ``module`` belongs to, if any."""
    for package in package_dirs():
        if module == package or module.startswith(package + "."):
            return package
    return None


def owner_of_private(module: str) -> str | None:
    """For a private module (a part of its name starts with ``_``), the package it is private
    to: the name up to that part. None for a public module."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


def scope_of(imp: Import) -> str:
    """The package an importer speaks for: its own package; a test under ``tests/<name>/``
    speaks for ``agentrt.<name>`` (a package's tests may use its private modules)."""
    package = imp.importer if imp.path.name == "__init__.py" else imp.importer.rpartition(".")[0]
    if package.startswith("tests.") and top_package("agentrt." + package[len("tests.") :]) is not None:
        return "agentrt." + package[len("tests.") :]
    return package


def product_imports() -> list[Import]:
    return [imp for imp in all_imports() if top_package(imp.importer) is not None]


def assert_none(violations: list[str]) -> None:
    assert not violations, "\n".join(violations)


def violations_of_allowed(package: str) -> list[str]:
    allowed = ALLOWED[package]
    return [
        str(imp)
        for imp in product_imports()
        if top_package(imp.importer) == package
        and top_package(imp.target) is not None
        and top_package(imp.target) not in allowed
    ]


def test_every_root_package_is_scanned() -> None:
    assert set(package_dirs()) == {
        f"agentrt.{name}" for name in ("activities", "cli", "client", "gateway", "schemas", "store", "worker", "workflows")
    } | {"agentrt"}
    scanned = {top_package(name) for _, name in scanned_files()}
    assert set(package_dirs()) <= scanned


def test_the_scanner_counts_imports_inside_type_checking_blocks_and_functions() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from agentrt.worker._config import AgentrtConfig\n"
        "def f():\n"
        "    import agentrt.client\n"
        "from . import _sibling\n"
        "from agentrt.worker import _payloads\n"
    )
    found = {target for _, target in imports_in(source, "agentrt.activities._model", False, frozenset({"agentrt.worker._payloads"}))}
    assert {"agentrt.worker._config", "agentrt.client", "agentrt.activities", "agentrt.worker._payloads"} <= found


def test_schemas_import_nothing_of_agentrt_but_schemas() -> None:
    assert_none(violations_of_allowed("agentrt.schemas"))


def test_workflows_import_only_schemas_and_their_own_modules() -> None:
    assert_none(violations_of_allowed("agentrt.workflows"))


def test_store_imports_only_schemas_and_its_own_modules() -> None:
    assert_none(violations_of_allowed("agentrt.store"))


def test_activities_import_neither_the_worker_nor_the_client() -> None:
    assert_none(violations_of_allowed("agentrt.activities"))


def test_the_worker_does_not_import_the_client() -> None:
    assert_none(violations_of_allowed("agentrt.worker"))


def test_the_client_imports_only_schemas_store_and_the_worker_s_configuration() -> None:
    assert_none(violations_of_allowed("agentrt.client"))


def test_the_client_takes_only_configuration_and_converter_names_from_the_worker() -> None:
    bad = []
    for path, importer in scanned_files():
        if top_package(importer) != "agentrt.client":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "agentrt.worker" and not _under_type_checking(path, node):
                bad += [f"{path.relative_to(REPO_ROOT)}:{node.lineno}: {a.name}" for a in node.names if a.name not in CLIENT_WORKER_NAMES]
    assert_none(bad)


def _under_type_checking(path: Path, node: ast.AST) -> bool:
    """Whether ``node`` sits in an ``if TYPE_CHECKING:`` block of ``path`` (a name only for the type checker)."""
    for block in ast.walk(ast.parse(path.read_text())):
        if isinstance(block, ast.If) and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING":
            if any(getattr(n, "lineno", None) == getattr(node, "lineno", -1) for b in block.body for n in ast.walk(b)):
                return True
    return False


def test_the_client_imports_neither_the_gateway_s_libraries_nor_mcp_nor_the_command_line_s() -> None:
    bad = [
        str(imp) for imp in product_imports()
        if top_package(imp.importer) == "agentrt.client" and imp.target.partition(".")[0] in CLIENT_FORBIDDEN_LIBRARIES
    ]
    assert_none(bad)


def test_the_gateway_imports_no_command_line_module() -> None:
    assert_none(violations_of_allowed("agentrt.gateway"))


def test_the_command_line_imports_no_workflow_module() -> None:
    assert_none(violations_of_allowed("agentrt.cli"))


def test_the_top_level_package_imports_only_the_packages_it_re_exports() -> None:
    assert_none(violations_of_allowed("agentrt"))


def test_importing_agentrt_loads_a_name_s_package_only_when_asked_for() -> None:
    probe = IMPORT_CLIENT.replace("import agentrt.client\n", "import agentrt\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert [m for m in json.loads(result.stdout) if m.startswith("agentrt.")] == []
    probe = IMPORT_CLIENT.replace("import agentrt.client\n", "from agentrt import tool, Agent, ToolContext\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert "agentrt.activities.tools._function" in loaded and "agentrt.workflows.session" not in loaded


# Module name prefixes `import agentrt.client` must not load: the gateway and the command line,
# their libraries, MCP, the model providers, the tools, the activities and the workflow classes,
# and the AWS SDK the s3 payload driver brings (loaded only where a bucket is configured).
HEAVY_MODULES = (
    "agentrt.activities", "agentrt.cli", "agentrt.gateway", "agentrt.workflows", "agentrt.worker._plugin",
    "agentrt.worker._worker", "agentrt.worker._s3_payloads", "ag_ui", "aioboto3", "aiobotocore", "botocore",
    "click", "fastapi", "fastapi_offline", "mcp", "starlette", "typer", "uvicorn",
)

IMPORT_CLIENT = """
import json, sys
import agentrt.client
print(json.dumps(sorted(sys.modules)))
"""


def test_importing_the_client_in_a_fresh_process_loads_no_heavy_module() -> None:
    result = subprocess.run([sys.executable, "-c", IMPORT_CLIENT], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout)
    assert "agentrt.client._client" in loaded
    assert [m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY_MODULES)] == []


def test_a_name_that_left_the_client_loads_its_package_only_when_asked_for() -> None:
    probe = IMPORT_CLIENT.replace("import agentrt.client\n", "import agentrt.client\nagentrt.client.create_app\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert {"agentrt.gateway._app", "fastapi"} <= set(json.loads(result.stdout))


def test_no_module_imports_another_package_s_private_module() -> None:
    bad = []
    for imp in all_imports():
        owner = owner_of_private(imp.target)
        if owner is None or (top_package(owner) is None and owner.partition(".")[0] != "bench"):
            continue  # a public module, or a private one of a third party or of the tests' own helpers
        scope = scope_of(imp)
        if not (scope == owner or scope.startswith(owner + ".")):
            bad.append(str(imp))
    assert_none(bad)


def test_bench_does_not_import_tests() -> None:
    bad = [str(imp) for imp in all_imports() if imp.importer.startswith("bench") and imp.target.partition(".")[0] == "tests"]
    assert_none(bad)


def test_the_product_imports_neither_tests_nor_bench() -> None:
    bad = [str(imp) for imp in product_imports() if imp.target.partition(".")[0] in ("tests", "bench")]
    assert_none(bad)


def test_nothing_imports_a_root_folder_as_a_bare_top_level_package() -> None:
    bare = {folder for folder in package_dirs().values()}
    bad = [str(imp) for imp in all_imports() if imp.target.partition(".")[0] in bare]
    assert_none(bad)


# Run with the repository root first on sys.path, as pytest has it: there ``import schemas``
# would succeed and load a second copy of agentrt.schemas.
IMPORT_EVERYTHING = """
import json, sys
from tests._packages import agentrt_modules, package_dirs
modules = agentrt_modules()
bare = sorted(name for name in sys.modules if name.partition(".")[0] in set(package_dirs().values()))
print(json.dumps({"modules": modules, "bare": bare}))
"""


def test_importing_every_agentrt_module_loads_no_bare_top_level_package() -> None:
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERYTHING], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert {"agentrt.schemas._events", "agentrt.cli._app", "agentrt.store._engine"} <= set(report["modules"])
    assert report["bare"] == []


def test_a_test_run_that_loads_a_bare_top_level_package_fails(tmp_path: Path) -> None:
    (tmp_path / "test_bare.py").write_text("def test_imports_schemas_bare():\n    import schemas  # noqa: F401\n")
    result = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
            "-c", str(REPO_ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), str(tmp_path / "test_bare.py"),
        ],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )
    assert "1 passed" in result.stdout
    assert result.returncode == 1
    assert "bare top-level name instead of agentrt.<name>: schemas" in result.stdout
