"""Telemetry end to end: sessions on the dev server with a client and worker whose plugin has
``[telemetry]`` on, spans and metrics read from the SDK's in-memory exporter and reader."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from opentelemetry import metrics, trace
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from temporalio.client import Client
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.worker import Replayer

from agentrt.activities.tools import default_registry
from agentrt.client import AgentClient, connect
from agentrt.schemas import McpServerConfig, ModelPrice, ModelProfile, PermissionRequested
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, DevServer, TelemetryConfig, build_worker, setup_telemetry
from tests.activities.providers._loopback import LoopbackServer, Reply, sse_data
from tests.conftest import OWNER, Harness
from tests.e2e._support import ALLOW_ALL, session_config, wait_for_event, worker_process, write_script
from tests.e2e._tasks import TaskRig, write_task_script
from tests.e2e.conftest import KEY_ENV
from tests.mcp_servers import time_stdio
from tests.worker.test_telemetry import measured, nothing_installed, reset_opentelemetry

PRICE = ModelPrice(input_usd_per_mtok=3.0, output_usd_per_mtok=15.0)


@dataclass
class Telemetry:
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader

    def finished(self) -> list[ReadableSpan]:
        return sorted(self.spans.get_finished_spans(), key=lambda s: s.start_time or 0)

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.finished() if s.name == name]

    async def measured(self, name: str) -> dict[tuple[tuple[str, object], ...], float]:
        # Off the event loop: the approvals gauge asks visibility through the worker's loop.
        return await asyncio.to_thread(measured, self.reader, name)


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    reset_opentelemetry()
    found = Telemetry(InMemorySpanExporter(), InMemoryMetricReader())
    handle = setup_telemetry(TelemetryConfig(enabled=True), span_exporter=found.spans, metric_reader=found.reader)
    yield found
    handle.shutdown()
    reset_opentelemetry()


@pytest.fixture
def no_otel() -> Iterator[None]:
    reset_opentelemetry()
    yield
    reset_opentelemetry()


@dataclass
class Traced:
    temporal: Client
    client: AgentClient
    config: AgentrtConfig


@asynccontextmanager
async def traced(
    server: DevServer, store: Store, store_url: str, *, enabled: bool = True,
    mcp_servers: dict[str, McpServerConfig] | None = None, **profiles: ModelProfile,
) -> AsyncIterator[Traced]:
    """A client and a worker, on a fresh task queue, connected with a plugin whose telemetry is
    ``enabled`` (the worker runs ``mcp_servers``; the client's sessions use them)."""
    config = AgentrtConfig(
        temporal_address=server.address, task_queue=f"tq-otel-{uuid.uuid4().hex[:8]}", database_url=store_url,
        telemetry=TelemetryConfig(enabled=enabled), mcp_servers=mcp_servers or {},
    )
    config.profiles["priced"] = ModelProfile(name="priced", provider="scripted", model="scripted", price=PRICE)
    config.profiles.update(profiles)
    temporal = await connect(server.address, plugin=AgentrtPlugin(config, store))
    async with build_worker(temporal, config, store, default_registry()):
        client = AgentClient(temporal, task_queue=config.task_queue, principal=OWNER, mcp_servers=sorted(config.mcp_servers))
        yield Traced(temporal, client, config)


def describe(spans: list[ReadableSpan]) -> str:
    """One line per span: name, kind, parent's name, attributes (the report of one turn)."""
    names = {s.context.span_id: s.name for s in spans}
    lines = []
    for span in spans:
        parent = names.get(span.parent.span_id, "(remote)") if span.parent else "-"
        status = f" status={span.status.status_code.name}" if span.status.status_code != StatusCode.UNSET else ""
        lines.append(f"{span.name} [{span.kind.name}] parent={parent}{status} {json.dumps(dict(span.attributes or {}), default=str)}")
    return "\n".join(lines)


def parent_of(span: ReadableSpan, spans: list[ReadableSpan]) -> ReadableSpan:
    assert span.parent is not None
    return next(s for s in spans if s.context.span_id == span.parent.span_id)


READ_THEN_ANSWER = [{"tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}]}, {"text": "it is a demo"}]


async def test_one_turn_yields_workflow_and_activity_spans_a_chat_span_per_model_call_and_a_tool_span(
    otel: Telemetry, temporal_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, READ_THEN_ANSWER)
    async with traced(temporal_server, store, store_url) as t:
        sid = uuid.uuid4().hex[:12]
        config = session_config(t.client, sid, workspace, script, profile="priced", approval=ALLOW_ALL)
        started = await t.client.start(config, "what is this project?")
        outcome = await t.client.wait(sid, started.turn_id)
    assert outcome.status == "completed" and outcome.answer == "it is a demo"

    spans = otel.finished()
    print(f"\nspans of one turn of session {sid}:\n{describe(spans)}")
    names = [s.name for s in spans]
    # Temporal's interceptor: the client's start (update with start: the first message), the
    # workflow's spans (zero length, as it records them) and each activity it ran, local ones
    # (session.prepare, the fast fs.read, the turn's last store write) included.
    for name in (
        "StartUpdateWithStartWorkflow:SessionWorkflow", "RunWorkflow:SessionWorkflow", "HandleUpdate:send_message",
        "StartActivity:session.prepare", "RunActivity:session.prepare", "StartActivity:provider.complete",
        "RunActivity:provider.complete", "StartActivity:tool.execute", "RunActivity:tool.execute",
        "RunActivity:store.append",
    ):
        assert name in names, name
    # The session's work is one trace, begun by the client's start; the client's later calls
    # (the wait's query and update) begin traces of their own.
    [start] = otel.named("StartUpdateWithStartWorkflow:SessionWorkflow")
    work = [s for s in spans if s.name.startswith(("RunWorkflow", "StartActivity", "RunActivity", "chat ", "execute_tool "))]
    assert {s.context.trace_id for s in work} == {start.context.trace_id}

    first, second = otel.named("chat scripted")
    assert parent_of(first, spans).name == "RunActivity:provider.complete"
    assert first.kind == SpanKind.CLIENT and first.status.status_code == StatusCode.UNSET
    attributes = dict(first.attributes or {})
    assert {k: attributes[k] for k in (
        "gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model", "gen_ai.response.finish_reasons",
        "gen_ai.conversation.id", "agentrt.session.id", "agentrt.turn.id", "agentrt.round", "agentrt.attempt",
        "agentrt.model_call.purpose",
    )} == {
        "gen_ai.operation.name": "chat", "gen_ai.provider.name": "scripted", "gen_ai.request.model": "scripted",
        "gen_ai.response.finish_reasons": ("tool_use",), "gen_ai.conversation.id": sid, "agentrt.session.id": sid,
        "agentrt.turn.id": started.turn_id, "agentrt.round": 1, "agentrt.attempt": 1, "agentrt.model_call.purpose": "reply",
    }
    assert second.attributes is not None and second.attributes["agentrt.round"] == 2
    assert second.attributes["gen_ai.response.finish_reasons"] == ("end_turn",)
    usage = [(s.attributes or {}) for s in (first, second)]
    assert sum(int(u["gen_ai.usage.input_tokens"]) for u in usage) == outcome.usage.input_tokens
    assert sum(int(u["gen_ai.usage.output_tokens"]) for u in usage) == outcome.usage.output_tokens
    assert sum(float(u["agentrt.cost.usd"]) for u in usage) == pytest.approx(PRICE.cost(outcome.usage))

    [tool] = otel.named("execute_tool fs.read")
    assert parent_of(tool, spans).name == "RunActivity:tool.execute"
    assert dict(tool.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fs.read", "gen_ai.tool.call.id": "call_0_0",
        "gen_ai.tool.type": "function", "gen_ai.conversation.id": sid, "agentrt.session.id": sid,
        "agentrt.turn.id": started.turn_id, "agentrt.attempt": 1, "agentrt.tool.local": False, "agentrt.tool.outcome": "ok",
    }


async def test_one_turn_is_counted_with_its_tool_call_tokens_and_cost(
    otel: Telemetry, temporal_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, READ_THEN_ANSWER)
    async with traced(temporal_server, store, store_url) as t:
        sid = uuid.uuid4().hex[:12]
        config = session_config(t.client, sid, workspace, script, profile="priced", approval=ALLOW_ALL)
        started = await t.client.start(config, "what is this project?")
        outcome = await t.client.wait(sid, started.turn_id)
        assert outcome.status == "completed"

        assert await otel.measured("agentrt.turns") == {(("agentrt.turn.status", "completed"),): 1}
        assert await otel.measured("agentrt.tool_calls") == {(("agentrt.tool.outcome", "ok"), ("gen_ai.tool.name", "fs.read")): 1}
        by = (("gen_ai.operation.name", "chat"), ("gen_ai.provider.name", "scripted"), ("gen_ai.request.model", "scripted"))
        assert await otel.measured("gen_ai.client.token.usage") == {
            (*by, ("gen_ai.token.type", "input")): outcome.usage.input_tokens,
            (*by, ("gen_ai.token.type", "output")): outcome.usage.output_tokens,
        }
        [cost] = (await otel.measured("agentrt.cost.usd")).values()
        assert cost == pytest.approx(PRICE.cost(outcome.usage))
        assert set(await otel.measured("gen_ai.client.operation.duration")) == {by}


async def test_an_autonomous_task_in_the_workflow_sandbox_traces_itself_and_its_child_session_in_one_trace(
    otel: Telemetry, temporal_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [[{"text": "nothing to do"}]])
    async with traced(temporal_server, store, store_url) as t:
        rig = TaskRig.create(t.temporal, store, t.config.task_queue)
        task_id = await rig.start(rig.config(workspace, script, acceptance={"command": "true"}, approval=ALLOW_ALL, max_sessions=1))
        assert (await rig.wait(task_id)).status == "completed"

    [start] = otel.named("StartWorkflow:AutonomousTaskWorkflow")
    for name in ("RunWorkflow:AutonomousTaskWorkflow", "StartChildWorkflow:SessionWorkflow", "RunWorkflow:SessionWorkflow", "chat scripted"):
        assert [s.context.trace_id for s in otel.named(name)] == [start.context.trace_id], name


async def test_a_task_s_acceptance_review_is_a_chat_span_of_its_own_purpose_under_its_activity(
    otel: Telemetry, temporal_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    script = write_task_script(tmp_path, [[{"text": "all done"}]], reviews=[{"verdict": "pass", "summary": "met"}])
    async with traced(temporal_server, store, store_url) as t:
        rig = TaskRig.create(t.temporal, store, t.config.task_queue)
        task_id = await rig.start(rig.config(workspace, script, approval=ALLOW_ALL, max_sessions=1))
        assert (await rig.wait(task_id)).status == "completed"

    spans = otel.finished()
    [review] = [s for s in otel.named("chat scripted") if (s.attributes or {}).get("agentrt.model_call.purpose") == "review"]
    assert parent_of(review, spans).name == "RunActivity:task.review"
    attributes = dict(review.attributes or {})
    assert attributes["gen_ai.conversation.id"] == f"task-{task_id}" and attributes["agentrt.attempt"] == 1
    assert attributes["gen_ai.provider.name"] == "scripted" and int(attributes["gen_ai.usage.output_tokens"]) > 0


async def test_an_mcp_tool_call_is_an_execute_tool_span_under_its_activity(
    otel: Telemetry, temporal_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "time.get_current_time", "arguments": {"timezone": "UTC"}}]}, {"text": "noon"},
    ])
    async with traced(temporal_server, store, store_url, mcp_servers={"time": time_stdio(tmp_path)}) as t:
        sid = uuid.uuid4().hex[:12]
        started = await t.client.start(session_config(t.client, sid, workspace, script, approval=ALLOW_ALL), "time?")
        assert (await t.client.wait(sid, started.turn_id)).status == "completed"

    [tool] = otel.named("execute_tool time.get_current_time")
    assert parent_of(tool, otel.finished()).name == "RunActivity:mcp.call_tool"
    attributes = dict(tool.attributes or {})
    assert (attributes["gen_ai.tool.name"], attributes["agentrt.session.id"], attributes["agentrt.tool.outcome"]) == (
        "time.get_current_time", sid, "ok",
    )


async def test_replaying_a_traced_session_exports_no_span(
    otel: Telemetry, temporal_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, READ_THEN_ANSWER)
    async with traced(temporal_server, store, store_url) as t:
        sid = uuid.uuid4().hex[:12]
        started = await t.client.start(session_config(t.client, sid, workspace, script, approval=ALLOW_ALL), "go")
        await t.client.wait(sid, started.turn_id)
        history = await t.temporal.get_workflow_handle(f"session-{sid}").fetch_history()
        assert otel.named("RunWorkflow:SessionWorkflow")  # the live run was traced
        otel.spans.clear()

        replayer = Replayer(workflows=[], plugins=[AgentrtPlugin(t.config, store)])
        assert any(isinstance(i, TracingInterceptor) for i in replayer.config(active_config=True).get("interceptors") or [])
        await replayer.replay_workflow(history)

    assert otel.finished() == []


async def test_a_session_waiting_for_an_approval_is_measured_until_it_is_decided(
    otel: Telemetry, temporal_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.write", "arguments": {"path": "out.txt", "content": "x"}}]}, {"text": "written"},
    ])
    async with traced(temporal_server, store, store_url) as t:
        key = (("temporal.namespace", "default"), ("temporal.task_queue", t.config.task_queue))

        async def waiting(expected: int) -> None:
            while (await otel.measured("agentrt.sessions.awaiting_approval")).get(key) != expected:
                await asyncio.sleep(0.2)

        sid = uuid.uuid4().hex[:12]
        started = await t.client.start(session_config(t.client, sid, workspace, script), "write it")
        requested = await wait_for_event(t.client, sid, lambda e: isinstance(e, PermissionRequested))
        await asyncio.wait_for(waiting(1), 30)
        assert isinstance(requested, PermissionRequested)

        await t.client.approve(sid, requested.request.request_id)
        assert (await t.client.wait(sid, started.turn_id)).status == "completed"
        await asyncio.wait_for(waiting(0), 30)


async def test_a_failed_model_call_ends_its_chat_span_in_error_and_counts_a_failed_turn(
    otel: Telemetry, temporal_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, [])  # no reply: the scripted model fails its first call
    async with traced(temporal_server, store, store_url) as t:
        sid = uuid.uuid4().hex[:12]
        started = await t.client.start(session_config(t.client, sid, workspace, script), "go")
        outcome = await t.client.wait(sid, started.turn_id)
        assert outcome.status == "failed"
        assert await otel.measured("agentrt.turns") == {(("agentrt.turn.status", "failed"),): 1}

    [chat] = otel.named("chat scripted")
    assert chat.status.status_code == StatusCode.ERROR
    assert (chat.attributes or {})["error.type"] == "ScriptExhaustedError"
    assert chat.status.description is None  # the error's text (a provider's body) stays out of spans


async def test_values_a_hostile_model_chose_are_cut_in_spans(
    otel: Telemetry, temporal_server: DevServer, store: Store, store_url: str, workspace: Path, provider_server: LoopbackServer
) -> None:
    call_id, reason = "c" * 20_000, "r" * 20_000
    chunk = {"id": "x", "object": "chat.completion.chunk", "model": "m"}
    provider_server.reply(
        Reply(chunks=sse_data(
            {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
                {"index": 0, "id": call_id, "type": "function", "function": {"name": "fs.read", "arguments": '{"path": "README.md"}'}},
            ]}, "finish_reason": None}]},
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]},
            "[DONE]",
        )),
        Reply(chunks=sse_data({**chunk, "choices": [{"index": 0, "delta": {"content": "read"}, "finish_reason": "stop"}]}, "[DONE]")),
    )
    hostile = ModelProfile(name="hostile", provider="openai", model="gpt-x", base_url=provider_server.url, api_key_env=KEY_ENV)
    async with traced(temporal_server, store, store_url, hostile=hostile) as t:
        sid = uuid.uuid4().hex[:12]
        config = t.client.new_config(str(workspace), session_id=sid, profile="hostile", approval=ALLOW_ALL, heartbeat_timeout_seconds=5.0)
        started = await t.client.start(config, "go")
        assert (await t.client.wait(sid, started.turn_id)).status == "completed"

    first = otel.named("chat gpt-x")[0]
    assert (first.attributes or {})["gen_ai.provider.name"] == "openai"
    assert (first.attributes or {})["gen_ai.response.finish_reasons"] == ("r" * 128,)
    [tool] = otel.named("execute_tool fs.read")
    assert (tool.attributes or {})["gen_ai.tool.call.id"] == "c" * 128


async def test_with_telemetry_off_a_turn_installs_no_provider_and_the_worker_has_no_tracing_interceptor(
    no_otel: None, temporal_server: DevServer, store: Store, store_url: str, workspace: Path, tmp_path: Path
) -> None:
    script = write_script(tmp_path, READ_THEN_ANSWER)
    async with traced(temporal_server, store, store_url, enabled=False) as t:
        plugin = next(p for p in t.temporal.config()["plugins"] if isinstance(p, AgentrtPlugin))
        assert not any(isinstance(i, TracingInterceptor) for i in plugin.interceptors or [])
        assert not any(isinstance(i, TracingInterceptor) for i in t.temporal.config().get("interceptors") or [])
        sid = uuid.uuid4().hex[:12]
        started = await t.client.start(session_config(t.client, sid, workspace, script, approval=ALLOW_ALL), "go")
        assert (await t.client.wait(sid, started.turn_id)).status == "completed"

    assert nothing_installed()
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    assert not isinstance(metrics.get_meter_provider(), MeterProvider)


async def test_an_agentrt_worker_process_with_telemetry_on_sends_spans_and_metrics_to_the_otlp_endpoint(
    harness: Harness, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    collector = LoopbackServer().start()
    collector.reply(*[Reply(status=200, headers={"Content-Type": "application/x-protobuf"}, content_length=0)] * 500)
    for name, value in {
        "AGENTRT_TELEMETRY": "1", "AGENTRT_OTLP_ENDPOINT": collector.url, "OTEL_SERVICE_NAME": "agentrt-test-worker",
        "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_METRIC_EXPORT_INTERVAL": "500",
    }.items():
        monkeypatch.setenv(name, value)  # the worker process's environment (worker_process copies this one)
    client = AgentClient(harness.temporal, task_queue=harness.task_queue + "-proc", principal=OWNER)
    script = write_script(tmp_path, READ_THEN_ANSWER)
    try:
        with worker_process(harness, tmp_path / "worker.log"):
            sid = harness.new_session_id()
            started = await client.start(session_config(client, sid, workspace, script, approval=ALLOW_ALL), "go")
            assert (await client.wait(sid, started.turn_id)).status == "completed"
        # Stopped by SIGTERM: the worker flushed what it held on its way out (`agentrt` exits with os._exit).
    finally:
        collector.stop()

    traces = [ExportTraceServiceRequest.FromString(r.body) for r in collector.requests if r.path == "/v1/traces"]
    spans = [(rs, s) for t in traces for rs in t.resource_spans for ss in rs.scope_spans for s in ss.spans]
    names = {s.name for _, s in spans}
    assert {"RunActivity:provider.complete", "chat scripted", "execute_tool fs.read"} <= names
    # The client here runs without telemetry: no trace context reaches the workflow, so it records no span.
    assert not any(name.startswith("RunWorkflow") for name in names)
    services = {a.value.string_value for rs, _ in spans for a in rs.resource.attributes if a.key == "service.name"}
    assert services == {"agentrt-test-worker"}
    sent = [ExportMetricsServiceRequest.FromString(r.body) for r in collector.requests if r.path == "/v1/metrics"]
    measured_names = {m.name for req in sent for rm in req.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert {"agentrt.turns", "agentrt.tool_calls", "gen_ai.client.token.usage"} <= measured_names
    # The SDK's own worker metrics (sdk-core's temporal_*), through the same meter provider.
    assert {"temporal_workflow_task_execution_latency", "temporal_activity_execution_latency"} <= measured_names, sorted(measured_names)
