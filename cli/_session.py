"""`agentrt session ...`: inspect and steer existing sessions (list, state, events, send, approvals,
answers to MCP servers' questions, cancel, compact, switch-model, raise-budget, rename, archive)."""

from __future__ import annotations

import json
import sys
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Optional

import typer
from temporalio.service import RPCError

from agentrt.cli._common import (
    ApproveMode,
    acknowledge,
    budget_from_options,
    drive_turn,
    load_config,
    print_outcome,
    run_command,
    wait_line,
)
from agentrt.cli._doctor import stuck_session_error
from agentrt.cli._output import output_attempts_option, output_schema_option, output_spec
from agentrt.client import failing_workflow_task
from agentrt.cli._render import event_line, pending_request_line, printable, usage_text
from agentrt.cli._runtime import runtime
from agentrt.cli._task_render import cut
from agentrt.schemas import RequestRejected, SessionBusy, SessionStuck, idempotency_key_problem, session_workflow_id
from agentrt.worker import AgentrtConfig

session_app = typer.Typer(help="Inspect and steer existing sessions.", no_args_is_help=True)


def _session_runtime(config: AgentrtConfig) -> Any:
    return runtime(config, embed_if_missing=False, ensure_worker=False)


@session_app.command("list")
def session_list(
    query: Optional[str] = typer.Option(None, "--query", "-q", help="Extra visibility filter, e.g. \"AgentSessionStatus = 'idle'\"."),
    limit: int = typer.Option(50, "--limit", min=1, max=10_000, help="Show at most this many sessions."),
    include_archived: bool = typer.Option(False, "--all", help="Include archived sessions."),
    as_json: bool = typer.Option(False, "--json", help="One JSON array: a row per session."),
) -> None:
    """List sessions, one row each (its latest run), most recently started run first; archived ones only with --all."""
    config = load_config()

    async def go() -> None:
        async with _session_runtime(config) as rt:
            listing = await rt.client.list_sessions(query, limit, include_archived=include_archived)
        if as_json:
            typer.echo(json.dumps([{**vars(s), "started_at": s.started_at.isoformat() if s.started_at else None} for s in listing]))
            return
        if not listing:
            typer.echo("no sessions")
        for s in listing:
            started = s.started_at.strftime("%Y-%m-%d %H:%M:%S") if s.started_at else "-"
            title = f"  {cut(s.title, 60)}" if s.title else ""
            typer.echo(f"{s.session_id:<14} {s.status:<18} {s.owner or '-':<12} {started}{title}")

    run_command(go)


@session_app.command("state")
def session_state(session_id: str, as_json: bool = typer.Option(False, "--json", help="The state as one JSON object.")) -> None:
    """Show a session's status, active turn, pending approvals and token usage; exit 1 when it is stuck (its workflow task keeps failing)."""
    config = load_config()

    async def go() -> int:
        async with _session_runtime(config) as rt:
            try:
                view = await rt.client.state(session_id, waits=True)
            except (RPCError, RequestRejected, SessionStuck):  # a query fails while the workflow task does
                problem = await failing_workflow_task(rt.client.temporal, session_workflow_id(session_id))
                if problem is None:
                    raise
                typer.echo(stuck_session_error(session_id, problem), err=True)
                return 1
        if as_json:
            typer.echo(view.model_dump_json())
            return 0
        agent = f" agent {view.agent}" if view.agent else ""
        typer.echo(f"session   {view.session_id} ({view.status}) owner {view.owner} profile {view.profile}{agent}")
        typer.echo(f"workspace {view.workspace}")
        if view.title:
            typer.echo(f"title     {printable(view.title)}")
        if view.paused is not None:
            why = f": {view.paused.reason}" if view.paused.reason else ""
            typer.echo(f"paused    by {view.paused.principal} since {view.paused.since:%Y-%m-%d %H:%M:%S} UTC{why} "
                       f"(`agentrt session resume {view.session_id}`)")
        network = "network on" if view.network else "no network"
        typer.echo(f"policy    sandbox {view.sandbox}, {network}; approval mode {view.approval_mode}")
        active = f"{view.active_turn_id} (round {view.current_round})" if view.active_turn_id else "-"
        typer.echo(f"turns     {view.turns_completed} done; active {active}; queued {', '.join(view.queued_turn_ids) or '-'}")
        typer.echo(f"usage     {usage_text(view.usage)}")
        if view.budget is not None and view.spend is not None:
            typer.echo(
                f"budget    {view.budget.describe()}; spent ${view.spend.cost_usd:.4f}, {view.spend.tool_calls} tool call(s); "
                f"left {view.remaining.describe() if view.remaining is not None else '-'}"
            )
        if view.context_window is not None:
            summary = f"; summary {view.summary_id}" if view.summary_id is not None else ""
            typer.echo(
                f"context   next call ~{view.context_tokens} of {view.context_window} tokens "
                f"({view.max_output_tokens} reserved for output); conversation since the last summary "
                f"~{view.live_tokens} tokens; {view.compactions} compaction(s){summary}"
            )
        typer.echo(f"history   run {view.run}; events from seq {view.first_seq_in_run} held by this run, {view.last_seq} in all")
        for r in view.pending_approvals:
            typer.echo(pending_request_line(view.session_id, r))
        for wait in view.waits:
            typer.echo(f"{'retry' if wait.kind == 'retrying' else 'store':<9} {wait_line(wait)}")
        return 0

    raise typer.Exit(run_command(go))


@session_app.command("events")
def session_events(
    session_id: str,
    since: int = typer.Option(0, "--since", min=0, max=2**62, help="Only events with seq greater than this."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new events until the session ends."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
) -> None:
    """Print a session's events."""
    config = load_config()

    def emit(event: Any) -> None:
        typer.echo(event.model_dump_json() if as_json else event_line(event))

    async def go() -> None:
        async with _session_runtime(config) as rt:
            if follow:
                async for event in rt.client.follow(session_id, since):
                    emit(event)
                return
            async for event in rt.client.all_events(session_id, since):
                emit(event)

    run_command(go)


@session_app.command("send")
def session_send(
    session_id: str,
    text: str,
    wait: bool = typer.Option(True, "--wait/--no-wait", help="Wait for the turn and print its outcome."),
    approve: ApproveMode = typer.Option(ApproveMode.ask, "--approve", help="Answer approvals: ask at the terminal, auto-grant, or deny."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object: the outcome (with --no-wait, the turn id)."),
    idempotency_key: Optional[str] = typer.Option(
        None, "--idempotency-key", metavar="KEY",
        help="Send this message once for KEY (1-200 of A-Z a-z 0-9 . _ : -): sent again with the same KEY, it names the "
        "first one's turn and queues nothing; the same KEY with another text is refused.",
    ),
    output_schema: Optional[Path] = output_schema_option(),
    output_attempts: int = output_attempts_option(),
    if_idle: bool = typer.Option(
        False, "--if-idle",
        help="Send only if the session is idle: while a turn runs, a compaction runs or anything is queued, queue "
        "nothing, say why on stderr and exit 3 (SessionBusy).",
    ),
) -> None:
    """Send a message; it runs after any active turn (with --output-schema, its answer must match that schema;
    with --if-idle, only if the session is idle)."""
    if idempotency_key is not None and idempotency_key_problem(idempotency_key):
        raise typer.BadParameter(str(idempotency_key_problem(idempotency_key)), param_hint="--idempotency-key")
    output = output_spec(output_schema, output_attempts)
    config = load_config()

    async def go() -> int:
        async with _session_runtime(config) as rt:
            before = (await rt.client.state(session_id)).last_seq
            try:
                sent = await rt.client.send(session_id, text, idempotency_key=idempotency_key, output=output, if_idle=if_idle)
            except SessionBusy as err:
                typer.echo(f"error: {err}", err=True)
                if as_json:
                    typer.echo(json.dumps({"session_id": session_id, "busy": err.busy, "turn_id": err.turn_id, "error": str(err)}))
                return 3
            if not wait:
                typer.echo(json.dumps({"session_id": session_id, "turn_id": sent.turn_id}) if as_json else sent.turn_id)
                return 0
            progress = sys.stderr if as_json else sys.stdout
            # A repeat names a turn that may have ended before ``before``: its outcome, without following.
            ended = await rt.client.wait(session_id, sent.turn_id, timeout_seconds=0) if idempotency_key else None
            if ended is not None and ended.status != "pending":
                outcome = ended
            else:
                outcome = await drive_turn(rt, session_id, sent.turn_id, approve, progress, since_seq=before)
            print_outcome(session_id, outcome, as_json)
            return 0 if outcome.status == "completed" else 1

    raise typer.Exit(run_command(go))


def _decision_command(decision: str) -> Callable[..., None]:
    def command(
        session_id: str,
        request_id: str,
        reason: Optional[str] = typer.Option(None, "--reason", help="Recorded with the decision."),
        as_json: bool = typer.Option(False, "--json", help="Print what was done as one JSON object."),
    ) -> None:
        config = load_config()

        async def go() -> None:
            async with _session_runtime(config) as rt:
                await rt.client.deny(session_id, request_id, reason)
            acknowledge(
                as_json, f"denied {request_id} in session {session_id}",
                session_id=session_id, request_id=request_id, decision="deny",
            )

        run_command(go)

    def grant_command(
        session_id: str,
        request_id: str,
        reason: Optional[str] = typer.Option(None, "--reason", help="Recorded with the decision."),
        for_session: bool = typer.Option(
            False, "--for-session", help="Also run later calls under the same policy rule without asking, for the rest of the session."
        ),
        arguments: Optional[str] = typer.Option(
            None, "--arguments", help="A JSON object: run the call with these arguments instead of the model's."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print what was done as one JSON object."),
    ) -> None:
        edited = None
        if arguments is not None:
            try:
                edited = json.loads(arguments)
            except ValueError as err:
                raise typer.BadParameter(f"not JSON: {err}", param_hint="--arguments") from None
            except RecursionError:  # nested deeper than the JSON parser goes
                raise typer.BadParameter("nested too deep", param_hint="--arguments") from None
            if not isinstance(edited, dict):
                raise typer.BadParameter("must be a JSON object", param_hint="--arguments")
        config = load_config()

        async def go() -> None:
            async with _session_runtime(config) as rt:
                await rt.client.approve(session_id, request_id, reason, for_session=for_session, arguments=edited)
            scope = " for the rest of the session" if for_session else ""
            acknowledge(
                as_json, f"granted {request_id} in session {session_id}{scope}{' with edited arguments' if edited else ''}",
                session_id=session_id, request_id=request_id, decision="grant", for_session=for_session,
                edited_arguments=edited is not None,
            )

        run_command(go)

    if decision == "grant":
        grant_command.__doc__ = "Grant a pending approval (REQUEST_ID as in `session state`), optionally for the session or with edited arguments."
        return grant_command

    command.__doc__ = f"{'Grant' if decision == 'grant' else 'Deny'} a pending approval (REQUEST_ID as in `session state`)."
    return command


session_app.command("approve")(_decision_command("grant"))
session_app.command("deny")(_decision_command("deny"))


class ReconcileOutcome(str, Enum):
    applied = "applied"
    not_applied = "not_applied"


@session_app.command("reconcile")
def session_reconcile(
    session_id: str,
    request_id: str,
    outcome: ReconcileOutcome = typer.Argument(..., help="applied: the effect happened; not_applied: run the call once more."),
    note: Optional[str] = typer.Option(None, "--note", help="Recorded with the answer."),
    as_json: bool = typer.Option(False, "--json", help="Print what was done as one JSON object."),
) -> None:
    """Say whether an effect of unknown outcome was applied (a `reconcile` request)."""
    config = load_config()

    async def go() -> None:
        async with _session_runtime(config) as rt:
            await rt.client.reconcile(session_id, request_id, outcome.value, note)
        acknowledge(
            as_json, f"reconciled {request_id} in session {session_id}: {outcome.value}",
            session_id=session_id, request_id=request_id, outcome=outcome.value,
        )

    run_command(go)


@session_app.command("answer")
def session_answer(
    session_id: str,
    request_id: str,
    content: Optional[str] = typer.Argument(
        None, help='The answer, a JSON object matching the schema the server asked for: \'{"name": "Ada"}\'.'
    ),
    decline: bool = typer.Option(False, "--decline", help="Decline to answer (no content)."),
    cancel: bool = typer.Option(False, "--cancel", help="Cancel the question (no content)."),
    reason: Optional[str] = typer.Option(None, "--reason", help="Recorded with the answer (an operator must give one)."),
    as_json: bool = typer.Option(False, "--json", help="Print what was done as one JSON object."),
) -> None:
    """Answer what an MCP server asked in the middle of a call (a request of kind `elicitation`)."""
    if decline and cancel:
        raise typer.BadParameter("give at most one of --decline and --cancel")
    action = "decline" if decline else "cancel" if cancel else "accept"
    if action != "accept" and content is not None:
        raise typer.BadParameter(f"a --{action} carries no content")
    parsed: dict[str, Any] | None = None
    if action == "accept":
        try:
            parsed = json.loads(content or "{}")
        except json.JSONDecodeError as err:
            raise typer.BadParameter(f"content is not JSON: {err}") from err
        if not isinstance(parsed, dict):
            raise typer.BadParameter("content must be a JSON object, e.g. '{\"name\": \"Ada\"}'")
    config = load_config()

    async def go() -> None:
        async with _session_runtime(config) as rt:
            await rt.client.answer(session_id, request_id, parsed, action=action, reason=reason)  # type: ignore[arg-type]
        acknowledge(
            as_json, f"answered {request_id} in session {session_id}: {action}",
            session_id=session_id, request_id=request_id, action=action,
        )

    run_command(go)


@session_app.command("cancel")
def session_cancel(
    session_id: str,
    turn_id: Optional[str] = typer.Option(None, "--turn", help="A queued turn to drop (default: the running turn)."),
    queued: bool = typer.Option(False, "--queued", help="Cancel the running turn and every queued turn."),
    reason: Optional[str] = typer.Option(None, "--reason", help="Why (recorded with the cancel; an operator must give one)."),
    as_json: bool = typer.Option(False, "--json", help="Print what was done as one JSON object."),
) -> None:
    """Cancel the running turn wherever it is (model call, tool, approval wait); it ends `cancelled` within about a second."""
    config = load_config()
    if queued and turn_id is not None:
        raise typer.BadParameter("--queued cancels every turn; it does not take --turn")

    async def go() -> None:
        async with _session_runtime(config) as rt:
            await rt.client.cancel(session_id, turn_id, reason, include_queued=queued)
        acknowledge(
            as_json, f"cancel requested for session {session_id}",
            session_id=session_id, turn_id=turn_id, include_queued=queued, cancel_requested=True,
        )

    run_command(go)


@session_app.command("compact")
def session_compact(session_id: str, as_json: bool = typer.Option(False, "--json", help="The outcome as one JSON object.")) -> None:
    """Summarise the older part of the conversation now (after the running turn).

    The transcript stays whole in the store and in `session events`; the model sees the summary in place of the older messages.
    """
    config = load_config()

    async def go() -> None:
        async with _session_runtime(config) as rt:
            outcome = await rt.client.compact(session_id)
        if as_json:
            typer.echo(outcome.model_dump_json())
        elif outcome.compacted:
            typer.echo(
                f"compacted session {session_id}: summary {outcome.summary_id} stands for positions "
                f"0-{(outcome.upto_position or 1) - 1}; conversation ~{outcome.tokens_before} -> ~{outcome.tokens_after} tokens"
            )
        else:
            typer.echo(f"nothing compacted in session {session_id}: {outcome.error or outcome.reason}")

    run_command(go)


@session_app.command("switch-model")
def session_switch_model(
    session_id: str,
    profile: str = typer.Argument(..., help="A profile name from agentrt.toml (a \\[profiles.NAME] table)."),
    as_json: bool = typer.Option(False, "--json", help="The outcome as one JSON object."),
) -> None:
    """Use another model profile from the next turn on (compacts first if the conversation would not fit)."""
    config = load_config()

    async def go() -> None:
        async with _session_runtime(config) as rt:
            result = await rt.client.switch_model(session_id, profile)
        if as_json:
            typer.echo(result.model_dump_json())
            return
        if result.from_profile == result.profile:
            typer.echo(f"session {session_id} already uses {result.profile}; nothing changed")
            return
        compacted = " after compacting the context" if result.compacted else ""
        if result.compaction_error:
            typer.echo(
                f"warning: compaction failed ({result.compaction_error}); older messages are left out of the "
                "context instead of summarised",
                err=True,
            )
        typer.echo(
            f"session {session_id} switched {result.from_profile} -> {result.profile}{compacted}: "
            f"window {result.context_window} tokens, next call ~{result.estimated_tokens} tokens"
        )

    run_command(go)


@session_app.command("raise-budget")
def session_raise_budget(
    session_id: str,
    budget_tokens: Optional[int] = typer.Option(None, "--budget-tokens", min=1, help="New most tokens (input + output)."),
    budget_usd: Optional[float] = typer.Option(None, "--budget-usd", help="New most cost in US dollars."),
    budget_tool_calls: Optional[int] = typer.Option(None, "--budget-tool-calls", min=1, help="New most tool calls."),
    budget_hours: Optional[float] = typer.Option(None, "--budget-hours", help="New most wall time since the start, in hours."),
    reason: Optional[str] = typer.Option(None, "--reason", help="Recorded with the change (an operator must give one)."),
    as_json: bool = typer.Option(False, "--json", help="The session's state afterwards as one JSON object."),
) -> None:
    """Raise a session's budget (the limits given replace the current ones); the next turn runs."""
    budget = budget_from_options(budget_tokens, budget_usd, budget_tool_calls, budget_hours)
    if budget is None:
        raise typer.BadParameter("give at least one of --budget-tokens, --budget-usd, --budget-tool-calls, --budget-hours")
    config = load_config()

    async def go() -> None:
        async with _session_runtime(config) as rt:
            view = await rt.client.raise_budget(session_id, budget, reason)
        if as_json:
            typer.echo(view.model_dump_json())
            return
        left = view.remaining.describe() if view.remaining is not None else "-"
        typer.echo(f"session {session_id} budget raised to {view.budget.describe() if view.budget else '-'}; left {left}")

    run_command(go)


@session_app.command("rename")
def session_rename(
    session_id: str,
    title: Optional[str] = typer.Argument(None, help="The new title (at most 200 characters); leave it out with --clear."),
    clear: bool = typer.Option(False, "--clear", help="Remove the session's title instead."),
    reason: Optional[str] = typer.Option(None, "--reason", help="Recorded with the change (an operator must give one)."),
    as_json: bool = typer.Option(False, "--json", help="The session's state afterwards as one JSON object."),
) -> None:
    """Give a session another title (recorded as SessionRenamed, shown by `session state` and the store's listing)."""
    if (title is None) == (not clear):
        raise typer.BadParameter("give a TITLE, or --clear to remove the title (not both)")
    config = load_config()

    async def go() -> None:
        async with _session_runtime(config) as rt:
            view = await rt.client.sessions.rename(session_id, title, reason)
        if as_json:
            typer.echo(view.model_dump_json())
            return
        typer.echo(f"session {session_id} renamed to {view.title!r}" if view.title else f"session {session_id} has no title now")

    run_command(go)


@session_app.command("archive")
def session_archive(
    session_id: str,
    reason: Optional[str] = typer.Option(None, "--reason", help="Why (recorded with the archive; an operator must give one)."),
    as_json: bool = typer.Option(False, "--json", help="The session's state afterwards as one JSON object."),
) -> None:
    """End the session; its history stays readable."""
    config = load_config()

    async def go() -> None:
        async with _session_runtime(config) as rt:
            view = await rt.client.archive(session_id, reason)
        if as_json:
            typer.echo(view.model_dump_json())
        else:
            typer.echo(f"archived session {session_id} after {view.turns_completed} turn(s)")

    run_command(go)
