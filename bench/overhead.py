"""What one agent round costs on Temporal: agentrt beside the bare floor and two other agent integrations.

    python -m bench.overhead [--rounds 20,100,200] [--repeats 3] [--result-bytes 5120]
                             [--systems floor,floor-tools,agentrt,agentrt-fused,agentrt-tools,agentrt-pinned-tools,
                                        agentrt-local,pai,oai]
                             [--workdir DIR]

Starts one Temporal dev server (free ports, headless, database in a temporary directory)
and a SQLite store, and runs the same workload on each system, one run at a time, each on
a fresh task queue with an in-process worker started for that run: one turn of R rounds,
each round a model call that returns exactly one tool call, then that tool call returning
``--result-bytes`` bytes of text; then a final model call with the answer. Every model
answers at once (no latency). The systems:

- ``floor``: ``bench._floor`` (bare Temporal, two activities per round, Temporal's default
  data converter): the least a round can cost.
- ``floor-tools``: the floor's effectful twin (``bench._floor`` with ``tool_task_queue`` and
  ``write_dir``): each round's model call returns an ``fs.write`` call carrying ``--result-bytes``
  bytes, and the tool call, on a task queue of its own served by a second worker, writes them to a
  file. The least an effectful round on a separate tools worker can cost: ``agentrt-tools`` is
  reported against it too (``× fl-tools``).
- ``agentrt``: an agentrt session with the scripted model (``bench.history``'s workload:
  R ``fs.read`` calls of R different workspace files), the tool as a regular activity
  (``local_tools=False`` where ``SessionConfig`` has that field).
- ``agentrt-fused``: the same with ``fused_rounds=True``: the model call runs the read-only
  ``fs.read`` calls and calls the model again itself (``fused-rounds-v1``), so a turn of R
  rounds is one model activity.
- ``agentrt-tools``: an effectful round: R ``fs.write`` calls (each writing ``--result-bytes``
  bytes the model sent), through the effect ledger, run by a tools worker of its own
  (``tool_task_queue``, ``role="tools"``) beside the session's worker (``role="models"``).
- ``agentrt-pinned-tools``: the same with both workers one Worker Deployment Version, made
  current: the session runs pinned, so its tool calls carry its staged events in their input
  (``pinned-tools-writes-v1``) instead of a ``store.append`` of their own before each.
- ``agentrt-local``: the same with ``local_tools=True`` (fast read-only tools as local
  activities); n/a where ``SessionConfig`` has no ``local_tools``.
- ``pai``: pydantic-ai's Temporal integration (``Agent`` with ``TemporalDurability``,
  ``PydanticAIPlugin`` + ``AgentPlugin``, a ``FunctionModel``), see ``bench._overhead_pai``.
- ``oai``: the OpenAI Agents SDK with ``OpenAIAgentsPlugin`` (a fake ``Model`` as model
  provider, the tool an ``activity_as_tool`` activity), see ``bench._overhead_oai``.

``pai`` and ``oai`` need the ``bench`` extra (``pip install -e '.[bench]'``); without it
their rows say n/a. Each system first runs once at R = 1 (a warm-up, not reported: the
first workflow of a kind pays for imports and sandbox loads). Then for each R
(``--rounds``) the systems run ``--repeats`` times, the order rotated per repetition
(repetition i starts at system i mod n).

Measured per run, reported per system and R as the median over the repeats that completed:
- ms/round: wall time from just before the client starts the workflow (agentrt: the
  session with its first message) until the client knows the outcome (``handle.result()``
  returned; agentrt: ``AgentClient.start_and_wait()`` returned), divided by R. ``× floor``: that over
  the floor's ms/round at the same R in the same run of the benchmark.
- in-history ms/round: from the ``WorkflowExecutionStarted`` event to the end as history
  records it (``WorkflowExecutionCompleted``; agentrt: the ``TurnEnded`` event's ``at``,
  ``workflow.now()`` of the workflow task that ended the turn), divided by R: the same
  span without the client's start and wait.
- client ms: that end to the client knowing it (wall clock at return minus the end's
  timestamp; the server's clock, on the same machine).
- workflow tasks, activities, local activities per round: ``WorkflowTaskCompleted``,
  ``ActivityTaskScheduled`` and ``MarkerRecorded`` events over every run of the workflow
  (continue-as-new followed back), divided by R. agentrt counts its whole session
  history: the session's start and what it records after the turn are in it too.
- history bytes: the server's ``history_size_bytes`` summed over those runs (agentrt: once
  the session's history has stopped changing for a second after the turn).

- where a round's time goes (``SPANS``, at the largest R): from the history's event times, the
  workflow tasks' wait to be taken and their run, the activities' wait to start and their run,
  and the rest; and the share of activities dispatched eagerly (started within
  ``EAGER_SECONDS`` of being scheduled).

A run that fails (a workflow terminated at the server's history limit, a timeout) is
reported with its reason and left out of the medians.

Output: one table row per R and system, notes, and as the last line exactly

    overhead agentrt_vs_floor=X pai_vs_floor=Y oai_vs_floor=Z fused_vs_floor=F tools_vs_floor=T tools_vs_floor_tools=U pinned_tools_vs_floor_tools=P

with the × floor values at the largest R (two decimals; n/a where not measured); ``U`` is
``agentrt-tools`` over ``floor-tools``, ``P`` ``agentrt-pinned-tools`` over it.

From a test (small parameters, reusing a running server, store and client):

    report = await bench.overhead.measure(temporal_client, store, tmp_path, rounds=[3], repeats=1,
                                          systems=("floor", "agentrt"))
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import importlib
import json
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowFailureError
from temporalio.converter import DataConverter
from temporalio.worker import Worker, WorkerDeploymentVersion

from agentrt.activities.tools import MAX_READ_BYTES, default_registry
from agentrt.client import AgentClient, StartedSession
from agentrt.schemas import ApprovalPolicy, SessionConfig, TurnEnded, TurnOutcome
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, DevServer, build_worker
from bench._cli import print_progress, run_and_exit
from bench.deployments import make_current
from bench._floor import FLOOR_ACTIVITIES, FloorAgentWorkflow, FloorInput, floor_model, floor_tool
from bench.history import (
    PRINCIPAL,
    PROMPT,
    TOOL,
    history_breakdown,
    prepare_workload,
    run_chain,
    settled_chain,
    with_agentrt_plugin,
)

SYSTEMS = ("floor", "floor-tools", "agentrt", "agentrt-fused", "agentrt-tools", "agentrt-pinned-tools", "agentrt-local", "pai", "oai")
DEFAULT_ROUNDS = (20, 100, 200)
DEFAULT_REPEATS = 3
# Every measured workflow runs on a worker that has already run a workflow of WARM_ROUNDS
# rounds, as a worker in service has: the dev server hands a new worker its workflow tasks
# sooner during its first few dozen (about 8 ms after they are scheduled, then about 35, the
# same for every system here), and that is not what a round costs in a running deployment.
WARM_ROUNDS = 40
DEFAULT_RESULT_BYTES = 5 * 1024

# The optional systems: the module that defines them and what to install for it.
OPTIONAL_MODULES = {
    "pai": ("bench._overhead_pai", "pydantic-ai-slim[temporal] (pip install -e '.[bench]')"),
    "oai": ("bench._overhead_oai", "openai-agents and temporalio-openai-agents (pip install -e '.[bench]')"),
}

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


def _import_probe(module: str) -> ModuleType | None:
    """The module, or None when it (or what it needs) is not installed."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def has_local_tools() -> bool:
    """Whether ``SessionConfig`` has ``local_tools`` (fast read-only tools as local activities)."""
    return "local_tools" in SessionConfig.model_fields


# ---------------------------------------------------------------------------- results


@dataclass
class Sample:
    """One run of one system.

    Seconds are wall-clock spans (see the module docstring); counts are totals over every
    run of the workflow, not per round. ``status`` is ``completed`` or what went wrong.
    """

    system: str
    rounds: int
    status: str
    wall_seconds: float = 0.0
    history_seconds: float | None = None
    client_seconds: float | None = None
    workflow_tasks: int = 0
    activities: int = 0
    local_activities: int = 0
    history_bytes: int = 0
    history_events: int = 0
    runs: int = 0
    breakdown: dict[str, int] = field(default_factory=dict)
    eager_activities: int = 0
    spans: dict[str, float] = field(default_factory=dict)  # SPANS, seconds over the run
    note: str | None = None
    rounds_made: int = 0  # agentrt: the model calls its turn made

    @property
    def completed(self) -> bool:
        return self.status == "completed"


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


@dataclass
class OverheadReport:
    """Every sample, by (system, R); ``unavailable`` maps a system left out to why."""

    rounds: list[int]
    repeats: int
    result_bytes: int
    systems: list[str]
    samples: dict[tuple[str, int], list[Sample]] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)

    def completed(self, system: str, rounds: int) -> list[Sample]:
        return [s for s in self.samples.get((system, rounds), []) if s.completed]

    def per_round(self, system: str, rounds: int, value: Callable[[Sample], float | None]) -> float | None:
        """Median over completed samples of ``value(sample) / R``; None when none completed."""
        values = [v / rounds for s in self.completed(system, rounds) if (v := value(s)) is not None]
        return _median(values)

    def ms_per_round(self, system: str, rounds: int) -> float | None:
        return self.per_round(system, rounds, lambda s: s.wall_seconds * 1000)

    def vs_floor(self, system: str, rounds: int, floor_system: str = "floor") -> float | None:
        """ms/round of ``system`` over ``floor_system``'s at the same R; None when either is unknown."""
        mine, floor = self.ms_per_round(system, rounds), self.ms_per_round(floor_system, rounds)
        if mine is None or not floor:
            return None
        return mine / floor

    def client_ms(self, system: str, rounds: int | None = None) -> float | None:
        """Median client-side latency (ms) over completed samples at ``rounds`` (default: every R)."""
        keys = [rounds] if rounds is not None else self.rounds
        values = [
            s.client_seconds * 1000 for r in keys for s in self.completed(system, r) if s.client_seconds is not None
        ]
        return _median(values)

    def _status(self, system: str, rounds: int) -> str:
        samples = self.samples.get((system, rounds), [])
        done = sum(1 for s in samples if s.completed)
        if done == len(samples):
            return f"{done}/{len(samples)} ok"
        failed = next(s for s in samples if not s.completed)
        return f"{done}/{len(samples)} ok; {failed.status}"

    def table(self) -> str:
        head = (
            f"{'R':>4}  {'system':<21}{'ms/round':>10}{'× floor':>9}{'in-hist ms/rd':>15}{'client ms':>11}"
            f"{'wf tasks/rd':>13}{'act./rd':>9}{'local/rd':>10}{'history bytes':>15}{'runs':>6}  status"
        )
        lines = [
            (
                f"rounds={','.join(map(str, self.rounds))} repeats={self.repeats} result_bytes={self.result_bytes} "
                "(medians over the completed repeats; × floor at the same R)"
            ),
            "",
            head,
        ]

        def cell(value: float | None, width: int, spec: str) -> str:
            return f"{'n/a' if value is None else format(value, spec):>{width}}"

        for r in self.rounds:
            for system in self.systems:
                if system in self.unavailable:
                    lines.append(
                        f"{r:>4}  {system:<21}{'n/a':>10}{'n/a':>9}{'':>15}{'':>11}{'':>13}{'':>9}{'':>10}"
                        f"{'':>15}{'':>6}  n/a"
                    )
                    continue
                done = self.completed(system, r)
                hist = _median([float(s.history_bytes) for s in done])
                runs = _median([float(s.runs) for s in done])
                lines.append(
                    f"{r:>4}  {system:<21}"
                    + cell(self.ms_per_round(system, r), 10, ".1f")
                    + cell(self.vs_floor(system, r), 9, ".2f")
                    + cell(
                        self.per_round(
                            system, r, lambda s: None if s.history_seconds is None else s.history_seconds * 1000
                        ),
                        15,
                        ".1f",
                    )
                    + cell(self.client_ms(system, r), 11, ".0f")
                    + cell(self.per_round(system, r, lambda s: float(s.workflow_tasks)), 13, ".2f")
                    + cell(self.per_round(system, r, lambda s: float(s.activities)), 9, ".2f")
                    + cell(self.per_round(system, r, lambda s: float(s.local_activities)), 10, ".2f")
                    + cell(hist, 15, ",.0f")
                    + cell(runs, 6, ".0f")
                    + f"  {self._status(system, r)}"
                )
        lines.append("")
        measured = [s for s in self.systems if s not in self.unavailable]
        latency = ", ".join(f"{s} {'n/a' if (v := self.client_ms(s)) is None else f'{v:.0f} ms'}" for s in measured)
        lines.append(
            "client ms (end in history -> outcome at the client; agentrt: TurnEnded.at -> AgentClient.start_and_wait() "
            f"returned, others: WorkflowExecutionCompleted -> handle.result() returned), median of all runs: {latency}"
        )
        for system, how in (("agentrt-tools", "unversioned"), ("agentrt-pinned-tools", "pinned to one Worker Deployment Version")):
            if system in measured and "floor-tools" in measured:
                ratios = ", ".join(
                    f"R={r} {'n/a' if (v := self.vs_floor(system, r, 'floor-tools')) is None else f'{v:.2f}'}"
                    for r in self.rounds
                )
                lines.append(
                    f"{system} × floor-tools (effectful rounds, tool calls on a tools worker of their own, {how}): {ratios}"
                )
        largest = max(self.rounds)
        for system in measured:
            done = self.completed(system, largest)
            if done and done[-1].breakdown:
                parts = ", ".join(f"{name} {size:,}" for name, size in done[-1].breakdown.items())
                lines.append(f"{system} history bytes by source at R={largest}: {parts}")
        lines += self.spans_table()
        for system, why in self.unavailable.items():
            lines.append(f"note: {system}: n/a, {why}")
        for (system, r), samples in self.samples.items():
            for s in samples:
                if s.note:
                    lines.append(f"note: {system} R={r}: {s.note}")
        return "\n".join(lines)

    def spans_table(self) -> list[str]:
        """Where a round's time goes at the largest R: ms per round in each of ``SPANS`` (medians over
        the completed repeats), and the share of activities dispatched eagerly."""
        largest = max(self.rounds)
        measured = [s for s in self.systems if s not in self.unavailable and any(x.spans for x in self.completed(s, largest))]
        if not measured:
            return []
        lines = ["", f"where a round's time goes at R={largest} (ms per round, from history event times):"]
        lines.append(f"  {'system':<21}" + "".join(f"{name:>10}" for name in SPANS) + f"{'eager act.':>12}")
        for system in measured:
            cells = "".join(
                f"{v:>10.1f}" if (v := self.per_round(system, largest, lambda x, n=name: x.spans.get(n, 0.0) * 1000)) is not None
                else f"{'n/a':>10}"
                for name in SPANS
            )
            done = self.completed(system, largest)
            eager = sum(x.eager_activities for x in done) / max(1, sum(x.activities for x in done))
            lines.append(f"  {system:<21}{cells}{eager:>11.0%}")
        lines += [f"  {name}: {what}" for name, what in SPANS.items()]
        return lines

    def line(self) -> str:
        """The last line: × floor at the largest R of agentrt, pai, oai and agentrt-fused (two decimals or n/a)."""
        largest = max(self.rounds)

        def ratio(system: str, floor_system: str = "floor") -> str:
            value = self.vs_floor(system, largest, floor_system)
            return "n/a" if value is None else f"{value:.2f}"

        return (
            f"overhead agentrt_vs_floor={ratio('agentrt')} pai_vs_floor={ratio('pai')} oai_vs_floor={ratio('oai')} "
            f"fused_vs_floor={ratio('agentrt-fused')} tools_vs_floor={ratio('agentrt-tools')} "
            f"tools_vs_floor_tools={ratio('agentrt-tools', 'floor-tools')} "
            f"pinned_tools_vs_floor_tools={ratio('agentrt-pinned-tools', 'floor-tools')}"
        )


# ---------------------------------------------------------------------------- history reading


# Where a run's time goes, from its history's event times (seconds, summed over the run):
SPANS = {
    "wft wait": "workflow task scheduled -> started (matching, a poller taking it)",
    "wft run": "workflow task started -> completed (the worker runs the workflow code, then answers)",
    "act wait": "activity scheduled -> started (0 when eagerly dispatched with the workflow task's answer)",
    "act run": "activity started -> closed (the activity's own work and its answer)",
    "other": "the rest of the span: between an activity's end and the next workflow task, the start",
}
EAGER_SECONDS = 0.001  # an activity started this soon after it was scheduled came with the task's answer


@dataclass
class _HistoryFacts:
    started: datetime | None = None
    completed: datetime | None = None
    workflow_tasks: int = 0
    activities: int = 0
    local_activities: int = 0
    eager_activities: int = 0
    spans: dict[str, float] = field(default_factory=lambda: dict.fromkeys(SPANS, 0.0))


def _tally_span(facts: _HistoryFacts, event: Any, times: dict[int, float]) -> None:
    """Add ``event``'s share to ``facts.spans`` (``times``: event id -> event time, so far)."""
    at = event.event_time.ToMicroseconds() / 1e6
    times[event.event_id] = at
    kind = event.event_type
    if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
        facts.spans["wft wait"] += at - times.get(event.workflow_task_started_event_attributes.scheduled_event_id, at)
    elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
        facts.spans["wft run"] += at - times.get(event.workflow_task_completed_event_attributes.started_event_id, at)
    elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
        waited = at - times.get(event.activity_task_started_event_attributes.scheduled_event_id, at)
        facts.spans["act wait"] += waited
        facts.eager_activities += waited < EAGER_SECONDS
    elif kind in (EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED):
        attributes = (
            event.activity_task_completed_event_attributes if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
            else event.activity_task_failed_event_attributes
        )
        facts.spans["act run"] += at - times.get(attributes.started_event_id, at)


async def _history_facts(temporal: Client, workflow_id: str, run_ids: list[str]) -> _HistoryFacts:
    """Counts over the runs' events, the first run's start time and the last run's completion time."""
    facts = _HistoryFacts()
    for run_id in run_ids:
        times: dict[int, float] = {}
        async for event in temporal.get_workflow_handle(workflow_id, run_id=run_id).fetch_history_events():
            _tally_span(facts, event, times)
            kind = event.event_type
            if kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                facts.workflow_tasks += 1
            elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                facts.activities += 1
            elif kind == EventType.EVENT_TYPE_MARKER_RECORDED:
                facts.local_activities += 1
            elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED and facts.started is None:
                facts.started = event.event_time.ToDatetime().astimezone()
            elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
                facts.completed = event.event_time.ToDatetime().astimezone()
    return facts


async def _fill_from_history(
    sample: Sample, temporal: Client, workflow_id: str, runs: list, *, end: datetime | None, breakdown: bool
) -> None:
    """Counts, sizes and the in-history span of ``sample`` from the workflow's runs; ``end`` (default
    the completion event) is when history says the work ended, ``sample.client_seconds`` its distance
    to the client's outcome (already set as the client's wall-clock time, in seconds since the epoch)."""
    run_ids = [r.run_id for r in runs]
    facts = await _history_facts(temporal, workflow_id, run_ids)
    sample.runs = len(runs)
    sample.history_bytes = sum(r.history_bytes for r in runs)
    sample.history_events = sum(r.history_events for r in runs)
    sample.workflow_tasks = facts.workflow_tasks
    sample.activities = facts.activities
    sample.local_activities = facts.local_activities
    sample.eager_activities = facts.eager_activities
    end = end or facts.completed
    if end is not None and facts.started is not None:
        sample.history_seconds = (end - facts.started).total_seconds()
        sample.spans = dict(facts.spans)
        sample.spans["other"] = max(0.0, sample.history_seconds - sum(facts.spans.values()))
    if end is not None and sample.client_seconds is not None:
        sample.client_seconds = sample.client_seconds - end.timestamp()
    else:
        sample.client_seconds = None
    if breakdown:
        sample.breakdown = await history_breakdown(temporal, workflow_id, run_ids)


# ---------------------------------------------------------------------------- the systems


@dataclass
class _Context:
    temporal: Client
    store: Store
    workdir: Path
    result_bytes: int
    timeout_seconds: Callable[[int], float]
    progress: Progress
    workloads: dict[int, tuple[Path, Path]] = field(default_factory=dict)

    def workload(self, rounds: int) -> tuple[Path, Path]:
        """agentrt's workspace and script for ``rounds``, made once."""
        if rounds not in self.workloads:
            self.workloads[rounds] = prepare_workload(self.workdir / f"agentrt-r{rounds}", rounds, self.result_bytes)
        return self.workloads[rounds]


def _client(temporal: Client, plugins: Sequence[Any] = (), converter: DataConverter | None = None) -> Client:
    """A client on ``temporal``'s connection with exactly these plugins (and data converter)."""
    config = temporal.config()
    config["plugins"] = list(plugins)
    config["interceptors"] = []
    config["data_converter"] = converter or DataConverter.default
    return Client(**config)


async def _run_workflow(
    ctx: _Context,
    system: str,
    rounds: int,
    temporal: Client,
    worker: Worker,
    start: Callable[[str, str, int], Awaitable[Any]],
    *,
    breakdown: bool,
) -> Sample:
    """Start a workflow with ``start(workflow_id, task_queue, rounds)`` (returns its handle) while
    ``worker`` runs, wait for its result and read its history. A workflow of ``WARM_ROUNDS``
    runs on the same worker first (see ``WARM_ROUNDS``)."""
    workflow_id = f"overhead-{system}-{uuid.uuid4().hex[:10]}"
    sample = Sample(system=system, rounds=rounds, status="completed")
    async with worker:
        warm = await start(f"{workflow_id}-warm", worker.task_queue, WARM_ROUNDS)
        await asyncio.wait_for(warm.result(), ctx.timeout_seconds(WARM_ROUNDS))
        began = time.time()
        handle = await start(workflow_id, worker.task_queue, rounds)
        try:
            await asyncio.wait_for(handle.result(), ctx.timeout_seconds(rounds))
        except WorkflowFailureError as err:
            sample.status = f"failed: {err.cause or err}"
        except TimeoutError:
            sample.status = f"timed out after {ctx.timeout_seconds(rounds):.0f} s"
            await handle.terminate("bench.overhead: timed out")
        finally:
            ended = time.time()
    sample.wall_seconds = ended - began
    sample.client_seconds = ended
    runs = await run_chain(temporal, workflow_id)
    await _fill_from_history(sample, temporal, workflow_id, runs, end=None, breakdown=breakdown)
    if not sample.completed:
        sample.note = (
            f"{sample.status} after {sample.activities} activities scheduled "
            f"(2 per round), at {sample.history_bytes:,} history bytes"
        )
    return sample


async def run_floor(ctx: _Context, rounds: int, *, breakdown: bool = False) -> Sample:
    """``bench._floor`` on the default data converter."""
    temporal = _client(ctx.temporal)
    worker = Worker(
        temporal,
        task_queue=f"overhead-floor-{uuid.uuid4().hex[:8]}",
        workflows=[FloorAgentWorkflow],
        activities=FLOOR_ACTIVITIES,
    )

    def start(workflow_id: str, task_queue: str, rounds: int) -> Awaitable[Any]:
        return temporal.start_workflow(
            FloorAgentWorkflow.run,
            FloorInput(rounds=rounds, result_bytes=ctx.result_bytes),
            id=workflow_id,
            task_queue=task_queue,
        )

    return await _run_workflow(ctx, "floor", rounds, temporal, worker, start, breakdown=breakdown)


async def run_floor_tools(ctx: _Context, rounds: int, *, breakdown: bool = False) -> Sample:
    """``bench._floor``'s effectful rounds: the tool calls on a task queue of their own, served by a
    second worker in this process, each writing its content to a file."""
    temporal = _client(ctx.temporal)
    task_queue = f"overhead-floor-tools-{uuid.uuid4().hex[:8]}"
    tools_queue = f"{task_queue}-tools"
    write_dir = ctx.workdir / f"floor-tools-r{rounds}-{uuid.uuid4().hex[:6]}"
    write_dir.mkdir(parents=True)
    worker = Worker(temporal, task_queue=task_queue, workflows=[FloorAgentWorkflow], activities=[floor_model])
    tools_worker = Worker(temporal, task_queue=tools_queue, activities=[floor_tool])

    def start(workflow_id: str, task_queue: str, rounds: int) -> Awaitable[Any]:
        return temporal.start_workflow(
            FloorAgentWorkflow.run,
            FloorInput(rounds=rounds, result_bytes=ctx.result_bytes, tool_task_queue=tools_queue, write_dir=str(write_dir)),
            id=workflow_id,
            task_queue=task_queue,
        )

    async with tools_worker:
        sample = await _run_workflow(ctx, "floor-tools", rounds, temporal, worker, start, breakdown=breakdown)
    written = len(list(write_dir.glob("out-*.txt")))
    if sample.completed and sample.note is None and written < rounds:
        sample.note = f"the run wrote {written} files, not {rounds}"
    return sample


def _optional_runner(system: str, module: ModuleType) -> Callable[..., Awaitable[Sample]]:
    """The runner of ``pai`` or ``oai`` from its module (``WORKFLOWS``, ``ACTIVITIES``, ``client_plugins()``,
    ``worker_plugins()``; the workflow takes ``(rounds, result_bytes)`` as its one dataclass input)."""

    async def run(ctx: _Context, rounds: int, *, breakdown: bool = False) -> Sample:
        temporal = _client(ctx.temporal, module.client_plugins())
        workflow_class = module.WORKFLOWS[0]
        input_class = module.PaiInput if system == "pai" else module.OaiInput
        worker = Worker(
            temporal,
            task_queue=f"overhead-{system}-{uuid.uuid4().hex[:8]}",
            workflows=module.WORKFLOWS,
            activities=module.ACTIVITIES,
            plugins=module.worker_plugins(),
        )

        def start(workflow_id: str, task_queue: str, rounds: int) -> Awaitable[Any]:
            return temporal.start_workflow(
                workflow_class.run,
                input_class(rounds=rounds, result_bytes=ctx.result_bytes),
                id=workflow_id,
                task_queue=task_queue,
            )

        return await _run_workflow(ctx, system, rounds, temporal, worker, start, breakdown=breakdown)

    return run


def _agentrt_runner(local_tools: bool, fused: bool = False) -> Callable[..., Awaitable[Sample]]:
    async def run(ctx: _Context, rounds: int, *, breakdown: bool = False) -> Sample:
        return await run_agentrt(ctx, rounds, local_tools=local_tools, fused=fused, breakdown=breakdown)

    return run


async def run_agentrt(ctx: _Context, rounds: int, *, local_tools: bool, fused: bool = False, breakdown: bool = False) -> Sample:
    """One agentrt session, one turn of ``rounds`` ``fs.read`` rounds, on an in-process worker of
    its own; ``fused``: with ``fused_rounds`` (the model call runs the rounds itself)."""
    system = "agentrt-fused" if fused else "agentrt-local" if local_tools else "agentrt"
    workspace, script = ctx.workload(rounds)
    temporal = with_agentrt_plugin(ctx.temporal, ctx.store)
    task_queue = f"overhead-{system}-{uuid.uuid4().hex[:8]}"
    agent = AgentClient(temporal, task_queue=task_queue, principal=PRINCIPAL)
    fields: dict[str, object] = {"tools": [TOOL], "max_rounds_per_turn": rounds + 5}
    if has_local_tools():
        fields["local_tools"] = local_tools
    if fused:
        fields["fused_rounds"] = True
    session = agent.new_config(str(workspace), profile="scripted", script=str(script), **fields)
    warm_workspace, warm_script = ctx.workload(WARM_ROUNDS)
    warm_session = agent.new_config(str(warm_workspace), profile="scripted", script=str(warm_script), **fields)
    config = AgentrtConfig(task_queue=task_queue)
    workers = [build_worker(temporal, config, ctx.store, default_registry(), task_queue=task_queue)]
    sample = await _measured_turn(ctx, system, rounds, temporal, agent, workers, warm_session, session, breakdown=breakdown)
    if sample.status == "completed" and sample.note is None and sample.rounds_made != rounds + 1:
        sample.note = f"the turn made {sample.rounds_made} model calls, not {rounds + 1}"
    return sample


async def _measured_turn(
    ctx: _Context,
    system: str,
    rounds: int,
    temporal: Client,
    agent: AgentClient,
    workers: list[Any],
    warm_session: SessionConfig,
    session: SessionConfig,
    *,
    breakdown: bool,
    started: Callable[[], Awaitable[None]] | None = None,
) -> Sample:
    """Run ``warm_session``'s turn, then ``session``'s, measured, on ``workers`` (started here,
    then ``started`` awaited); the sample from the client's wall time and the session's history."""
    sample = Sample(system=system, rounds=rounds, status="completed")
    async with contextlib.AsyncExitStack() as stack:
        for worker in workers:
            await stack.enter_async_context(worker)
        if started is not None:
            await started()
        await asyncio.wait_for(agent.start_and_wait(warm_session, PROMPT), ctx.timeout_seconds(WARM_ROUNDS))
        began = time.time()
        try:
            started, outcome = await asyncio.wait_for(agent.start_and_wait(session, PROMPT), ctx.timeout_seconds(rounds))
        except TimeoutError:
            started = StartedSession(session.session_id, "turn-1", f"session-{session.session_id}")
            outcome = TurnOutcome(turn_id="turn-1", status="pending")
        ended = time.time()
        if outcome.status != "completed":
            sample.status = f"turn {outcome.status}" + (f": {outcome.error}" if outcome.error else "")
        runs = await settled_chain(temporal, started.workflow_id)
    sample.wall_seconds = ended - began
    sample.client_seconds = ended
    sample.rounds_made = outcome.rounds
    turn_ended = await asyncio.to_thread(_turn_ended, ctx.store, started.session_id, started.turn_id)
    if turn_ended is None or turn_ended.at is None:
        sample.note = "no TurnEnded event with a timestamp in the store"
    end = turn_ended.at if turn_ended is not None else None
    await _fill_from_history(sample, temporal, started.workflow_id, runs, end=end, breakdown=breakdown)
    return sample


def prepare_write_workload(directory: Path, rounds: int, result_bytes: int) -> tuple[Path, Path]:
    """``directory/workspace`` (empty) and ``directory/script.json``: ``rounds`` replies that each
    write one file of ``result_bytes`` bytes with ``fs.write``, then ``done``."""
    workspace = directory / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    turns: list[dict[str, Any]] = [
        {"text": f"Writing out-{k}.txt.", "tool_calls": [{"name": "fs.write", "arguments": {
            "path": f"out-{k}.txt", "content": (f"line {k} " * result_bytes)[:result_bytes],
        }}]}
        for k in range(1, rounds + 1)
    ]
    turns.append({"text": "done"})
    script = directory / "script.json"
    script.write_text(json.dumps({"turns": turns}), encoding="utf-8")
    return workspace, script


async def run_agentrt_tools(ctx: _Context, rounds: int, *, pinned: bool = False, breakdown: bool = False) -> Sample:
    """One agentrt session whose turn writes ``rounds`` files (``fs.write``, effectful, through
    the effect ledger), its tool calls on a tools worker of their own (``role="tools"``) beside the
    session's worker (``role="models"``), both in this process. ``pinned``: both workers are one
    Worker Deployment Version, made current, so the session runs pinned to it and its tool calls
    carry its staged events (``pinned-tools-writes-v1``) as Temporal gives them to that build."""
    system = "agentrt-pinned-tools" if pinned else "agentrt-tools"
    task_queue = f"overhead-{system}-{uuid.uuid4().hex[:8]}"
    tools_queue = f"{task_queue}-tools"
    temporal = with_agentrt_plugin(ctx.temporal, ctx.store)
    agent = AgentClient(temporal, task_queue=task_queue, principal=PRINCIPAL)
    allow = ApprovalPolicy(read_only="allow", idempotent="allow", effectful="allow")
    fields: dict[str, object] = {
        "tools": ["fs.write"], "max_rounds_per_turn": rounds + 5, "approval": allow, "tool_task_queue": tools_queue,
    }
    tag = uuid.uuid4().hex[:6]
    workspace, script = prepare_write_workload(ctx.workdir / f"tools-r{rounds}-{tag}", rounds, ctx.result_bytes)
    warm_workspace, warm_script = prepare_write_workload(ctx.workdir / f"tools-warm-{tag}", WARM_ROUNDS, ctx.result_bytes)
    session = agent.new_config(str(workspace), profile="scripted", script=str(script), **fields)
    warm_session = agent.new_config(str(warm_workspace), profile="scripted", script=str(warm_script), **fields)
    config = AgentrtConfig(task_queue=task_queue, tool_task_queue=tools_queue)
    version = WorkerDeploymentVersion(deployment_name=f"bench-{tag}", build_id="build") if pinned else None
    workers = [
        build_worker(temporal, config, ctx.store, default_registry(), task_queue=task_queue, role="models", deployment=version),
        build_worker(temporal, config, ctx.store, default_registry(), task_queue=tools_queue, role="tools", deployment=version),
    ]
    started = None if version is None else functools.partial(make_current, temporal, version.deployment_name, version.build_id)
    sample = await _measured_turn(
        ctx, system, rounds, temporal, agent, workers, warm_session, session, breakdown=breakdown, started=started,
    )
    written = len(list(workspace.glob("out-*.txt")))
    if sample.status == "completed" and sample.note is None and written != rounds:
        sample.note = f"the turn wrote {written} files, not {rounds}"
    return sample


def _turn_ended(store: Store, session_id: str, turn_id: str) -> TurnEnded | None:
    # From the store, not the events query: the store keeps the events of every run of the session.
    return next((e for e in store.turn_events(session_id, turn_id) if isinstance(e, TurnEnded)), None)


# ---------------------------------------------------------------------------- the benchmark


def check_parameters(rounds: Sequence[int], repeats: int, result_bytes: int, systems: Sequence[str]) -> None:
    """Raise ``ValueError`` for parameters the workload cannot have."""
    if not rounds or any(r < 1 for r in rounds):
        raise ValueError(f"rounds must be one or more numbers >= 1, got {list(rounds)}")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    if not 1 <= result_bytes <= MAX_READ_BYTES:
        raise ValueError(f"result_bytes must be 1..{MAX_READ_BYTES} (fs.read's largest read), got {result_bytes}")
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown or not systems:
        raise ValueError(f"systems must be some of {', '.join(SYSTEMS)}, got {list(systems)}")


def _default_timeout(rounds: int) -> float:
    return 120.0 + 5.0 * rounds


async def measure(
    temporal: Client,
    store: Store,
    workdir: Path,
    *,
    rounds: Sequence[int] = DEFAULT_ROUNDS,
    repeats: int = DEFAULT_REPEATS,
    result_bytes: int = DEFAULT_RESULT_BYTES,
    systems: Sequence[str] = SYSTEMS,
    timeout_seconds: Callable[[int], float] = _default_timeout,
    warmup: bool = True,
    progress: Progress = _quiet,
) -> OverheadReport:
    """Every system's runs against an existing server (only ``temporal``'s connection is used; each
    system picks its own data converter and plugins), one run at a time.

    Writes agentrt's workspaces and scripts under ``workdir``; starts and stops a worker per run
    on a fresh task queue, so it can share a server and store with other tests. ``timeout_seconds(R)``
    bounds one run; with ``warmup`` each system first runs once at R = 1, not reported. Raises
    ``ValueError`` for bad parameters; a failing run is reported, not raised.
    """
    check_parameters(rounds, repeats, result_bytes, systems)
    report = OverheadReport(rounds=list(rounds), repeats=repeats, result_bytes=result_bytes, systems=list(systems))
    runners: dict[str, Callable[..., Awaitable[Sample]]] = {}
    for system in systems:
        if system == "floor":
            runners[system] = run_floor
        elif system == "floor-tools":
            runners[system] = run_floor_tools
        elif system == "agentrt":
            runners[system] = _agentrt_runner(local_tools=False)
        elif system == "agentrt-fused":
            runners[system] = _agentrt_runner(local_tools=False, fused=True)
        elif system == "agentrt-tools":
            runners[system] = run_agentrt_tools
        elif system == "agentrt-pinned-tools":
            runners[system] = functools.partial(run_agentrt_tools, pinned=True)
        elif system == "agentrt-local":
            if has_local_tools():
                runners[system] = _agentrt_runner(local_tools=True)
            else:
                report.unavailable[system] = "SessionConfig has no field local_tools"
        else:
            module_name, install = OPTIONAL_MODULES[system]
            module = _import_probe(module_name)
            if module is None:
                report.unavailable[system] = f"not installed: {install}"
            else:
                runners[system] = _optional_runner(system, module)
    ctx = _Context(temporal, store, workdir, result_bytes, timeout_seconds, progress)
    order = list(runners)
    if warmup:
        # The first workflow of a kind in a process pays for imports and the sandbox's module loads.
        for system in order:
            try:
                sample = await runners[system](ctx, 1)
            except Exception as err:  # noqa: BLE001 - the measured runs will say it again
                sample = Sample(system=system, rounds=1, status=f"error: {type(err).__name__}: {err}")
            progress(f"{system} warm-up (R=1, not reported): {sample.status}")
    largest = max(rounds)
    for r in rounds:
        for repetition in range(repeats):
            shift = repetition % len(order) if order else 0
            for system in order[shift:] + order[:shift]:
                try:
                    sample = await runners[system](ctx, r, breakdown=(r == largest and repetition == repeats - 1))
                except Exception as err:  # noqa: BLE001 - one broken run is reported, the others still run
                    sample = Sample(system=system, rounds=r, status=f"error: {type(err).__name__}: {err}")
                report.samples.setdefault((system, r), []).append(sample)
                progress(
                    f"{system} R={r} #{repetition + 1}: {sample.status}, {sample.wall_seconds * 1000 / r:.1f} ms/round, "
                    f"{sample.history_bytes:,} history bytes"
                )
    return report


async def run_benchmark(
    *,
    rounds: Sequence[int] = DEFAULT_ROUNDS,
    repeats: int = DEFAULT_REPEATS,
    result_bytes: int = DEFAULT_RESULT_BYTES,
    systems: Sequence[str] = SYSTEMS,
    workdir: Path | None = None,
    progress: Progress = _quiet,
) -> OverheadReport:
    """Self-contained: a dev server and a SQLite store in ``workdir`` (default: a temporary
    directory, removed afterwards), every run, then everything stopped."""
    check_parameters(rounds, repeats, result_bytes, systems)
    own_dir = workdir is None
    directory = Path(tempfile.mkdtemp(prefix="agentrt-overhead-")) if workdir is None else workdir
    directory.mkdir(parents=True, exist_ok=True)
    server = DevServer.on_free_ports(directory)
    store: Store | None = None
    try:
        await server.start()
        progress(f"temporal dev server on {server.address}; files in {directory}")
        store = Store.open(f"sqlite:///{directory / 'agentrt.db'}")
        temporal = await Client.connect(server.address)
        return await measure(
            temporal,
            store,
            directory,
            rounds=rounds,
            repeats=repeats,
            result_bytes=result_bytes,
            systems=systems,
            progress=progress,
        )
    finally:
        if store is not None:
            store.close()
        server.stop()
        if own_dir:
            shutil.rmtree(directory, ignore_errors=True)


# ---------------------------------------------------------------------------- command line


def _numbers(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from err


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.overhead", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds",
        type=_numbers,
        default=list(DEFAULT_ROUNDS),
        help="tool rounds per turn, comma-separated (default 20,100,200)",
    )
    parser.add_argument(
        "--repeats", type=int, default=DEFAULT_REPEATS, help="runs per system and R; the median is reported (default 3)"
    )
    parser.add_argument(
        "--result-bytes", type=int, default=DEFAULT_RESULT_BYTES, help="bytes of each tool result (default 5120)"
    )
    parser.add_argument(
        "--systems",
        type=_names,
        default=list(SYSTEMS),
        help=f"comma-separated, some of {','.join(SYSTEMS)} (default all)",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="keep run files here (default: a removed temp dir)")
    args = parser.parse_args(argv)
    try:
        check_parameters(args.rounds, args.repeats, args.result_bytes, args.systems)
    except ValueError as err:
        parser.error(str(err))
    run_and_exit(
        lambda: run_benchmark(
            rounds=args.rounds,
            repeats=args.repeats,
            result_bytes=args.result_bytes,
            systems=args.systems,
            workdir=args.workdir,
            progress=print_progress,
        ),
        lambda report: "agentrt" not in args.systems or report.completed("agentrt", max(args.rounds)),
    )


if __name__ == "__main__":
    main()
