"""The built wheel, installed beside a user's own ``workflows`` package and ``schemas``
module: it ships only ``agentrt/`` (with the store migrations and the demo script), and the
installed ``agentrt`` CLI, client, store and an in-process worker run a scripted session
without touching the user's modules or the repository's sources.

The wheel is built offline without build isolation. It is installed into a fresh virtual
environment whose dependencies come from the project's environment through a ``.pth`` file
naming that environment's site-packages; ``.pth`` files inside a directory added that way are
not processed, so the editable install of agentrt there stays invisible.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import uuid
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentrt.worker import DevServer
from tests._packages import REPO_ROOT, package_dirs
from tests.e2e._support import write_script

ANSWER = "The README says this is a demo project."


@dataclass(frozen=True)
class Installed:
    """A fresh virtual environment with the wheel installed, and a user's project directory."""

    wheel: Path
    venv: Path
    site_packages: Path
    project: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a user's process: their project on PYTHONPATH, no agentrt settings."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTRT_", "PYTHON", "VIRTUAL_ENV"))}
        return {**env, "PYTHONPATH": str(self.project), "PATH": f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", **extra}

    def run(self, *args: str | Path, env: Mapping[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run ``args`` in the user's project directory (default environment: ``env()``); fails on a non-zero exit."""
        result = subprocess.run(
            [str(a) for a in args], cwd=self.project, env=dict(env or self.env()), capture_output=True, text=True, timeout=timeout
        )
        assert result.returncode == 0, f"{args}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
        return result


def checked(*args: str | Path, timeout: float = 120) -> str:
    """Run ``args``; its stdout, or a failed assertion showing its output."""
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{args}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    return result.stdout


def purelib(python: Path | str) -> Path:
    return Path(checked(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip())


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("wheel")

    # Build from a copy of what the wheel is made of, so nothing is written into the repository.
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO_ROOT / name, source / name)
    for folder in package_dirs().values():
        shutil.copytree(REPO_ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = root / "dist"
    checked(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", source, "-w", dist)
    [wheel] = dist.glob("agentrt-*.whl")

    venv = root / "venv"
    checked(sys.executable, "-m", "venv", "--without-pip", venv)
    site_packages = purelib(venv / "bin" / "python")
    (site_packages / "project-dependencies.pth").write_text(f"{sysconfig.get_paths()['purelib']}\n")
    checked(venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--ignore-installed", wheel)

    project = root / "project"
    (project / "workflows").mkdir(parents=True)
    (project / "workflows" / "__init__.py").write_text("OWNER = 'the user'\n")
    (project / "workflows" / "context.py").write_text("WHOSE = 'the user'\n")
    (project / "schemas.py").write_text("ConfigurationError = None\n")
    (project / "gateway.py").write_text("WHOSE = 'the user'\n")
    return Installed(wheel=wheel, venv=venv, site_packages=site_packages, project=project)


def test_the_wheel_holds_only_agentrt_with_its_migrations_and_demo_script(installed: Installed) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert {name.split("/")[0] for name in names} == {"agentrt", f"agentrt-{version}.dist-info"}
    migrations = {f"agentrt/store/migrations/versions/{p.name}" for p in (REPO_ROOT / "store" / "migrations" / "versions").glob("*.py")}
    assert migrations and migrations <= names
    assert {"agentrt/store/migrations/env.py", "agentrt/store/migrations/script.py.mako", "agentrt/cli/demo/script.yaml"} <= names
    assert {package.replace(".", "/") + "/__init__.py" for package in package_dirs()} <= names  # agentrt/ from sdk/ too
    assert not any(name.endswith(".pyc") for name in names)
    entry_points = zipfile.ZipFile(installed.wheel).read(f"agentrt-{version}.dist-info/entry_points.txt").decode()
    assert "agentrt = agentrt.cli:main" in entry_points


def test_the_fresh_environment_does_not_see_the_editable_install(installed: Installed) -> None:
    probe = (
        "import json, sys, agentrt\n"
        "print(json.dumps({'path': list(agentrt.__path__), 'finders': [repr(f) for f in sys.meta_path],\n"
        "  'modules': [m for m in sys.modules if 'editable' in m]}))\n"
    )
    report = json.loads(installed.run(installed.python, "-c", probe).stdout)
    assert report["path"] == [str(installed.site_packages / "agentrt")]
    assert report["modules"] == [] and not any("editable" in f for f in report["finders"])


def test_the_installed_cli_answers_help_beside_user_modules(installed: Installed) -> None:
    result = installed.run(installed.venv / "bin" / "agentrt", "--help")
    assert "Usage" in result.stdout and "run" in result.stdout


def test_agentrt_and_the_user_s_workflows_and_schemas_import_side_by_side(installed: Installed) -> None:
    probe = (
        "import json, sys\n"
        "from agentrt.client import AgentClient\n"
        "import agentrt.schemas, agentrt.workflows.context, agentrt.gateway, workflows, workflows.context, schemas, gateway\n"
        "print(json.dumps({\n"
        "  'user': [workflows.__file__, workflows.context.__file__, schemas.__file__, gateway.__file__],\n"
        "  'user_values': [workflows.OWNER, workflows.context.WHOSE, schemas.ConfigurationError, gateway.WHOSE],\n"
        "  'agentrt': sorted({m.__file__ for n, m in list(sys.modules.items()) if n.startswith('agentrt.') and getattr(m, '__file__', None)}),\n"
        "  'client': AgentClient.__module__,\n"
        "  'error': agentrt.schemas.ConfigurationError.__name__,\n"
        "}))\n"
    )
    report = json.loads(installed.run(installed.python, "-c", probe).stdout)
    assert all(path.startswith(str(installed.project)) for path in report["user"])
    assert report["user_values"] == ["the user", "the user", None, "the user"]
    assert report["agentrt"] and all(path.startswith(str(installed.site_packages / "agentrt")) for path in report["agentrt"])
    assert report["client"] == "agentrt.client._client" and report["error"] == "ConfigurationError"


def test_the_installed_store_creates_every_table_from_its_packaged_migrations(installed: Installed) -> None:
    probe = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from sqlalchemy import inspect, text\n"
        "import agentrt.store\n"
        "from agentrt.store import Store\n"
        "with Store.open(sys.argv[1]) as store, store.engine.connect() as conn:\n"
        "    tables = sorted(inspect(conn).get_table_names())\n"
        "    revision = conn.execute(text('SELECT version_num FROM alembic_version')).scalar_one()\n"
        "versions = Path(agentrt.store.__file__).parent / 'migrations' / 'versions'\n"
        "print(json.dumps({'tables': tables, 'revision': revision, 'store': agentrt.store.__file__,\n"
        "  'versions': sorted(p.name for p in versions.glob('*.py'))}))\n"
    )
    url = f"sqlite:///{installed.project / 'store.db'}"
    report = json.loads(installed.run(installed.python, "-c", probe, url).stdout)
    assert set(report["tables"]) >= {
        "alembic_version", "context_summaries", "effects", "events", "messages", "payloads", "sessions", "token_deltas", "usage_receipts",
    }
    repo_versions = sorted(p.name for p in (REPO_ROOT / "store" / "migrations" / "versions").glob("*.py"))
    assert report["store"].startswith(str(installed.site_packages / "agentrt" / "store"))
    assert report["versions"] == repo_versions
    assert report["revision"] == repo_versions[-1].split("_")[0]


async def test_the_installed_cli_runs_a_scripted_session_with_an_in_process_worker(
    installed: Installed, temporal_server: DevServer, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "README.md").write_text("# Demo project\n")
    script = write_script(tmp_path, [
        {"text": "Let me look.", "tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}]},
        {"text": ANSWER},
    ])
    env = installed.env(
        AGENTRT_TEMPORAL_ADDRESS=temporal_server.address,
        AGENTRT_TASK_QUEUE=f"wheel-{uuid.uuid4().hex[:8]}",
        AGENTRT_DATABASE_URL=f"sqlite:///{tmp_path / 'agentrt.db'}",
        AGENTRT_PRINCIPAL="alice",
    )
    agentrt = installed.venv / "bin" / "agentrt"
    result = await asyncio.to_thread(
        installed.run, agentrt, "run", "What does the README say?", "--workspace", workspace, "--script", script, env=env, timeout=120
    )
    assert ANSWER in result.stdout
    assert "running one in this process" in result.stderr
