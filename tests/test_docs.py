"""The Python examples of the documentation pages (docs/*.md) run as written.

An example is one of three kinds:

- a program (its first line is a docstring naming its file, `\"\"\"worker.py: ...`) that the
  README shows too: it must be the README's, character for character, and tests/test_readme.py
  runs that one as its own process;
- a snippet: imports and functions a reader calls from their own code. Each is executed as a
  module, and each function it defines is called here, against a real Temporal dev server and
  worker, by the runner `RUNNERS` names for it (a snippet function without a runner fails);
- an example marked `<!-- not run: REASON -->` on the line above it, because it needs what a
  test machine lacks (Amazon S3, a hosted model). It is compiled and checked as far as it can be;
  the set stays small.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import hashlib
import hmac
import json
import re
import sys
import time
import typing
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.util._once import Once

from agentrt import schemas, worker
from agentrt.client import AgentClient, AgentrtPlugin, StreamHub, connect

from tests.conftest import OWNER, Harness

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
GUIDE = "build-your-own-agent.md"  # its programs are examples/support's files (tests/examples runs them)
SUPPORT_EXAMPLE = REPO / "examples" / "support"
FENCE = re.compile(r"(?:^(?P<marker><!-- not run: (?P<reason>.+?) -->)\n)?^```python\n(?P<code>.*?)^```", re.S | re.M)
PROGRAM = re.compile(r'^"""(?P<name>[\w.-]+\.py)\b')
MOST_NOT_RUN = 3


@dataclass(frozen=True)
class Example:
    page: str
    number: int  # 1-based, among the page's Python examples
    code: str
    not_run: str | None

    @property
    def label(self) -> str:
        return f"docs/{self.page} python example {self.number}"

    @property
    def program(self) -> str | None:
        found = PROGRAM.match(self.code)
        return found["name"] if found else None


def examples() -> list[Example]:
    found = []
    for page in sorted(DOCS.glob("*.md")):
        for number, match in enumerate(FENCE.finditer(page.read_text()), 1):
            found.append(Example(page.name, number, match["code"], match["reason"]))
    return found


def readme_programs() -> dict[str, str]:
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    return {m["name"]: b for b in blocks if (m := PROGRAM.match(b))}


def snippets() -> list[Example]:
    return [e for e in examples() if e.not_run is None and e.program is None]


def load(example: Example) -> ModuleType:
    """Execute a snippet as a module: its imports must resolve and its top level must run."""
    module = ModuleType(f"docs_example_{example.page.replace('-', '_').removesuffix('.md')}_{example.number}")
    # In sys.modules as an imported module is: pydantic resolves a model's annotations there (the
    # snippet inherits this file's ``from __future__ import annotations``, so they are strings).
    sys.modules[module.__name__] = module
    exec(compile(example.code, example.label, "exec"), module.__dict__)
    return module


def functions(example: Example) -> list[str]:
    tree = ast.parse(example.code)
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and not n.name.startswith("_")]


def snippet(page: str, function: str) -> Callable[..., Any]:
    [example] = [e for e in snippets() if e.page == page and function in functions(e)]
    return getattr(load(example), function)


# ---------------------------------------------------------------- every example


def test_every_python_example_in_the_docs_compiles() -> None:
    assert len(examples()) >= 10
    for example in examples():
        compile(example.code, example.label, "exec")


def test_a_docs_program_that_the_readme_shows_is_the_readme_s_which_runs_under_test_readme() -> None:
    readme = readme_programs()
    programs = [e for e in examples() if e.program and e.not_run is None and e.page != GUIDE]
    assert {e.program for e in programs} == {"worker.py", "client.py"}
    for example in programs:
        assert example.program in readme, f"{example.label}: a program no test runs (mark it or make it a snippet)"
        assert example.code == readme[example.program], f"{example.label} differs from the README's {example.program}"


def test_the_guide_s_programs_are_the_example_s_files_which_run_under_tests_examples() -> None:
    programs = {e.program: e for e in examples() if e.page == GUIDE}
    assert set(programs) == {"support_agent.py", "service.py"}
    for name, example in programs.items():
        assert example.code == (SUPPORT_EXAMPLE / name).read_text(), f"{example.label} differs from examples/support/{name}"
    agent_lines = (SUPPORT_EXAMPLE / "support_agent.py").read_text().splitlines()
    assert len(agent_lines) < 60 and f"one file of {len(agent_lines)} lines" in (DOCS / GUIDE).read_text()


def test_only_a_few_examples_are_not_run_and_each_says_why() -> None:
    not_run = [e for e in examples() if e.not_run is not None]
    assert 0 < len(not_run) <= MOST_NOT_RUN, [e.label for e in not_run]
    assert all(len(e.not_run or "") > 10 for e in not_run)


def test_every_snippet_loads_and_every_function_it_defines_has_a_runner() -> None:
    for example in snippets():
        load(example)
        names = functions(example)
        assert names, f"{example.label}: a snippet defines the functions a reader calls"
        for name in names:
            assert (example.page, name) in RUNNERS, f"{example.label}: no runner calls {name}()"


def test_the_s3_example_gives_the_s3_driver_to_the_plugin() -> None:
    [s3] = [e for e in examples() if e.program == "s3.py"]
    assert s3.page == "big-payloads.md" and s3.not_run is not None
    assert "AgentrtPlugin(config, store, driver=s3_driver)" in s3.code and "plugin=plugin" in s3.code


# ---------------------------------------------------------------- reference pages


def test_the_events_page_lists_every_event_type() -> None:
    page = (DOCS / "events.md").read_text()
    members = typing.get_args(typing.get_args(schemas.Event)[0])
    tags = [m.model_fields["type"].default for m in members]
    assert len(tags) > 50
    assert [tag for tag in tags if f"| `{tag}`" not in page] == []


def test_the_errors_page_draws_every_error_class() -> None:
    page = (DOCS / "errors.md").read_text()
    exported = [getattr(package, name) for package in (schemas, worker) for name in package.__all__]
    errors = {e.__name__ for e in exported if isinstance(e, type) and issubclass(e, schemas.AgentrtError)}
    assert len(errors) > 40
    assert sorted(name for name in errors - {"AgentrtError"} if not re.search(rf"[─ ]{name} ", page)) == []


# ---------------------------------------------------------------- the snippets, run

RUNNERS: dict[tuple[str, str], Callable[..., Awaitable[None]]] = {}


def runs(page: str, *names: str) -> Callable[[Callable[..., Awaitable[None]]], Callable[..., Awaitable[None]]]:
    def register(runner: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
        for name in names:
            RUNNERS[(page, name)] = runner
        return runner

    return register


def script(tmp_path: Path, *answers: str) -> str:
    path = tmp_path / f"script-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps({"turns": [{"text": a} for a in answers]}))
    return str(path)


async def archived_session(harness: Harness, workspace: Path, tmp_path: Path) -> str:
    """A session that answered one message and was archived: its stream has an end."""
    config = harness.client.new_config(str(workspace), profile="scripted", script=script(tmp_path, "Hello there."))
    started, outcome = await harness.client.start_and_wait(config, "Say hello")
    assert outcome.status == "completed"
    await harness.client.archive(started.session_id)
    return started.session_id


@runs("python-client.md", "ask")
async def run_ask(harness: Harness, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ask = snippet("python-client.md", "ask")
    session = harness.client.new_config(str(workspace), profile="scripted", script=script(tmp_path, "A summary.", "Two questions."))
    await ask(harness.client, session)
    assert capsys.readouterr().out.splitlines() == ["A summary.", "completed Two questions."]


@runs("python-client.md", "nudge_if_idle")
async def run_nudge_if_idle(harness: Harness, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nudge_if_idle = snippet("python-client.md", "nudge_if_idle")
    turns = {"turns": [{"text": "working", "delay_seconds": 5}, {"text": "the changelog"}]}
    (tmp_path / "slow.json").write_text(json.dumps(turns))
    config = harness.client.new_config(str(workspace), profile="scripted", script=str(tmp_path / "slow.json"))
    started = await harness.client.start(config, "write the notes")
    while (await harness.client.state(started.session_id)).active_turn_id is None:
        await asyncio.sleep(0.1)
    assert await nudge_if_idle(harness.client, started.session_id) is None
    assert capsys.readouterr().out.split() == ["not", "now:", "turn", started.turn_id]
    await harness.client.wait(started.session_id, started.turn_id, timeout_seconds=60)
    turn_id = await nudge_if_idle(harness.client, started.session_id)
    assert (await harness.client.wait(started.session_id, turn_id, timeout_seconds=60)).answer == "the changelog"
    assert (await harness.client.state(started.session_id)).title == "release notes"


@runs("structured-output.md", "triage")
async def run_triage(harness: Harness, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    triage = snippet("structured-output.md", "triage")
    answers = script(tmp_path, '{"priority": "urgent"}', '{"priority": "high", "tags": ["billing"]}')
    session = harness.client.new_config(str(workspace), profile="scripted", script=answers)
    result = await triage(harness.client, session, "my invoice is wrong")
    assert (result.priority, result.tags) == ("high", ["billing"])
    events = [e async for e in harness.client.all_events(session.session_id)]
    assert [e.attempt for e in events if e.type == "OutputValidationFailed"] == [1]


@runs("idempotency.md", "pay_invoice")
async def run_pay_invoice(harness: Harness, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pay_invoice = snippet("idempotency.md", "pay_invoice")
    config = harness.client.new_config(str(workspace), profile="scripted", script=script(tmp_path, "Ready.", "Paid.", "Done."))
    started, _ = await harness.client.start_and_wait(config, "get ready")
    await pay_invoice(harness.client, started.session_id)
    events = [e async for e in harness.client.all_events(started.session_id)]
    assert [e.text for e in events if e.type == "UserMessageAdded"] == ["get ready", "pay invoice 42", "and now?"]


@runs("idempotency.md", "start_once")
async def run_start_once(harness: Harness, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    start_once = snippet("idempotency.md", "start_once")
    keys = [uuid.uuid4().hex for _ in range(3)]
    task_id, graph_id = await start_once(harness.client, str(workspace), *keys)
    try:
        assert (task_id, graph_id) == await start_once(harness.client, str(workspace), *keys)  # a retry: the same ids
    finally:
        with contextlib.suppress(Exception):
            await harness.client.cancel_task(task_id)
        with contextlib.suppress(Exception):
            await harness.client.cancel_graph(graph_id)


@runs("quotas.md", "upgrade")
async def run_upgrade(harness: Harness, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    upgrade = snippet("quotas.md", "upgrade")
    operator = AgentClient(harness.temporal, task_queue=harness.task_queue, principal="ops", store=harness.store, operators=["ops"])
    await upgrade(operator)
    assert capsys.readouterr().out.split()[:2] == ["5000000", "0"]
    assert [(r.quota, r.principal, r.reason) for r in harness.store.quota_raises("acme")][-1] == ("tokens_per_day", "ops", "customer upgraded")


@runs("streaming.md", "follow", "stream_app")
async def run_streams(harness: Harness, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session_id = await archived_session(harness, workspace, tmp_path)
    await snippet("streaming.md", "follow")(harness.store, session_id)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("1 SessionInitialized") and lines[-1].split()[1] == "SessionArchived"

    hub = StreamHub(harness.store, poll_seconds=0.05)
    try:
        async with serving(snippet("streaming.md", "stream_app")(hub)) as http:
            answer = await http.get(f"/sessions/{session_id}/stream")
    finally:
        await hub.aclose()
    assert answer.status_code == 200 and "RUN_FINISHED" in answer.text


@runs("streaming.md", "read_from")
async def run_read_from(harness: Harness, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session_id = await archived_session(harness, workspace, tmp_path)
    snippet("streaming.md", "read_from")(harness.store, session_id, None)
    everything = capsys.readouterr().out.split()
    snippet("streaming.md", "read_from")(harness.store, session_id, everything[2])
    assert everything[0] == "1" and capsys.readouterr().out.split() == everything[3:]


@runs("streaming.md", "wait_for_growth")
async def run_wait_for_growth(harness: Harness, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    waiting = asyncio.ensure_future(snippet("streaming.md", "wait_for_growth")(harness.store, "grows"))
    for idx in range(100):  # a write once the wait hears wakes it, long before its 30 s
        await asyncio.to_thread(harness.store.append_deltas, "grows", "t1", 1, 1, ["a token"], idx)
        if (await asyncio.wait({waiting}, timeout=0.1))[0]:
            break
    assert waiting.done() and waiting.result() is True


@runs("telemetry.md", "traced")
async def run_traced(harness: Harness, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    async def work(plugin: AgentrtPlugin) -> None:
        temporal = await connect(harness.server.address, plugin=plugin)
        client = AgentClient(temporal, task_queue=harness.task_queue, principal=OWNER)
        config = client.new_config(str(workspace), profile="scripted", script=script(tmp_path, "Traced."))
        _, outcome = await client.start_and_wait(config, "hello")
        assert outcome.status == "completed"

    with fresh_opentelemetry():
        spans = await snippet("telemetry.md", "traced")(harness.store, work)
    assert any(s.name.startswith("StartWorkflow") or s.name.startswith("StartUpdateWithStartWorkflow") for s in spans), [
        s.name for s in spans
    ]


@runs("webhooks.md", "receive")
async def run_receive(harness: Harness, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    receive = snippet("webhooks.md", "receive")
    body = json.dumps({"id": "wh-1", "type": "turn.ended", "created_at": "2026-12-06T08:00:00Z", "data": {"turn_id": "turn-1"}}).encode()
    stamp = int(time.time())
    signature = hmac.new(b"s3cret", f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    headers = {"Agentrt-Webhook-Id": "wh-1", "Agentrt-Webhook-Timestamp": str(stamp), "Agentrt-Signature": f"v1={signature}"}
    assert receive("s3cret", body, headers) == 204
    assert receive("s3cret", body, headers) == 204  # delivered again: handled once
    assert receive("s3cret", body.replace(b"turn-1", b"turn-2"), headers) == 401
    assert capsys.readouterr().out.splitlines() == ["turn.ended {'turn_id': 'turn-1'}", "refused: signature_mismatch"]


@runs("webhooks.md", "serve")
async def run_serve(
    harness: Harness, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = await archived_session(harness, workspace, tmp_path)
    monkeypatch.setenv("AGENTRT_TEMPORAL_ADDRESS", harness.server.address)
    monkeypatch.setenv("AGENTRT_TASK_QUEUE", harness.task_queue)
    monkeypatch.setenv("AGENTRT_DATABASE_URL", harness.config.database_url)
    stopping = asyncio.Event()
    serve = asyncio.create_task(snippet("webhooks.md", "serve")(session_id, OWNER, stopping))
    await asyncio.sleep(1)  # the dispatcher reads the watch: a turn ended, then the session's archive
    assert not serve.done()
    stopping.set()
    await serve


@runs("agents.md", "order_status")
async def run_secret_tool(
    harness: Harness, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = f"sk-orders-{uuid.uuid4().hex}"
    monkeypatch.setenv("ORDERS_API_KEY", key)
    order_status = snippet("agents.md", "order_status")
    path = tmp_path / "status.json"
    path.write_text(json.dumps({"turns": [
        {"tool_calls": [{"name": "order_status", "arguments": {"order_id": "A-1"}}]}, {"text": "shipped"},
    ]}))
    queue = harness.task_queue + "-docs-secrets"
    async with worker.build_worker(harness.temporal, harness.config, harness.store, task_queue=queue, tools=[order_status]):
        client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER)
        config = client.new_config(str(workspace), profile="scripted", script=str(path), tools=["order_status"])
        _, outcome = await client.start_and_wait(config, "where is A-1?")
    assert outcome.status == "completed"
    [result] = [m.text for _, m in harness.store.messages(config.session_id) if m.role == "tool"]
    assert result == "order A-1: shipped (asked with key [secret:ORDERS_API_KEY])"


@runs("agents.md", "lookup_order", "refund", "deps", "plugin", "ask_support")
async def run_support_agent(harness: Harness, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [example] = [e for e in snippets() if e.page == "agents.md" and "ask_support" in functions(e)]
    module = load(example)
    registry = module.plugin(harness.config).worker_plugin.registry
    assert registry.agent_names() == ["support"] and {"lookup_order", "refund", "fs.read"} <= set(registry.names())
    turns = [
        {"tool_calls": [{"name": "lookup_order", "arguments": {"order_id": "A-1"}}]},
        {"tool_calls": [{"name": "refund", "arguments": {"order_id": "A-1", "amount_cents": 500}}]},
        {"text": '{"category": "refund", "urgent": false}'},
    ]
    path = tmp_path / "support.json"
    path.write_text(json.dumps({"turns": turns}))
    queue = harness.task_queue + "-docs"
    async with worker.build_worker(harness.temporal, harness.config, harness.store, registry, task_queue=queue):
        client = AgentClient(harness.temporal, task_queue=queue, principal=OWNER)
        config = client.new_config(str(workspace), profile="scripted", script=str(path), agent="support")
        outcome = await module.ask_support(client, config)
    assert outcome.status == "completed" and outcome.output_as(module.Triage) == module.Triage(category="refund", urgent=False)
    refunds = registry.runtime.deps()["payments"].refunds
    assert refunds == {f"session-{config.session_id}/turn-1/4/call_1_0": ("A-1", 500)}


@runs("audit.md", "who_acted")
async def run_who_acted(harness: Harness, workspace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    client = AgentClient(harness.temporal, task_queue=harness.task_queue, principal=OWNER, store=harness.store)
    config = client.new_config(str(workspace), profile="scripted", script=script(tmp_path, "Hello there."))
    started, _ = await client.start_and_wait(config, "Say hello")
    await client.raise_budget(started.session_id, schemas.Budget(max_tokens=10_000), reason="a longer job")
    await client.archive(started.session_id, "done with it")
    for _ in range(300):  # the archive is written as the session's workflow ends
        if len(await client.audit(target=started.session_id)) == 2:
            break
        await asyncio.sleep(0.1)
    await snippet("audit.md", "who_acted")(client, started.session_id)
    lines = [line.split(" ", 1)[1] for line in capsys.readouterr().out.splitlines()]
    assert lines == [f"{OWNER} raise_budget a longer job", f"{OWNER} archive done with it"]


@pytest.mark.parametrize("runner", sorted(set(RUNNERS.values()), key=lambda r: r.__name__), ids=lambda r: r.__name__)
async def test_a_docs_snippet_runs_as_written(
    runner: Callable[..., Awaitable[None]],
    harness: Harness,
    workspace: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    arguments: dict[str, Any] = {"harness": harness, "workspace": workspace, "tmp_path": tmp_path, "capsys": capsys}
    if "monkeypatch" in runner.__code__.co_varnames:
        arguments["monkeypatch"] = monkeypatch
    await asyncio.wait_for(runner(**arguments), 120)


# ---------------------------------------------------------------- helpers


@contextlib.contextmanager
def fresh_opentelemetry() -> Iterator[None]:
    """A process sets its OpenTelemetry providers once; forget them before and after, as
    OpenTelemetry's own tests do, so the example installs its own and leaves none behind."""

    def forget() -> None:
        trace._TRACER_PROVIDER_SET_ONCE = Once()  # type: ignore[attr-defined]
        trace._TRACER_PROVIDER = None  # type: ignore[attr-defined]
        metrics_internal._METER_PROVIDER_SET_ONCE = Once()
        metrics_internal._METER_PROVIDER = None

    forget()
    try:
        yield
    finally:
        forget()
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider) and metrics.get_meter_provider() is not None


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    server = _Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    task = asyncio.ensure_future(server.serve())
    while not server.started:
        assert not task.done(), "the server did not start"
        await asyncio.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            yield http
    finally:
        server.should_exit = True
        await task

