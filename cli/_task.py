"""`agentrt task ...`: start an autonomous task (a goal pursued over days by sessions, acceptance
checks and durable timers), watch it (status, events, list, wait) and steer it (pause, resume,
nudge, cancel, amend, raise-budget)."""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from agentrt.cli._common import (
    ApprovalModeOption,
    SandboxMode,
    budget_from_options,
    echo_listing,
    load_config,
    load_script,
    run_command,
    warn_unpriced,
)
from agentrt.cli._runtime import runtime
from agentrt.cli._task_render import cut, result_lines, status_json, status_lines, task_event_line
from agentrt.schemas import (
    AgentrtError,
    ApprovalPolicy,
    AutonomousTaskResult,
    ConfigurationError,
    TaskStatusView,
    UnknownProfileError,
    idempotency_key_problem,
)
from agentrt.worker import AgentrtConfig

task_app = typer.Typer(
    help="Autonomous tasks: a goal pursued over hours or days by sessions that run, checkpoint and sleep.",
    no_args_is_help=True,
)

# The longest duration `--every` takes (seconds): a year.
MAX_DURATION_SECONDS = 366 * 86_400
_UNITS = {"s": 1, "m": 60, "h": 3_600, "d": 86_400}
_NUMBER = r"\d+(?:\.\d+)?"
_DURATION_PART = re.compile(rf"({_NUMBER})([smhd])")
DURATION_HELP = "a duration: 20s, 15m, 6h, 2d, 1h30m, or plain seconds"


class TaskStatusOption(str, Enum):
    """``task list --status``: a task status (``TASK_STATUSES``)."""

    waiting = "waiting"
    running = "running"
    paused = "paused"
    budget_exceeded = "budget_exceeded"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"


def parse_duration(text: str) -> float:
    """Seconds in ``text``: ``20s``, ``15m``, ``6h``, ``2d``, parts together (``1h30m``) or plain
    seconds (``90``, ``1.5``). Raises ``ValueError`` (saying what is accepted) for anything else,
    for 0, and for more than ``MAX_DURATION_SECONDS``."""
    raw = text.strip().lower()
    if re.fullmatch(_NUMBER, raw):
        seconds = float(raw)
    elif raw and re.fullmatch(rf"(?:{_NUMBER}[smhd])+", raw):
        seconds = sum(float(number) * _UNITS[unit] for number, unit in _DURATION_PART.findall(raw))
    else:
        raise ValueError(f"{text!r} is not {DURATION_HELP}")
    if seconds <= 0:
        raise ValueError(f"{text!r} is not more than 0 seconds")
    if seconds > MAX_DURATION_SECONDS:
        raise ValueError(f"{text!r} is more than a year ({MAX_DURATION_SECONDS} seconds)")
    return seconds


def _task_runtime(config: AgentrtConfig) -> Any:
    return runtime(config, embed_if_missing=False, ensure_worker=False)


def _print_view(view: TaskStatusView, as_json: bool, what: str) -> None:
    if as_json:
        typer.echo(status_json(view))
        return
    typer.echo(f"task {view.task_id}: {what}; now {view.status}, {view.sessions} of {view.max_sessions} session(s) used")


# ---------------------------------------------------------------- commands


@task_app.command("start")
def task_start(
    goal: str = typer.Argument(..., help="What the task should achieve; every session is told it."),
    workspace: Path = typer.Option(
        ..., "--workspace", "-w", help="Directory the sessions and commands work in.", exists=True, file_okay=False, resolve_path=True
    ),
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help="Model profile from agentrt.toml for the sessions."),
    script: Optional[Path] = typer.Option(
        None, "--script", exists=True, dir_okay=False, resolve_path=True,
        help="Scripted-model file (JSON or YAML): an offline model for the sessions.",
    ),
    accept: Optional[str] = typer.Option(
        None, "--accept", help="Acceptance command: the goal is met when it exits 0 in the workspace (OS sandbox)."
    ),
    accept_review: Optional[str] = typer.Option(
        None, "--accept-review", help="Acceptance criteria a reviewer model checks after each session."
    ),
    criteria: Optional[list[str]] = typer.Option(
        None, "--criterion", help="A criterion the goal must meet (repeat for more); sessions are told them."
    ),
    every: Optional[str] = typer.Option(
        None, "--every", metavar="DURATION", help=f"Sleep this long after each session ({DURATION_HELP})."
    ),
    cron: Optional[str] = typer.Option(
        None, "--cron", metavar="EXPR", help="Run sessions at the times of this five-field cron expression (UTC), e.g. '0 9 * * 1-5'."
    ),
    trigger: Optional[str] = typer.Option(
        None, "--trigger", metavar="CMD",
        help="At each wake run CMD in the workspace first: its output's first word says execute, ignore or defer SECONDS.",
    ),
    max_sessions: int = typer.Option(10, "--max-sessions", min=1, max=10_000, help="Sessions before the task fails."),
    max_rounds: int = typer.Option(50, "--max-rounds", min=1, max=10_000, help="Model calls per session."),
    budget_tokens: Optional[int] = typer.Option(None, "--budget-tokens", min=1, help="Most tokens (input + output) of all sessions."),
    budget_usd: Optional[float] = typer.Option(None, "--budget-usd", help="Most cost in US dollars (priced profiles only)."),
    budget_tool_calls: Optional[int] = typer.Option(None, "--budget-tool-calls", min=1, help="Most tool calls of all sessions."),
    budget_hours: Optional[float] = typer.Option(None, "--budget-hours", help="Most wall time since the start, in hours."),
    reviewer_profile: Optional[str] = typer.Option(
        None, "--reviewer-profile", help="Model profile of the acceptance reviewer (default: the sessions' profile)."
    ),
    sandbox: SandboxMode = typer.Option(SandboxMode.workspace_write, "--sandbox", help="How the sessions' and commands' processes are confined."),
    network: bool = typer.Option(False, "--network", help="Let sandboxed commands use the network."),
    approval_mode: ApprovalModeOption = typer.Option(
        ApprovalModeOption.never, "--approval-mode",
        help="No person answers a task: never (the default) runs what the sandbox confines and denies destructive "
        "and network calls; on_request and always deny every call their rules would ask about.",
    ),
    task_id: Optional[str] = typer.Option(None, "--id", help="Task id to use (default: a new random one); ids are not reused."),
    as_json: bool = typer.Option(False, "--json", help='Print {"task_id": "..."} only.'),
    idempotency_key: Optional[str] = typer.Option(
        None, "--idempotency-key", metavar="KEY",
        help="Start this task once for KEY (1-200 of A-Z a-z 0-9 . _ : -): started again with the same KEY, it prints the "
        "first start's task id and starts nothing. Without --id the task id comes from KEY.",
    ),
) -> None:
    """Start an autonomous task working towards GOAL and print its id; it goes on wherever a worker runs."""
    if not goal.strip():
        raise typer.BadParameter("the goal is empty", param_hint="GOAL")
    if idempotency_key is not None and idempotency_key_problem(idempotency_key):
        raise typer.BadParameter(str(idempotency_key_problem(idempotency_key)), param_hint="--idempotency-key")
    if every is not None and cron is not None:
        raise typer.BadParameter("give --every or --cron, not both", param_hint="--every")
    every_seconds = None
    if every is not None:
        try:
            every_seconds = parse_duration(every)
        except ValueError as err:
            raise typer.BadParameter(str(err), param_hint="--every") from None
    if cron is not None and len(cron.split()) != 5:
        raise typer.BadParameter(f"must have five fields (minute hour day month weekday), not {cron!r}", param_hint="--cron")
    for value, hint in ((accept, "--accept"), (accept_review, "--accept-review"), (trigger, "--trigger")):
        if value is not None and not value.strip():
            raise typer.BadParameter("is empty", param_hint=hint)
    if any(not c.strip() for c in criteria or []):
        raise typer.BadParameter("a criterion is empty", param_hint="--criterion")
    budget = budget_from_options(budget_tokens, budget_usd, budget_tool_calls, budget_hours)
    if script:
        try:
            load_script(str(script))
        except ConfigurationError as err:
            raise typer.BadParameter(str(err), param_hint="--script") from None
    config = load_config()
    chosen = profile or ("scripted" if script else config.default_profile)
    checked = [(chosen, "--profile")] if profile or not script else []
    for name, hint in checked + ([(reviewer_profile, "--reviewer-profile")] if reviewer_profile else []):
        try:
            config.profile(name)  # fail fast on an unknown profile
        except UnknownProfileError as err:
            more = "; give --script FILE to run the offline scripted model" if hint == "--profile" and not profile else ""
            raise typer.BadParameter(f"{err}{more}", param_hint=hint) from None
    warn_unpriced(config, chosen, budget)

    async def go() -> None:
        async with _task_runtime(config) as rt:
            started = await rt.client.start_task(
                goal, workspace=str(workspace), task_id=task_id, criteria=criteria or [], accept_command=accept,
                accept_review=accept_review, every_seconds=every_seconds, cron=cron, trigger_command=trigger,
                max_sessions=max_sessions, max_rounds_per_session=max_rounds, budget=budget, profile=chosen,
                script=str(script) if script else None, sandbox=sandbox.value, network=network, approval=ApprovalPolicy(mode=approval_mode.value),
                reviewer_profile=reviewer_profile, idempotency_key=idempotency_key,
            )
            worker = await rt.client.has_worker()
        if as_json:
            typer.echo(json.dumps({"task_id": started}))
        else:
            typer.echo(f"task {started} started (workflow task-{started}): {cut(goal, 80)}")
            typer.echo(f"  watch it: agentrt task status {started}   ·   stop it: agentrt task cancel {started}")
        if not worker:
            typer.echo(
                f"agentrt: no worker polls task queue {config.task_queue!r}; the task waits until one runs "
                "(`agentrt worker` or `agentrt dev`)",
                err=True,
            )

    run_command(go)


@task_app.command("status")
def task_status(task_id: str, as_json: bool = typer.Option(False, "--json", help="The status as one JSON object.")) -> None:
    """Show a task's goal, status, sessions, next wake, last checkpoint, and spend against its budget."""
    config = load_config()

    async def go() -> None:
        async with _task_runtime(config) as rt:
            view = await rt.client.task_status(task_id)
        if as_json:
            typer.echo(status_json(view))
            return
        for line in status_lines(view, datetime.now(timezone.utc)):
            typer.echo(line)

    run_command(go)


@task_app.command("events")
def task_events(
    task_id: str,
    since: int = typer.Option(0, "--since", min=0, max=2**62, help="Only events with seq greater than this."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
) -> None:
    """Print a task's events (of its current run), one line each: seq, time (UTC), type, what happened."""
    config = load_config()

    async def go() -> None:
        after = since
        async with _task_runtime(config) as rt:
            while True:
                page = await rt.client.task_events(task_id, after)
                if after + 1 < page.first_seq:
                    typer.echo(f"(events {after + 1}-{page.first_seq - 1} belong to earlier runs of the task: not shown)", err=True)
                if not page.events:
                    return
                for event in page.events:
                    typer.echo(event.model_dump_json() if as_json else task_event_line(event))
                after = max(page.events[-1].seq, page.first_seq - 1)

    run_command(go)


def _control_command(action: str, done: str, doc: str) -> Callable[..., None]:
    def command(
        task_id: str,
        reason: Optional[str] = typer.Option(None, "--reason", help="Recorded with the change (an operator must give one)."),
        as_json: bool = typer.Option(False, "--json", help="The task's status afterwards as one JSON object."),
    ) -> None:
        config = load_config()

        async def go() -> None:
            async with _task_runtime(config) as rt:
                view = await getattr(rt.client, f"{action}_task")(task_id, reason)
            _print_view(view, as_json, done)

        run_command(go)

    command.__doc__ = doc
    return command


task_app.command("pause")(_control_command(
    "pause", "paused",
    "Pause a task: no session and no acceptance check starts, and its running session pauses (no model or tool call\n"
    "starts) until `task resume`. Pausing a paused task is no error.",
))
task_app.command("resume")(_control_command("resume", "resumed", "Resume a paused task: its session goes on where it stopped."))
task_app.command("nudge")(_control_command("nudge", "nudged", "Wake a sleeping task now instead of at its next wake."))
task_app.command("cancel")(_control_command("cancel", "cancel requested", "Cancel a task: its running session is cancelled and the task ends."))


@task_app.command("amend")
def task_amend(
    task_id: str,
    goal: str = typer.Argument(..., help="The new goal the next sessions work towards."),
    criteria: Optional[list[str]] = typer.Option(
        None, "--criterion", help="A criterion of the new goal (repeat for more; none given: the criteria stay)."
    ),
    reason: Optional[str] = typer.Option(None, "--reason", help="Recorded with the change (an operator must give one)."),
    as_json: bool = typer.Option(False, "--json", help="The task's status afterwards as one JSON object."),
) -> None:
    """Change a task's goal (and, with --criterion, its criteria) from its next session on."""
    if not goal.strip():
        raise typer.BadParameter("the goal is empty", param_hint="GOAL")
    if any(not c.strip() for c in criteria or []):
        raise typer.BadParameter("a criterion is empty", param_hint="--criterion")
    config = load_config()

    async def go() -> None:
        async with _task_runtime(config) as rt:
            view = await rt.client.amend_task_goal(task_id, goal, criteria or None, reason)
        _print_view(view, as_json, "goal amended")

    run_command(go)


@task_app.command("raise-budget")
def task_raise_budget(
    task_id: str,
    budget_tokens: Optional[int] = typer.Option(None, "--budget-tokens", min=1, help="New most tokens (input + output)."),
    budget_usd: Optional[float] = typer.Option(None, "--budget-usd", help="New most cost in US dollars."),
    budget_tool_calls: Optional[int] = typer.Option(None, "--budget-tool-calls", min=1, help="New most tool calls."),
    budget_hours: Optional[float] = typer.Option(None, "--budget-hours", help="New most wall time since the start, in hours."),
    max_sessions: Optional[int] = typer.Option(None, "--max-sessions", min=1, max=10_000, help="New most sessions."),
    reason: Optional[str] = typer.Option(None, "--reason", help="Recorded with the change (an operator must give one)."),
    as_json: bool = typer.Option(False, "--json", help="The task's status afterwards as one JSON object."),
) -> None:
    """Raise a task's limits (the ones given replace the current ones); a task stopped at its budget goes on."""
    budget = budget_from_options(budget_tokens, budget_usd, budget_tool_calls, budget_hours)
    if budget is None and max_sessions is None:
        raise typer.BadParameter(
            "give at least one of --budget-tokens, --budget-usd, --budget-tool-calls, --budget-hours, --max-sessions"
        )
    config = load_config()

    async def go() -> None:
        async with _task_runtime(config) as rt:
            view = await rt.client.raise_task_budget(task_id, budget, max_sessions, reason)
        _print_view(view, as_json, f"limits raised to {view.budget.describe()}, {view.max_sessions} session(s)")

    run_command(go)


@task_app.command("list")
def task_list(
    status: Optional[TaskStatusOption] = typer.Option(None, "--status", help="Only tasks with this status."),
    limit: int = typer.Option(50, "--limit", min=1, max=10_000, help="Show at most this many tasks."),
    as_json: bool = typer.Option(False, "--json", help="One JSON array of the tasks."),
) -> None:
    """List your tasks (as $AGENTRT_PRINCIPAL), most recently started first."""
    config = load_config()

    async def go() -> None:
        async with _task_runtime(config) as rt:
            listing = await rt.client.list_tasks(status.value if status else None, limit)
        echo_listing(listing, "task_id", "task", as_json)

    run_command(go)


@task_app.command("wait")
def task_wait(task_id: str, as_json: bool = typer.Option(False, "--json", help="The result as one JSON object.")) -> None:
    """Wait until a task ends and print how. Exit code 0 when it completed, 1 when it failed or was cancelled."""
    config = load_config()

    def still_running() -> str:
        return f"task {task_id} goes on; see it with: agentrt task status {task_id}"

    async def go() -> AutonomousTaskResult:
        async with _task_runtime(config) as rt:
            try:
                view: TaskStatusView | None = await rt.client.task_status(task_id)
            except AgentrtError:
                view = None  # no worker answers queries now; waiting needs none
            if view is not None and view.status in ("paused", "budget_exceeded"):
                step = "resume" if view.status == "paused" else "raise-budget"
                typer.echo(
                    f"task {task_id} is {view.status}: waiting until someone runs agentrt task {step} {task_id} "
                    f"(or cancel)", err=True,
                )
            result = await rt.client.wait_task(task_id)
        if as_json:
            typer.echo(result.model_dump_json())
        else:
            for line in result_lines(result):
                typer.echo(line)
        sys.stdout.flush()
        return result

    result = run_command(go, on_interrupt=still_running)
    raise typer.Exit(0 if result.status == "completed" else 1)
