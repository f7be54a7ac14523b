"""`agentrt graph ...`: run a task graph (a goal the planner decomposes, or a DAG from a file) and
follow it, approve or reject its plan, watch it (status, events, list, wait) and cancel it."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer
from temporalio.service import RPCError, RPCStatusCode

from agentrt.cli._common import SandboxMode, budget_from_options, echo_listing, load_config, load_script, run_command
from agentrt.cli._graph_render import dag_lines, graph_event_line, graph_lines, graph_result_lines, plan_lines, retry_wait_line
from agentrt.client import load_graph_file
from agentrt.cli._runtime import runtime
from agentrt.cli._task_render import cut
from agentrt.schemas import (
    MAX_NODE_RETRIES,
    MAX_PARALLEL_LIMIT,
    MAX_RETRY_WINDOW_SECONDS,
    TERMINAL_GRAPH_STATUSES,
    ConfigurationError,
    GraphSnapshot,
    GraphSpec,
    RequestRejected,
    TaskGraphResult,
    UnknownProfileError,
    WorkerUnavailable,
    idempotency_key_problem,
)
from agentrt.worker import AgentrtConfig

graph_app = typer.Typer(
    help="Task graphs: a goal planned into a DAG of agent tasks, approved once, run in parallel and reviewed.",
    no_args_is_help=True,
)

# Seconds between two reads of a graph `graph run` follows.
POLL_SECONDS = 0.5


class GraphStatusOption(str, Enum):
    """``graph list --status``: a graph status (``GRAPH_STATUSES``)."""

    planning = "planning"
    pending_approval = "pending_approval"
    approved = "approved"
    executing = "executing"
    completed = "completed"
    failed = "failed"
    rejected = "rejected"
    cancelled = "cancelled"
    paused = "paused"


class PlanApprovalOption(str, Enum):
    """``--approve-plan``: who approves the plan."""

    ask = "ask"
    auto = "auto"


class FailurePolicyOption(str, Enum):
    """``--failure-policy``: what a node that fails for good does to the rest."""

    block_dependents = "block_dependents"
    fail_fast = "fail_fast"
    allow_orphans = "allow_orphans"


class RiskLevelOption(str, Enum):
    """``--risk-level``: the least risk the plan is taken to have."""

    low = "low"
    medium = "medium"
    high = "high"


def _graph_runtime(config: AgentrtConfig) -> Any:
    return runtime(config, embed_if_missing=False, ensure_worker=False)


def _interactive() -> bool:
    """True when a person can answer at the terminal (standard input is a TTY)."""
    return sys.stdin.isatty()


def _snapshot_json(snapshot: GraphSnapshot) -> str:
    return json.dumps(snapshot.model_dump(mode="json"))


def _print_snapshot(snapshot: GraphSnapshot, as_json: bool, what: str) -> None:
    if as_json:
        typer.echo(_snapshot_json(snapshot))
        return
    now = f"; the graph is {snapshot.status}" if snapshot.status not in what else ""
    typer.echo(f"graph {snapshot.graph_id}: {what}{now}")


def _check_models(
    config: AgentrtConfig, spec: GraphSpec | None, profile: str | None, script: Path | None,
    planner_profile: str | None, reviewer_profile: str | None,
) -> str:
    """The graph's profile (``scripted`` with ``--script`` or when every node names a script); raises
    ``typer.BadParameter`` for an unknown profile (the graph's when some node uses it, the planner's,
    the reviewer's or a node's) or a scripted-model file that does not load."""
    if script:
        try:
            load_script(str(script))
        except ConfigurationError as err:
            raise typer.BadParameter(str(err), param_hint="--script") from None
    # The graph's model is used by the planner, the reviewer and every node that names none.
    needs_graph_model = spec is None or any(not n.profile and not n.script for n in spec.nodes)
    all_scripted = spec is not None and all(n.script for n in spec.nodes)
    chosen = profile or ("scripted" if script or all_scripted else config.default_profile)
    checked = [(chosen, "--profile")] if profile or (needs_graph_model and not script) else []
    checked += [(name, hint) for name, hint in ((planner_profile, "--planner-profile"), (reviewer_profile, "--reviewer-profile")) if name]
    for node in spec.nodes if spec is not None else []:
        if node.profile:
            checked.append((node.profile, f"FILE (node {node.id!r})"))
        if node.script:
            try:
                load_script(node.script)
            except ConfigurationError as err:
                raise typer.BadParameter(f"node {node.id!r}: {err}", param_hint="FILE") from None
    for name, hint in checked:
        try:
            config.profile(name)  # fail fast on an unknown profile
        except UnknownProfileError as err:
            more = "; give --script FILE to run the offline scripted model" if hint == "--profile" and not profile else ""
            raise typer.BadParameter(f"{err}{more}", param_hint=hint) from None
    return chosen


# ---------------------------------------------------------------- following a run


async def _read_line(client: Any, graph_id: str) -> str | None:
    """A line of terminal input (``""`` at its end), or None once the plan left ``pending_approval``
    (approved or rejected elsewhere). A daemon thread reads, so an unanswered prompt never holds
    the process open."""
    loop = asyncio.get_running_loop()
    line: asyncio.Future[str] = loop.create_future()

    def deliver(text: str) -> None:
        if not line.done():
            line.set_result(text)

    def read() -> None:
        text = sys.stdin.readline()
        try:
            loop.call_soon_threadsafe(deliver, text)
        except RuntimeError:  # the loop has closed: nobody waits for the answer
            pass

    threading.Thread(target=read, name="graph-approval-prompt", daemon=True).start()
    while not line.done():
        if (await client.graph_status(graph_id)).status != "pending_approval":
            return None
        await asyncio.wait([line], timeout=POLL_SECONDS)
    return line.result()


async def _ask_approval(client: Any, snapshot: GraphSnapshot, mode: str) -> None:
    """Ask at the terminal whether to approve the plan (y approves, anything else rejects), or,
    without a terminal, say how to approve it from elsewhere."""
    gid = snapshot.graph_id
    how = f"agentrt graph approve {gid}   (or: agentrt graph approve {gid} --reject)"
    if mode == "auto":
        typer.echo(f"the plan's risk is {snapshot.risk_level or 'high'}: it is not approved automatically; a person must approve it")
    if not _interactive():
        typer.echo(f"the plan waits for approval: {how}")
        return
    sys.stdout.flush()
    sys.stderr.write(f"Approve this plan? [y/N] (or from elsewhere: agentrt graph approve {gid}) ")
    sys.stderr.flush()
    answer = await _read_line(client, gid)
    if answer is None:
        typer.echo("the plan was decided elsewhere")
        return
    if not answer:
        typer.echo(f"(no terminal input) the plan waits for approval: {how}")
        return
    try:
        if answer.strip().lower() in ("y", "yes"):
            await client.approve_graph(gid, "approved at the terminal")
        else:
            await client.reject_graph(gid, "rejected at the terminal")
    except RequestRejected as err:
        typer.echo(str(err))


async def follow_graph(client: Any, graph_id: str, approve_plan: str) -> GraphSnapshot:
    """Print the graph's events as they happen, its DAG once planned and again whenever a node's
    status changes, ask for (or say how to give) the plan's approval; return the final snapshot."""
    after = 0
    shown: tuple[tuple[str, str, int], ...] | None = None
    asked = False
    noted_no_worker = False
    noted_retry_wait: datetime | None = None  # the retry_until of the wait last said
    while True:
        try:
            snapshot: GraphSnapshot = await client.graph_status(graph_id)
            page = await client.graph_events(graph_id, after)  # after the snapshot: every event it reflects
        except WorkerUnavailable:
            if not noted_no_worker:
                typer.echo("no worker answers yet; waiting for one (`agentrt worker` or `agentrt dev`)", err=True)
                noted_no_worker = True
            await asyncio.sleep(POLL_SECONDS)
            continue
        except RPCError as err:
            if err.status != RPCStatusCode.FAILED_PRECONDITION:  # a workflow not ready for queries yet
                raise
            await asyncio.sleep(POLL_SECONDS)
            continue
        for event in page.events:
            typer.echo(graph_event_line(event))
            after = event.seq
        nodes = tuple((n.id, n.status, n.attempts) for n in snapshot.nodes)
        if snapshot.nodes and nodes != shown and snapshot.status not in TERMINAL_GRAPH_STATUSES:  # the end shows it whole
            typer.echo("plan:" if shown is None else "nodes:")
            for line in dag_lines(snapshot):
                typer.echo(line)
            shown = nodes
        if snapshot.retry_until != noted_retry_wait:
            noted_retry_wait = snapshot.retry_until
            if (waiting := retry_wait_line(snapshot)) is not None:
                typer.echo(waiting)
        if snapshot.status == "pending_approval" and not asked:
            asked = True
            for line in plan_lines(snapshot):
                typer.echo(line)
            await _ask_approval(client, snapshot, approve_plan)
            continue
        if snapshot.status in TERMINAL_GRAPH_STATUSES:
            for event in (await client.graph_events(graph_id, after)).events:
                typer.echo(graph_event_line(event))
            return snapshot
        await asyncio.sleep(POLL_SECONDS)


# ---------------------------------------------------------------- commands


@graph_app.command("run")
def graph_run(
    file: Optional[Path] = typer.Argument(
        None, exists=True, dir_okay=False, resolve_path=True, metavar="FILE",
        help="Graph file (JSON or YAML): {max_parallel, nodes: [{id, prompt, depends_on, ...}]}. Or give --goal.",
    ),
    goal: Optional[str] = typer.Option(None, "--goal", help="A goal the planner decomposes into a graph (instead of FILE)."),
    workspace: Path = typer.Option(
        ..., "--workspace", "-w", help="Directory the nodes' sessions work in.", exists=True, file_okay=False, resolve_path=True
    ),
    approve_plan: PlanApprovalOption = typer.Option(
        PlanApprovalOption.ask, "--approve-plan",
        help="ask: a person approves the plan (here on a terminal, or `graph approve`); auto: approved unless its risk is high.",
    ),
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help="Model profile of the nodes, planner and reviewer."),
    script: Optional[Path] = typer.Option(
        None, "--script", exists=True, dir_okay=False, resolve_path=True,
        help="Scripted-model file (JSON or YAML): an offline model instead of --profile.",
    ),
    planner_profile: Optional[str] = typer.Option(None, "--planner-profile", help="Model profile of the planner (default: --profile)."),
    reviewer_profile: Optional[str] = typer.Option(None, "--reviewer-profile", help="Model profile of the reviewer (default: --profile)."),
    graph_id: Optional[str] = typer.Option(None, "--id", help="Graph id to use (default: a new random one); ids are not reused."),
    max_parallel: Optional[int] = typer.Option(
        None, "--max-parallel", min=1, max=MAX_PARALLEL_LIMIT, help="Most nodes running at once (default: the graph's)."
    ),
    max_retries: int = typer.Option(1, "--max-retries", min=0, max=MAX_NODE_RETRIES, help="Reruns of a node that failed or failed review."),
    failure_policy: FailurePolicyOption = typer.Option(
        FailurePolicyOption.block_dependents, "--failure-policy",
        help="When a node fails for good: block_dependents (others go on), fail_fast (stop all), allow_orphans (dependants run anyway).",
    ),
    retry_window: float = typer.Option(
        0.0, "--retry-window", min=0, max=MAX_RETRY_WINDOW_SECONDS, metavar="SECONDS",
        help="When nodes failed for good: wait this long for `graph retry` before the graph ends failed (default 0: at once).",
    ),
    risk_level: RiskLevelOption = typer.Option(RiskLevelOption.low, "--risk-level", help="The least risk the plan is taken to have."),
    tools: Optional[list[str]] = typer.Option(None, "--tool", help="A tool the nodes may be granted (repeat for more; default: every tool)."),
    sandbox: SandboxMode = typer.Option(SandboxMode.workspace_write, "--sandbox", help="How the nodes' processes are confined."),
    network: bool = typer.Option(False, "--network", help="Let the nodes' sandboxed commands use the network."),
    max_rounds: int = typer.Option(50, "--max-rounds", min=1, max=10_000, help="Model calls per node session."),
    budget_tokens: Optional[int] = typer.Option(None, "--budget-tokens", min=1, help="Most tokens (input + output) of the whole graph."),
    budget_usd: Optional[float] = typer.Option(None, "--budget-usd", help="Most cost of the whole graph in US dollars (priced profiles only)."),
    budget_tool_calls: Optional[int] = typer.Option(None, "--budget-tool-calls", min=1, help="Most tool calls of the whole graph."),
    budget_hours: Optional[float] = typer.Option(None, "--budget-hours", help="Most wall time since the start, in hours."),
    as_json: bool = typer.Option(False, "--json", help='Print {"graph_id": "..."} right after the start and do not follow.'),
    idempotency_key: Optional[str] = typer.Option(
        None, "--idempotency-key", metavar="KEY",
        help="Start this graph once for KEY (1-200 of A-Z a-z 0-9 . _ : -): run again with the same KEY, it follows the "
        "first start's graph and starts nothing. Without --id the graph id comes from KEY.",
    ),
) -> None:
    """Start a task graph from FILE or --goal and follow it until it ends (exit 0 when it completed, 1 otherwise).

    Ctrl-C stops following; the graph goes on wherever a worker runs."""
    if (file is None) == (goal is None):
        raise typer.BadParameter("give a graph FILE or --goal TEXT, not both and not neither")
    if goal is not None and not goal.strip():
        raise typer.BadParameter("the goal is empty", param_hint="--goal")
    if idempotency_key is not None and idempotency_key_problem(idempotency_key):
        raise typer.BadParameter(str(idempotency_key_problem(idempotency_key)), param_hint="--idempotency-key")
    if profile and script:
        raise typer.BadParameter("give --profile or --script, not both", param_hint="--profile")
    spec: GraphSpec | None = None
    if file is not None:
        try:
            spec = load_graph_file(file)
        except ConfigurationError as err:
            raise typer.BadParameter(str(err), param_hint="FILE") from None
    budget = budget_from_options(budget_tokens, budget_usd, budget_tool_calls, budget_hours)
    config = load_config()
    chosen = _check_models(config, spec, profile, script, planner_profile, reviewer_profile)
    started: dict[str, str] = {}

    async def go() -> GraphSnapshot | None:
        async with _graph_runtime(config) as rt:
            client = rt.client
            gid = await client.start_graph(
                goal=goal, graph=spec, workspace=str(workspace), graph_id=graph_id, profile=chosen,
                script=str(script) if script else None, planner_profile=planner_profile, reviewer_profile=reviewer_profile,
                approve_plan=approve_plan.value, risk_level=risk_level.value, max_parallel=max_parallel, max_retries=max_retries,
                failure_policy=failure_policy.value, retry_window_seconds=retry_window, tools=tools or None, sandbox=sandbox.value, network=network,
                max_rounds_per_node=max_rounds, idempotency_key=idempotency_key, budget=budget,
            )
            started["id"] = gid
            if not await client.has_worker():
                typer.echo(
                    f"agentrt: no worker polls task queue {config.task_queue!r}; the graph waits until one runs "
                    "(`agentrt worker` or `agentrt dev`)", err=True,
                )
            if as_json:
                typer.echo(json.dumps({"graph_id": gid}))
                return None
            what = cut(goal, 80) if goal is not None else f"{len(spec.nodes) if spec else 0} node(s) from {file.name if file else '-'}"
            typer.echo(f"graph {gid} started (workflow graph-{gid}): {what}")
            snapshot = await follow_graph(client, gid, approve_plan.value)
        typer.echo("")
        for line in graph_lines(snapshot):
            typer.echo(line)
        sys.stdout.flush()
        return snapshot

    def still_running() -> str | None:
        gid = started.get("id")
        return f"graph {gid} goes on; see it with: agentrt graph status {gid}" if gid else None

    snapshot = run_command(go, on_interrupt=still_running)
    raise typer.Exit(0 if snapshot is None or snapshot.status == "completed" else 1)


@graph_app.command("approve")
def graph_approve(
    graph_id: str,
    reject: bool = typer.Option(False, "--reject", help="Reject the plan instead: the graph ends rejected."),
    reason: Optional[str] = typer.Option(None, "--reason", help="Recorded with the decision (an operator must give one)."),
    as_json: bool = typer.Option(False, "--json", help="The graph's snapshot afterwards as one JSON object."),
) -> None:
    """Approve the plan of a graph pending approval (its nodes then run), or reject it with --reject."""
    config = load_config()

    async def go() -> None:
        async with _graph_runtime(config) as rt:
            snapshot = await rt.client.approve_graph(graph_id, reason, approve=not reject)
        _print_snapshot(snapshot, as_json, "plan rejected" if reject else "plan approved")

    run_command(go)


@graph_app.command("status")
def graph_status(graph_id: str, as_json: bool = typer.Option(False, "--json", help="The snapshot as one JSON object.")) -> None:
    """Show a graph: status, owner, goal, risk, approval, spend, its nodes in dependency order, the answer."""
    config = load_config()

    async def go() -> None:
        async with _graph_runtime(config) as rt:
            snapshot = await rt.client.graph_status(graph_id)
        if as_json:
            typer.echo(_snapshot_json(snapshot))
            return
        for line in graph_lines(snapshot):
            typer.echo(line)

    run_command(go)


@graph_app.command("events")
def graph_events(
    graph_id: str,
    since: int = typer.Option(0, "--since", min=0, max=2**62, help="Only events with seq greater than this."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
) -> None:
    """Print a graph's events, one line each: seq, time (UTC), type, what happened."""
    config = load_config()

    async def go() -> None:
        after = since
        async with _graph_runtime(config) as rt:
            while True:
                page = await rt.client.graph_events(graph_id, after)
                if after + 1 < page.first_seq:
                    typer.echo(f"(events {after + 1}-{page.first_seq - 1} belong to earlier runs of the graph: not shown)", err=True)
                if not page.events:
                    return
                for event in page.events:
                    typer.echo(event.model_dump_json() if as_json else graph_event_line(event))
                after = max(page.events[-1].seq, page.first_seq - 1)

    run_command(go)


@graph_app.command("cancel")
def graph_cancel(
    graph_id: str,
    reason: Optional[str] = typer.Option(None, "--reason", help="Recorded with the cancel (an operator must give one)."),
    as_json: bool = typer.Option(False, "--json", help="The graph's snapshot afterwards as one JSON object."),
) -> None:
    """Cancel a graph: its running nodes' sessions are cancelled and it ends cancelled."""
    config = load_config()

    async def go() -> None:
        async with _graph_runtime(config) as rt:
            snapshot = await rt.client.cancel_graph(graph_id, reason)
        _print_snapshot(snapshot, as_json, "cancelled")

    run_command(go)


@graph_app.command("retry")
def graph_retry(
    graph_id: str,
    node_id: str = typer.Argument(..., metavar="NODE", help="The node that failed for good."),
    reason: Optional[str] = typer.Option(None, "--reason", help="Recorded with the retry (an operator must give one)."),
    as_json: bool = typer.Option(False, "--json", help="The graph's snapshot afterwards as one JSON object."),
) -> None:
    """Run a node that failed for good again; the dependants it blocked wait for it again (the graph must still run)."""
    config = load_config()

    async def go() -> None:
        async with _graph_runtime(config) as rt:
            snapshot = await rt.client.graphs.retry_node(graph_id, node_id, reason)
        _print_snapshot(snapshot, as_json, f"node {node_id} retried")

    run_command(go)


@graph_app.command("list")
def graph_list(
    status: Optional[GraphStatusOption] = typer.Option(None, "--status", help="Only graphs with this status."),
    limit: int = typer.Option(50, "--limit", min=1, max=10_000, help="Show at most this many graphs."),
    as_json: bool = typer.Option(False, "--json", help="One JSON array of the graphs."),
) -> None:
    """List your graphs (as $AGENTRT_PRINCIPAL), most recently started first."""
    config = load_config()

    async def go() -> None:
        async with _graph_runtime(config) as rt:
            listing = await rt.client.list_graphs(status.value if status else None, limit)
        echo_listing(listing, "graph_id", "graph", as_json)

    run_command(go)


@graph_app.command("wait")
def graph_wait(graph_id: str, as_json: bool = typer.Option(False, "--json", help="The result as one JSON object.")) -> None:
    """Wait until a graph ends and print how. Exit code 0 when it completed, 1 when it failed, was rejected or cancelled."""
    config = load_config()

    def still_running() -> str:
        return f"graph {graph_id} goes on; see it with: agentrt graph status {graph_id}"

    async def go() -> TaskGraphResult:
        async with _graph_runtime(config) as rt:
            try:
                snapshot: GraphSnapshot | None = await rt.client.graph_status(graph_id)
            except WorkerUnavailable:
                snapshot = None  # no worker answers queries now; waiting needs none
            if snapshot is not None and snapshot.status == "pending_approval":
                typer.echo(f"graph {graph_id} waits for its plan's approval: agentrt graph approve {graph_id}", err=True)
            result = await rt.client.wait_graph(graph_id)
        if as_json:
            typer.echo(result.model_dump_json())
        else:
            for line in graph_result_lines(result):
                typer.echo(line)
        sys.stdout.flush()
        return result

    result = run_command(go, on_interrupt=still_running)
    raise typer.Exit(0 if result.status == "completed" else 1)

