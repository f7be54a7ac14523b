"""Worker and client configuration: agentrt.toml plus environment overrides, found the same way by
every process on a machine (``$AGENTRT_CONFIG``, ``./agentrt.toml``, ``$AGENTRT_HOME/agentrt.toml``)."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any, Mapping

from pydantic import ValidationError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from agentrt.schemas import (
    AdvisorPolicy,
    ConfigurationError,
    Lanes,
    McpServerConfig,
    ModelProfile,
    QuotaPolicy,
    SecretsConfig,
    UnknownProfileError,
)
from agentrt.store import agentrt_home
from agentrt.worker._at_rest import encryption_setting, home_codec
from agentrt.worker._codec import CodecConfig, codec_config
from agentrt.worker._gateway_config import GatewayConfig, gateway_config
from agentrt.worker._payload_config import PAYLOAD_KEYS, PayloadConfig, payload_config, payload_env
from agentrt.worker._quota_config import quota_policy
from agentrt.worker._telemetry import TelemetryConfig, telemetry_config

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "agentrt"
CONFIG_FILE_NAME = "agentrt.toml"
TOP_LEVEL_KEYS = {
    "default_profile", "profiles", "temporal", "store", "payloads", "principals", "advisor", "mcp", "skills",
    "gateway", "telemetry", "codec", "worker", "secrets", "sandbox", "quotas", "tenants", "lanes",
}
ADVISOR_KEYS = {"mode", "profile", "timeout_seconds"}
TEMPORAL_KEYS = {"address", "namespace", "task_queue", "tool_task_queue", "model_task_queue"}

# Always available: the offline scripted model (a script file is given per session with --script).
BUILTIN_PROFILES = {
    "scripted": ModelProfile(name="scripted", provider="scripted", model="scripted", context_window=200_000),
}


def _problems(err: ValidationError, where: str) -> str:
    """``err``'s problems on one line: ``field: message; ...`` (``where`` for the table itself)."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or where}: {e['msg']}" for e in err.errors())


def _advisor_policy(raw: Mapping[str, Any], file: Path | None, profiles: Mapping[str, ModelProfile]) -> AdvisorPolicy:
    """The ``[advisor]`` table: a valid ``AdvisorPolicy`` whose ``profile`` is a configured one."""
    try:
        policy = AdvisorPolicy(**raw)
    except ValidationError as err:
        problems = _problems(err, "advisor")
        raise ConfigurationError(f"{file}: [advisor] is invalid: {problems}") from err
    if policy.profile is not None and policy.profile not in profiles:
        raise UnknownProfileError(policy.profile, list(profiles), f"[advisor] profile in {file}")
    return policy


def _lanes(raw: object, file: Path | None) -> Lanes:
    """The ``[lanes]`` table: priority keys per kind (1 to 5), the fairness key's source and weights."""
    if not isinstance(raw, dict):
        raise ConfigurationError(f"{file}: lanes must be a table ([lanes]), not {raw!r}")
    unknown = sorted(set(raw) - set(Lanes.model_fields))
    if unknown:
        raise ConfigurationError(
            f"{file}: [lanes] has unknown setting(s) {', '.join(unknown)}; known: {', '.join(Lanes.model_fields)}"
        )
    try:
        return Lanes.model_validate(raw)
    except ValidationError as err:
        raise ConfigurationError(f"{file}: [lanes] is invalid: {_problems(err, 'lanes')}") from err


def _mcp_servers(raw: object, file: Path | None) -> dict[str, McpServerConfig]:
    """The ``[mcp.servers.NAME]`` tables: a valid ``McpServerConfig`` each (a relative ``cwd`` or
    ``read_paths`` entry is taken from the file's directory)."""
    if not isinstance(raw, dict) or set(raw) - {"servers"}:
        raise ConfigurationError(f"{file}: [mcp] holds only [mcp.servers.NAME] tables, not {raw!r}")
    servers = raw.get("servers", {})
    if not isinstance(servers, dict):
        raise ConfigurationError(f"{file}: [mcp.servers] must be a table of servers, not {servers!r}")
    found: dict[str, McpServerConfig] = {}
    for name, table in servers.items():
        if not isinstance(table, dict):
            raise ConfigurationError(f"{file}: [mcp.servers.{name}] must be a table, not {table!r}")
        try:
            config = McpServerConfig(name=name, **table)
        except (ValidationError, TypeError) as err:
            problems = _problems(err, name) if isinstance(err, ValidationError) else str(err)
            raise ConfigurationError(f"{file}: [mcp.servers.{name}] is invalid: {problems}") from err
        updates: dict[str, Any] = {"read_paths": [str(_beside(file, Path(p).expanduser())) for p in config.read_paths]}
        if config.cwd is not None:
            updates["cwd"] = str(_beside(file, Path(config.cwd).expanduser()))
        found[name] = config.model_copy(update=updates)
    return found


def _secrets_config(raw: object, file: Path | None) -> SecretsConfig:
    """The ``[secrets]`` table: a valid ``SecretsConfig`` (a relative ``path`` is taken from the file's directory)."""
    if not isinstance(raw, dict):
        raise ConfigurationError(f"{file}: secrets must be a table ([secrets]), not {raw!r}")
    try:
        config = SecretsConfig(**raw)
    except (ValidationError, TypeError) as err:
        problems = _problems(err, "secrets") if isinstance(err, ValidationError) else str(err)
        raise ConfigurationError(f"{file}: [secrets] is invalid: {problems}") from err
    if config.path is not None:
        config = config.model_copy(update={"path": str(_beside(file, Path(config.path).expanduser()))})
    return config


# What a workflow task left for a dead worker waits before any worker may take it (the SDK's
# default is 10 s): see ``[worker] sticky_schedule_to_start_seconds`` and docs/deployment.md.
DEFAULT_STICKY_SCHEDULE_TO_START_SECONDS = 3.0
WORKER_KEYS = {
    "agents", "sticky_schedule_to_start_seconds", "max_concurrent_workflow_tasks", "max_concurrent_activities",
    "max_cached_workflows",
}
# Activities a worker runs at once, and the workflows it keeps in memory (the SDK's sticky cache),
# unless ``[worker]`` says otherwise.
DEFAULT_MAX_CONCURRENT_ACTIVITIES = 32
DEFAULT_MAX_CACHED_WORKFLOWS = 1000


def _agent_modules(raw: object, file: Path | None) -> list[str]:
    """``[worker] agents``: modules whose ``Agent``s and ``@tool``s the workers register."""
    if not isinstance(raw, dict) or set(raw) - WORKER_KEYS:
        raise ConfigurationError(
            f"{file}: [worker] holds only agents = [\"module\", ...], sticky_schedule_to_start_seconds, "
            f"max_concurrent_workflow_tasks, max_concurrent_activities and max_cached_workflows, not {raw!r}"
        )
    modules = raw.get("agents", [])
    if not isinstance(modules, list) or not all(isinstance(m, str) and m.strip() for m in modules):
        raise ConfigurationError(f"{file}: [worker] agents must be a list of module names, not {modules!r}")
    return list(modules)


def _worker_number(
    raw: Mapping[str, Any], file: Path | None, env: Mapping[str, str], key: str, *,
    kind: type[int] | type[float], noun: str, bounds: str, valid: Callable[[float], bool], default: float | None,
) -> Any:
    """``[worker] key`` (its ``AGENTRT_<KEY>`` environment variable wins) of ``kind``, where ``valid``;
    ``default`` when neither is set. Raises ``ConfigurationError`` saying it must be ``noun`` ``bounds``."""
    value: object = raw.get(key, default)
    where = f"{file}: [worker] {key}"
    name = f"AGENTRT_{key.upper()}"
    text = env.get(name)
    if text:
        where = name
        try:
            value = kind(text)
        except ValueError:
            raise ConfigurationError(f"{where} must be {noun}, not {text!r}") from None
    if value is None:
        return None
    kinds = (int,) if kind is int else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not valid(value):
        raise ConfigurationError(f"{where} must be {noun} {bounds}, not {value!r}")
    return kind(value)


def _workflow_slots(raw: Mapping[str, Any], file: Path | None, env: Mapping[str, str]) -> int | None:
    """``[worker] max_concurrent_workflow_tasks`` (``AGENTRT_MAX_CONCURRENT_WORKFLOW_TASKS`` wins):
    a whole number from 2 to 1000, or None (the SDK's default, 100)."""
    return _worker_number(
        raw, file, env, "max_concurrent_workflow_tasks", kind=int, noun="a whole number", bounds="from 2 to 1000",
        valid=lambda v: 2 <= v <= 1000, default=None,
    )


def _activity_slots(raw: Mapping[str, Any], file: Path | None, env: Mapping[str, str]) -> int:
    """``[worker] max_concurrent_activities`` (``AGENTRT_MAX_CONCURRENT_ACTIVITIES`` wins): a whole
    number from 1 to 5000; default ``DEFAULT_MAX_CONCURRENT_ACTIVITIES`` (32)."""
    return _worker_number(
        raw, file, env, "max_concurrent_activities", kind=int, noun="a whole number", bounds="from 1 to 5000",
        valid=lambda v: 1 <= v <= 5000, default=DEFAULT_MAX_CONCURRENT_ACTIVITIES,
    )


def _cached_workflows(raw: Mapping[str, Any], file: Path | None, env: Mapping[str, str]) -> int:
    """``[worker] max_cached_workflows`` (``AGENTRT_MAX_CACHED_WORKFLOWS`` wins): a whole number from
    0 to 100,000; default ``DEFAULT_MAX_CACHED_WORKFLOWS`` (1,000, the SDK's)."""
    return _worker_number(
        raw, file, env, "max_cached_workflows", kind=int, noun="a whole number", bounds="from 0 to 100000",
        valid=lambda v: 0 <= v <= 100_000, default=DEFAULT_MAX_CACHED_WORKFLOWS,
    )


def _sticky_seconds(raw: Mapping[str, Any], file: Path | None, env: Mapping[str, str]) -> float:
    """``[worker] sticky_schedule_to_start_seconds`` (``AGENTRT_STICKY_SCHEDULE_TO_START_SECONDS``
    wins): a number of seconds above 0 and at most 60."""
    return _worker_number(
        raw, file, env, "sticky_schedule_to_start_seconds", kind=float, noun="a number of seconds",
        bounds="above 0 and at most 60", valid=lambda v: 0 < v <= 60, default=DEFAULT_STICKY_SCHEDULE_TO_START_SECONDS,
    )


def _skill_paths(raw: object, file: Path | None) -> list[str]:
    """``[skills] paths``: directories searched for skills, besides each workspace's ``.agentrt/skills``."""
    if not isinstance(raw, dict) or set(raw) - {"paths"}:
        raise ConfigurationError(f"{file}: [skills] holds only paths = [...], not {raw!r}")
    paths = raw.get("paths", [])
    if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
        raise ConfigurationError(f"{file}: [skills] paths must be a list of directories, not {paths!r}")
    return [str(_beside(file, Path(p).expanduser())) for p in paths]


def _sandbox_cgroup(raw: object, file: Path | None) -> str | None:
    """``[sandbox] cgroup``: a cgroup v2 directory delegated to the worker, for a cgroup per call."""
    value = raw.get("cgroup") if isinstance(raw, dict) else None
    if value is not None and not (isinstance(value, str) and Path(value).is_absolute()):
        raise ConfigurationError(f"{file}: [sandbox] cgroup must be an absolute path (a cgroup v2 directory), not {value!r}")
    return value


def _egress_allow(raw: object, file: Path | None) -> list[str]:
    """``[sandbox] egress_allow``: internal destinations (``"host:port"``, ``"10.0.0.0/8:443"``,
    ``"name:*"``) that sandboxed commands granted network may reach through the egress proxy."""
    if not isinstance(raw, dict) or set(raw) - {"egress_allow", "cgroup"}:
        raise ConfigurationError(f"{file}: [sandbox] holds only egress_allow = [\"host:port\", ...] and cgroup, not {raw!r}")
    entries = raw.get("egress_allow", [])
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise ConfigurationError(f"{file}: [sandbox] egress_allow must be a list of \"host:port\" strings, not {entries!r}")
    if entries:
        from agentrt.activities.tools import parse_egress_allow  # only when there is something to check

        try:
            parse_egress_allow(entries)
        except ConfigurationError as err:
            raise ConfigurationError(f"{file}: {err}") from None
    return list(entries)


def _beside(file: Path | None, path: Path) -> Path:
    """``path`` as written in ``file``: a relative one is taken from the file's directory."""
    return path if path.is_absolute() or file is None else file.parent / path


def _store_url_beside(file: Path | None, url: str) -> str:
    """A SQLite ``[store] url`` with a relative file path, made absolute against the file's directory."""
    try:
        parsed = make_url(url)
    except ArgumentError as err:
        raise ConfigurationError(f"{file}: [store] url {url!r} is not a database URL: {err}") from err
    database = parsed.database
    if not parsed.drivername.startswith("sqlite") or not database or database == ":memory:" or database.startswith("file:"):
        return url
    return parsed.set(database=str(_beside(file, Path(database).expanduser()))).render_as_string(hide_password=False)


def config_file(env: Mapping[str, str] | None = None) -> Path | None:
    """The agentrt.toml a process reads, first found of: ``$AGENTRT_CONFIG`` (it must exist),
    ``./agentrt.toml`` (the working directory), ``$AGENTRT_HOME/agentrt.toml``; None without one."""
    env = os.environ if env is None else env
    explicit = env.get("AGENTRT_CONFIG")
    if explicit:
        return Path(explicit).expanduser().absolute()
    for candidate in (Path.cwd() / CONFIG_FILE_NAME, agentrt_home(env) / CONFIG_FILE_NAME):
        if candidate.is_file():
            return candidate
    return None


@dataclass
class AgentrtConfig:
    """Resolved configuration.

    Sources, lowest to highest precedence: built-in defaults, one TOML file (the first of
    ``$AGENTRT_CONFIG``, ``./agentrt.toml``, ``$AGENTRT_HOME/agentrt.toml``; see
    ``config_file``), then environment variables ``AGENTRT_TEMPORAL_ADDRESS``,
    ``AGENTRT_NAMESPACE``, ``AGENTRT_TASK_QUEUE``, ``AGENTRT_TOOL_TASK_QUEUE``, ``AGENTRT_MODEL_TASK_QUEUE``,
    ``AGENTRT_STICKY_SCHEDULE_TO_START_SECONDS``, ``AGENTRT_DATABASE_URL``,
    ``AGENTRT_DEFAULT_PROFILE``, ``AGENTRT_PAYLOAD_DRIVER``, ``AGENTRT_PAYLOAD_PATH``,
    ``AGENTRT_PAYLOAD_BUCKET``, ``AGENTRT_PAYLOAD_ENDPOINT_URL``, ``AGENTRT_PAYLOAD_REGION``.

    ``AgentrtConfig.load()`` always sets ``database_url`` (default
    ``sqlite:///$AGENTRT_HOME/agentrt.db``); a config built directly may leave it None, which
    the store reads as the same default. ``operators`` (``[principals] operators``) are the
    principals that sessions started with this configuration let act across owners, with a
    reason (``SessionConfig.operators``). ``tool_task_queue`` (``[temporal] tool_task_queue``,
    ``AGENTRT_TOOL_TASK_QUEUE``): where sessions started with this configuration run their
    tool calls (``agentrt worker --tools-only`` serves it); None runs them on ``task_queue``.
    ``model_task_queue`` (``[temporal] model_task_queue``, ``AGENTRT_MODEL_TASK_QUEUE``): where they
    run their model calls (``agentrt worker --providers-only`` serves it); None runs them on ``task_queue``.
    ``advisor`` (``[advisor] mode/profile/timeout_seconds``): the ``AdvisorPolicy`` of the
    sessions this configuration's clients start (``agentrt run --advisor`` overrides the mode).
    ``mcp_servers`` (``[mcp.servers.NAME]``): the MCP servers this configuration's workers run and
    its clients' sessions use (``McpServerConfig``). ``skill_paths`` (``[skills] paths``):
    directories searched for skills besides each workspace's ``.agentrt/skills``.
    ``agent_modules`` (``[worker] agents``): modules whose ``Agent``s and ``@tool``s its workers
    register (``agentrt worker --agents`` adds more). ``sticky_schedule_to_start_seconds``
    (``[worker] sticky_schedule_to_start_seconds``, ``AGENTRT_STICKY_SCHEDULE_TO_START_SECONDS``;
    default 3): how long a session's next workflow task waits for the worker that ran the last one
    (its sticky queue) before any worker of the task queue may take it, which bounds how long a
    session of a killed worker waits (Temporal's ``sticky_queue_schedule_to_start_timeout``; the
    SDK's default is 10 s). ``max_concurrent_workflow_tasks`` (``[worker]
    max_concurrent_workflow_tasks``, ``AGENTRT_MAX_CONCURRENT_WORKFLOW_TASKS``; None: the SDK's 100):
    the workflow tasks a worker takes at once. ``max_concurrent_activities`` (``[worker]
    max_concurrent_activities``, ``AGENTRT_MAX_CONCURRENT_ACTIVITIES``; default 32): the activities
    a worker runs at once, and the threads of its synchronous ones (tool calls): a model call waits
    seconds on its provider holding a slot, so a provider worker wants about as many as the model
    calls in flight (docs/capacity.md). ``max_cached_workflows`` (``[worker] max_cached_workflows``,
    ``AGENTRT_MAX_CACHED_WORKFLOWS``; default 1,000, the SDK's): the sessions a worker keeps in
    memory (its sticky cache, ~0.25 MiB each when idle: docs/benchmarks.md, bench.idle); one evicted
    replays its history on its next workflow task. ``secrets`` (``[secrets]``): where its workers
    read the secrets tools and MCP servers declare (``SecretsConfig``; default: their environment).
    ``egress_allow`` (``[sandbox] egress_allow``): internal destinations its workers' sandboxed
    commands with network may reach (see docs/tools-and-policy.md); ``sandbox_cgroup``
    (``[sandbox] cgroup``): a cgroup v2 directory delegated to the worker, under which each
    sandboxed command gets a cgroup of its own. ``codec`` (``[codec]``): the keys payloads and
    the store's content are encrypted with; when none are configured and ``encryption`` is on
    (``[codec] encryption``, ``AGENTRT_ENCRYPTION``; default on), the keys of
    ``$AGENTRT_HOME/codec-keys.toml`` if that file exists (the file ``agentrt dev`` and ``agentrt
    run`` make); ``encryption`` off leaves configured keys on. ``quotas`` (``[quotas]``,
    ``[tenants]``): the tenants' limits (``QuotaPolicy``), checked by clients at a start and by
    workers at a model call. ``lanes`` (``[lanes]``): the Temporal priority and fairness key of the
    sessions, tasks and graphs its clients start (``Lanes``). ``source`` is the file read, if any.
    """

    temporal_address: str = DEFAULT_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    task_queue: str = DEFAULT_TASK_QUEUE
    tool_task_queue: str | None = None
    model_task_queue: str | None = None
    database_url: str | None = None
    default_profile: str = "default"
    profiles: dict[str, ModelProfile] = field(default_factory=lambda: dict(BUILTIN_PROFILES))
    payloads: PayloadConfig = field(default_factory=PayloadConfig)
    operators: list[str] = field(default_factory=list)
    advisor: AdvisorPolicy = field(default_factory=AdvisorPolicy)
    mcp_servers: dict[str, McpServerConfig] = field(default_factory=dict)
    skill_paths: list[str] = field(default_factory=list)
    agent_modules: list[str] = field(default_factory=list)
    sticky_schedule_to_start_seconds: float = DEFAULT_STICKY_SCHEDULE_TO_START_SECONDS
    max_concurrent_workflow_tasks: int | None = None
    max_concurrent_activities: int = DEFAULT_MAX_CONCURRENT_ACTIVITIES
    max_cached_workflows: int = DEFAULT_MAX_CACHED_WORKFLOWS
    egress_allow: list[str] = field(default_factory=list)
    sandbox_cgroup: str | None = None
    gateway: GatewayConfig = field(default_factory=GatewayConfig)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)
    codec: CodecConfig = field(default_factory=CodecConfig)
    secrets: SecretsConfig = field(default_factory=SecretsConfig)
    encryption: bool = True
    quotas: QuotaPolicy = field(default_factory=QuotaPolicy)
    lanes: Lanes = field(default_factory=Lanes)
    source: Path | None = None

    def profile(self, name: str) -> ModelProfile:
        """The profile called ``name``; raises ``UnknownProfileError`` listing the known ones."""
        try:
            return self.profiles[name]
        except KeyError:
            raise UnknownProfileError(name, list(self.profiles)) from None

    @classmethod
    def load(cls, path: str | Path | None = None, env: Mapping[str, str] | None = None) -> "AgentrtConfig":
        """Read the configuration; raises ``ConfigurationError`` for a missing named file, bad TOML,
        an unknown setting or an invalid value."""
        env = os.environ if env is None else env
        home = agentrt_home(env)
        file = Path(path).expanduser().absolute() if path else config_file(env)
        data: dict[str, Any] = {}
        if file is not None:
            if not file.is_file():
                raise ConfigurationError(f"configuration file {file} does not exist")
            try:
                data = tomllib.loads(file.read_text(encoding="utf-8"))
            except tomllib.TOMLDecodeError as err:
                raise ConfigurationError(f"{file}: invalid TOML: {err}") from err
            except UnicodeDecodeError as err:
                raise ConfigurationError(f"{file}: not UTF-8 text (byte {err.start})") from err
            except OSError as err:
                raise ConfigurationError(f"{file}: cannot be read: {err.strerror or err}") from err
        if not isinstance(data.get("principals", {}), dict):
            raise ConfigurationError(f"{file}: principals must be a table ([principals]), not {data['principals']!r}")
        if not isinstance(data.get("payloads", {}), dict):
            raise ConfigurationError(f"{file}: payloads must be a table ([payloads]), not {data['payloads']!r}")
        if not isinstance(data.get("advisor", {}), dict):
            raise ConfigurationError(f"{file}: advisor must be a table ([advisor]), not {data['advisor']!r}")
        unknown = sorted(set(data) - TOP_LEVEL_KEYS)
        unknown += [
            f"temporal.{k}" for k in sorted(set(data.get("temporal", {})) - TEMPORAL_KEYS)
        ]
        unknown += [f"store.{k}" for k in sorted(set(data.get("store", {})) - {"url"})]
        unknown += [f"payloads.{k}" for k in sorted(set(data.get("payloads", {})) - PAYLOAD_KEYS)]
        unknown += [f"principals.{k}" for k in sorted(set(data.get("principals", {})) - {"operators"})]
        unknown += [f"advisor.{k}" for k in sorted(set(data.get("advisor", {})) - ADVISOR_KEYS)]
        if unknown:
            raise ConfigurationError(
                f"{file}: unknown setting(s) {', '.join(unknown)}; known: default_profile, [profiles.NAME], "
                "[temporal] address/namespace/task_queue/tool_task_queue/model_task_queue, [store] url, [payloads] driver/path/threshold_bytes/bucket/endpoint_url/region, "
                "[principals] operators, [advisor] mode/profile/timeout_seconds, [mcp.servers.NAME], [skills] paths, "
                "[worker] agents/sticky_schedule_to_start_seconds/max_concurrent_workflow_tasks/max_concurrent_activities/max_cached_workflows, [gateway], [telemetry], [codec], [secrets], "
                "[sandbox] egress_allow/cgroup, [quotas], [tenants], [lanes]"
            )
        config = cls(source=file)
        temporal = data.get("temporal", {})
        config.temporal_address = temporal.get("address", config.temporal_address)
        config.namespace = temporal.get("namespace", config.namespace)
        config.task_queue = temporal.get("task_queue", config.task_queue)
        config.tool_task_queue = temporal.get("tool_task_queue", config.tool_task_queue)
        config.model_task_queue = temporal.get("model_task_queue", config.model_task_queue)
        file_url = data.get("store", {}).get("url")
        config.database_url = _store_url_beside(file, file_url) if file_url else None
        config.default_profile = data.get("default_profile", config.default_profile)
        config.payloads = payload_config(data.get("payloads", {}), file, home)
        operators = data.get("principals", {}).get("operators", [])
        if not isinstance(operators, list) or not all(isinstance(o, str) and o.strip() for o in operators):
            raise ConfigurationError(f"{file}: [principals] operators must be a list of principal names, not {operators!r}")
        config.operators = list(operators)
        for name, raw in data.get("profiles", {}).items():
            try:
                config.profiles[name] = ModelProfile(name=name, **raw)
            except ValidationError as err:
                raise ConfigurationError(f"{file}: profile {name!r} is invalid: {err}") from err
        config.advisor = _advisor_policy(data.get("advisor", {}), file, config.profiles)
        config.mcp_servers = _mcp_servers(data.get("mcp", {}), file)
        config.skill_paths = _skill_paths(data.get("skills", {}), file)
        config.agent_modules = _agent_modules(data.get("worker", {}), file)
        config.sticky_schedule_to_start_seconds = _sticky_seconds(data.get("worker", {}), file, env)
        config.max_concurrent_workflow_tasks = _workflow_slots(data.get("worker", {}), file, env)
        config.max_concurrent_activities = _activity_slots(data.get("worker", {}), file, env)
        config.max_cached_workflows = _cached_workflows(data.get("worker", {}), file, env)
        config.secrets = _secrets_config(data.get("secrets", {}), file)
        config.quotas = quota_policy(data.get("quotas", {}), data.get("tenants", {}), file)
        config.lanes = _lanes(data.get("lanes", {}), file)
        config.egress_allow = _egress_allow(data.get("sandbox", {}), file)
        config.sandbox_cgroup = _sandbox_cgroup(data.get("sandbox", {}), file)
        config.gateway = gateway_config(data.get("gateway", {}), file, env)
        config.telemetry = telemetry_config(data.get("telemetry", {}), file, env)
        config.codec = codec_config(data.get("codec", {}), file, env)
        config.encryption = encryption_setting(data.get("codec", {}), file, env)
        if config.encryption and not config.codec.enabled:  # configured keys always win, whatever encryption says
            config.codec = home_codec(env) or config.codec
        config.temporal_address = env.get("AGENTRT_TEMPORAL_ADDRESS", config.temporal_address)
        config.namespace = env.get("AGENTRT_NAMESPACE", config.namespace)
        config.task_queue = env.get("AGENTRT_TASK_QUEUE", config.task_queue)
        config.tool_task_queue = env.get("AGENTRT_TOOL_TASK_QUEUE", config.tool_task_queue) or None
        config.model_task_queue = env.get("AGENTRT_MODEL_TASK_QUEUE", config.model_task_queue) or None
        config.database_url = (
            env.get("AGENTRT_DATABASE_URL") or config.database_url or f"sqlite:///{home / 'agentrt.db'}"
        )
        config.default_profile = env.get("AGENTRT_DEFAULT_PROFILE", config.default_profile)
        config.payloads = payload_env(config.payloads, env, file)
        return config
