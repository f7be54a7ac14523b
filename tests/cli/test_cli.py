"""The `agentrt` CLI as a user runs it: a real process against the test run's Temporal server."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from temporalio.service import RPCError

from agentrt.cli import _app
from tests._cli_processes import cli_processes
from tests.conftest import Harness
from agentrt.schemas import PermissionRequested
from tests.e2e._support import wait_for_event, write_script


def plain(text: str) -> str:
    """The CLI's error text without the box drawing and line wrapping of its terminal formatting."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


async def agentrt(
    harness: Harness, *args: str, cwd: Path, input: str | None = None, timeout: float = 120, env: dict[str, str] | None = None,
    stdout: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the CLI as a separate process (forked from one that imported it: tests/_cli_processes.py)
    without blocking the event loop the test's worker runs on (as principal alice unless ``env`` says
    otherwise); ``stdout``: a file to read its output from while it runs."""
    env = {
        **os.environ,
        "AGENTRT_TEMPORAL_ADDRESS": harness.server.address,
        "AGENTRT_TASK_QUEUE": harness.task_queue,
        "AGENTRT_DATABASE_URL": harness.config.database_url or "",
        "AGENTRT_PRINCIPAL": "alice",
        **(env or {}),
    }
    env.pop("AGENTRT_CONFIG", None)
    return await cli_processes().run(list(args), env=env, cwd=cwd, input=input, timeout=timeout, stdout=stdout)


async def test_run_json_prints_one_object_with_the_outcome(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "x.txt", "content": "hi"}}]},
        {"text": "wrote x.txt"},
    ])
    result = await agentrt(harness, "run", "write x", "--workspace", str(workspace), "--script", script, "--approve", "auto", "--json", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["outcome"] == "completed" and body["answer"] == "wrote x.txt"
    assert set(body) >= {"session_id", "turn_id", "outcome", "answer", "usage"}
    assert (workspace / "x.txt").read_text() == "hi"
    assert "granting req-1" in result.stderr
    assert "running one in this process" not in result.stderr
    harness.session_ids.append(body["session_id"])


async def test_run_with_approve_deny_refuses_the_call_and_still_answers(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "touch no.txt"}}]},
        {"text": "could not run it"},
    ])
    result = await agentrt(harness, "run", "run it", "-w", str(workspace), "--script", script, "--approve", "deny", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "denying req-1" in result.stdout
    assert "could not run it" in result.stdout
    assert not (workspace / "no.txt").exists()


async def test_run_with_approve_ask_reads_the_answer_from_the_terminal(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "asked.txt", "content": "yes"}}]},
        {"text": "ok"},
    ])
    result = await agentrt(harness, "run", "go", "-w", str(workspace), "--script", script, "--approve", "ask", cwd=tmp_path, input="y\n")
    assert result.returncode == 0, result.stderr
    assert "approve fs.write" in result.stderr
    assert (workspace / "asked.txt").read_text() == "yes"


async def test_session_commands_show_state_events_and_send(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": "first"}, {"text": "second"}])
    run = await agentrt(harness, "run", "hello", "-w", str(workspace), "--script", script, "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    session_id = json.loads(run.stdout)["session_id"]
    harness.session_ids.append(session_id)

    sent = await agentrt(harness, "session", "send", session_id, "again", "--json", cwd=tmp_path)
    assert sent.returncode == 0, sent.stderr
    assert json.loads(sent.stdout)["answer"] == "second"
    state = json.loads((await agentrt(harness, "session", "state", session_id, "--json", cwd=tmp_path)).stdout)
    assert state["turns_completed"] == 2 and state["status"] == "idle"
    events = (await agentrt(harness, "session", "events", session_id, cwd=tmp_path)).stdout
    assert "UserMessageAdded" in events and "TurnEnded" in events
    listing = (await agentrt(harness, "session", "list", cwd=tmp_path)).stdout
    assert session_id in listing
    archived = await agentrt(harness, "session", "archive", session_id, cwd=tmp_path)
    assert archived.returncode == 0 and "archived" in archived.stdout


async def test_unknown_session_is_a_clear_error(harness: Harness, tmp_path: Path) -> None:
    result = await agentrt(harness, "session", "state", "no-such-session", cwd=tmp_path)
    assert result.returncode == 2
    assert "no session 'no-such-session'" in result.stderr


async def test_a_run_without_a_profile_or_script_says_how_to_get_one(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    result = await agentrt(harness, "run", "x", "-w", str(workspace), cwd=tmp_path)
    assert result.returncode == 2
    assert "unknown model profile 'default'" in result.stderr and "give --script FILE" in result.stderr
    assert "docs/providers.md" in result.stderr


async def test_unknown_profile_is_rejected_before_a_session_starts(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    result = await agentrt(harness, "run", "x", "-w", str(workspace), "--profile", "gpt-9", cwd=tmp_path)
    assert result.returncode == 2
    assert "unknown model profile 'gpt-9'" in result.stderr and "scripted" in result.stderr
    assert "define [profiles.gpt-9] in agentrt.toml" in " ".join(result.stderr.split())


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "x", "--workspace", "/definitely/not/here"], "does not exist"),
        (["run", "x", "--workspace", ".", "--approve", "maybe"], "'maybe' is not one of"),
        (["run", "x", "--workspace", ".", "--max-rounds", "0"], "greater than or equal to 1"),
        (["run", "x", "--workspace", ".", "--compact-threshold", "1.5"], "Input should be less than or equal to 1"),
        # --approval-timeout 1e308 crashed the workflow task for good (OverflowError), -5 denied at
        # once, nan and inf meant never.
        (["run", "x", "--workspace", ".", "--approval-timeout", "1e308"], "at most 31622400 seconds, not 1e+308"),
        (["run", "x", "--workspace", ".", "--approval-timeout", "-5"], "must be more than 0"),
        (["run", "x", "--workspace", ".", "--approval-timeout", "nan"], "not nan"),
        (["run", "x", "--workspace", ".", "--approval-timeout", "inf"], "not inf"),
        (["run", "x", "--workspace", ".", "--sandbox", "none"], "'none' is not one of"),
        (["run", "x", "--workspace", ".", "--approval-mode", "sometimes"], "'sometimes' is not one of"),
        (["session", "list", "-q", "1=1) OR (WorkflowType != 'x'"], "must stay inside its group"),
        (["session", "list", "-q", "ExecutionStatus = 'Running' ORDER BY StartTime"], "Temporal refused it"),
        (["worker", "--tools-only", "--models-only"], "choose one of --tools-only and --models-only"),
        (["worker", "--models-only"], "needs [temporal] tool_task_queue"),
        (["worker", "--workflows-only", "--providers-only"], "choose one of --workflows-only and --providers-only"),
        (["worker", "--providers-only"], "needs [temporal] model_task_queue"),
    ],
)
async def test_invalid_arguments_are_rejected_with_the_reason(harness: Harness, tmp_path: Path, args: list[str], message: str) -> None:
    result = await agentrt(harness, *args, cwd=tmp_path)
    assert result.returncode == 2
    assert message in plain(result.stderr)


async def test_every_command_has_help(harness: Harness, tmp_path: Path) -> None:
    for args in (["--help"], ["run", "--help"], ["session", "--help"], ["session", "approve", "--help"], ["dev", "--help"]):
        result = await agentrt(harness, *args, cwd=tmp_path)
        assert result.returncode == 0 and "Usage" in result.stdout


async def test_a_script_with_a_typo_is_rejected_before_any_session_starts(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"turns": [{"text": "hi", "tool_call": []}]}')
    # A terminal wide enough that the error box does not break the path (tmp_path's length varies).
    result = await agentrt(harness, "run", "x", "-w", str(workspace), "--script", str(bad), cwd=tmp_path, env={"COLUMNS": "400"})
    assert result.returncode == 2
    assert "bad.json" in plain(result.stderr) and "tool_call" in plain(result.stderr)
    assert "session" not in result.stdout


async def test_an_approval_the_session_would_ignore_fails_with_the_reason(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "y.txt", "content": "y"}}]},
        {"text": "ok"},
    ])
    sid = harness.new_session_id()
    config = harness.client.new_config(str(workspace), session_id=sid, profile="scripted", script=script)
    await harness.client.start(config, "go")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))

    wrong = await agentrt(harness, "session", "approve", sid, "req-42", cwd=tmp_path)
    assert wrong.returncode == 2 and "no pending request req-42" in wrong.stderr
    right = await agentrt(harness, "session", "approve", sid, requested.request.request_id, cwd=tmp_path)
    assert right.returncode == 0 and f"granted {requested.request.request_id}" in right.stdout
    again = await agentrt(harness, "session", "approve", sid, requested.request.request_id, cwd=tmp_path)
    assert again.returncode == 2 and "already decided" in again.stderr


async def test_session_state_shows_a_call_being_retried_with_its_cause(
    harness: Harness, workspace: Path, tmp_path: Path, closed_port_url: str
) -> None:
    from agentrt.schemas import ModelProfile

    harness.config.profiles["down"] = ModelProfile(name="down", provider="openai", model="m", base_url=f"{closed_port_url}/v1")
    sid = harness.new_session_id()
    config = harness.client.new_config(str(workspace), session_id=sid, profile="down", heartbeat_timeout_seconds=5.0)
    await harness.client.start(config, "hello?")

    async def retrying() -> subprocess.CompletedProcess[str]:
        while True:
            result = await agentrt(harness, "session", "state", sid, cwd=tmp_path)
            if "retry " in result.stdout:
                return result
            await asyncio.sleep(0.5)

    result = await asyncio.wait_for(retrying(), 90)

    line = next(l for l in result.stdout.splitlines() if l.startswith("retry "))
    assert re.search(r"retrying provider\.complete \(attempt \d+ of 9", line)
    assert f"{closed_port_url}/v1/chat/completions failed: ConnectError" in line
    # The same, typed, for a program: the state's waits and the client's.
    shown = json.loads((await agentrt(harness, "session", "state", sid, "--json", cwd=tmp_path)).stdout)
    assert [(w["activity"], w["kind"]) for w in shown["waits"]] == [("provider.complete", "retrying")]
    waits = await harness.client.sessions.waits(sid)
    assert [(w.activity, w.kind, w.maximum_attempts) for w in waits] == [("provider.complete", "retrying", 9)]
    assert "ConnectError" in waits[0].message and waits[0].attempt >= 2
    await harness.client.cancel(sid)


async def agentrt_into_a_closed_pipe(harness: Harness, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the CLI with its standard output a pipe nobody reads any more (``| head -1`` once head
    has its line): every write to it fails with EPIPE."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    env = {
        **os.environ,
        "AGENTRT_TEMPORAL_ADDRESS": harness.server.address,
        "AGENTRT_TASK_QUEUE": harness.task_queue,
        "AGENTRT_DATABASE_URL": harness.config.database_url or "",
        "AGENTRT_PRINCIPAL": "alice",
    }
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentrt.cli", *args,
            cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=write_end, stderr=asyncio.subprocess.PIPE,
        )
    finally:
        os.close(write_end)
    _, stderr = await asyncio.wait_for(process.communicate(), 120)
    return subprocess.CompletedProcess(list(args), process.returncode or 0, "", stderr.decode())


@pytest.mark.parametrize(
    "args",
    [
        ["session", "list"],
        ["session", "list", "--json"],
        ["session", "events", "{sid}"],
        ["session", "events", "{sid}", "--json"],
        ["session", "state", "{sid}"],
        ["session", "trajectory", "{sid}"],
        ["task", "list"],
        ["graph", "list"],
        ["memory", "list"],
        ["doctor"],
        ["--help"],
        ["session", "events", "--help"],
    ],
)
async def test_a_reader_that_stops_reading_ends_the_command_quietly_with_exit_code_0(
    harness: Harness, workspace: Path, tmp_path: Path, args: list[str]
) -> None:
    # `agentrt session list | head -1`: click exited 1 on the broken pipe, rich (the help pages) too.
    sid = harness.new_session_id()
    config = harness.client.new_config(str(workspace), session_id=sid, profile="scripted", script=write_script(tmp_path, [{"text": "hi"}]))
    started = await harness.client.start(config, "hello")
    await harness.client.wait(sid, started.turn_id)

    result = await agentrt_into_a_closed_pipe(harness, *[a.format(sid=sid) for a in args], cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr


async def test_a_key_missing_from_the_worker_s_environment_is_reported_as_the_worker_s(
    harness: Harness, workspace: Path, tmp_path: Path, closed_port_url: str
) -> None:
    from agentrt.schemas import ModelProfile

    # Client and worker both define the profile; only the worker reads the key, and lacks it.
    variable = "AGENTRT_TEST_KEY_THE_WORKER_LACKS"
    assert variable not in os.environ
    harness.config.profiles["keyed"] = ModelProfile(
        name="keyed", provider="openai", model="m", base_url=f"{closed_port_url}/v1", api_key_env=variable
    )
    (tmp_path / "agentrt.toml").write_text(f'[profiles.keyed]\nprovider = "openai"\nmodel = "m"\nbase_url = "{closed_port_url}/v1"\napi_key_env = "{variable}"\n')

    result = await agentrt(harness, "run", "hi", "-w", str(workspace), "--profile", "keyed", "--json", cwd=tmp_path)

    body = json.loads(result.stdout)
    harness.session_ids.append(body["session_id"])
    assert result.returncode == 1 and body["outcome"] == "failed"
    assert f"reads its API key from ${variable}, which is not set in the worker's environment" in body["error"]


# ---------------------------------------------------------------- what `agentrt --help` loads

HELP_PROBE = """
import json, sys
sys.argv = ["agentrt", "--help"]
from agentrt.cli import app
try:
    app()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def test_agentrt_help_lists_every_command_without_loading_any() -> None:
    result = subprocess.run([sys.executable, "-c", HELP_PROBE], capture_output=True, text=True, timeout=120)
    loaded = json.loads(result.stderr.strip().splitlines()[-1])
    assert all(f" {name} " in result.stdout for name in ("run", "worker", "serve", "codec-server", "session", "graph"))
    heavy = ("agentrt.client", "agentrt.gateway", "agentrt.worker", "agentrt.activities", "agentrt.workflows", "agentrt.store",
             "agentrt.schemas", "temporalio", "fastapi", "mcp", "sqlalchemy")
    assert [m for m in loaded if m.startswith(heavy)] == []
    assert [m for m in loaded if m.startswith("agentrt.cli.")] == ["agentrt.cli._app"]


SESSION_LIST_PROBE = """
import json, sys
sys.argv = ["agentrt", "session", "list", "--help"]
from agentrt.cli import app
try:
    app()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def test_a_command_that_talks_to_a_server_loads_the_client_and_no_worker() -> None:
    result = subprocess.run([sys.executable, "-c", SESSION_LIST_PROBE], capture_output=True, text=True, timeout=120)
    loaded = json.loads(result.stderr.strip().splitlines()[-1])
    assert "agentrt.client._client" in loaded and "agentrt.cli._session" in loaded
    heavy = ("agentrt.gateway", "agentrt.activities", "agentrt.workflows", "fastapi", "mcp")
    assert [m for m in loaded if m.startswith(heavy)] == []


@pytest.mark.parametrize("name", sorted(_app.COMMANDS))
def test_agentrt_help_lists_each_command_with_the_first_paragraph_of_its_own_help(name: str) -> None:
    command = _app.load_command(name)
    assert _app.COMMANDS[name].summary == (command.help or "").split("\n\n")[0]


def _help_texts(command: object, path: str) -> list[tuple[str, str]]:
    """Every help text of ``command`` and its subcommands: its own, and each option's."""
    import click

    texts = [(path, getattr(command, "help", None) or "")]
    texts += [(f"{path} {param.name}", getattr(param, "help", None) or "") for param in getattr(command, "params", [])]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            texts += _help_texts(sub, f"{path} {name}")
    return texts


@pytest.mark.parametrize("name", sorted(_app.COMMANDS))
def test_a_config_table_named_in_help_is_shown_not_eaten_as_rich_markup(name: str) -> None:
    """``[codec]`` in a help text is a Rich markup tag: typer prints nothing for it unless escaped
    (``\\[codec]``), which left `agentrt dev --help` saying "with the  keys"."""
    unescaped = re.compile(r"(?<!\\)\[[a-z_.]+\]")
    eaten = [(where, found) for where, text in _help_texts(_app.load_command(name), name) for found in unescaped.findall(text)]
    assert eaten == []


def test_the_dev_commands_help_names_the_codec_table() -> None:
    result = subprocess.run([sys.executable, "-m", "agentrt.cli", "dev", "--help"], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "COLUMNS": "200"})
    assert "with the [codec] keys" in result.stdout and "adds to [worker] agents" in result.stdout


async def test_run_of_an_agent_no_worker_registered_exits_2_naming_it_instead_of_waiting(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "never"}])
    result = await agentrt(harness, "run", "hello", "-w", str(workspace), "--script", str(script), "--agent", "billing", cwd=tmp_path, timeout=90)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"agent 'billing' is not registered on the worker of task queue {harness.task_queue!r}" in plain(result.stderr)


async def test_run_json_of_an_agent_no_worker_registered_prints_the_failure_as_an_object_and_exits_2(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [{"text": "never"}])
    result = await agentrt(
        harness, "run", "hello", "-w", str(workspace), "--script", str(script), "--agent", "billing", "--json", cwd=tmp_path, timeout=90
    )
    assert result.returncode == 2, result.stdout + result.stderr
    body = json.loads(result.stdout)
    harness.session_ids.append(body["session_id"])
    assert (body["turn_id"], body["outcome"], body["error_type"]) == ("turn-1", "failed", "AgentNotRegistered")
    assert "agent 'billing' is not registered" in body["error"]


async def test_run_with_agents_beside_a_running_worker_says_the_module_reaches_no_worker(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    # `agentrt dev` runs a worker without the module; `agentrt run --agents` then starts none of its own.
    script = write_script(tmp_path, [{"text": "never"}])
    result = await agentrt(
        harness, "run", "hello", "-w", str(workspace), "--script", str(script),
        "--agents", "tests.e2e.agent_tools", "--agent", "support", cwd=Path(__file__).parents[2], timeout=90,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    said = plain(result.stderr)
    assert f"a worker already polls task queue {harness.task_queue!r}, so --agents registers tests.e2e.agent_tools on no worker" in said
    assert f"a session of an agent needs every worker polling {harness.task_queue!r} to register it" in said


async def test_ctrl_c_while_run_waits_for_its_first_message_to_be_taken_exits_130_without_a_traceback(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    """A versioned worker takes no run until a version is current: `agentrt run` waits on its start's
    update, and Ctrl-C there ended the update wait with an error of its own, printed as a traceback
    with exit 1 instead of the interruption it is."""
    from tests.e2e._versions import versioned_worker

    queue = f"{harness.task_queue}-noversion"
    script = write_script(tmp_path, [{"text": "never"}])
    env = {
        **os.environ, "AGENTRT_TEMPORAL_ADDRESS": harness.server.address, "AGENTRT_TASK_QUEUE": queue,
        "AGENTRT_DATABASE_URL": harness.config.database_url or "", "AGENTRT_PRINCIPAL": "alice",
    }
    env.pop("AGENTRT_CONFIG", None)
    async with versioned_worker(harness.temporal, harness.config, harness.store, queue, f"nover-{queue}", "b1"):
        sid = uuid.uuid4().hex[:12]  # not among the harness's recorded sessions: no workflow task ever runs
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agentrt.cli", "run", "hello", "--workspace", str(workspace), "--script", str(script),
            "--session-id", sid,
            cwd=tmp_path, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(600):  # until its start is sent: the session's workflow exists, waiting for a worker
            try:
                await harness.temporal.get_workflow_handle(f"session-{sid}").describe()
                break
            except RPCError:
                await asyncio.sleep(0.1)
        await asyncio.sleep(1)
        assert process.returncode is None
        process.send_signal(signal.SIGINT)
        _, stderr = await asyncio.wait_for(process.communicate(), 60)
    text = stderr.decode()
    assert process.returncode == 130 and "interrupted" in text and "Traceback" not in text, text


async def test_action_commands_print_one_json_object_with_json(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "j.txt", "content": "j"}}]},
        {"text": "ok"},
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "rm -rf ."}}]},
        {"text": "never"},
    ])
    sid = harness.new_session_id()
    config = harness.client.new_config(str(workspace), session_id=sid, profile="scripted", script=script)
    started = await harness.client.start(config, "go")
    requested = await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested))
    request_id = requested.request.request_id

    granted = await agentrt(harness, "session", "approve", sid, request_id, "--json", cwd=tmp_path)
    assert granted.returncode == 0, granted.stderr
    assert json.loads(granted.stdout) == {
        "session_id": sid, "request_id": request_id, "decision": "grant", "for_session": False, "edited_arguments": False,
    }
    await harness.client.wait(sid, started.turn_id)
    await harness.client.send(sid, "again")
    await wait_for_event(harness.client, sid, lambda e: isinstance(e, PermissionRequested) and e.request.request_id != request_id)
    cancelled = await agentrt(harness, "session", "cancel", sid, "--json", cwd=tmp_path)
    assert cancelled.returncode == 0, cancelled.stderr
    assert json.loads(cancelled.stdout) == {"session_id": sid, "turn_id": None, "include_queued": False, "cancel_requested": True}
    archived = await agentrt(harness, "session", "archive", sid, "--json", cwd=tmp_path)
    assert archived.returncode == 0, archived.stderr
    view = json.loads(archived.stdout)
    assert view["session_id"] == sid and view["turns_completed"] == 2
    assert (workspace / "j.txt").read_text() == "j" and any(workspace.iterdir())
