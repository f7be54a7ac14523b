"""Shared fixtures: one real Temporal dev server per test run, a store, and a worker per test."""

from __future__ import annotations

import gc
import logging
import socket
import sys
import uuid
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator, Iterator

import hypothesis  # noqa: F401 - imported (and assertion-rewritten) at collection, see below
import pytest
from temporalio.client import Client, WorkflowHandle

from agentrt.activities.tools import default_registry
from agentrt.client import AgentClient, connect
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, DevServer, build_worker
from agentrt.workflows.session import SessionWorkflow
from tests._recorded import RECORDED_HISTORIES, export_recorded, run_dir, worker_ended, worker_started, xdist_worker

# hypothesis' pytest plugin imports hypothesis at the terminal summary if no test did; after
# Temporal's core threads ran, that late import's ast.parse can fail on CPython 3.11.7 with
# "AST constructor recursion depth mismatch". Importing it here keeps subset runs clean.
OWNER = "alice"


@pytest.fixture(scope="session", autouse=True)
def agentrt_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every test, and every process a test starts, keeps its agentrt files in a temporary
    AGENTRT_HOME, never in the user's ~/.agentrt, and reads no agentrt.toml of the user's.

    Default encryption is off (``AGENTRT_ENCRYPTION=off``): a command run in-process that made the
    machine's own keys in this shared home would change what every later configuration loads.
    Tests of the default give their processes a home of their own without that setting."""
    home = tmp_path_factory.mktemp("agentrt-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AGENTRT_HOME", str(home))
        patch.setenv("AGENTRT_ENCRYPTION", "off")
        for name in (
            "AGENTRT_CONFIG", "AGENTRT_DATABASE_URL", "AGENTRT_PAYLOAD_DRIVER", "AGENTRT_PAYLOAD_PATH",
            "AGENTRT_PAYLOAD_BUCKET", "AGENTRT_PAYLOAD_ENDPOINT_URL", "AGENTRT_PAYLOAD_REGION",
        ):
            patch.delenv(name, raising=False)
        yield home


@pytest.fixture(autouse=True)
def logging_as_it_was() -> Iterator[None]:
    """The ``agentrt`` and ``temporalio`` loggers as they were before the test: a command run
    in-process (``agentrt run``) sends them to a file and stops their propagation, which would
    hide a later test's records from ``caplog``."""
    loggers = [logging.getLogger(name) for name in ("agentrt", "temporalio")]
    kept = [(logger, logger.propagate, list(logger.handlers), logger.level) for logger in loggers]
    yield
    for logger, propagate, handlers, level in kept:
        for handler in logger.handlers:
            if handler not in handlers:
                handler.close()
        logger.propagate, logger.handlers[:] = propagate, handlers
        logger.setLevel(level)


@pytest.fixture(scope="session", autouse=True)
def xdist_worker_span(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Under pytest-xdist: this worker's start and end, marked in the run's shared directory for the
    replay test (tests/_recorded.py). Set up before, and so torn down after, every other fixture."""
    worker = xdist_worker(request.config)
    if worker is None:
        yield
        return
    worker_started(run_dir(tmp_path_factory), worker)
    yield
    worker_ended(run_dir(tmp_path_factory), worker)


@pytest.fixture(scope="session")
async def recorded_histories_export(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, temporal_client: Client, store_url: str
) -> AsyncIterator[None]:
    """Under pytest-xdist: when this worker's tests are done, and before its server stops, its recorded
    histories are written for the replay test, which may run in another worker."""
    yield
    worker = xdist_worker(request.config)
    if worker is not None:
        await export_recorded(run_dir(tmp_path_factory), worker, store_url)


@pytest.fixture(scope="session")
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("agentrt-state")


@pytest.fixture(scope="session")
async def temporal_server(state_dir: Path) -> AsyncIterator[DevServer]:
    # Per-workflow time skipping (temporalio.testing.TimeSkipper) for the autonomous task tests;
    # a workflow started without a time-skipping config runs on the wall clock as before.
    server = DevServer.on_free_ports(state_dir, ["--dynamic-config-value", "frontend.WorkflowTimeSkippingEnabled=true"])
    await server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
async def temporal_client(temporal_server: DevServer, store: Store, store_url: str) -> Client:
    # Harness workers run on this client: big payloads go to the test store.
    return await connect(temporal_server.address, plugin=AgentrtPlugin(AgentrtConfig(database_url=store_url), store))


@pytest.fixture(scope="session")
def store_url(state_dir: Path) -> str:
    return f"sqlite:///{state_dir / 'agentrt.db'}"


@pytest.fixture(scope="session")
def store(store_url: str) -> Store:
    return Store.open(store_url)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("# Demo project\n\nA small project used by tests.\n")
    (ws / "src").mkdir()
    (ws / "src" / "main.py").write_text("print('hello')\n")
    return ws


class Harness:
    """A worker on a fresh task queue plus clients for it; records every session it starts."""

    def __init__(self, temporal: Client, task_queue: str, config: AgentrtConfig, store: Store, server: DevServer) -> None:
        self.temporal = temporal
        self.task_queue = task_queue
        self.config = config
        self.store = store
        self.server = server
        self.client = AgentClient(temporal, task_queue=task_queue, principal=OWNER)
        self.session_ids: list[str] = []

    def as_principal(self, principal: str) -> AgentClient:
        return AgentClient(self.temporal, task_queue=self.task_queue, principal=principal)

    def client_on(self, task_queue: str) -> AgentClient:
        """A client of the owner for sessions on another task queue (a worker process's)."""
        return AgentClient(self.temporal, task_queue=task_queue, principal=OWNER)

    def handle(self, session_id: str) -> WorkflowHandle:
        return self.temporal.get_workflow_handle_for(SessionWorkflow.run, f"session-{session_id}")

    def new_session_id(self) -> str:
        session_id = uuid.uuid4().hex[:12]
        self.session_ids.append(session_id)
        return session_id

    @asynccontextmanager
    async def worker(self) -> AsyncIterator[None]:
        worker = build_worker(self.temporal, self.config, self.store, default_registry(), task_queue=self.task_queue)
        async with worker:
            yield


@pytest.fixture
async def harness(
    temporal_client: Client, temporal_server: DevServer, store: Store, store_url: str, recorded_histories_export: None
) -> AsyncIterator[Harness]:
    config = AgentrtConfig(temporal_address=temporal_server.address, task_queue=f"tq-{uuid.uuid4().hex[:8]}", database_url=store_url)
    h = Harness(temporal_client, config.task_queue, config, store, temporal_server)
    async with h.worker():
        yield h
    RECORDED_HISTORIES.extend(h.handle(s) for s in h.session_ids)


@pytest.fixture(scope="module", autouse=True)
def garbage_collected_and_frozen() -> None:
    """Before each module: what the modules before left is collected and the rest frozen, so that a
    full collection in a workflow thread scans only what this module made (see below)."""
    gc.collect()
    gc.freeze()


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (thousands of test items, every imported module) is moved out of the
    garbage collector's reach: a full collection that scanned it from a workflow thread on a loaded
    machine took over the SDK's 2 s deadlock bound (TMPRL1101, seen in a query of a graph)."""
    gc.collect()
    gc.freeze()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "replay_last: runs after every other test (replays their histories)")
    config.addinivalue_line("markers", "runs_first: a long test, handed out before the others so that it does not end the run late")


def module_fixtures(item: pytest.Item) -> list[str]:
    """The module-scoped fixtures ``item`` uses."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return sorted(name for name, defs in info.name2fixturedefs.items() if defs and defs[-1].scope == "module")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Long tests (marked runs_first) go out first and the replay test last: a long test handed out
    # near the end would hold the run open while the other processes sit idle.
    items.sort(key=lambda item: (item.get_closest_marker("replay_last") is not None, item.get_closest_marker("runs_first") is None))
    # Under `pytest -n N --dist loadgroup` the tests of a module that share a module-scoped fixture
    # (a built wheel, a server of their own) run in one worker, which sets the fixture up once.
    for item in items:
        if module_fixtures(item):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.partition("::")[0]))


# The repository's folders install as ``agentrt.<name>``; pytest puts the repository root on
# sys.path, so ``import schemas`` would quietly load a second copy of a package (other classes,
# other module state). A run in which that happened fails, naming what was loaded.
BARE_PACKAGES = frozenset({"activities", "cli", "client", "gateway", "schemas", "store", "worker", "workflows"})


def bare_modules_loaded() -> list[str]:
    """Modules in ``sys.modules`` loaded under a bare top-level name instead of ``agentrt.<name>``."""
    return sorted(name for name in list(sys.modules) if name.partition(".")[0] in BARE_PACKAGES)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    loaded = bare_modules_loaded()
    if not loaded:
        return
    message = (
        f"modules imported under a bare top-level name instead of agentrt.<name>: {', '.join(loaded)} "
        "(import them as agentrt.<name>)"
    )
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write("\n")
        reporter.write_sep("=", "bare top-level imports", red=True)
        reporter.write_line(message, red=True, bold=True)
    else:
        print(message, file=sys.stderr)
    if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def closed_port_url() -> Iterator[str]:
    """A loopback URL nothing listens on (connections are refused), the same for the whole run.

    Its port stays bound (never listening) until the run ends: a port given back at once was
    taken by a loopback provider a later test started, and a session still retrying against the
    "closed" URL took that provider's queued replies."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}"
