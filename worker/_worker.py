"""The worker process: hosts the session, task and graph workflows and their activities on one task
queue, or a part of them (models only, tools only) on queues of their own."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
from contextlib import asynccontextmanager
from datetime import timedelta
from collections.abc import Callable, Sequence
from typing import Any, AsyncIterator

from temporalio.client import Client
from temporalio.common import VersioningBehavior
from temporalio.worker import Worker, WorkerDeploymentConfig, WorkerDeploymentVersion

from agentrt.activities import WORKER_PROCESS, WorkerRole, build_activities
from agentrt.activities.mcp import McpManager
from agentrt.activities.tools import Agent, SecretVault, Tool, ToolRegistry, cgroup_problem, sandbox_status
from agentrt.schemas import ConfigurationError
from agentrt.store import Store, agentrt_home
from agentrt.worker._agents import worker_registry
from agentrt.worker._at_rest import encrypt_store, open_store
from agentrt.worker._config import DEFAULT_STICKY_SCHEDULE_TO_START_SECONDS, AgentrtConfig
from agentrt.worker._plugin import LOCAL_ACTIVITY_SLOTS, WORKFLOWS, AgentrtPlugin, AgentrtWorkerPlugin, plugin_of
from agentrt.worker._secrets import check_secrets
from agentrt.worker._startup import ensure_search_attributes
from agentrt.worker._stuck_watch import StuckWatch
from agentrt.worker._telemetry import flush_telemetry
from agentrt.worker._upgrades import Upgrades

log = logging.getLogger("agentrt.worker")

# The SDK sends an activity's heartbeats at most every 80% of its heartbeat timeout (30 s by
# default here), and a cancellation reaches a running activity only in the answer to a sent
# heartbeat: a cancelled turn's model call would run on for ~24 s. Sending at most one
# heartbeat per second bounds that delay to about a second, for one small RPC per second
# per running activity.
HEARTBEAT_THROTTLE = timedelta(seconds=1)


# A workflow task left for a worker that died moves to the task queue after this (the SDK's
# default is 10 s), unless the call that schedules it was retried after the dead worker
# (``ResumeInterceptor`` resets the sticky queue then). A live worker takes its sticky tasks
# within milliseconds; one so loaded that it does not within this bound lets another worker
# replay the session instead. ``[worker] sticky_schedule_to_start_seconds`` sets it.
STICKY_SCHEDULE_TO_START = timedelta(seconds=DEFAULT_STICKY_SCHEDULE_TO_START_SECONDS)


# Payloads of one workflow task stored or read one after another. Above 1 the SDK visits each
# payload of every activation and completion in an asyncio task of its own, which at 100
# sessions at once cost several percent of the worker's CPU; big payloads are rare in a task.
EXTERNAL_STORAGE_CONCURRENCY = 1


# What a worker without codec keys says when it starts.
CLEAR_HISTORY_WARNING = (
    "history is in clear: this worker has no codec keys, so prompts, model answers, tool arguments and tool "
    "results (a `cat .env` too) are written readable into Temporal history (the UI, `temporal workflow show`, "
    "anyone with namespace access) and into the store. Turn encryption on: `agentrt codec-server --generate-key`, "
    "then [codec] keys_file or AGENTRT_CODEC_KEYS for every worker and client (docs/encryption.md)"
)


def check_role(config: AgentrtConfig, role: WorkerRole) -> None:
    """Raise ``ConfigurationError`` when ``config`` cannot serve a worker of ``role``: a
    models-only or workflows-only worker needs ``tool_task_queue``, where its sessions' tool calls
    go; a workflows-only or providers-only worker needs ``model_task_queue``, where their model
    calls go (a distinct one: the workflows-only worker's own queue would get them back)."""
    if role in ("models", "workflows") and not config.tool_task_queue:
        raise ConfigurationError(
            f"a {role}-only worker needs [temporal] tool_task_queue (or AGENTRT_TOOL_TASK_QUEUE): "
            "the task queue its sessions' tool calls go to, served by `agentrt worker --tools-only`"
        )
    if role in ("workflows", "providers") and not config.model_task_queue:
        raise ConfigurationError(
            f"a {role}-only worker needs [temporal] model_task_queue (or AGENTRT_MODEL_TASK_QUEUE): "
            "the task queue its sessions' model calls go to, served by `agentrt worker --providers-only`"
        )
    if role in ("workflows", "providers") and config.model_task_queue == config.task_queue:
        raise ConfigurationError(
            f"[temporal] model_task_queue is the task queue itself ({config.task_queue!r}): give model calls a queue "
            "of their own for `agentrt worker --providers-only`"
        )


# Temporal's limit on a deployment name's and a build id's size (bytes; the server's default), and
# the build id it keeps for unversioned workers.
MAX_DEPLOYMENT_NAME_BYTES = 255
UNVERSIONED_BUILD_ID = "__unversioned__"


def check_deployment_version(version: WorkerDeploymentVersion) -> None:
    """Raise ``ConfigurationError`` for a deployment name or build id Temporal would not register
    (a worker polling as it would never take a run): empty, over ``MAX_DEPLOYMENT_NAME_BYTES``, a
    ``.`` in the name or a leading ``__`` (Temporal's reserved names), the build id ``__unversioned__``; or that agentrt cannot put in a
    visibility query (a backslash) or a log line (a control character, surrounding spaces)."""
    for what, value in (("deployment name", version.deployment_name), ("build id", version.build_id)):
        problem = (
            "is empty" if not value
            else f"is longer than {MAX_DEPLOYMENT_NAME_BYTES} bytes" if len(value.encode()) > MAX_DEPLOYMENT_NAME_BYTES
            else "holds a backslash" if "\\" in value
            else "holds a control character" if any(ord(c) < 32 or ord(c) == 127 for c in value)
            else "begins or ends with a space" if value != value.strip()
            else None
        )
        if problem is not None:
            raise ConfigurationError(f"{what} {value[:80]!r} {problem}")
    if "." in version.deployment_name:
        raise ConfigurationError(f"deployment name {version.deployment_name!r} holds a '.': Temporal does not allow one")
    if version.build_id == UNVERSIONED_BUILD_ID:
        raise ConfigurationError(f"build id {UNVERSIONED_BUILD_ID!r} is Temporal's name for unversioned workers")
    if version.deployment_name.startswith("__"):
        # The server refuses it ("WorkerDeploymentName cannot start with '__'"): the version is never registered.
        raise ConfigurationError(f"deployment name {version.deployment_name[:80]!r} begins with '__': Temporal reserves such names")


class AgentrtWorker(Worker):
    """A Temporal ``Worker`` that owns the process's MCP servers (``mcp``, an ``McpManager``):
    ``run()`` (and ``async with``) starts the eager ones first, stops those an operator revokes while
    it runs (``McpManager.watch_revocations``) and stops every server the worker started once it
    has shut down. A worker that runs workflows also logs the ones of its
    task queue that are stuck on a failing workflow task (``StuckWatch``) and, when it is a
    Worker Deployment Version, wakes the runs pinned to older builds while its own is current
    (``Upgrades``)."""

    def __init__(self, *args: Any, mcp: McpManager, registry: ToolRegistry, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mcp = mcp
        self.registry = registry  # its tools, agents and ToolRuntime

    async def run(self) -> None:
        await self.mcp.start()
        watches: list[asyncio.Task[None]] = [asyncio.create_task(self.mcp.watch_revocations())]  # stops revoked servers
        if self.config().get("workflows"):
            watches.append(asyncio.create_task(StuckWatch(self.client, self.task_queue).run()))
            deployment = self.config().get("deployment_config")
            if deployment is not None:
                watches.append(asyncio.create_task(Upgrades(self.client, deployment.version).run()))
        try:
            await super().run()
        finally:
            for watch in watches:
                watch.cancel()
            await self.mcp.close()
            plugin = plugin_of(self.client)
            if plugin is not None:
                await plugin.payload_storage.aclose()  # e.g. the s3 driver's client of this loop


def build_worker(
    client: Client,
    config: AgentrtConfig,
    store: Store,
    registry: ToolRegistry | None = None,
    *,
    task_queue: str | None = None,
    max_concurrent_activities: int | None = None,
    max_concurrent_workflow_tasks: int | None = None,
    max_cached_workflows: int | None = None,
    sticky_queue_schedule_to_start_timeout: timedelta | None = None,
    role: WorkerRole = "all",
    mcp: McpManager | None = None,
    agents: Sequence[Agent] = (),
    tools: Sequence[Tool] = (),
    deps: Callable[[], Any] | None = None,
    graceful_shutdown: timedelta = timedelta(0),
    deployment: WorkerDeploymentVersion | None = None,
) -> AgentrtWorker:
    """A worker for ``task_queue`` (default ``config.task_queue``) running the activities for
    ``config``, ``store`` and ``registry`` (default ``default_registry()``).

    ``max_concurrent_activities`` bounds the activities running at once and sizes the thread
    pool of the synchronous ones (tools, tool listing) (None: ``config.max_concurrent_activities``,
    32 unless ``[worker]`` says otherwise); ``max_concurrent_workflow_tasks`` bounds
    the workflow tasks it holds at once (None: ``config.max_concurrent_workflow_tasks``, else the SDK's default, 100): they share one Python
    process, so a worker that holds fewer leaves the rest waiting on the server's task queue, where
    lanes order them (docs/lanes.md); ``max_cached_workflows`` is the
    sticky cache (None: ``config.max_cached_workflows``, 1000 unless ``[worker]`` says otherwise): a
    session evicted from it replays its history on its next workflow task. ``sticky_queue_schedule_to_start_timeout`` (default
    ``config.sticky_schedule_to_start_seconds``, 3 s) is how long a session's next workflow task
    waits for this worker before any worker may take it (and replay the session): after this
    worker dies, how long its sessions wait at most before another worker takes them on.

    ``role``: ``all`` runs sessions and every activity; ``models`` runs sessions and every
    activity but their tool calls, for sessions whose ``tool_task_queue`` is served elsewhere
    (``ConfigurationError`` when ``config.tool_task_queue`` is not set); ``tools`` runs only
    tool calls, on ``config.tool_task_queue`` (default ``task_queue``), and no workflow;
    ``providers`` runs only model calls, on ``config.model_task_queue``, and no workflow;
    ``workflows`` runs sessions, tasks and graphs and every activity but model and tool calls
    (``check_role`` says what each role needs configured).

    ``client`` must be connected with ``AgentrtPlugin`` or ``AgentrtClientPlugin``
    (``agentrt.client.connect`` uses the latter): the worker inherits from it the data converter
    that decides where big payloads go, and gets the workflows, the sandbox and its identity from
    ``AgentrtPlugin`` (or an ``AgentrtWorkerPlugin`` of its own). Raises ``ConfigurationError`` otherwise.

    ``mcp``: the process's MCP servers (default: an ``McpManager`` of ``config.mcp_servers`` and of
    the servers operators add or change at run time in ``store``, none for ``models``, recording
    their events in ``store``); the worker starts and stops them with itself.

    The secrets the tools and MCP servers declare must be in ``config.secrets``' sources
    (``check_secrets``): ``SecretsMissing`` names those that are not.

    ``agents``, ``tools`` and ``deps``: the user's agents, ``@tool`` functions and their
    dependencies' factory, added to ``registry`` (default: the registry of the client's
    ``AgentrtPlugin``, else ``default_registry()``) with those of ``config.agent_modules``
    (``worker_registry``); a session naming an agent or tool the worker lacks fails at its start.

    With ``[codec]`` keys, a ``store`` opened without a cipher gets theirs (``encrypt_store``): the
    worker never writes a session's content to the store in clear while it encrypts history.

    ``graceful_shutdown`` (Temporal's ``graceful_shutdown_timeout``): on shutdown the worker stops
    polling and lets the model and tool calls it runs finish for up to this long before it cancels
    them (their retries then run on another worker; an effectful one asks for a reconcile). Zero,
    the default, cancels them at once.

    ``deployment`` (Temporal's Worker Deployment Versioning, a deployment name and a build id):
    the worker polls as that version, and every session, task and graph it starts is ``PINNED`` to
    it: the run lives on the build that started it, whatever version is made current later, so a
    deploy never changes the code under a running agent (docs/deployment.md). None: unversioned.
    ``ConfigurationError`` for a name or build id Temporal would not register (``check_deployment_version``).
    """
    if deployment is not None:
        check_deployment_version(deployment)
    encrypt_store(store, config.codec)
    connected = plugin_of(client)
    if connected is None:
        raise ConfigurationError(
            "build_worker needs a client connected with AgentrtPlugin "
            "(agentrt.client.connect(address, namespace, plugin=AgentrtPlugin(config, store)))"
        )
    # Local activities (tool listing, fast tools) share the pool: threads for both, so 32 long
    # shell commands never leave a session's tool listing waiting for a thread.
    check_role(config, role)
    if registry is None and isinstance(connected, AgentrtPlugin):
        registry = connected.worker_plugin.registry
    registry = worker_registry(registry, agents=agents, tools=tools, modules=config.agent_modules, deps=deps)
    check_secrets(registry, config, role)
    own_queue = {"tools": config.tool_task_queue or config.task_queue, "providers": config.model_task_queue}.get(role)
    queue = task_queue or own_queue or config.task_queue
    if max_concurrent_activities is None:
        max_concurrent_activities = config.max_concurrent_activities
    executor = concurrent.futures.ThreadPoolExecutor(max_workers=max_concurrent_activities + LOCAL_ACTIVITY_SLOTS)
    if mcp is None:
        # A worker that runs no tool call starts no server (not even an eager one).
        servers = config.mcp_servers if role in ("all", "tools") else {}
        mcp = McpManager(
            servers,
            store=store,
            worker=WORKER_PROCESS,
            home=agentrt_home(),
            vault=SecretVault(config.secrets),
            egress_allow=getattr(config, "egress_allow", ()),
            runtime_servers=role in ("all", "tools"),
        )
    return AgentrtWorker(
        client,
        mcp=mcp,
        registry=registry,
        task_queue=queue,
        workflows=[] if role in ("tools", "providers") else WORKFLOWS,
        activities=build_activities(config, store, registry, role, mcp=mcp),
        activity_executor=executor,
        max_concurrent_activities=max_concurrent_activities,
        max_concurrent_workflow_tasks=(
            max_concurrent_workflow_tasks if max_concurrent_workflow_tasks is not None else config.max_concurrent_workflow_tasks
        ),
        max_concurrent_local_activities=LOCAL_ACTIVITY_SLOTS,
        max_cached_workflows=max_cached_workflows if max_cached_workflows is not None else config.max_cached_workflows,
        sticky_queue_schedule_to_start_timeout=sticky_queue_schedule_to_start_timeout
        or timedelta(seconds=config.sticky_schedule_to_start_seconds),
        max_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        default_heartbeat_throttle_interval=HEARTBEAT_THROTTLE,
        max_workflow_task_external_storage_concurrency=EXTERNAL_STORAGE_CONCURRENCY,
        graceful_shutdown_timeout=graceful_shutdown,
        deployment_config=None if deployment is None else WorkerDeploymentConfig(
            version=deployment, use_worker_versioning=True, default_versioning_behavior=VersioningBehavior.PINNED,
        ),
        # A client connected with the light AgentrtClientPlugin (agentrt.client.connect) lacks the worker's part.
        plugins=[] if isinstance(connected, AgentrtPlugin) else [AgentrtWorkerPlugin(config, store)],
    )


@asynccontextmanager
async def running_worker(
    client: Client, config: AgentrtConfig, store: Store | None = None, registry: ToolRegistry | None = None,
    *, role: WorkerRole = "all", agents: Sequence[Agent] = (), tools: Sequence[Tool] = (), deps: Callable[[], Any] | None = None,
    graceful_shutdown: timedelta = timedelta(0), deployment: WorkerDeploymentVersion | None = None,
) -> AsyncIterator[Worker]:
    """Run a worker in this process for the duration of the ``async with`` block.

    First makes sure the namespace has the search attributes sessions write (registering
    missing ones; ``MissingSearchAttributes`` when it cannot), then polls. The worker logs
    where it stores and reads big payloads, and whether the OS sandbox (bubblewrap) runs here.
    Once it has stopped, it flushes the process's telemetry (``flush_telemetry``) and stops the
    event loop of its async tools. ``agents``, ``tools``, ``deps``, ``graceful_shutdown``,
    ``deployment``: as ``build_worker`` takes them.
    """
    plugin = plugin_of(client)
    own_store = store is None
    store = store or open_store(config)
    try:
        await ensure_search_attributes(client)
        worker = build_worker(
            client, config, store, registry, role=role, agents=agents, tools=tools, deps=deps,
            graceful_shutdown=graceful_shutdown, deployment=deployment,
        )
    except BaseException:
        if own_store:
            store.close()
        raise
    if plugin is not None:
        log.info("payload storage: %s", plugin.payload_storage.describe())
    keys = [p.api_key_env for p in config.profiles.values() if p.api_key_env and os.environ.get(p.api_key_env)]
    if role in ("tools", "workflows") and keys:
        log.warning(
            "this %s-only worker's environment holds provider keys (%s): it sends no model call, so run it without them%s",
            role, ", ".join(sorted(set(keys))), ", so that no tool call can reach them" if role == "tools" else "",
        )
    if not config.codec.enabled:
        log.warning(CLEAR_HISTORY_WARNING)
    sandbox = await asyncio.to_thread(sandbox_status)
    if sandbox.available:
        log.info("OS sandbox for shell.run: bubblewrap at %s", sandbox.path)
        cgroup = getattr(config, "sandbox_cgroup", None)
        problem = cgroup_problem(cgroup) if cgroup else None
        if cgroup and problem:
            log.warning("[sandbox] cgroup: %s; sandboxed commands are refused until it is fixed", problem)
        elif cgroup:
            log.info("a cgroup per sandboxed command under %s (memory and processes of the whole call)", cgroup)
        if os.geteuid() == 0:
            log.warning(
                "this worker runs as root: the kernel does not hold root to a sandboxed command's process limit "
                "(RLIMIT_NPROC), and its commands act as root on workspace files; run the worker as an unprivileged user"
            )
    else:
        log.warning(
            "no OS sandbox on this worker (%s): shell.run refuses to run in sessions whose sandbox is read_only or "
            "workspace_write, and runs unconfined only where a session chose danger_full_access",
            sandbox.reason,
        )
    task = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        await worker.shutdown()
        try:
            await task
        except Exception:  # noqa: BLE001 - shutdown errors are logged, not raised over the caller's error
            log.exception("worker stopped with an error")
        # The last spans and measurements leave now: the `agentrt` command exits without atexit handlers.
        await asyncio.to_thread(flush_telemetry)
        await asyncio.to_thread(worker.registry.runtime.close)
        if own_store:
            store.close()
