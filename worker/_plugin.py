"""AgentrtPlugin: the one object that makes a Temporal worker or replayer (and its client) speak agentrt.

Given to ``Client.connect(plugins=[...])`` it sets what ``AgentrtClientPlugin`` sets (the data
converter with external storage for big payloads, the interceptors); every ``Worker`` built on
that client inherits it and gets the workflows, the sandbox passthrough, the activities (when the
plugin has a store and a tool registry), the worker interceptors,
``workflow_failure_exception_types`` and an identity that advertises where the worker reads
payloads. ``Replayer(plugins=[...])`` gets the same converter, workflows, sandbox and failure
types, so a replay runs exactly what a worker runs.

The worker's part is ``AgentrtWorkerPlugin``: ``AgentrtPlugin`` holds one, and a worker built on a
client connected with the light ``AgentrtClientPlugin`` (worker/_client_plugin.py, what
``agentrt.client.connect`` uses) gets one of its own (``build_worker``).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import temporalio.client
import temporalio.worker
from temporalio.converter import StorageDriver
from temporalio.plugin import SimplePlugin
from temporalio.worker import ReplayerConfig, UnsandboxedWorkflowRunner, WorkerConfig
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from agentrt.activities import build_activities
from agentrt.activities.tools import Agent, Tool, ToolRegistry
from agentrt.schemas import (
    EFFECTS_RECONCILE,
    MEMORY_DECIDE,
    PROFILES_DESCRIBE,
    SESSION_WORKFLOW,
    STORE_APPEND,
    TOOL_EXECUTE,
    TOOLS_LIST,
)
from agentrt.store import Store
from agentrt.worker._agents import worker_registry
from agentrt.worker._secrets import check_secrets
from agentrt.worker._client_plugin import (
    PAYLOADS_IDENTITY_KEY,
    PLUGIN_NAME,
    AgentrtClientPlugin,
    payload_fingerprints_of,
    plugin_of,
)
from agentrt.worker._config import AgentrtConfig
from agentrt.worker._contract import ActivityContractInterceptor
from agentrt.worker._signal_guard import SignalArityGuard
from agentrt.worker._store_outage import StoreOutageInterceptor
from agentrt.worker._payloads import PayloadStorage
from agentrt.worker._query_guard import LegacyQueryGuard
from agentrt.worker._resume import ResumeInterceptor
from agentrt.worker._telemetry import sessions_awaiting_approval
from agentrt.workflows.autonomous import AutonomousTaskWorkflow
from agentrt.workflows.graph import TaskGraphWorkflow
from agentrt.workflows.session import SessionWorkflow

__all__ = [
    "AgentrtPlugin",
    "AgentrtWorkerPlugin",
    "PASSTHROUGH_MODULES",
    "PAYLOADS_IDENTITY_KEY",
    "WORKFLOWS",
    "payload_fingerprints_of",
    "plugin_of",
    "workflow_runner",
]

# The SDK's default number of activity slots, when a worker sets none.
DEFAULT_ACTIVITY_THREADS = 100
# Local activities a worker runs at once (store writes, tool listing, fast read-only tools),
# each with a thread of its own beside the activity threads.
LOCAL_ACTIVITY_SLOTS = 16
WORKFLOWS: list[type] = [SessionWorkflow, AutonomousTaskWorkflow, TaskGraphWorkflow]

# Modules the workflow sandbox shares with the worker instead of importing them afresh for
# every workflow run. Only modules that are deterministic and hold no mutable module state
# may be here: whatever passes through is shared by every workflow the worker runs.
# (pydantic and pydantic_core are passed through by the SDK's default restrictions already.)
PASSTHROUGH_MODULES = (
    # The pydantic models of every workflow input, result, state and event: plain data, no I/O.
    # Passed through so a model class is the same object inside and outside the sandbox (the
    # data converter builds instances outside) and is not rebuilt for every workflow run.
    "agentrt.schemas",
    # The policy engine: a pure decide(risk, approval, sandbox) over agentrt.schemas types.
    "agentrt.workflows.policy",
    # Context planning: pure, deterministic functions over agentrt.schemas types.
    "agentrt.workflows.context",
    # The session workflow's pure bookkeeping (inbox, approvals book, event journal, compaction
    # plans, tool-call triage, activity options, error reading): plain classes and functions
    # over agentrt.schemas types with no module state; the workflow holds their instances.
    "agentrt.workflows._activity_options",
    "agentrt.workflows._approvals",
    "agentrt.workflows._compaction",
    "agentrt.workflows._errors",
    "agentrt.workflows._inbox",
    "agentrt.workflows._journal",
    "agentrt.workflows._tool_calls",
    # JSON Schema validation of tool-call arguments (agentrt.schemas._validation): deterministic
    # library code (jsonschema, its referencing, and the compiled rpds under it). agentrt.schemas
    # imports them outside the sandbox already; listed so that workflow code importing them
    # directly shares those modules instead of importing the whole tree again for every run.
    "jsonschema",
    "referencing",
    "rpds",
)


def workflow_runner() -> LegacyQueryGuard:
    """The runner of agentrt's workers (the plugin's; also for test workflows): the sandboxed
    runner with agentrt's passthrough modules, inside ``LegacyQueryGuard``."""
    sandboxed = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH_MODULES))
    return LegacyQueryGuard(sandboxed)


class AgentrtWorkerPlugin(SimplePlugin):
    """The worker's part of agentrt: workflows, sandbox, activities and worker interceptors.

    - ``config`` (default ``AgentrtConfig()``): telemetry, and the activities' configuration.
    - ``store`` and ``registry``: with both, the plugin also carries the activities, so
      ``Worker(client, task_queue=...)`` runs sessions. Activities given to a ``Worker``
      explicitly replace the plugin's (a worker with another tool registry keeps exactly its own).
    - ``agents`` (``Agent``), ``tools`` (``@tool`` functions) and ``config.agent_modules``
      (``[worker] agents``): added to ``registry`` (default: the built-in tools; then the plugin
      carries activities given a ``store``); ``deps``: the factory of what tools read as
      ``ToolContext.deps`` (called once, on the worker; never serialized). See ``worker_registry``.
    - ``payload_storage``: what the worker's identity advertises it reads (default: that of the
      ``AgentrtClientPlugin`` the worker's client was connected with).

    Given to a ``Worker`` (``Worker(client, ..., plugins=[AgentrtWorkerPlugin(config, store)])``)
    whose client carries ``AgentrtClientPlugin``; ``AgentrtPlugin`` holds one.
    """

    def __init__(
        self,
        config: AgentrtConfig | None = None,
        store: Store | None = None,
        *,
        registry: ToolRegistry | None = None,
        agents: Sequence[Agent] = (),
        tools: Sequence[Tool] = (),
        deps: Callable[[], Any] | None = None,
        payload_storage: PayloadStorage | None = None,
    ) -> None:
        self.config = config or AgentrtConfig()
        self.store = store
        self.payload_storage = payload_storage
        if agents or tools or deps is not None or self.config.agent_modules:
            registry = worker_registry(registry, agents=agents, tools=tools, modules=self.config.agent_modules, deps=deps)
        self.registry = registry  # build_worker starts from it
        self._activities: list[Callable[..., Any]] = (
            build_activities(self.config, store, registry) if store is not None and registry is not None else []
        )
        super().__init__(
            PLUGIN_NAME + "-worker",
            activities=self._add_activities,
            workflows=self._add_workflows,
            workflow_runner=workflow_runner(),
            workflow_failure_exception_types=[],
        )

    def _add_activities(self, given: Sequence[Callable[..., Any]] | None) -> Sequence[Callable[..., Any]]:
        return list(given) if given else list(self._activities)

    @staticmethod
    def _add_workflows(given: Sequence[type] | None) -> Sequence[type]:
        # Appends each agentrt workflow once, so a worker that lists them too does not fail.
        given = list(given or [])
        return given + [w for w in WORKFLOWS if w not in given]

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        """See ``SimplePlugin``; also ``SignalArityGuard``: a replay drops the signals the worker dropped."""
        config = super().configure_replayer(config)
        config["interceptors"] = _with_signal_guard(config.get("interceptors"), config.get("workflows"))
        return config

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        """See ``SimplePlugin``. Also puts the runner of unsandboxed workflows inside ``LegacyQueryGuard``
        (the sandboxed one is there already), adds ``ResumeInterceptor`` (a call retried after a dead
        worker frees its session from that worker's sticky queue) and ``ActivityContractInterceptor``
        (activity calls carry this build's activity contract; one from a build outside it is refused;
        an interceptor of that class given to the worker is kept instead) and ``SignalArityGuard`` (a
        signal whose arguments its handler cannot take is dropped, not retried forever), appends ``agentrt-payloads=...`` to the worker's identity,
        gives a worker that runs the plugin's (synchronous) activities a thread pool for them
        when it has no activity executor, and adds no workflows to a worker given activities only."""
        adds_activities = not config.get("activities") and bool(self._activities)
        if adds_activities and self.registry is not None:
            check_secrets(self.registry, self.config)  # the plugin's activities run its tools here
        activities_only = bool(config.get("activities")) and not config.get("workflows")
        config = super().configure_worker(config)
        if activities_only:
            config["workflows"] = []  # a worker given only activities (e.g. tools on their own queue) stays so
        unsandboxed = config.get("unsandboxed_workflow_runner") or UnsandboxedWorkflowRunner()
        if not isinstance(unsandboxed, LegacyQueryGuard):  # runs workflows defined with sandboxed=False
            config["unsandboxed_workflow_runner"] = LegacyQueryGuard(unsandboxed)
        _warn_without_local_activities(config)
        if adds_activities and config.get("activity_executor") is None:
            slots = config.get("max_concurrent_activities") or DEFAULT_ACTIVITY_THREADS
            local = config.get("max_concurrent_local_activities") or LOCAL_ACTIVITY_SLOTS
            config["max_concurrent_local_activities"] = local  # threads for local activities beside the others
            config["activity_executor"] = concurrent.futures.ThreadPoolExecutor(max_workers=slots + local)
        client = config.get("client")
        interceptors = list(config.get("interceptors") or [])
        if client is not None and not any(isinstance(i, ResumeInterceptor) for i in interceptors):
            interceptors.append(ResumeInterceptor(client))
        if not any(isinstance(i, ActivityContractInterceptor) for i in interceptors):
            interceptors.append(ActivityContractInterceptor())  # activity calls across builds (_contract.py)
        if self.store is not None and not any(isinstance(i, StoreOutageInterceptor) for i in interceptors):
            interceptors.append(StoreOutageInterceptor(self.store))  # an unreachable store waited out (_store_outage.py)
        config["interceptors"] = _with_signal_guard(interceptors, config.get("workflows"))
        storage = self.payload_storage
        if storage is None and client is not None:
            connected = plugin_of(client)
            storage = connected.payload_storage if connected is not None else None
        base = config.get("identity") or (client.identity if client is not None else None) or f"{os.getpid()}@{socket.gethostname()}"
        if storage is not None and PAYLOADS_IDENTITY_KEY + "=" not in base:
            config["identity"] = f"{base} {PAYLOADS_IDENTITY_KEY}={','.join(storage.reader_fingerprints)}"
        return config

    async def run_worker(self, worker: temporalio.worker.Worker, next: Callable[[temporalio.worker.Worker], Awaitable[None]]) -> None:
        """See ``SimplePlugin``. With telemetry on, a worker that runs sessions reports how many
        of its task queue's sessions wait for an approval while it runs."""
        if not self.config.telemetry.enabled or SessionWorkflow not in (worker.config().get("workflows") or []):
            await super().run_worker(worker, next)
            return
        with sessions_awaiting_approval.watching(worker.client, worker.task_queue):
            await super().run_worker(worker, next)


class AgentrtPlugin(AgentrtClientPlugin):
    """The data converter, workflows, sandbox, activities and interceptors of agentrt, in one plugin:
    ``AgentrtClientPlugin`` (converter, payload storage, codec, interceptors) and the
    ``AgentrtWorkerPlugin`` it holds as ``worker_plugin`` (workflows, activities, sandbox, worker
    interceptors).

    - ``config`` (default ``AgentrtConfig()``) decides where big payloads go (``[payloads]``,
      ``[store] url``); ``store`` is the open store the store driver and the activities use
      (without it the store driver opens ``config.database_url`` on first use);
      ``driver`` replaces the configured payload writer (e.g. the SDK's S3 driver).
    - ``registry``: with a ``store`` and a tool registry the plugin also carries the
      activities, so ``Worker(client, task_queue=...)`` on a client connected with it runs
      sessions. Activities given to a ``Worker`` explicitly replace the plugin's (a worker
      with another tool registry keeps exactly its own); ``build_worker`` does that.
    - ``agents``, ``tools``, ``deps``: the user's agents, tools and their dependencies, as
      ``AgentrtWorkerPlugin`` takes them.
    - ``interceptors``: client and worker interceptors (none by default).
    - ``config.telemetry`` on (``[telemetry] enabled``, ``AGENTRT_TELEMETRY=1``): installs the
      process's tracer and meter providers unless it has some (``setup_telemetry``), and adds
      Temporal's ``TracingInterceptor`` (unless ``interceptors`` has one) and ``EventMeasures``;
      a worker that runs sessions reports ``agentrt.sessions.awaiting_approval`` while it runs.

    ``workflow_failure_exception_types`` is empty on purpose: an exception a workflow does
    not expect (a bug, a ``TypeError``, a non-determinism error) fails the *workflow task*,
    which Temporal retries, so the session waits for a fixed worker and then carries on; it
    never fails the session and its history. The session workflow turns the failures it
    expects into outcomes (a failed turn, a denied call) itself.
    """

    def __init__(
        self,
        config: AgentrtConfig | None = None,
        store: Store | None = None,
        *,
        registry: ToolRegistry | None = None,
        agents: Sequence[Agent] = (),
        tools: Sequence[Tool] = (),
        deps: Callable[[], Any] | None = None,
        driver: StorageDriver | None = None,
        interceptors: Sequence[temporalio.client.Interceptor | temporalio.worker.Interceptor] = (),
    ) -> None:
        super().__init__(config, store, driver=driver, interceptors=interceptors)
        self.worker_plugin = AgentrtWorkerPlugin(
            self.config, store, registry=registry, agents=agents, tools=tools, deps=deps, payload_storage=self.payload_storage
        )

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        """The client part's worker settings (interceptors, failure types), then the worker part's."""
        return self.worker_plugin.configure_worker(super().configure_worker(config))

    def configure_replayer(self, config: ReplayerConfig) -> ReplayerConfig:
        """The client part's replayer settings (converter, interceptors), then the worker part's (workflows, runner)."""
        return self.worker_plugin.configure_replayer(super().configure_replayer(config))

    async def run_worker(self, worker: temporalio.worker.Worker, next: Callable[[temporalio.worker.Worker], Awaitable[None]]) -> None:
        """See ``AgentrtWorkerPlugin.run_worker``."""
        await self.worker_plugin.run_worker(worker, next)


# What a session runs as local activities, on the worker that runs its workflow task.
LOCAL_ACTIVITY_NAMES = (STORE_APPEND, TOOLS_LIST, PROFILES_DESCRIBE, EFFECTS_RECONCILE, TOOL_EXECUTE, MEMORY_DECIDE)


def _with_signal_guard(interceptors: Sequence[Any] | None, workflows: Sequence[type] | None) -> list[Any]:
    """``interceptors`` with a ``SignalArityGuard`` of ``workflows`` (a signal its handler cannot take
    is dropped, _signal_guard.py), unless one is there already."""
    given = list(interceptors or [])
    if any(isinstance(i, SignalArityGuard) for i in given):
        return given
    return given + [SignalArityGuard(list(workflows or []))]


def _warn_without_local_activities(config: WorkerConfig) -> None:
    """Log when a worker runs sessions without the activities they run locally (no store given)."""
    if SessionWorkflow not in (config.get("workflows") or []):
        return
    names = {getattr(a, "__temporal_activity_definition").name for a in config.get("activities") or []}
    missing = [name for name in LOCAL_ACTIVITY_NAMES if name not in names]
    if missing == [TOOL_EXECUTE]:
        return  # a models or workflows worker: its sessions' tool calls run on a tools queue
    if missing:
        logging.getLogger(__name__).warning(
            "this worker runs %s without the activities its sessions run as local activities (%s): their "
            "workflow tasks fail until it has them; give AgentrtPlugin a store (AgentrtPlugin(config, store))",
            SESSION_WORKFLOW,
            ", ".join(missing),
        )
