"""The one connection factory: every agentrt client connects with an agentrt plugin.

The plugin carries the data converter, including the payload codec and the external storage for
big payloads. By default it is the light ``AgentrtClientPlugin``, which imports no workflow or
activity; a process that also runs a worker on the same client passes ``AgentrtPlugin`` (the
workflows and activities too). A worker built on a client inherits the client's plugins, so that
converter decides where big payloads go; a client that reads what a worker wrote needs the same
storage.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from temporalio.client import Client
from temporalio.common import Priority

from agentrt.schemas import AdvisorPolicy, ConfigurationError, LaneKind, Lanes, QuotaPolicy
from agentrt.store import Store
from agentrt.worker import AgentrtClientPlugin, AgentrtConfig

__all__ = ["DECISION_GRACE_SECONDS", "DECISION_SECONDS", "MAX_DECISION_SECONDS", "Connection", "connect"]

# How long a task's or graph's update may wait for a worker to take it (seconds), by default: its
# ``expires_at``. The client waits DECISION_GRACE_SECONDS more for the answer (clock skew, the
# answer on its way), so by default it answers within the gateway's bound of a session update (60 s).
DECISION_SECONDS = 50.0
DECISION_GRACE_SECONDS = 5.0
MAX_DECISION_SECONDS = 3600.0


@dataclass
class Connection:
    """What the sub-clients of one ``AgentClient`` share: the Temporal client, the task queue its
    sessions, tasks and graphs start on, the principal it acts as, the store (None: the query paths
    only), and the settings of what it starts (the sessions' ``advisor`` and ``mcp_servers``; the
    tasks' and graphs' ``default_profile``, ``operators`` and ``tool_task_queue``; the
    ``model_task_queue`` of all it starts).
    ``readable``: the running workflows (sessions, tasks, graphs) this principal was found allowed
    to see, by workflow id, until when (``time.monotonic()``) that answer is believed (``check_visible``).
    ``quotas``: the tenants' quotas every start is checked against (``[quotas]``, ``[tenants]``).
    ``lanes``: the priority and fairness key every start sets (``[lanes]``; ``lane``).
    ``decision_seconds``: how long a decision on a task or graph waits for a worker to take it
    before it expires, never to be applied (``WorkflowKind.update``); ``virtual_clock``: the
    workflows run on a virtual clock (a time-skipping test server), whose time runs ahead of the
    client's, so decisions carry no expiry (one no worker took in time may be applied later)."""

    temporal: Client
    task_queue: str
    principal: str
    store: Store | None
    advisor: AdvisorPolicy
    mcp_servers: list[str]
    default_profile: str
    operators: list[str]
    tool_task_queue: str | None
    model_task_queue: str | None = None
    readable: dict[str, float] = field(default_factory=dict)
    quotas: QuotaPolicy = field(default_factory=QuotaPolicy)
    lanes: Lanes = field(default_factory=Lanes)
    decision_seconds: float = DECISION_SECONDS
    virtual_clock: bool = False

    def lane(self, kind: LaneKind, owner: str) -> Priority:
        """The Temporal priority of a start of ``kind`` (``interactive``, ``task``, ``graph``) owned by
        ``owner``: its lane's priority key, and ``owner``'s tenant (``[tenants]``) or ``owner`` as the
        fairness key, as ``lanes`` says."""
        return self.lanes.priority(kind, owner, self.quotas.tenant_of(owner))

    def needs_store(self, method: str) -> Store:
        """The store; ``ConfigurationError`` naming ``AgentClient.<method>`` when the client has none."""
        if self.store is None:
            raise ConfigurationError(f"AgentClient.{method} needs the store: pass store=Store.open(url)")
        return self.store


async def connect(address: str, namespace: str = "default", *, plugin: AgentrtClientPlugin | None = None) -> Client:
    """Connect to the Temporal frontend at ``address`` (``host:port``) with ``plugin``.

    ``plugin`` is normally ``AgentrtClientPlugin(config, store)`` for the process's configuration
    and open store (or ``AgentrtPlugin(config, store)``, its subclass, for a client that workers
    are built on). Without it, the plugin is ``AgentrtClientPlugin(AgentrtConfig.load())``
    (``$AGENTRT_CONFIG``, ``./agentrt.toml`` or ``$AGENTRT_HOME/agentrt.toml``, plus
    environment): the configuration an ``agentrt worker`` on the same machine reads, so both
    store and find big payloads in the same place; its store is opened only when a payload
    needs it.

    Raises ``RuntimeError`` from the SDK when nothing answers at ``address``, and
    ``schemas.ConfigurationError`` when the default configuration cannot be read.
    """
    if plugin is None:
        plugin = AgentrtClientPlugin(AgentrtConfig.load())
    return await Client.connect(address, namespace=namespace, plugins=[plugin])
