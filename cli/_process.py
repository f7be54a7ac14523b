"""The `agentrt` commands that run things: `run` (a prompt), `worker`, `dev` (embedded server and a
worker) and `demo`."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Optional
from urllib.parse import urlsplit

import typer

from agentrt.cli._common import (
    AdvisorModeOption,
    ApprovalModeOption,
    ApproveMode,
    SandboxMode,
    budget_from_options,
    drive_turn,
    load_config,
    load_script,
    print_outcome,
    run_command,
    warn_unpriced,
)
from agentrt.cli._encryption import local_codec_server, no_encryption_option, with_home_keys, without_encryption
from agentrt.cli._output import output_attempts_option, output_schema_option, output_spec
from agentrt.cli._runtime import runtime, state_dir
from agentrt.cli._temporal_ui import noted_dev_server, ui_port_for
from agentrt.schemas import (
    MAX_APPROVAL_TIMEOUT_SECONDS,
    MAX_TITLE_CHARS,
    AgentNotRegistered,
    ApprovalPolicy,
    ConfigurationError,
    ToolNotRegistered,
    TurnOutcome,
    UnknownProfileError,
    idempotency_key_problem,
    title_problem,
)
# The worker's own modules load in the commands that run one: `agentrt run` refuses a bad argument
# without loading them.
from agentrt.worker import DEFAULT_ADDRESS, AgentrtConfig, DevServer, connect_when_ready, open_store

if TYPE_CHECKING:
    from agentrt.worker import WorkerRole

log = logging.getLogger("agentrt.worker")

# How long `agentrt worker` lets running calls finish when it is stopped (seconds): a tool call's
# default timeout (SessionConfig.tool_timeout_seconds).
DEFAULT_GRACEFUL_SHUTDOWN_SECONDS = 300.0


def _log_to_stderr() -> None:
    """An operator reads a worker's log: INFO and up, with times, on stderr."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("alembic").setLevel(logging.WARNING)  # one line per store migration step is noise here
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request (agentrt dev's codec server probe) is noise too


def run(
    prompt: str = typer.Argument(..., help="What the agent should do."),
    workspace: Path = typer.Option(..., "--workspace", "-w", help="Directory the tools work in.", exists=True, file_okay=False, resolve_path=True),
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help="Model profile from agentrt.toml."),
    script: Optional[Path] = typer.Option(
        None, "--script", exists=True, dir_okay=False, resolve_path=True,
        help="Scripted-model file (JSON or YAML): an offline model. With --profile it keeps that profile's context window.",
    ),
    approve: ApproveMode = typer.Option(ApproveMode.ask, "--approve", help="Answer approvals: ask at the terminal, auto-grant, or deny."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object: session_id, turn_id, outcome, answer, error, error_type, rounds, tool_calls, usage, output."),
    session_id: Optional[str] = typer.Option(None, "--session-id", help="Session id to use (default: a new random one)."),
    title: Optional[str] = typer.Option(
        None, "--title", help="The session's title (at most 200 characters), shown by session list and state; session rename changes it."
    ),
    approval_timeout: Optional[float] = typer.Option(
        None, "--approval-timeout", help="Deny approvals not decided within this many seconds (more than 0, at most a year)."
    ),
    sandbox: SandboxMode = typer.Option(
        SandboxMode.workspace_write, "--sandbox",
        help="How shell commands are confined: an OS sandbox with the workspace read-only or read-write, or none at all.",
    ),
    network: bool = typer.Option(False, "--network", help="Let sandboxed commands use the network."),
    approval_mode: ApprovalModeOption = typer.Option(
        ApprovalModeOption.on_request, "--approval-mode",
        help="Who decides what the sandbox allows: the rules (on_request), a person for every call but read-only ones (always), or no one (never).",
    ),
    max_rounds: int = typer.Option(250, "--max-rounds", min=1, max=10_000, help="Model calls per turn before the turn ends as round_limit."),
    fused_rounds: bool = typer.Option(
        False, "--fused-rounds", help="Let a model call run the read-only calls it asks for and call the model again itself (one activity)."
    ),
    compact_threshold: Optional[float] = typer.Option(
        None, "--compact-threshold", min=0.01, max=1.0,
        help="Compact at a turn's end past this fraction of the input budget (1.0: never by tokens).",
        show_default="the profile's compact_threshold, else 0.8",
    ),
    system_prompt: Optional[str] = typer.Option(
        None, "--system-prompt", help="Text appended to the default system prompt (see --replace-system-prompt)."
    ),
    replace_system_prompt: bool = typer.Option(
        False, "--replace-system-prompt", help="Send --system-prompt instead of the default system prompt, not after it."
    ),
    advisor: Optional[AdvisorModeOption] = typer.Option(
        None, "--advisor",
        help="An advisor model reviews tool calls first: never, high-risk batches only (lightweight) or every batch (full).",
        show_default="[advisor] mode in agentrt.toml, else off",
    ),
    budget_tokens: Optional[int] = typer.Option(None, "--budget-tokens", min=1, help="Most tokens (input + output) the session may use."),
    budget_usd: Optional[float] = typer.Option(None, "--budget-usd", help="Most cost in US dollars (profiles with a price)."),
    budget_tool_calls: Optional[int] = typer.Option(None, "--budget-tool-calls", min=1, help="Most tool calls the session may make."),
    budget_hours: Optional[float] = typer.Option(None, "--budget-hours", help="Most wall time since the session started, in hours."),
    output_schema: Optional[Path] = output_schema_option(),
    output_attempts: int = output_attempts_option(),
    idempotency_key: Optional[str] = typer.Option(
        None, "--idempotency-key", metavar="KEY",
        help="Run this prompt once for KEY (1-200 of A-Z a-z 0-9 . _ : -): run again with the same KEY, it follows the "
        "first run's session and turn instead of starting another. Without --session-id the session id comes from KEY.",
    ),
    agent: Optional[str] = typer.Option(
        None, "--agent", help="Run as this registered agent (its instructions, tools and settings; docs/agents.md)."
    ),
    agents: list[str] = typer.Option(
        [], "--agents", metavar="MODULE",
        help="Register the Agents and @tools of this Python module on the in-process worker (repeatable).",
    ),
    no_encryption: bool = no_encryption_option(),
) -> None:
    """Start a session with PROMPT, stream its progress and print the answer.

    When it runs the worker itself (none polls the task queue) and no codec keys are configured, it
    encrypts with the machine's own keys, $AGENTRT_HOME/codec-keys.toml, made on first use.

    Exit code 0 when the turn completes, 1 for any other outcome, 2 for a usage or runtime error.
    """
    if not prompt.strip():
        raise typer.BadParameter("the prompt is empty", param_hint="PROMPT")
    if idempotency_key is not None and idempotency_key_problem(idempotency_key):
        raise typer.BadParameter(str(idempotency_key_problem(idempotency_key)), param_hint="--idempotency-key")
    budget = budget_from_options(budget_tokens, budget_usd, budget_tool_calls, budget_hours)
    if approval_timeout is not None and not 0 < approval_timeout <= MAX_APPROVAL_TIMEOUT_SECONDS:  # nan fails too
        raise typer.BadParameter(
            f"must be more than 0 and at most {MAX_APPROVAL_TIMEOUT_SECONDS} seconds, not {approval_timeout}",
            param_hint="--approval-timeout",
        )
    if title is not None and (problem := title_problem(title) or (f"longer than {MAX_TITLE_CHARS} characters" if len(title) > MAX_TITLE_CHARS else None)):
        raise typer.BadParameter(problem, param_hint="--title")
    if replace_system_prompt and not (system_prompt or "").strip():
        raise typer.BadParameter("--replace-system-prompt needs a --system-prompt", param_hint="--replace-system-prompt")
    if script:
        try:
            load_script(str(script))
        except ConfigurationError as err:
            raise typer.BadParameter(str(err), param_hint="--script") from None
    output = output_spec(output_schema, output_attempts)
    config = _with_agent_modules(load_config(), agents, agent)
    if no_encryption:
        config = without_encryption(config)
    progress = sys.stderr if as_json else sys.stdout

    started_session: list[str] = []

    def still_running() -> str | None:
        if not started_session:
            return None
        return (
            f"session {started_session[0]} goes on wherever a worker runs; "
            f"stop it with: agentrt session cancel {started_session[0]}"
        )

    async def go() -> TurnOutcome:
        async with runtime(config, notice=sys.stderr, default_keys=True) as rt:
            if agents and not rt.worker_in_process:
                sys.stderr.write(
                    f"agentrt: a worker already polls task queue {config.task_queue!r}, so --agents registers "
                    f"{', '.join(agents)} on no worker; the running one serves this session (if it lacks them, restart "
                    f"it with {' '.join('--agents ' + m for m in agents)}: agentrt dev or agentrt worker)\n"
                )
            session_config = rt.client.new_config(
                str(workspace),
                session_id=session_id,
                idempotency_key=idempotency_key,
                profile=(profile or ("scripted" if script else config.default_profile)),
                script=str(script) if script else None,
                approval_timeout_seconds=approval_timeout,
                max_rounds_per_turn=max_rounds,
                fused_rounds=fused_rounds,
                compact_threshold=compact_threshold,
                system_prompt=system_prompt,
                system_prompt_mode="replace" if replace_system_prompt else "extend",
                sandbox=sandbox.value,
                network=network,
                approval=ApprovalPolicy(mode=approval_mode.value),
                operators=config.operators,
                tool_task_queue=config.tool_task_queue,
                advisor=config.advisor if advisor is None else config.advisor.model_copy(update={"mode": advisor.value}),
                budget=budget,
                output=output,
                agent=agent,
                title=title,
            )
            if profile or not script:
                try:
                    config.profile(session_config.profile)  # fail fast on an unknown profile
                except UnknownProfileError as err:
                    where = "in agentrt.toml (docs/providers.md, \"Profiles in agentrt.toml\")"
                    hint = f"; define [profiles.{profile}] {where}" if profile else (
                        f"; give --script FILE to run the offline scripted model, or define [profiles.default] {where}"
                    )
                    raise ConfigurationError(f"{err}{hint}") from None
            warn_unpriced(config, session_config.profile, budget)
            started = await rt.client.start(session_config, prompt, idempotency_key=idempotency_key)
            started_session.append(started.session_id)
            progress.write(f"session {started.session_id} (workflow {started.workflow_id}) · {started.turn_id}\n")
            try:
                outcome = await drive_turn(rt, started.session_id, started.turn_id, approve, progress)
            except (AgentNotRegistered, ToolNotRegistered) as err:
                if as_json:  # a program reading stdout gets the object too (the exit code stays 2)
                    failed = TurnOutcome(turn_id=started.turn_id, status="failed", error=str(err), error_type=type(err).__name__)
                    print_outcome(started.session_id, failed, as_json)
                if isinstance(err, AgentNotRegistered) and rt.worker_in_process and not rt.config.agent_modules:
                    sys.stderr.write(
                        f"agentrt: the worker this run started (none polled {config.task_queue!r}) has no agents module: "
                        "give it one with --agents MODULE, or run once your worker with the module polls\n"
                    )
                raise
            print_outcome(started.session_id, outcome, as_json)
            return outcome

    outcome = run_command(go, on_interrupt=still_running)
    raise typer.Exit(0 if outcome.status == "completed" else 1)


def worker(
    tools_only: bool = typer.Option(
        False, "--tools-only", help="Run only tool calls, on \\[temporal] tool_task_queue: start it without provider keys."
    ),
    models_only: bool = typer.Option(
        False, "--models-only", help="Run sessions and model calls, not tool calls (needs \\[temporal] tool_task_queue)."
    ),
    workflows_only: bool = typer.Option(
        False, "--workflows-only",
        help="Run sessions, tasks and graphs, not model or tool calls (needs \\[temporal] tool_task_queue and "
        "model_task_queue): start it without provider keys.",
    ),
    providers_only: bool = typer.Option(
        False, "--providers-only",
        help="Run only model calls, on \\[temporal] model_task_queue: the only workers that need provider keys.",
    ),
    agents: list[str] = typer.Option(
        [], "--agents", metavar="MODULE",
        help="Register the Agents and @tools of this Python module (repeatable; adds to \\[worker] agents).",
    ),
    deployment: Optional[str] = typer.Option(
        None, "--deployment", metavar="NAME", envvar="AGENTRT_DEPLOYMENT",
        help="Poll as a version of this Worker Deployment (with --build-id): every session, task and graph this "
        "worker starts stays pinned to its build (docs/deployment.md, \"Versioned deploys\").",
    ),
    build_id: Optional[str] = typer.Option(
        None, "--build-id", metavar="ID", envvar="AGENTRT_BUILD_ID", help="This worker's build (with --deployment), e.g. the image tag.",
    ),
    graceful_shutdown: float = typer.Option(
        DEFAULT_GRACEFUL_SHUTDOWN_SECONDS, "--graceful-shutdown", metavar="SECONDS", min=0, max=86_400,
        help="On SIGTERM or Ctrl-C, stop polling and let running model and tool calls finish for up to this long "
        "before cancelling them (default: a tool call's default timeout). Keep the pod's termination grace above it.",
    ),
) -> None:
    """Run a worker for the configured task queue until Ctrl-C.

    Waits (with backoff) for a Temporal server that is not up yet, registers the search
    attributes sessions write when the namespace lacks them (or exits with code 2 and the
    command that does), then polls. By default one worker runs sessions, model calls and tool
    calls; `--models-only` and `--tools-only` split them in two, `--workflows-only`, `--providers-only`
    and `--tools-only` in three (docs/worker.md).
    """
    import temporalio.runtime
    from temporalio.worker import WorkerDeploymentVersion

    from agentrt.store import Store
    from agentrt.worker import AgentrtPlugin, check_deployment_version, check_role, running_worker, sdk_metrics_runtime

    chosen = [flag for flag, on in (
        ("--tools-only", tools_only), ("--models-only", models_only), ("--workflows-only", workflows_only),
        ("--providers-only", providers_only),
    ) if on]
    if len(chosen) > 1:
        raise typer.BadParameter(f"choose one of {' and '.join(chosen)}", param_hint=chosen[0])
    if not (deployment or "").strip() and (build_id or "").strip():
        raise typer.BadParameter("a build id needs a deployment name (--deployment or AGENTRT_DEPLOYMENT)", param_hint="--build-id")
    if (deployment is not None or build_id is not None) and not ((deployment or "").strip() and (build_id or "").strip()):
        raise typer.BadParameter(
            "a deployment needs a non-empty build id (--build-id or AGENTRT_BUILD_ID)", param_hint="--deployment"
        )
    version = None if deployment is None else WorkerDeploymentVersion(deployment_name=deployment, build_id=build_id or "")
    if version is not None:
        try:
            check_deployment_version(version)
        except ConfigurationError as err:
            raise typer.BadParameter(str(err), param_hint="--deployment / --build-id") from None
    roles: dict[str, WorkerRole] = {
        "--tools-only": "tools", "--models-only": "models", "--workflows-only": "workflows", "--providers-only": "providers",
    }
    role: WorkerRole = roles[chosen[0]] if chosen else "all"
    config = _with_agent_modules(load_config(), agents)
    try:
        check_role(config, role)  # before waiting for a server
    except ConfigurationError as err:
        raise typer.BadParameter(str(err), param_hint=chosen[0] if chosen else None) from None
    _log_to_stderr()

    async def go() -> None:
        store = open_store(config)
        try:
            plugin = AgentrtPlugin(config, store)  # with [telemetry] on, installs the meter provider first
            async with sdk_metrics_runtime(config.telemetry) as runtime:
                await serve(store, plugin, runtime)
        finally:
            store.close()

    async def serve(store: Store, plugin: AgentrtPlugin, runtime: temporalio.runtime.Runtime | None) -> None:
        temporal = await connect_when_ready(config.temporal_address, config.namespace, [plugin], runtime=runtime)
        shutdown = timedelta(seconds=graceful_shutdown)
        async with running_worker(temporal, config, store, role=role, graceful_shutdown=shutdown, deployment=version) as running:
            log.info(
                "worker polling %r at %s (namespace %r) for %s%s, %d activity slots, a cache of %d sessions; Ctrl-C stops it",
                running.task_queue, config.temporal_address, config.namespace,
                {
                    "all": "sessions, models and tools", "models": "sessions and models", "tools": "tools only",
                    "workflows": "sessions, not model or tool calls", "providers": "model calls only",
                }[role],
                "" if version is None else f" as version {version.deployment_name}.{version.build_id} (runs pinned)",
                config.max_concurrent_activities, config.max_cached_workflows,
            )
            if config.agent_modules:
                registry = getattr(running, "registry", None)
                log.info("agents: %s", ", ".join(registry.agent_names()) if registry is not None else "?")
            await asyncio.Event().wait()

    run_command(go, service=True)


def _with_agent_modules(config: AgentrtConfig, modules: list[str], agent: str | None = None) -> AgentrtConfig:
    """``config`` with ``modules`` added to its ``[worker] agents``, each of them (the
    configuration's too) imported now from the current directory as ``python -m`` would, so that a
    module that does not import (or an ``agent`` that ``--agents`` modules do not define) is a usage
    error before any server or worker starts."""
    extra = [m for m in modules if m not in config.agent_modules]
    if not config.agent_modules and not extra:
        return config
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` has it: a module of the current project imports
    from agentrt.worker import agents_in

    try:
        agents_in(config.agent_modules)
    except ConfigurationError as err:
        raise typer.BadParameter(str(err), param_hint="[worker] agents (agentrt.toml)") from None
    try:
        found, _ = agents_in(modules)
    except ConfigurationError as err:
        raise typer.BadParameter(str(err), param_hint="--agents") from None
    if modules and agent is not None and agent not in [a.name for a in found]:
        names = ", ".join(a.name for a in found) or "none"
        raise typer.BadParameter(f"no agent {agent!r} in {', '.join(modules)} (agents there: {names})", param_hint="--agent")
    return dataclasses.replace(config, agent_modules=[*config.agent_modules, *extra])


def dev(
    port: int = typer.Option(7233, "--port", min=1, max=65535, help="Temporal frontend port."),
    ui_port: Optional[int] = typer.Option(
        None, "--ui-port", min=1, max=65535, help="Temporal UI port.", show_default="--port + 1000, else a free port"
    ),
    db: Optional[Path] = typer.Option(
        None, "--db", help="SQLite file for Temporal's histories.", show_default="$AGENTRT_HOME/temporal.db"
    ),
    ui_codec_endpoint: Optional[str] = typer.Option(
        None, "--ui-codec-endpoint",
        help="Remote codec endpoint the UI decodes payloads with (`agentrt codec-server`).",
        show_default="a codec server this command runs on 127.0.0.1 (port 8081, else a free one) when encrypting",
    ),
    agents: list[str] = typer.Option(
        [], "--agents", metavar="MODULE",
        help="Register the Agents and @tools of this Python module on the worker (repeatable; adds to \\[worker] agents).",
    ),
    no_encryption: bool = no_encryption_option(),
) -> None:
    """Start the embedded Temporal dev server and a worker; Ctrl-C stops both.

    Encrypts history and the store: with the \\[codec] keys, else the machine's own
    ($AGENTRT_HOME/codec-keys.toml, made on first use), and runs `agentrt codec-server
    --insecure-no-auth` on loopback so that the UI shows payloads in clear (--no-encryption: neither).

    Prints the server's address and UI, and with another --port than 7233 the
    `export AGENTRT_TEMPORAL_ADDRESS=...` line other shells need to reach it.
    """
    config = _with_agent_modules(load_config(), agents)
    ui_port = ui_port or ui_port_for(port)
    try:  # before anything is made or started (keys, the codec server) for a server that cannot start
        DevServer(port=port, ui_port=ui_port).check_ports()
    except ConfigurationError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    config = without_encryption(config) if no_encryption else with_home_keys(config, sys.stderr)
    config.temporal_address = f"localhost:{port}"
    db = db or state_dir() / "temporal.db"
    _log_to_stderr()

    async def go() -> None:
        if ui_codec_endpoint is not None or not config.codec.enabled:
            await serve(ui_codec_endpoint)
            return
        async with local_codec_server(ui_port, config.codec) as endpoint:
            typer.echo(
                f"codec server for the UI at {endpoint} (keys {config.codec.keys_file or 'from the environment'}; "
                f"log {state_dir() / 'codec-server.log'})", err=True,
            )
            await serve(endpoint)

    async def serve(codec_endpoint: str | None) -> None:
        from agentrt.worker import running_worker

        async with DevServer(
            port=port, ui_port=ui_port, db_file=db, log_file=state_dir() / "temporal.log", ui_codec_endpoint=codec_endpoint
        ) as server:
            typer.echo(f"temporal server at {server.address} · UI {server.ui_url} · history {db}", err=True)
            if config.temporal_address != DEFAULT_ADDRESS:
                typer.echo(f"other shells reach it with:\n  export AGENTRT_TEMPORAL_ADDRESS={server.address}", err=True)
            if codec_endpoint and ui_codec_endpoint:
                port_flag = f" --port {urlsplit(codec_endpoint).port}" if urlsplit(codec_endpoint).port else ""
                typer.echo(
                    f"the UI decodes payloads through {codec_endpoint}: run `agentrt codec-server{port_flag} "
                    f"--ui-origin {server.ui_url} --insecure-no-auth` "
                    "(the dev UI has no sign-in, so it sends no token)", err=True,
                )
            with noted_dev_server(port, server.address, server.ui_url):
                async with runtime(config, embed_if_missing=False, ensure_worker=False) as rt:
                    async with running_worker(rt.client.temporal, config, rt.store) as running:
                        typer.echo(f"worker polling {config.task_queue!r}; Ctrl-C stops both", err=True)
                        if config.agent_modules:
                            registry = getattr(running, "registry", None)
                            names = ", ".join(registry.agent_names()) if registry is not None else "?"
                            typer.echo(f"agents: {names or 'none'} (from {', '.join(config.agent_modules)})", err=True)
                        await asyncio.Event().wait()

    run_command(go, service=True)
