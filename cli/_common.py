"""What every `agentrt` command shares: exit codes for errors, the configuration, and following a turn
(its events, streamed text and approvals) until it ends."""

from __future__ import annotations

import os

import asyncio
import json
import math
import signal
import sys
from datetime import timezone
from enum import Enum
from typing import Any, Awaitable, Callable, TypeVar

import typer
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from agentrt.client import AgentClient, Patience, StoreWait, start_failure
from agentrt.cli._render import QUIET_LIVE_EVENTS, event_line, printable, usage_text
from agentrt.cli._runtime import Runtime
from agentrt.schemas import (
    ActivityWait,
    AgentrtError,
    AssistantMessageCompleted,
    Budget,
    EventsPage,
    PermissionRequested,
    RequestRejected,
    ServerUnavailable,
    SessionNotFound,
    SessionStuck,
    TurnEnded,
    TurnOutcome,
    WorkerUnavailable,
    session_workflow_id,
)
from agentrt.store import StreamWakeups
from agentrt.worker import AgentrtConfig

T = TypeVar("T")


class ApprovalModeOption(str, Enum):
    """``--approval-mode``: the session's ``ApprovalPolicy.mode``."""

    never = "never"
    on_request = "on_request"
    always = "always"


class AdvisorModeOption(str, Enum):
    """``--advisor``: the session's ``AdvisorPolicy.mode``."""

    off = "off"
    lightweight = "lightweight"
    full = "full"


class SandboxMode(str, Enum):
    """``--sandbox``: a session's ``SandboxPolicy``."""

    read_only = "read_only"
    workspace_write = "workspace_write"
    danger_full_access = "danger_full_access"


class ApproveMode(str, Enum):
    ask = "ask"
    auto = "auto"
    deny = "deny"


def run_command(
    coro_factory: Callable[[], Awaitable[T]], *, service: bool = False, on_interrupt: Callable[[], str | None] | None = None
) -> T:
    """Run a coroutine; AgentrtError becomes a one-line error and exit code 2 (1 for ``SessionStuck``).

    Ctrl-C and SIGTERM cancel it. A ``service`` (``worker``, ``dev``) stopped by SIGTERM, as
    a container runtime stops it, exits 0 after a graceful shutdown; otherwise an
    interruption exits 130, printing ``interrupted`` and what ``on_interrupt`` returns (what
    goes on without the command, and how to stop it).
    """
    stopped_by_sigterm = False

    async def main() -> T:
        task = asyncio.ensure_future(coro_factory())

        def on_sigterm() -> None:
            nonlocal stopped_by_sigterm
            stopped_by_sigterm = True
            task.cancel()

        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_sigterm)
        try:
            return await task
        except Exception:
            # A call cancelled by Ctrl-C or SIGTERM may end with an error of its own (a Temporal update
            # wait ends WorkflowUpdateRPCTimeoutOrCancelledError): it is the interruption all the same.
            current = asyncio.current_task()
            if stopped_by_sigterm or (current is not None and current.cancelling()):
                raise asyncio.CancelledError() from None
            raise

    try:
        return asyncio.run(main())
    except SessionStuck as err:  # exit 1, as `agentrt doctor` and `session state` do for a stuck one
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1) from None
    except ServerUnavailable as err:
        typer.echo(
            f"error: {err}\n  start one with `agentrt dev` (the server `agentrt run` starts for itself "
            "stops when the run ends), or point AGENTRT_TEMPORAL_ADDRESS at yours",
            err=True,
        )
        raise typer.Exit(2) from None
    except AgentrtError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    except RPCError as err:
        typer.echo(f"error: Temporal answered {err.status.name}: {err.message}", err=True)
        raise typer.Exit(2) from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        if service and stopped_by_sigterm:
            typer.echo("stopped (SIGTERM)", err=True)
            raise typer.Exit(0) from None
        hint = on_interrupt() if on_interrupt is not None else None
        typer.echo(f"interrupted; {hint}" if hint else "interrupted", err=True)
        raise typer.Exit(130) from None


def load_config() -> AgentrtConfig:
    """``AgentrtConfig.load()``; a configuration error becomes a one-line error and exit code 2."""
    try:
        return AgentrtConfig.load()
    except AgentrtError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None


async def drive_turn(
    rt: Runtime,
    session_id: str,
    turn_id: str,
    approve: ApproveMode,
    out: Any,
    since_seq: int = 0,
) -> TurnOutcome:
    """Print the turn's events and streamed text until it ends; answer approvals per ``approve``.

    Also reports activity retries (a provider down, a tool's worker lost) from the
    workflow's pending activities, so a stalled round says why. Follows the turn through worker
    kills and server restarts (``next_events``).
    """
    client = rt.client
    patience = Patience(session_id, f"turn {turn_id}")

    def say(line: str) -> None:
        out.write(f"      {line}\n")
        out.flush()

    store_wait = StoreWait(rt.store, say)  # a store that does not answer is waited out, and said
    delta_after = await store_wait.read(rt.store.last_delta_id, session_id)
    stream_key: tuple[str, int, int] | None = None
    answered: set[str] = set()
    prompts: list[asyncio.Task[None]] = []
    reported_failures: set[tuple[str, int]] = set()
    polls = 0
    # A write heard (this process, or PostgreSQL) ends the wait; at most one look per 0.05 s.
    wakeups = StreamWakeups(rt.store.changes, min_interval=0.05)
    wakeups.watch(session_id)
    try:
        while True:
            ended = False
            page = await store_wait.call(lambda: next_events(client, session_id, since_seq, patience))
            # Read after the events: a reply's text is printed before the event that completes it.
            deltas = await store_wait.read(rt.store.deltas, session_id, delta_after)

            def stream(upto: tuple[str, int] | None) -> None:
                """Print the fetched deltas (only those of rounds up to ``upto`` = (turn, round), when given)."""
                nonlocal deltas, delta_after, stream_key
                while deltas and (upto is None or (deltas[0].turn_id == upto[0] and deltas[0].round <= upto[1])):
                    delta = deltas.pop(0)
                    delta_after = delta.id
                    key = (delta.turn_id, delta.round, delta.attempt)
                    if key != stream_key:
                        out.write(("\n" if stream_key is not None else "") + "      model> ")
                        stream_key = key
                    out.write(printable(delta.text, keep_newlines=True))

            for event in page.events:
                since_seq = event.seq
                if isinstance(event, QUIET_LIVE_EVENTS):
                    continue
                if isinstance(event, AssistantMessageCompleted) and event.turn_id is not None:
                    stream((event.turn_id, event.round))
                if stream_key is not None:
                    out.write("\n")
                    stream_key = None
                out.write(event_line(event) + "\n")
                if isinstance(event, PermissionRequested) and event.request.request_id not in answered:
                    answered.add(event.request.request_id)
                    prompts.append(asyncio.create_task(answer_approval(client, session_id, event, approve, out)))
                if isinstance(event, TurnEnded) and event.turn_id == turn_id:
                    ended = True
            stream(None)
            polls += 1
            if polls % 5 == 0:
                await report_retries(client, session_id, reported_failures, out)
                if not ended and await session_closed(client, session_id):
                    # Failed at its start (an agent or tool no worker registered) or ended otherwise:
                    # the wait says how (a typed error), or gives the outcome the store did not show yet.
                    out.flush()
                    failure = await start_failure(client.temporal.get_workflow_handle(f"session-{session_id}"))
                    if failure is not None:
                        raise failure
                    return await store_wait.call(lambda: client.wait(session_id, turn_id, timeout_seconds=0))
            if ended:
                if stream_key is not None:
                    out.write("\n")
                out.flush()
                return await store_wait.call(lambda: client.wait(session_id, turn_id))
            out.flush()
            await wakeups.wait(session_id, 0.2)
    finally:
        wakeups.close()
        for task in prompts:
            task.cancel()


async def next_events(client: AgentClient, session_id: str, since_seq: int, patience: Patience) -> EventsPage:
    """``client.events(session_id, since_seq)``, asked again with backoff while no server or worker
    answers (a restart, a killed worker), warning once a minute; Ctrl-C stops it."""
    address = client.temporal.service_client.config.target_host
    while True:
        try:
            return await patience.retried(lambda: client.events(session_id, since_seq), address)
        except WorkerUnavailable as err:
            await patience.pause(err, f"no worker answers ({err.reason})")


async def retry_lines(client: AgentClient, session_id: str) -> list[tuple[tuple[str, int], str]]:
    """The session's activities that wait for the store or are being retried (``sessions.waits``),
    each as ``((activity id, attempt), line)``: ``retrying provider.complete (attempt 3 of 9, after
    2 s): <last error>`` or ``provider.complete waits for the store (since 12:00:01 UTC): <why>``;
    empty when none does (or the server does not answer)."""
    try:
        waits = await client.sessions.waits(session_id)
    except (RPCError, SessionNotFound):  # not visible yet, or the server is away: nothing to say now
        return []
    return [((wait.activity_id, wait.attempt), wait_line(wait)) for wait in waits]


def wait_line(wait: ActivityWait) -> str:
    """One line for an ``ActivityWait`` (``retry_lines``)."""
    if wait.kind == "store_unavailable":
        since = f" (since {wait.since:%H:%M:%S} UTC)" if wait.since is not None else ""
        return f"{wait.activity} (attempt {wait.attempt}) waits for the store{since}: {wait.message}"
    of = f" of {wait.maximum_attempts}" if wait.maximum_attempts else ""
    after = f", after {wait.retry_in:g} s" if wait.retry_in else ""
    return f"retrying {wait.activity} (attempt {wait.attempt}{of}{after}): {wait.message}"


async def session_closed(client: AgentClient, session_id: str) -> bool:
    """Whether the session's workflow run has closed (failed, completed, cancelled, terminated)."""
    try:
        description = await client.temporal.get_workflow_handle(f"session-{session_id}").describe()
    except RPCError:
        return False  # not visible yet, or the server is away: the loop goes on
    return description.status not in (WorkflowExecutionStatus.RUNNING, WorkflowExecutionStatus.CONTINUED_AS_NEW)


async def report_retries(client: AgentClient, session_id: str, reported: set[tuple[str, int]], out: Any) -> None:
    """Print each wait for the store and each failed attempt of a pending activity once (``retry_lines``)."""
    for key, line in await retry_lines(client, session_id):
        if key not in reported:
            reported.add(key)
            out.write(f"      {line}\n")


# The longest part of a server's answer schema shown at the prompt (characters).
MAX_SHOWN_SCHEMA_CHARS = 2000


async def read_answer(client: AgentClient, session_id: str, request_id: str, out: Any, done: str) -> str | None:
    """A line of terminal input for ``request_id`` (``""`` at end of input), or None once it was
    ``done`` (decided, answered) from another process, the temporal CLI or the UI: stop asking."""
    sys.stderr.flush()
    reading = asyncio.ensure_future(asyncio.to_thread(sys.stdin.readline))
    while not reading.done():
        pending = {r.request_id for r in (await client.state(session_id)).pending_approvals}
        if request_id not in pending:
            out.write(f"\n      {request_id} was {done} elsewhere\n")
            return None
        await asyncio.wait([reading], timeout=0.5)
    if not sys.stdin.isatty():
        sys.stderr.write("\n")  # a terminal echoes the answer's line end; piped input does not
    return reading.result()


async def answer_approval(client: AgentClient, session_id: str, event: PermissionRequested, mode: ApproveMode, out: Any) -> None:
    request = event.request
    if request.kind == "reconcile":
        out.write(
            f"      {request.tool} may or may not have run; answer with: "
            f"agentrt session reconcile {session_id} {request.request_id} applied|not_applied\n"
        )
        return
    if request.kind == "elicitation":
        await answer_question(client, session_id, event, out)
        return
    if mode is ApproveMode.auto:
        out.write(f"      operator {client.principal}: granting {request.request_id} ({request.tool}) [--approve auto]\n")
        await client.approve(session_id, request.request_id, reason="granted by CLI (--approve auto)")
        return
    if mode is ApproveMode.deny:
        out.write(f"      operator {client.principal}: denying {request.request_id} ({request.tool}) [--approve deny]\n")
        await client.deny(session_id, request.request_id, reason="denied by CLI (--approve deny)")
        return
    elsewhere = f"agentrt session approve|deny {session_id} {request.request_id}"
    sys.stdout.flush()
    arguments = json.dumps(request.arguments)
    shown = arguments if len(arguments) <= 300 else arguments[:299] + "…"  # cut arguments say so
    sys.stderr.write(f"\napprove {request.tool} {shown}? [y/N] (or from elsewhere: {elsewhere}) ")
    answer = await read_answer(client, session_id, request.request_id, out, "decided")
    if answer is None:
        return
    if not answer:
        out.write(f"      (no terminal input) waiting for a decision from elsewhere: {elsewhere}\n")
        return
    try:
        if answer.strip().lower() in {"y", "yes"}:
            await client.approve(session_id, request.request_id, reason="granted at the terminal")
        else:
            await client.deny(session_id, request.request_id, reason="denied at the terminal")
    except RequestRejected as err:
        out.write(f"      {err}\n")


def outcome_json(session_id: str, outcome: TurnOutcome) -> str:
    return json.dumps(
        {
            "session_id": session_id,
            "turn_id": outcome.turn_id,
            "outcome": outcome.status,
            "answer": outcome.answer,
            "error": outcome.error,
            "error_type": outcome.error_type,
            "rounds": outcome.rounds,
            "tool_calls": outcome.tool_calls,
            "usage": outcome.usage.model_dump(),
            "output": outcome.output,
        }
    )


def print_outcome(session_id: str, outcome: TurnOutcome, as_json: bool) -> None:
    if as_json:
        typer.echo(outcome_json(session_id, outcome))
        return
    typer.echo("")
    if outcome.answer:
        typer.echo(outcome.answer)
        typer.echo("")
    detail = f": {outcome.error}" if outcome.error else ""
    code = f" {outcome.error_type}" if outcome.error_type else ""
    typer.echo(
        f"[{outcome.status}{code}{detail}] session {session_id} · {outcome.turn_id} · {outcome.rounds} round(s) · "
        f"{outcome.tool_calls} tool call(s) · {usage_text(outcome.usage)}"
    )
    if outcome.status == "budget_exceeded" and outcome.error_type == "QuotaExceeded":
        typer.echo("the tenant's quota stops it until it resets or an operator raises it: agentrt quota show, agentrt quota raise")
    elif outcome.status == "budget_exceeded":
        typer.echo(f"raise the budget to go on: agentrt session raise-budget {session_id} --budget-tokens N (see --help)")


async def answer_question(client: AgentClient, session_id: str, event: PermissionRequested, out: Any) -> None:
    """Ask at the terminal (or read standard input) what an MCP server asked: a JSON object for
    its schema, ``decline`` or ``cancel``; an answer the session refuses (not JSON, off the
    schema) asks again. At the end of input, say how to answer from elsewhere."""
    request = event.request
    elsewhere = f"agentrt session answer {session_id} {request.request_id} '{{...}}' (or --decline / --cancel)"
    schema = request.requested_schema or {}
    shown = json.dumps(schema)
    if len(shown) > MAX_SHOWN_SCHEMA_CHARS:
        shown = shown[:MAX_SHOWN_SCHEMA_CHARS] + f"… (whole: agentrt session state {session_id} --json)"
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    sys.stdout.flush()
    sys.stderr.write(
        f"\n{request.tool} asks: {printable(request.message or '')}\n"
        f"answer as JSON matching {shown}\n" + (f"required: {', '.join(map(str, required))}\n" if required else "")
    )
    while True:
        sys.stderr.write(f"(a JSON object, or decline / cancel; from elsewhere: {elsewhere})> ")
        line = await read_answer(client, session_id, request.request_id, out, "answered")
        if line is None:
            return
        if not line:
            out.write(f"      (end of terminal input) waiting for an answer from elsewhere: {elsewhere}\n")
            return
        line = line.strip()
        try:
            if line.lower() in ("decline", "cancel"):
                await client.answer(session_id, request.request_id, action=line.lower())  # type: ignore[arg-type]
                return
            content = json.loads(line)
            if not isinstance(content, dict):
                out.write("      the answer must be a JSON object; try again\n")
                continue
            await client.answer(session_id, request.request_id, content)
            return
        except json.JSONDecodeError as err:
            out.write(f"      not JSON ({err}); try again\n")
        except RequestRejected as err:
            out.write(f"      {err}; try again\n")


def budget_from_options(
    tokens: int | None, usd: float | None, tool_calls: int | None, hours: float | None
) -> Budget | None:
    """The ``Budget`` the ``--budget-*`` options give, None when none is given; raises
    ``typer.BadParameter`` for a cost or a time that is not a finite number above 0."""
    for value, hint in ((usd, "--budget-usd"), (hours, "--budget-hours")):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise typer.BadParameter(f"must be more than 0, not {value}", param_hint=hint)
    if tokens is None and usd is None and tool_calls is None and hours is None:
        return None
    return Budget(
        max_tokens=tokens, max_cost_usd=usd, max_tool_calls=tool_calls,
        max_wall_seconds=hours * 3_600 if hours is not None else None,
    )


def warn_unpriced(config: AgentrtConfig, profile: str, budget: Budget | None) -> None:
    """Say on stderr when ``--budget-usd`` cannot trip: ``profile`` has no ``[profiles.NAME.price]``."""
    if budget is None or budget.max_cost_usd is None:
        return
    try:
        price = config.profile(profile).price
    except AgentrtError:
        price = None
    if price is None:
        typer.echo(
            f"warning: profile {profile!r} has no [profiles.{profile}.price]: its calls cost $0, so --budget-usd "
            "never stops them", err=True,
        )


def acknowledge(as_json: bool, text: str, **fields: Any) -> None:
    """Print what an action command did: ``text`` for a person, or with ``as_json`` one JSON
    object of ``fields`` (a script's stable shape: ids, the decision, its scope)."""
    typer.echo(json.dumps(fields) if as_json else text)


def echo_listing(rows: list[Any], id_field: str, noun: str, as_json: bool) -> None:
    """Print a ``list_tasks``/``list_graphs`` result: one JSON array (``started_at`` as ISO 8601),
    or a line per row (id, status, start time in UTC), or ``no <noun>s``."""
    if as_json:
        typer.echo(json.dumps([{**vars(r), "started_at": r.started_at.isoformat() if r.started_at else None} for r in rows]))
        return
    if not rows:
        typer.echo(f"no {noun}s")
    for row in rows:
        started = row.started_at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if row.started_at else "-"
        typer.echo(f"{getattr(row, id_field):<14} {row.status:<17} {started}")


def load_script(path: str) -> Any:
    """The scripted model's file at ``path``, read and checked (``ConfigurationError`` when it does
    not load). The provider's module is imported here, by a command given a script, not by every command.
    Read by its real path, as the client records it (a worker opens a script by its real path only)."""
    from agentrt.activities.providers.scripted import load_script as load

    return load(os.path.realpath(path))
