"""The MCP manager against real servers: server-everything (npm; 2025-11-25, elicitation as a
server request), mcp-server-time (PyPI; 2026-07-28) and the probe server (``MCPServer``;
2026-07-28, elicitation as an ``InputRequiredResult``), over stdio in the OS sandbox and over
streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest

from agentrt.activities.mcp import McpManager
from agentrt.activities.tools import SandboxStatus
from agentrt.schemas import ElicitationAnswer, McpServerConfig, McpServerUnavailable, McpToolError, ToolError
from agentrt.store import Store
from tests._loopback_http import BODY, loopback_http
from tests.activities.mcp.conftest import MakeManager
from tests.mcp_servers import (
    EVERYTHING_ADD,
    EVERYTHING_ECHO,
    EVERYTHING_ELICITATION,
    EVERYTHING_IMAGE,
    EVERYTHING_LONG_RUNNING,
    EVERYTHING_TOOL_COUNT,
    everything_stdio,
    probe_stdio,
    server_processes,
    time_stdio,
)


def accept(**content: object) -> ElicitationAnswer:
    return ElicitationAnswer(request_id="req-1", principal="alice", action="accept", content=content)


def decline() -> ElicitationAnswer:
    return ElicitationAnswer(request_id="req-1", principal="alice", action="decline")


def events(store: Store, server: str) -> list[str]:
    return [e.type for e in store.mcp_server_events(server)]


async def wait_until(condition, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


# Listing.


async def test_everything_lists_its_tools_as_server_dot_tool_with_risks_from_annotations(
    tmp_path: Path, managers: MakeManager, db: Store
) -> None:
    manager = managers(everything_stdio(tmp_path, risk={"get-env": "effectful"}), store=db)
    listing = await manager.list_tools("everything")
    risks = {info.name: (info.risk, info.risk_reason) for info in listing.tools}
    assert len(listing.tools) == len(listing.specs) == EVERYTHING_TOOL_COUNT
    assert {spec.name for spec in listing.specs} >= {"everything.echo", "everything.get-sum", "everything.trigger-elicitation-request"}
    assert risks["echo"] == ("read_only", "readOnlyHint: true")
    assert risks["gzip-file-as-resource"] == ("idempotent", "destructiveHint: false, idempotentHint: true")
    assert risks["toggle-simulated-logging"][0] == "effectful"
    assert risks["get-env"] == ("effectful", "override in agentrt.toml: effectful")
    assert all(spec.source == "mcp:everything" and not spec.untrusted and not spec.destructive for spec in listing.specs)
    await manager.close()
    ready = [e for e in db.mcp_server_events("everything") if e.type == "McpServerReady"]
    assert [(e.tools, e.protocol_version, e.worker) for e in ready] == [(EVERYTHING_TOOL_COUNT, "2025-11-25", "test-worker")]


async def test_the_time_server_lists_two_read_only_tools_over_the_2026_protocol(
    tmp_path: Path, managers: MakeManager, db: Store
) -> None:
    manager = managers(time_stdio(tmp_path, trust="untrusted"), store=db)
    listing = await manager.list_tools("time")
    assert sorted(spec.name for spec in listing.specs) == ["time.convert_time", "time.get_current_time"]
    assert {(spec.risk, spec.untrusted) for spec in listing.specs} == {("read_only", True)}
    assert manager.state("time") == "ready"
    await manager.close()
    assert [e.protocol_version for e in db.mcp_server_events("time") if e.type == "McpServerReady"] == ["2026-07-28"]


async def test_a_tool_name_too_long_once_qualified_is_listed_as_skipped_and_not_offered(
    tmp_path: Path, managers: MakeManager
) -> None:
    listing = await managers(probe_stdio(tmp_path)).list_tools("probe")
    skipped = {info.name: info.skipped for info in listing.tools if info.skipped}
    assert list(skipped) == ["t" * 60]
    assert f"probe.{'t' * 60}" not in {spec.name for spec in listing.specs}
    unannotated = next(info for info in listing.tools if info.name == "unannotated")
    assert (unannotated.risk, unannotated.risk_reason) == ("effectful", "no annotations: effectful")


async def test_a_listing_is_reused_within_its_ttl_and_refresh_lists_again(tmp_path: Path, managers: MakeManager) -> None:
    manager = managers(time_stdio(tmp_path))
    first = await manager.list_tools("time")
    assert await manager.list_tools("time") is first
    assert await manager.list_tools("time", refresh=True) is not first


async def test_an_unconfigured_server_is_unavailable(managers: MakeManager) -> None:
    with pytest.raises(McpServerUnavailable, match="no \\[mcp.servers.nope\\]"):
        await managers().call_tool("nope", "x", {}, timeout_seconds=5)


# Calls.


async def test_echo_and_get_sum_return_their_text(tmp_path: Path, managers: MakeManager) -> None:
    manager = managers(everything_stdio(tmp_path))
    echo = await manager.call_tool("everything", EVERYTHING_ECHO, {"message": "hi"}, timeout_seconds=10)
    total = await manager.call_tool("everything", EVERYTHING_ADD, {"a": 2, "b": 3}, timeout_seconds=10)
    assert (echo.text, echo.is_error, echo.input_required) == ("Echo: hi", False, None)
    assert "5" in total.text and not total.is_error


async def test_get_current_time_returns_the_time_as_json(tmp_path: Path, managers: MakeManager) -> None:
    manager = managers(time_stdio(tmp_path))
    outcome = await manager.call_tool("time", "get_current_time", {"timezone": "Europe/Paris"}, timeout_seconds=10)
    assert json.loads(outcome.text)["timezone"] == "Europe/Paris"
    assert not outcome.is_error


async def test_a_tool_error_result_passes_is_error_through(tmp_path: Path, managers: MakeManager) -> None:
    manager = managers(time_stdio(tmp_path), everything_stdio(tmp_path))
    bad_zone = await manager.call_tool("time", "get_current_time", {"timezone": "Nowhere/Land"}, timeout_seconds=10)
    bad_args = await manager.call_tool("everything", EVERYTHING_ADD, {"a": "two", "b": 3}, timeout_seconds=10)
    assert bad_zone.is_error and "Invalid timezone" in bad_zone.text
    assert bad_args.is_error and "Input validation error" in bad_args.text


async def test_an_unknown_tool_is_a_protocol_error_with_its_json_rpc_code(tmp_path: Path, managers: MakeManager) -> None:
    with pytest.raises(McpToolError, match="Unknown tool") as caught:
        await managers(time_stdio(tmp_path)).call_tool("time", "nope", {}, timeout_seconds=10)
    assert (caught.value.server, caught.value.tool, caught.value.code) == ("time", "nope", -32602)


async def test_an_image_is_saved_in_files_dir_and_named_in_the_text(tmp_path: Path, managers: MakeManager) -> None:
    files = tmp_path / "files"
    outcome = await managers(everything_stdio(tmp_path)).call_tool(
        "everything", EVERYTHING_IMAGE, {}, timeout_seconds=10, files_dir=files
    )
    [saved] = list(files.iterdir())
    assert f"[image image/png, {saved.stat().st_size} bytes: {saved}]" in outcome.text.splitlines()
    assert saved.read_bytes().startswith(b"\x89PNG")


async def test_progress_notifications_reach_on_progress(tmp_path: Path, managers: MakeManager) -> None:
    seen: list[tuple[float, float | None, str | None]] = []
    outcome = await managers(everything_stdio(tmp_path)).call_tool(
        "everything", EVERYTHING_LONG_RUNNING, {"duration": 0.3, "steps": 3}, timeout_seconds=10,
        on_progress=lambda progress, total, message: seen.append((progress, total, message)),
    )
    assert "completed" in outcome.text
    assert seen == [(1.0, 3.0, None), (2.0, 3.0, None), (3.0, 3.0, None)]


async def test_progress_messages_of_a_2026_server_reach_on_progress(tmp_path: Path, managers: MakeManager) -> None:
    seen: list[tuple[float, float | None, str | None]] = []
    await managers(probe_stdio(tmp_path)).call_tool(
        "probe", "count", {"steps": 2}, timeout_seconds=10, on_progress=lambda *report: seen.append(report)
    )
    assert seen == [(1.0, 2.0, "step 1"), (2.0, 2.0, "step 2")]


# Elicitation.


async def test_an_elicitation_without_answer_stops_the_call_and_returns_the_question(tmp_path: Path, managers: MakeManager) -> None:
    outcome = await managers(everything_stdio(tmp_path)).call_tool("everything", EVERYTHING_ELICITATION, {}, timeout_seconds=10)
    assert outcome.text == "" and not outcome.is_error
    assert outcome.input_required is not None
    assert outcome.input_required.message == "Please provide inputs for the following fields:"
    assert outcome.input_required.requested_schema["required"] == ["name"]
    assert outcome.input_required.mode == "form"


async def test_the_next_run_answers_the_elicitation_and_returns_the_tools_result(tmp_path: Path, managers: MakeManager) -> None:
    manager = managers(everything_stdio(tmp_path))
    first = await manager.call_tool("everything", EVERYTHING_ELICITATION, {}, timeout_seconds=10)
    assert first.input_required is not None
    accepted = await manager.call_tool("everything", EVERYTHING_ELICITATION, {}, timeout_seconds=10, answers=[accept(name="Ann")])
    declined = await manager.call_tool("everything", EVERYTHING_ELICITATION, {}, timeout_seconds=10, answers=[decline()])
    assert accepted.input_required is None and "- Name: Ann" in accepted.text
    assert declined.input_required is None and "declined" in declined.text


async def test_a_2026_server_asks_through_input_required_and_resumes_from_request_state(
    tmp_path: Path, managers: MakeManager
) -> None:
    manager = managers(probe_stdio(tmp_path))
    first = await manager.call_tool("probe", "ask_name", {}, timeout_seconds=10)
    question = first.input_required
    assert question is not None and question.message == "What is your name?"
    assert question.requested_schema["properties"]["name"]["type"] == "string"
    assert question.key is not None and question.request_state is not None
    resumed = await manager.call_tool(
        "probe", "ask_name", {}, timeout_seconds=10, answers=[accept(name="Ann")], request_state=question.request_state
    )
    declined = await manager.call_tool(
        "probe", "ask_name", {}, timeout_seconds=10, answers=[decline()], request_state=question.request_state
    )
    assert (resumed.text, resumed.input_required) == ("hello Ann", None)
    assert declined.text == "no name: decline"


async def test_a_2026_call_with_answers_but_no_request_state_runs_again_from_the_start(
    tmp_path: Path, managers: MakeManager
) -> None:
    outcome = await managers(probe_stdio(tmp_path)).call_tool("probe", "ask_name", {}, timeout_seconds=10, answers=[accept(name="Bo")])
    assert outcome.text == "hello Bo"


async def test_a_request_state_the_restarted_server_refuses_runs_the_call_from_the_start(
    tmp_path: Path, managers: MakeManager
) -> None:
    first = await managers(probe_stdio(tmp_path)).call_tool("probe", "ask_name", {}, timeout_seconds=10)
    assert first.input_required is not None
    # Another worker process: a new server, whose key does not open the old state.
    other = managers(probe_stdio(tmp_path))
    outcome = await other.call_tool(
        "probe", "ask_name", {}, timeout_seconds=10, answers=[accept(name="Cy")], request_state=first.input_required.request_state
    )
    assert outcome.text == "hello Cy"


async def test_a_legacy_elicitation_with_two_calls_in_flight_is_refused_not_misattributed(
    tmp_path: Path, managers: MakeManager
) -> None:
    manager = managers(everything_stdio(tmp_path))
    await manager.list_tools("everything")
    both = await asyncio.gather(
        *(manager.call_tool("everything", EVERYTHING_ELICITATION, {}, timeout_seconds=10, answers=[accept(name="Ann")]) for _ in range(2))
    )
    assert all(o.is_error and "cannot tell which of the 2 calls in flight asks for input" in o.text for o in both)


# Failures and restarts.


async def test_a_killed_server_fails_the_call_in_flight_and_restarts_on_next_use(
    tmp_path: Path, managers: MakeManager, db: Store
) -> None:
    config = everything_stdio(tmp_path)
    manager = managers(config, store=db)
    progressed = asyncio.Event()
    call = asyncio.create_task(
        manager.call_tool(
            "everything", EVERYTHING_LONG_RUNNING, {"duration": 30, "steps": 60}, timeout_seconds=60,
            on_progress=lambda *_: progressed.set(),
        )
    )
    await asyncio.wait_for(progressed.wait(), 10)
    [node] = [pid for pid in server_processes(config.args[0]) if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(config.command.encode())]
    os.kill(node, signal.SIGKILL)
    with pytest.raises(McpServerUnavailable, match="connection closed during the call") as caught:
        await call
    assert "exit status 137" in caught.value.diagnostic
    assert manager.state("everything") == "failed"
    echo = await manager.call_tool("everything", EVERYTHING_ECHO, {"message": "again"}, timeout_seconds=10)
    assert echo.text == "Echo: again"
    await manager.close()
    assert events(db, "everything") == [
        "McpServerStarting", "McpServerReady", "McpServerFailed", "McpServerStarting", "McpServerReady", "McpServerStopped",
    ]
    failed = next(e for e in db.mcp_server_events("everything") if e.type == "McpServerFailed")
    assert failed.diagnostic is not None and "exit status 137" in failed.diagnostic


async def test_an_idle_server_that_dies_is_marked_failed_and_restarted_on_next_use(
    tmp_path: Path, managers: MakeManager, db: Store
) -> None:
    config = time_stdio(tmp_path)
    manager = managers(config, store=db)
    await manager.list_tools("time")
    [python] = [  # the server itself, not the relay that reads its stdout (its command line names the server too)
        pid for pid in server_processes("mcp_server_time")
        if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(config.command.encode()) and b"_relay.py" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    os.kill(python, signal.SIGKILL)
    await wait_until(lambda: manager.state("time") == "failed")
    outcome = await manager.call_tool("time", "get_current_time", {"timezone": "UTC"}, timeout_seconds=10)
    assert json.loads(outcome.text)["timezone"] == "UTC"
    await manager.close()
    assert events(db, "time")[:4] == ["McpServerStarting", "McpServerReady", "McpServerFailed", "McpServerStarting"]
    failed = next(e for e in db.mcp_server_events("time") if e.type == "McpServerFailed")
    assert failed.diagnostic is not None and failed.diagnostic.startswith("the server closed the connection; exit status 137")


async def test_a_server_that_cannot_start_fails_with_its_exit_status_and_stderr(
    tmp_path: Path, managers: MakeManager, db: Store
) -> None:
    broken = McpServerConfig(name="broken", command="/bin/sh", args=["-c", "echo cannot start here >&2; exit 3"], cwd=str(tmp_path / "b"))
    manager = managers(broken, store=db)
    with pytest.raises(McpServerUnavailable) as caught:
        await manager.list_tools("broken")
    assert caught.value.diagnostic == (
        "the server closed the connection before it was ready; exit status 3; stderr: cannot start here"
    )
    assert manager.state("broken") == "failed"
    await manager.close()
    assert events(db, "broken") == ["McpServerStarting", "McpServerFailed"]


async def test_restarts_back_off_and_a_use_that_cannot_wait_is_refused_at_once(tmp_path: Path, managers: MakeManager) -> None:
    manager = managers(McpServerConfig(name="broken", command="/bin/false", cwd=str(tmp_path / "b")))
    for _ in range(2):  # the first failure, then the restart at once
        with pytest.raises(McpServerUnavailable, match="exit status 1"):
            await manager.call_tool("broken", "x", {}, timeout_seconds=5)
    started = time.monotonic()
    # Refused without waiting: a call that waited would end on its own 0.5 s timeout instead.
    with pytest.raises(McpServerUnavailable, match="failed 2 times in a row and restarts in 1 s"):
        await manager.call_tool("broken", "x", {}, timeout_seconds=0.5)
    with pytest.raises(McpServerUnavailable, match="exit status 1"):  # waits out the second's backoff
        await manager.call_tool("broken", "x", {}, timeout_seconds=5)
    assert time.monotonic() - started >= 0.9


async def test_eager_servers_start_with_start_and_a_failure_is_recorded_not_raised(
    tmp_path: Path, managers: MakeManager, db: Store
) -> None:
    good = time_stdio(tmp_path, start="eager")
    bad = McpServerConfig(name="bad", command="/nonexistent/server", start="eager", cwd=str(tmp_path / "bad"))
    lazy = everything_stdio(tmp_path)
    manager = managers(good, bad, lazy, store=db)
    await manager.start()
    assert (manager.state("time"), manager.state("bad"), manager.state("everything")) == ("ready", "failed", None)
    await manager.close()
    failed = db.mcp_server_events("bad")[-1]
    assert failed.type == "McpServerFailed" and failed.diagnostic is not None and "/nonexistent/server" in failed.diagnostic


# Configuration.


async def test_env_references_expand_from_the_managers_environment(tmp_path: Path, managers: MakeManager) -> None:
    config = probe_stdio(tmp_path, env={"GREETING": "hello ${AGENTRT_TEST_NAME}!", "PLAIN": "as is"})
    manager = managers(config, env={"AGENTRT_TEST_NAME": "world", "UNUSED": "x"})
    seen = json.loads((await manager.call_tool("probe", "environment", {}, timeout_seconds=10)).text)
    assert (seen["GREETING"], seen["PLAIN"]) == ("hello world!", "as is")
    assert manager.secrets() == ["world"]


async def test_a_missing_variable_makes_the_server_unavailable_naming_it(tmp_path: Path, managers: MakeManager, db: Store) -> None:
    manager = managers(probe_stdio(tmp_path, env={"TOKEN": "${AGENTRT_TEST_MISSING}"}), store=db)
    with pytest.raises(McpServerUnavailable, match="environment variable AGENTRT_TEST_MISSING \\(in env.TOKEN\\) is not set"):
        await manager.call_tool("probe", "environment", {}, timeout_seconds=10)
    await manager.close()
    assert events(db, "probe") == ["McpServerStarting", "McpServerFailed"]


async def test_http_headers_expand_from_the_managers_environment(
    probe_http: McpServerConfig, managers: MakeManager
) -> None:
    config = probe_http.model_copy(update={"headers": {"X-Api-Key": "key-${AGENTRT_TEST_KEY}"}})
    manager = managers(config, env={"AGENTRT_TEST_KEY": "s3cret"})
    outcome = await manager.call_tool("probe_http", "header", {"name": "X-Api-Key"}, timeout_seconds=10)
    assert outcome.text == "key-s3cret"
    assert manager.secrets() == ["s3cret"]


async def test_a_missing_header_variable_makes_the_http_server_unavailable(
    probe_http: McpServerConfig, managers: MakeManager
) -> None:
    config = probe_http.model_copy(update={"headers": {"Authorization": "Bearer ${AGENTRT_TEST_TOKEN}"}})
    with pytest.raises(McpServerUnavailable, match="AGENTRT_TEST_TOKEN \\(in headers.Authorization\\)"):
        await managers(config).list_tools("probe_http")


async def test_a_diagnostic_never_holds_a_secret_value(tmp_path: Path, managers: MakeManager, db: Store) -> None:
    leaky = McpServerConfig(
        name="leaky", command="/bin/sh", args=["-c", 'echo "my token is $TOKEN" >&2; exit 1'],
        env={"TOKEN": "${AGENTRT_TEST_TOKEN}"}, cwd=str(tmp_path / "leaky"),
    )
    manager = managers(leaky, store=db, env={"AGENTRT_TEST_TOKEN": "tok-12345"})
    with pytest.raises(McpServerUnavailable) as caught:
        await manager.list_tools("leaky")
    assert "my token is [redacted]" in caught.value.diagnostic and "tok-12345" not in caught.value.diagnostic
    await manager.close()
    assert all("tok-12345" not in (e.diagnostic or "") for e in db.mcp_server_events("leaky"))


# The sandbox.


async def test_a_sandboxed_server_cannot_read_files_outside_its_directory(tmp_path: Path, managers: MakeManager) -> None:
    outside = tmp_path / "outside" / "secret.txt"
    outside.parent.mkdir()
    outside.write_text("top secret")
    config = probe_stdio(tmp_path)
    Path(config.cwd or "").mkdir(parents=True)
    (Path(config.cwd or "") / "mine.txt").write_text("my own")
    manager = managers(config)
    theirs = await manager.call_tool("probe", "read_file", {"path": str(outside)}, timeout_seconds=10)
    mine = await manager.call_tool("probe", "read_file", {"path": "mine.txt"}, timeout_seconds=10)
    assert theirs.text.startswith("cannot read: FileNotFoundError")
    assert mine.text == "my own"


async def test_a_sandboxed_server_sees_none_of_the_workers_environment(
    tmp_path: Path, managers: MakeManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTRT_TEST_WORKER_SECRET", "do-not-leak")
    config = probe_stdio(tmp_path)
    seen = json.loads((await managers(config).call_tool("probe", "environment", {}, timeout_seconds=10)).text)
    cwd = str(Path(config.cwd or "").resolve())
    assert {k: v for k, v in seen.items() if k != "PWD"} == {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": cwd, "LANG": "C.UTF-8"}


async def test_an_unsandboxed_server_gets_the_same_small_environment(
    tmp_path: Path, managers: MakeManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTRT_TEST_WORKER_SECRET", "do-not-leak")
    config = probe_stdio(tmp_path, sandbox="none")
    seen = json.loads((await managers(config).call_tool("probe", "environment", {}, timeout_seconds=10)).text)
    assert "AGENTRT_TEST_WORKER_SECRET" not in seen and "USER" not in seen
    assert seen["HOME"] == str(Path(config.cwd or "").resolve())


async def test_a_sandboxed_server_does_not_run_when_bwrap_cannot(
    tmp_path: Path, managers: MakeManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agentrt.activities.mcp._launch.sandbox_status", lambda: SandboxStatus(None, "no bwrap binary"))
    with pytest.raises(McpServerUnavailable, match="sandbox \\(bubblewrap\\) cannot run on this worker.*no bwrap binary"):
        await managers(probe_stdio(tmp_path)).list_tools("probe")


# Timeouts, cancellation, shutdown.


async def test_a_call_that_times_out_is_cancelled_at_the_server(tmp_path: Path, managers: MakeManager) -> None:
    config = probe_stdio(tmp_path)
    manager = managers(config)
    await manager.list_tools("probe")
    marker = Path(config.cwd or "") / "marker"
    with pytest.raises(ToolError, match="the MCP tool probe.sleep timed out after 0.5 s"):
        await manager.call_tool("probe", "sleep", {"seconds": 30, "marker": "marker"}, timeout_seconds=0.5)
    await wait_until(lambda: marker.read_text() == "cancelled")


async def test_cancelling_the_awaiting_task_cancels_the_call_at_the_server(tmp_path: Path, managers: MakeManager) -> None:
    config = probe_stdio(tmp_path)
    manager = managers(config)
    marker = Path(config.cwd or "") / "marker"
    call = asyncio.create_task(manager.call_tool("probe", "sleep", {"seconds": 30, "marker": "marker"}, timeout_seconds=60))
    await wait_until(lambda: marker.exists() and marker.read_text() == "started")
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    await wait_until(lambda: marker.read_text() == "cancelled")
    assert (await manager.call_tool("probe", "count", {"steps": 1}, timeout_seconds=10)).text == "counted to 1"


def process_start(pid: int) -> str | None:
    """``pid``'s start time in clock ticks (/proc/PID/stat field 22), "Z" for a zombie, None when gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()
    except OSError:
        return None
    return "Z" if fields[0] == "Z" else fields[19]


async def test_close_stops_every_server_process_and_records_it(tmp_path: Path, managers: MakeManager, db: Store) -> None:
    configs = [everything_stdio(tmp_path), time_stdio(tmp_path), probe_stdio(tmp_path)]
    manager = managers(*configs, store=db)
    for config in configs:
        await manager.list_tools(config.name)
    pids = server_processes(str(tmp_path))
    assert len(pids) >= 3
    started = {pid: process_start(pid) for pid in pids}
    await manager.close()
    await manager.close()  # idempotent
    assert server_processes(str(tmp_path)) == []
    # Each is gone, a zombie, or its pid belongs to a newer process (the suite's other processes
    # spawn many, and pid_max is often 32768); a process still inside exit gets a moment.
    for _ in range(100):
        if all(process_start(pid) in (None, "Z") or process_start(pid) != started[pid] for pid in pids):
            break
        await asyncio.sleep(0.1)
    assert all(process_start(pid) in (None, "Z") or process_start(pid) != started[pid] for pid in pids)
    assert {c.name: (manager.state(c.name), events(db, c.name)[-1]) for c in configs} == {
        c.name: ("stopped", "McpServerStopped") for c in configs
    }
    with pytest.raises(McpServerUnavailable, match="shutting down"):
        await manager.list_tools("time")


async def test_concurrent_first_uses_share_one_start_and_one_process(
    tmp_path: Path, managers: MakeManager, db: Store
) -> None:
    config = everything_stdio(tmp_path)
    manager = managers(config, store=db)
    echoes = await asyncio.gather(
        *(manager.call_tool("everything", EVERYTHING_ECHO, {"message": str(i)}, timeout_seconds=10) for i in range(5))
    )
    assert [o.text for o in echoes] == [f"Echo: {i}" for i in range(5)]
    assert len([pid for pid in server_processes(config.args[0]) if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(config.command.encode())]) == 1
    await manager.close()
    assert events(db, "everything") == ["McpServerStarting", "McpServerReady", "McpServerStopped"]


async def test_close_during_a_start_stops_it_at_once(tmp_path: Path, managers: MakeManager, db: Store) -> None:
    mute = McpServerConfig(name="mute", command="/bin/sh", args=["-c", "sleep 600 # mute-server"], cwd=str(tmp_path / "mute"))
    manager = managers(mute, store=db)
    listing = asyncio.create_task(manager.list_tools("mute"))
    await wait_until(lambda: len(server_processes("mute-server")) > 0)
    await asyncio.wait_for(manager.close(), 120)  # not the mute server's 600 s: close stops it
    with pytest.raises(McpServerUnavailable, match="shutting down"):
        await listing
    assert server_processes("mute-server") == []
    assert (manager.state("mute"), events(db, "mute")) == ("stopped", ["McpServerStarting", "McpServerStopped"])


async def test_close_is_safe_when_nothing_was_started(tmp_path: Path) -> None:
    manager = McpManager({"time": time_stdio(tmp_path)}, store=None, worker="w", home=tmp_path)
    await manager.close()
    assert manager.state("time") is None


# Streamable HTTP.


async def test_everything_over_streamable_http_lists_and_calls(everything_http: McpServerConfig, managers: MakeManager) -> None:
    manager = managers(everything_http)
    listing = await manager.list_tools("everything_http")
    echo = await manager.call_tool("everything_http", EVERYTHING_ECHO, {"message": "over http"}, timeout_seconds=10)
    question = await manager.call_tool("everything_http", EVERYTHING_ELICITATION, {}, timeout_seconds=10)
    answered = await manager.call_tool(
        "everything_http", EVERYTHING_ELICITATION, {}, timeout_seconds=10, answers=[accept(name="Dee")]
    )
    assert len(listing.specs) == EVERYTHING_TOOL_COUNT
    assert echo.text == "Echo: over http"
    assert question.input_required is not None and "- Name: Dee" in answered.text
    assert everything_http.url is not None and everything_http.url.startswith("http://127.0.0.1:")


async def test_the_stderr_of_a_stdio_server_is_kept_in_its_log(tmp_path: Path, managers: MakeManager) -> None:
    manager = managers(time_stdio(tmp_path))
    await manager.call_tool("time", "get_current_time", {"timezone": "Nowhere/Land"}, timeout_seconds=10)
    await manager.close()
    assert "get_current_time" in (tmp_path / "home" / "mcp" / "time.log").read_text()


# Network.


async def test_a_sandboxed_server_with_network_reaches_out_only_through_the_egress_proxy(
    tmp_path: Path, managers: MakeManager
) -> None:
    # A fetch tool a hostile model drives: granted network, it still reaches no loopback service of the worker host.
    with loopback_http() as host_service, loopback_http() as allowed:
        manager = managers(probe_stdio(tmp_path, network=True), egress_allow=[f"127.0.0.1:{allowed}"])
        refused = (await manager.call_tool("probe", "fetch", {"url": f"http://127.0.0.1:{host_service}/"}, timeout_seconds=20)).text
        reached = (await manager.call_tool("probe", "fetch", {"url": f"http://127.0.0.1:{allowed}/"}, timeout_seconds=20)).text

    assert "403" in refused and BODY.decode() not in refused
    assert BODY.decode() in reached
