"""The `agentrt` command line: run a prompt, drive sessions, run a worker or the embedded dev server."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Any, Awaitable, Callable, Optional, TypeVar

import typer
from temporalio.service import RPCError

from agentrt.activities.providers.scripted import load_script
from agentrt.client._client import AgentClient
from agentrt.client._render import event_line, transcript_lines
from agentrt.client._runtime import STATE_DIR, Runtime, runtime
from agentrt.schemas import (
    AgentrtError,
    ConfigurationError,
    PermissionRequested,
    RequestRejected,
    TurnEnded,
    TurnOutcome,
)
from agentrt.worker import AgentrtConfig, DevServer, running_worker

T = TypeVar("T")

app = typer.Typer(
    name="agentrt",
    help="A durable agent runtime on Temporal: sessions whose turns, tool calls and approvals survive crashes.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
session_app = typer.Typer(help="Inspect and steer existing sessions.", no_args_is_help=True)
app.add_typer(session_app, name="session")


class ApproveMode(str, Enum):
    ask = "ask"
    auto = "auto"
    deny = "deny"


def _run(coro_factory: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine; AgentrtError becomes a one-line error and exit code 2."""

    async def main() -> T:
        task = asyncio.ensure_future(coro_factory())
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
        return await task

    try:
        return asyncio.run(main())
    except AgentrtError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None
    except RPCError as err:
        typer.echo(f"error: Temporal answered {err.status.name}: {err.message}", err=True)
        raise typer.Exit(2) from None
    except (KeyboardInterrupt, asyncio.CancelledError):
        typer.echo("interrupted", err=True)
        raise typer.Exit(130) from None


def _config() -> AgentrtConfig:
    try:
        return AgentrtConfig.load()
    except AgentrtError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(2) from None


# ---------------------------------------------------------------- run


async def _drive_turn(
    rt: Runtime,
    session_id: str,
    turn_id: str,
    approve: ApproveMode,
    out: Any,
    since_seq: int = 0,
) -> TurnOutcome:
    """Print the turn's events and streamed text until it ends; answer approvals per ``approve``.

    Also reports activity retries (a provider down, a tool's worker lost) from the
    workflow's pending activities, so a stalled round says why.
    """
    client = rt.client
    delta_after = rt.store.last_delta_id(session_id)
    stream_key: tuple[str, int, int] | None = None
    answered: set[str] = set()
    prompts: list[asyncio.Task[None]] = []
    reported_failures: set[tuple[str, int]] = set()
    polls = 0
    try:
        while True:
            ended = False
            page = await client.events(session_id, since_seq)
            for event in page.events:
                since_seq = event.seq
                if stream_key is not None:
                    out.write("\n")
                    stream_key = None
                out.write(event_line(event) + "\n")
                if isinstance(event, PermissionRequested) and event.request.request_id not in answered:
                    answered.add(event.request.request_id)
                    prompts.append(asyncio.create_task(_answer_approval(client, session_id, event, approve, out)))
                if isinstance(event, TurnEnded) and event.turn_id == turn_id:
                    ended = True
            for delta in rt.store.deltas(session_id, delta_after):
                delta_after = delta.id
                key = (delta.turn_id, delta.round, delta.attempt)
                if key != stream_key:
                    out.write(("\n" if stream_key is not None else "") + "      model> ")
                    stream_key = key
                out.write(delta.text)
            polls += 1
            if polls % 5 == 0:
                await _report_retries(client, session_id, reported_failures, out)
            if ended:
                if stream_key is not None:
                    out.write("\n")
                out.flush()
                return await client.wait(session_id, turn_id)
            out.flush()
            await asyncio.sleep(0.2)
    finally:
        for task in prompts:
            task.cancel()


async def _report_retries(client: AgentClient, session_id: str, reported: set[tuple[str, int]], out: Any) -> None:
    """Print each failed attempt of a pending activity once: ``retrying model call (attempt 3): <error>``."""
    try:
        description = await client.temporal.get_workflow_handle(f"session-{session_id}").describe()
    except RPCError:
        return
    for pending in description.raw_description.pending_activities:
        if pending.attempt <= 1 or not pending.last_failure.message:
            continue
        key = (pending.activity_id, pending.attempt)
        if key in reported:
            continue
        reported.add(key)
        out.write(
            f"      retrying {pending.activity_type.name} (attempt {pending.attempt}): "
            f"{pending.last_failure.message[:300]}\n"
        )


async def _answer_approval(client: AgentClient, session_id: str, event: PermissionRequested, mode: ApproveMode, out: Any) -> None:
    request = event.request
    if request.kind == "reconcile":
        out.write(
            f"      {request.tool} may or may not have run; answer with: "
            f"agentrt session reconcile {session_id} {request.request_id} applied|not_applied\n"
        )
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
    sys.stderr.write(f"\napprove {request.tool} {json.dumps(request.arguments)[:300]}? [y/N] (or from elsewhere: {elsewhere}) ")
    sys.stderr.flush()
    reading = asyncio.ensure_future(asyncio.to_thread(sys.stdin.readline))
    while not reading.done():
        # Decided from another process, the temporal CLI or the UI: stop asking.
        pending = {r.request_id for r in (await client.state(session_id)).pending_approvals}
        if request.request_id not in pending:
            out.write(f"\n      {request.request_id} was decided elsewhere\n")
            return
        await asyncio.wait([reading], timeout=0.5)
    answer = reading.result()
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


def _outcome_json(session_id: str, outcome: TurnOutcome) -> str:
    return json.dumps(
        {
            "session_id": session_id,
            "turn_id": outcome.turn_id,
            "outcome": outcome.status,
            "answer": outcome.answer,
            "error": outcome.error,
            "rounds": outcome.rounds,
            "tool_calls": outcome.tool_calls,
            "usage": outcome.usage.model_dump(),
        }
    )


def _print_outcome(session_id: str, outcome: TurnOutcome, as_json: bool) -> None:
    if as_json:
        typer.echo(_outcome_json(session_id, outcome))
        return
    typer.echo("")
    if outcome.answer:
        typer.echo(outcome.answer)
        typer.echo("")
    usage = outcome.usage
    detail = f": {outcome.error}" if outcome.error else ""
    typer.echo(
        f"[{outcome.status}{detail}] session {session_id} · {outcome.turn_id} · {outcome.rounds} round(s) · "
        f"{outcome.tool_calls} tool call(s) · {usage.input_tokens} in / {usage.output_tokens} out tokens"
    )


@app.command()
def run(
    prompt: str = typer.Argument(..., help="What the agent should do."),
    workspace: Path = typer.Option(..., "--workspace", "-w", help="Directory the tools work in.", exists=True, file_okay=False, resolve_path=True),
    profile: Optional[str] = typer.Option(None, "--profile", "-p", help="Model profile from agentrt.toml."),
    script: Optional[Path] = typer.Option(
        None, "--script", exists=True, dir_okay=False, resolve_path=True,
        help="Scripted-model file (JSON or YAML): an offline model. With --profile it keeps that profile's context window.",
    ),
    approve: ApproveMode = typer.Option(ApproveMode.ask, "--approve", help="Answer approvals: ask at the terminal, auto-grant, or deny."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object: session_id, turn_id, outcome, answer, usage."),
    session_id: Optional[str] = typer.Option(None, "--session-id", help="Session id to use (default: a new random one)."),
    approval_timeout: Optional[float] = typer.Option(None, "--approval-timeout", help="Deny approvals not decided within this many seconds."),
    max_rounds: int = typer.Option(250, "--max-rounds", min=1, help="Model calls per turn before the turn ends as round_limit."),
) -> None:
    """Start a session with PROMPT, stream its progress and print the answer.

    Exit code 0 when the turn completes, 1 for any other outcome, 2 for a usage or runtime error.
    """
    if not prompt.strip():
        raise typer.BadParameter("the prompt is empty", param_hint="PROMPT")
    if script:
        try:
            load_script(str(script))
        except ConfigurationError as err:
            raise typer.BadParameter(str(err), param_hint="--script") from None
    config = _config()
    progress = sys.stderr if as_json else sys.stdout

    async def go() -> TurnOutcome:
        async with runtime(config, notice=sys.stderr) as rt:
            session_config = rt.client.new_config(
                str(workspace),
                session_id=session_id,
                profile=(profile or ("scripted" if script else config.default_profile)),
                script=str(script) if script else None,
                approval_timeout_seconds=approval_timeout,
                max_rounds_per_turn=max_rounds,
            )
            if profile or not script:
                config.profile(session_config.profile)  # fail fast on an unknown profile
            started = await rt.client.start(session_config, prompt)
            progress.write(f"session {started.session_id} (workflow {started.workflow_id}) · {started.turn_id}\n")
            outcome = await _drive_turn(rt, started.session_id, started.turn_id, approve, progress)
            _print_outcome(started.session_id, outcome, as_json)
            return outcome

    outcome = _run(go)
    raise typer.Exit(0 if outcome.status == "completed" else 1)


# ---------------------------------------------------------------- session commands


def _session_runtime(config: AgentrtConfig) -> Any:
    return runtime(config, embed_if_missing=False, ensure_worker=False)


@session_app.command("list")
def session_list(
    query: Optional[str] = typer.Option(None, "--query", "-q", help="Extra visibility filter, e.g. \"AgentSessionStatus = 'idle'\"."),
    limit: int = typer.Option(50, "--limit", min=1),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """List sessions, newest first."""
    config = _config()

    async def go() -> None:
        async with _session_runtime(config) as rt:
            listing = await rt.client.list_sessions(query, limit)
        if as_json:
            typer.echo(json.dumps([{**vars(s), "started_at": s.started_at.isoformat() if s.started_at else None} for s in listing]))
            return
        if not listing:
            typer.echo("no sessions")
        for s in listing:
            started = s.started_at.strftime("%Y-%m-%d %H:%M:%S") if s.started_at else "-"
            typer.echo(f"{s.session_id:<14} {s.status:<18} {s.owner or '-':<12} {started}")

    _run(go)


@session_app.command("state")
def session_state(session_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Show a session's status, active turn, pending approvals and token usage."""
    config = _config()

    async def go() -> None:
        async with _session_runtime(config) as rt:
            view = await rt.client.state(session_id)
        if as_json:
            typer.echo(view.model_dump_json())
            return
        typer.echo(f"session   {view.session_id} ({view.status}) owner {view.owner} profile {view.profile}")
        typer.echo(f"workspace {view.workspace}")
        active = f"{view.active_turn_id} (round {view.current_round})" if view.active_turn_id else "-"
        typer.echo(f"turns     {view.turns_completed} done; active {active}; queued {', '.join(view.queued_turn_ids) or '-'}")
        typer.echo(f"usage     {view.usage.input_tokens} in / {view.usage.output_tokens} out tokens")
        if view.context_window is not None:
            summary = f"; summary {view.summary_id}" if view.summary_id is not None else ""
            typer.echo(
                f"context   next call ~{view.context_tokens} of {view.context_window} tokens "
                f"({view.max_output_tokens} reserved for output); conversation since the last summary "
                f"~{view.live_tokens} tokens; {view.compactions} compaction(s){summary}"
            )
        typer.echo(f"history   run {view.run}; events from seq {view.first_seq_in_run} held by this run, {view.last_seq} in all")
        for r in view.pending_approvals:
            typer.echo(f"approval  {r.request_id}: {r.tool} {json.dumps(r.arguments)[:200]}")

    _run(go)


@session_app.command("events")
def session_events(
    session_id: str,
    since: int = typer.Option(0, "--since", min=0, help="Only events with seq greater than this."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new events until the session ends."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per line."),
) -> None:
    """Print a session's events."""
    config = _config()

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

    _run(go)


@session_app.command("send")
def session_send(
    session_id: str,
    text: str,
    wait: bool = typer.Option(True, "--wait/--no-wait", help="Wait for the turn and print its outcome."),
    approve: ApproveMode = typer.Option(ApproveMode.ask, "--approve"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Send a message; it runs after any active turn."""
    config = _config()

    async def go() -> int:
        async with _session_runtime(config) as rt:
            before = (await rt.client.state(session_id)).last_seq
            sent = await rt.client.send(session_id, text)
            if not wait:
                typer.echo(json.dumps({"session_id": session_id, "turn_id": sent.turn_id}) if as_json else sent.turn_id)
                return 0
            progress = sys.stderr if as_json else sys.stdout
            outcome = await _drive_turn(rt, session_id, sent.turn_id, approve, progress, since_seq=before)
            _print_outcome(session_id, outcome, as_json)
            return 0 if outcome.status == "completed" else 1

    raise typer.Exit(_run(go))


def _decision_command(decision: str) -> Callable[..., None]:
    def command(
        session_id: str,
        request_id: str,
        reason: Optional[str] = typer.Option(None, "--reason", help="Recorded with the decision."),
    ) -> None:
        config = _config()

        async def go() -> None:
            async with _session_runtime(config) as rt:
                if decision == "grant":
                    await rt.client.approve(session_id, request_id, reason)
                else:
                    await rt.client.deny(session_id, request_id, reason)
            typer.echo(f"{'granted' if decision == 'grant' else 'denied'} {request_id} in session {session_id}")

        _run(go)

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
) -> None:
    """Say whether an effect of unknown outcome was applied (a `reconcile` request)."""
    config = _config()

    async def go() -> None:
        async with _session_runtime(config) as rt:
            await rt.client.reconcile(session_id, request_id, outcome.value, note)
        typer.echo(f"reconciled {request_id} in session {session_id}: {outcome.value}")

    _run(go)


@session_app.command("cancel")
def session_cancel(
    session_id: str,
    turn_id: Optional[str] = typer.Option(None, "--turn", help="A queued turn to drop (default: the running turn)."),
    reason: Optional[str] = typer.Option(None, "--reason"),
) -> None:
    """Cancel the running turn, including a model call in flight."""
    config = _config()

    async def go() -> None:
        async with _session_runtime(config) as rt:
            await rt.client.cancel(session_id, turn_id, reason)
        typer.echo(f"cancel requested for session {session_id}")

    _run(go)


@session_app.command("compact")
def session_compact(session_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Summarise the older part of the conversation now (after the running turn).

    The transcript stays whole in the store and in `session events`; the model sees the summary in place of the older messages.
    """
    config = _config()

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

    _run(go)


@session_app.command("switch-model")
def session_switch_model(
    session_id: str,
    profile: str = typer.Argument(..., help="A profile name from agentrt.toml (a \\[profiles.NAME] table)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Use another model profile from the next turn on (compacts first if the conversation would not fit)."""
    config = _config()

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

    _run(go)


@session_app.command("archive")
def session_archive(session_id: str, reason: Optional[str] = typer.Option(None, "--reason")) -> None:
    """End the session; its history stays readable."""
    config = _config()

    async def go() -> None:
        async with _session_runtime(config) as rt:
            view = await rt.client.archive(session_id, reason)
        typer.echo(f"archived session {session_id} after {view.turns_completed} turn(s)")

    _run(go)


# ---------------------------------------------------------------- processes


@app.command()
def worker() -> None:
    """Run a worker for the configured task queue until Ctrl-C."""
    config = _config()

    async def go() -> None:
        async with runtime(config, embed_if_missing=False, ensure_worker=False) as rt:
            async with running_worker(rt.client.temporal, config, rt.store):
                typer.echo(f"worker polling {config.task_queue!r} at {config.temporal_address}; Ctrl-C stops it", err=True)
                await asyncio.Event().wait()

    _run(go)


@app.command()
def dev(
    port: int = typer.Option(7233, "--port", help="Temporal frontend port."),
    ui_port: int = typer.Option(8233, "--ui-port", help="Temporal UI port."),
    db: Path = typer.Option(STATE_DIR / "temporal.db", "--db", help="SQLite file for Temporal's histories."),
) -> None:
    """Start the embedded Temporal dev server and a worker; Ctrl-C stops both."""
    config = _config()
    config.temporal_address = f"localhost:{port}"

    async def go() -> None:
        async with DevServer(port=port, ui_port=ui_port, db_file=db, log_file=STATE_DIR / "temporal.log") as server:
            typer.echo(f"temporal server at {server.address} · UI {server.ui_url} · history {db}", err=True)
            async with runtime(config, embed_if_missing=False, ensure_worker=False) as rt:
                async with running_worker(rt.client.temporal, config, rt.store):
                    typer.echo(f"worker polling {config.task_queue!r}; Ctrl-C stops both", err=True)
                    await asyncio.Event().wait()

    _run(go)


# ---------------------------------------------------------------- demo


DEMO_PROMPT = "Look around this repository, read its README and write a short NOTES.md about it."
IGNORED = shutil.ignore_patterns(".git", ".venv", ".agentrt", "__pycache__", "*.egg-info", ".pytest_cache", ".hypothesis")


@app.command()
def demo(
    source: Path = typer.Option(Path("."), "--source", help="Repository to copy into the demo workspace.", exists=True, file_okay=False, resolve_path=True),
) -> None:
    """Run a scripted session on a temporary copy of SOURCE: list, read, write NOTES.md (approved), answer."""
    config = _config()
    script = resources.files("agentrt.client") / "demo" / "script.yaml"

    async def go() -> int:
        with tempfile.TemporaryDirectory(prefix="agentrt-demo-") as tmp:
            workspace = Path(tmp) / source.name
            shutil.copytree(source, workspace, ignore=IGNORED)
            async with runtime(config, notice=sys.stdout) as rt:
                session_config = rt.client.new_config(str(workspace), profile="scripted", script=str(script))
                typer.echo(f"workspace: {workspace} (a copy of {source})")
                started = await rt.client.start(session_config, DEMO_PROMPT)
                typer.echo(f"session {started.session_id} (workflow {started.workflow_id})\n")
                outcome = await _drive_turn(rt, started.session_id, started.turn_id, ApproveMode.auto, sys.stdout)
                _print_outcome(started.session_id, outcome, False)
                typer.echo("\n--- transcript (from the store) ---")
                for line in transcript_lines(rt.store.messages(started.session_id)):
                    typer.echo(line)
                typer.echo("\n--- events ---")
                for event in (await rt.client.events(started.session_id)).events:
                    typer.echo(event_line(event))
                notes = workspace / "NOTES.md"
                typer.echo(f"\n--- {notes.name} as written by the session ---")
                typer.echo(notes.read_text() if notes.exists() else "(missing)")
                typer.echo(
                    f"\nTemporal UI: {rt.ui_url}/namespaces/{config.namespace}/workflows/{started.workflow_id}"
                    + ("  (embedded server: run `agentrt dev` to browse it after this demo)" if rt.embedded_server else "")
                )
                return 0 if outcome.status == "completed" and notes.exists() else 1

    raise typer.Exit(_run(go))


def main() -> None:
    """Entry point of the `agentrt` console script.

    Exits with ``os._exit`` after flushing output: the Temporal client's core threads can
    abort CPython's finalization ("PyGILState_Release: thread state must be current",
    temporalio/sdk-python#300), which would turn a successful command into exit code 134.
    """
    try:
        app()
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        if isinstance(exit_.code, str):
            print(exit_.code, file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
