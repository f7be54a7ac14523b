"""How Temporal workflow history grows per round of a long agent turn: agentrt vs a naive loop.

    python -m bench.history [--rounds 200] [--result-bytes 1024] [--window 5] [--workdir DIR]

Starts its own Temporal dev server (free ports, headless, database in a temporary
directory), a SQLite store and two in-process workers on fresh task queues: agentrt's
(``worker.build_worker``) and the naive baseline's (``bench._naive``). Both run the same
workload: one turn of R rounds (``--rounds``) by the scripted model, each round one
``fs.read`` of a different workspace file of ``--result-bytes`` bytes, then a final
answer in round R + 1. The two runs go one after the other, so they do not share the
two cores and batch their workflow tasks alike. agentrt runs with its own data converter
(``worker.AgentrtPlugin``: pydantic JSON plus external
storage of big payloads, here in the benchmark's store); the naive baseline with the plain
pydantic converter (``temporalio.contrib.pydantic.pydantic_data_converter``) and no
external storage, as the runtimes it stands for run.

What is measured:
- ``hb(k)``: the workflow's history size in bytes (``workflow.info().get_current_history_size()``)
  when the model call of round k was made. agentrt records it in each ``ModelRequestStarted``
  event (read back from the store, which keeps the events of every run of the session);
  the naive workflow returns its list.
- bytes/round at round N: the mean of ``hb(k + 1) - hb(k)`` over k = N - W + 1 .. N
  (``--window`` W, default 5, clipped at round 1), i.e. what rounds N-W+1..N each added
  to history, from the start of one model call to the start of the next: the model call,
  the tool call and (agentrt) the store writes. The window smooths the few bytes by which
  rounds differ (round numbers, call ids, timestamps). Round R's bytes end at round R + 1's
  model call (the final answer), so every round 1..R has a value. A negative difference
  (a continue-as-new between two model calls) is left out of the mean.
- growth: bytes/round at round R divided by bytes/round at round R/10 (20 and 200 for the
  default R = 200). 1.00 means constant cost per round, i.e. history linear in the rounds;
  the naive loop's cost per round grows with the transcript, so its history is quadratic.
- totals: the server's ``history_size_bytes`` (``DescribeWorkflowExecution``, the number
  ``get_current_history_size()`` reports inside the workflow) of the workflow's final
  history, summed over all its runs when it continued as new (followed back from the latest
  run through ``continued_execution_run_id``). Read after the run: for agentrt once the
  turn has ended and the session's history has stopped changing for a second (the session
  stays open, idle, possibly after a continue-as-new that carries its state to a new run);
  for the naive workflow once it has completed. The table also splits the history bytes
  by source (serialized event sizes per activity type, workflow tasks, other).

The naive history is about R^2/2 x (result bytes + ~400) bytes: 200 rounds of 1 KB came
to 29 MB, under the server's 50 MiB limit, with a largest activity input of about
280 KB, under 2 MiB. For parameters that would break a limit, the naive workflow stops
before the model call that would, and the output says which limit and at which round;
bytes/round it did not reach are reported as n/a and its growth as nan.

Output: a table of bytes/round at rounds R/10, R/2 and R for both, the totals, and the
last line exactly

    history agentrt_growth=G naive_growth=G total_agentrt=BYTES total_naive=BYTES

From a test (small parameters, reusing a running server, store and client):

    report = await bench.history.measure(temporal_client, store, tmp_path, rounds=20, result_bytes=256)
    assert report.agentrt.status == "completed" and report.agentrt_growth < 1.5

or self-contained (its own server): ``await bench.history.run_benchmark(rounds=20)``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter
from temporalio.worker import Worker

from agentrt.activities.tools import MAX_READ_BYTES, default_registry
from agentrt.client import AgentClient
from agentrt.schemas import ModelRequestStarted
from agentrt.store import Store
from agentrt.worker import AgentrtConfig, AgentrtPlugin, DevServer, build_worker, workflow_runner
from bench._cli import print_progress, run_and_exit
from bench._naive import NAIVE_ACTIVITIES, NaiveAgentInput, NaiveAgentResult, NaiveAgentWorkflow

DEFAULT_ROUNDS = 200
DEFAULT_RESULT_BYTES = 1024
DEFAULT_WINDOW = 5
TOOL = "fs.read"
FS_READ_DEFAULT_LIMIT = 65_536
PRINCIPAL = "bench"
PROMPT = "Read the workspace files one by one, one per round, then say done."

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


# ---------------------------------------------------------------------------- results


@dataclass
class RunSize:
    """One run of a workflow: its run id and final history size (bytes) and length (events)."""

    run_id: str
    history_bytes: int
    history_events: int


@dataclass
class RunMeasure:
    """One workflow's numbers.

    ``history_bytes[k]`` is the history size (bytes) when the model call of round k was made;
    ``runs`` the workflow's runs (more than one after continue-as-new) with their final sizes;
    ``breakdown`` their serialized event bytes by what wrote them (see ``history_breakdown``).
    """

    name: str
    workflow_id: str
    status: str
    rounds: int
    history_bytes: dict[int, int] = field(default_factory=dict)
    runs: list[RunSize] = field(default_factory=list)
    breakdown: dict[str, int] = field(default_factory=dict)
    note: str | None = None

    @property
    def total_bytes(self) -> int:
        """Final history size (bytes, server's ``history_size_bytes``), summed over every run."""
        return sum(r.history_bytes for r in self.runs)

    @property
    def total_events(self) -> int:
        return sum(r.history_events for r in self.runs)

    def bytes_per_round(self, round_number: int, window: int = DEFAULT_WINDOW) -> float | None:
        """Mean of ``hb(k + 1) - hb(k)`` for k in ``round_number - window + 1 .. round_number`` (k >= 1).

        A negative difference is a continue-as-new between the two model calls (a new run's
        history starts small): that round is left out of the mean. None when no round of the
        window has both values (the run stopped before them).
        """
        deltas = []
        for k in range(max(1, round_number - window + 1), round_number + 1):
            if k in self.history_bytes and k + 1 in self.history_bytes:
                delta = self.history_bytes[k + 1] - self.history_bytes[k]
                if delta >= 0:
                    deltas.append(delta)
        return sum(deltas) / len(deltas) if deltas else None


@dataclass
class HistoryReport:
    rounds: int
    result_bytes: int
    window: int
    agentrt: RunMeasure
    naive: RunMeasure

    @property
    def checkpoints(self) -> list[int]:
        """Rounds R/10, R/2 and R (deduplicated, at least 1)."""
        return sorted({max(1, self.rounds // 10), max(1, self.rounds // 2), self.rounds})

    def growth(self, run: RunMeasure) -> float:
        """bytes/round at round R over bytes/round at round R/10; nan when either is unknown or zero."""
        first = run.bytes_per_round(max(1, self.rounds // 10), self.window)
        last = run.bytes_per_round(self.rounds, self.window)
        if first is None or last is None or first == 0:
            return math.nan
        return last / first

    @property
    def agentrt_growth(self) -> float:
        return self.growth(self.agentrt)

    @property
    def naive_growth(self) -> float:
        return self.growth(self.naive)

    def table(self) -> str:
        runs = [self.agentrt, self.naive]
        width = 15
        lines = [
            f"rounds={self.rounds} result_bytes={self.result_bytes} window={self.window} "
            f"(bytes/round at N = mean of hb(k+1)-hb(k), k = N-{self.window - 1}..N)",
            "",
            f"{'':<24}" + "".join(f"{r.name:>{width}}" for r in runs),
        ]
        for n in self.checkpoints:
            cells = []
            for run in runs:
                value = run.bytes_per_round(n, self.window)
                cells.append(f"{'n/a' if value is None else f'{value:,.0f}':>{width}}")
            lines.append(f"{f'bytes/round at {n}':<24}" + "".join(cells))
        lines.append(f"{'growth (R / R/10)':<24}" + "".join(f"{self.growth(r):>{width}.2f}" for r in runs))
        lines.append(f"{'history bytes at end':<24}" + "".join(f"{r.total_bytes:>{width},}" for r in runs))
        lines.append(f"{'history events at end':<24}" + "".join(f"{r.total_events:>{width},}" for r in runs))
        lines.append(f"{'workflow runs':<24}" + "".join(f"{len(r.runs):>{width}}" for r in runs))
        lines.append(f"{'model calls':<24}" + "".join(f"{len(r.history_bytes):>{width}}" for r in runs))
        lines.append(f"{'status':<24}" + "".join(f"{r.status:>{width}}" for r in runs))
        for run in runs:
            if len(run.runs) > 1:
                sizes = " + ".join(f"{r.history_bytes:,} ({r.history_events:,} events)" for r in run.runs)
                lines.append(f"{run.name} runs (continue-as-new), oldest first: {sizes}")
        for run in runs:
            parts = ", ".join(f"{name} {size:,}" for name, size in run.breakdown.items())
            lines.append(f"{run.name} history bytes by source: {parts}")
        for run in runs:
            if run.note:
                lines.append(f"note: {run.name}: {run.note}")
        return "\n".join(lines)

    def line(self) -> str:
        return (
            f"history agentrt_growth={self.agentrt_growth:.2f} naive_growth={self.naive_growth:.2f} "
            f"total_agentrt={self.agentrt.total_bytes} total_naive={self.naive.total_bytes}"
        )


# ---------------------------------------------------------------------------- workload


_FILLER = "abcdefghijklmnopqrstuvwxyz0123456789" * 2


def file_name(round_number: int) -> str:
    return f"f{round_number:04d}.txt"


def file_content(round_number: int, size: int) -> str:
    """``size`` bytes of ASCII text, different for every round: 64-byte lines naming the round."""
    lines = []
    total = 0
    line_number = 0
    while total < size:
        head = f"round {round_number:04d} line {line_number:05d} "
        line = head + _FILLER[: 63 - len(head)] + "\n"
        lines.append(line)
        total += len(line)
        line_number += 1
    return "".join(lines)[:size]


def prepare_workload(directory: Path, rounds: int, result_bytes: int) -> tuple[Path, Path]:
    """Create ``directory/workspace`` with one file per round and ``directory/script.json``.

    The script has ``rounds`` responses that each read one file, then a final ``done``.
    Returns (workspace, script).
    """
    workspace = directory / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    turns = []
    for k in range(1, rounds + 1):
        (workspace / file_name(k)).write_text(file_content(k, result_bytes), encoding="ascii")
        arguments: dict[str, object] = {"path": file_name(k)}
        if result_bytes > FS_READ_DEFAULT_LIMIT:
            arguments["limit"] = result_bytes
        turns.append({"text": f"Reading {file_name(k)}.", "tool_calls": [{"name": TOOL, "arguments": arguments}]})
    turns.append({"text": "done"})
    script = directory / "script.json"
    script.write_text(json.dumps({"turns": turns}), encoding="utf-8")
    return workspace, script


def with_converter(temporal: Client, converter: DataConverter) -> Client:
    """A client on ``temporal``'s connection and namespace with another data converter."""
    config = temporal.config()
    config["data_converter"] = converter
    return Client(**config)


def with_agentrt_plugin(temporal: Client, store: Store) -> Client:
    """A client on ``temporal``'s connection with ``AgentrtPlugin``, its big-payload storage in ``store``.

    ``client.connect`` without a plugin would put big payloads in the database of
    ``AgentrtConfig.load()`` (``$AGENTRT_HOME`` by default), outside the benchmark's directory.
    """
    config = temporal.config()
    config["plugins"] = [AgentrtPlugin(AgentrtConfig(), store)]
    return Client(**config)


async def run_chain(temporal: Client, workflow_id: str) -> list[RunSize]:
    """Every run of ``workflow_id``, oldest first: the latest run, then back through continue-as-new.

    Sizes are the server's ``history_size_bytes`` / ``history_length`` (``DescribeWorkflowExecution``).
    """
    runs: list[RunSize] = []
    run_id: str | None = None
    while True:
        handle = temporal.get_workflow_handle(workflow_id, run_id=run_id)
        info = (await handle.describe()).raw_description.workflow_execution_info
        runs.append(RunSize(info.execution.run_id, info.history_size_bytes, info.history_length))
        previous = ""
        this_run = temporal.get_workflow_handle(workflow_id, run_id=info.execution.run_id)
        async for first in this_run.fetch_history_events():
            previous = first.workflow_execution_started_event_attributes.continued_execution_run_id
            break
        if not previous:
            return list(reversed(runs))
        run_id = previous


async def history_breakdown(temporal: Client, workflow_id: str, run_ids: list[str]) -> dict[str, int]:
    """The history events' serialized bytes (protobuf ``ByteSize``) of these runs, grouped by source.

    An activity's scheduled, started and closing events count under ``activity <type>``;
    workflow task events under ``workflow tasks``; everything else (start with its input,
    signals, updates, search-attribute upserts, continue-as-new, ...) under ``other``. The
    sum is close to, not exactly, the server's ``history_size_bytes``.
    """
    totals: dict[str, int] = {}
    for run_id in run_ids:
        activity_types: dict[int, str] = {}
        async for event in temporal.get_workflow_handle(workflow_id, run_id=run_id).fetch_history_events():
            kind = event.WhichOneof("attributes") or ""
            if kind == "activity_task_scheduled_event_attributes":
                name = f"activity {event.activity_task_scheduled_event_attributes.activity_type.name}"
                activity_types[event.event_id] = name
            elif kind.startswith("activity_task_"):
                name = activity_types.get(getattr(event, kind).scheduled_event_id, "activity ?")
            elif kind.startswith("workflow_task_"):
                name = "workflow tasks"
            else:
                name = "other"
            totals[name] = totals.get(name, 0) + event.ByteSize()
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


async def _totals(temporal: Client, workflow_id: str) -> tuple[list[RunSize], dict[str, int]]:
    runs = await run_chain(temporal, workflow_id)
    return runs, await history_breakdown(temporal, workflow_id, [r.run_id for r in runs])


# ---------------------------------------------------------------------------- the two runs


async def measure_agentrt(
    temporal: Client,
    store: Store,
    workspace: Path,
    script: Path,
    rounds: int,
    *,
    timeout_seconds: float = 1800.0,
    progress: Progress = _quiet,
) -> RunMeasure:
    """One agentrt session, one turn of ``rounds`` tool rounds, on an in-process worker of its own.

    The worker and client use ``AgentrtPlugin`` with ``store`` on ``temporal``'s connection.
    """
    temporal = with_agentrt_plugin(temporal, store)
    task_queue = f"bench-history-{uuid.uuid4().hex[:8]}"
    config = AgentrtConfig(task_queue=task_queue)  # the worker uses only its profiles (built-in: scripted)
    agent = AgentClient(temporal, task_queue=task_queue, principal=PRINCIPAL)
    session = agent.new_config(
        str(workspace), profile="scripted", script=str(script), tools=[TOOL], max_rounds_per_turn=rounds + 5
    )
    async with build_worker(temporal, config, store, default_registry(), task_queue=task_queue):
        started = await agent.start(session, PROMPT)
        progress(f"agentrt: session {started.session_id} ({started.workflow_id}) started, {rounds} rounds")
        outcome = await agent.wait(started.session_id, started.turn_id, timeout_seconds=timeout_seconds)
        runs = await settled_chain(temporal, started.workflow_id)
        breakdown = await history_breakdown(temporal, started.workflow_id, [r.run_id for r in runs])
    # From the store, not the events query: the store keeps the events of every run of the session.
    history: dict[int, int] = {}
    since = 0
    while events := await asyncio.to_thread(store.events, started.session_id, since, 1000):
        for event in events:
            since = event.seq
            if isinstance(event, ModelRequestStarted) and event.turn_id == started.turn_id:
                if event.history_bytes is not None:
                    history[event.round] = event.history_bytes
    notes = []
    if outcome.status != "completed":
        notes.append(f"the turn ended {outcome.status}" + (f": {outcome.error}" if outcome.error else ""))
    if not history:
        notes.append("no ModelRequestStarted event of the turn carried history_bytes")
    measured = RunMeasure(
        name="agentrt",
        workflow_id=started.workflow_id,
        status=outcome.status,
        rounds=outcome.rounds,
        history_bytes=history,
        runs=runs,
        breakdown=breakdown,
        note="; ".join(notes) or None,
    )
    progress(
        f"agentrt: turn {outcome.status} after {outcome.rounds} model calls, "
        f"history {measured.total_bytes:,} bytes in {len(runs)} run(s)"
    )
    return measured


async def settled_chain(temporal: Client, workflow_id: str, timeout_seconds: float = 60.0) -> list[RunSize]:
    """The run chain once it stops changing for a second: after a turn's outcome is published the
    session may still write to history (a compaction, the continue-as-new that follows it)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_seconds
    runs = await run_chain(temporal, workflow_id)
    while loop.time() < deadline:
        await asyncio.sleep(1.0)
        again = await run_chain(temporal, workflow_id)
        if again == runs:
            break
        runs = again
    return runs


async def measure_naive(
    temporal: Client,
    workspace: Path,
    script: Path,
    rounds: int,
    *,
    timeout_seconds: float = 1800.0,
    progress: Progress = _quiet,
) -> RunMeasure:
    """The naive baseline (``bench._naive``), same script and workspace, on an in-process worker of its own.

    Worker and client use the plain pydantic converter on ``temporal``'s connection: no
    external storage for big payloads, as in the runtimes the baseline stands for.
    """
    temporal = with_converter(temporal, pydantic_data_converter)
    task_queue = f"bench-naive-{uuid.uuid4().hex[:8]}"
    workflow_id = f"naive-{uuid.uuid4().hex[:12]}"
    tools, _ = default_registry().specs([TOOL])
    worker = Worker(
        temporal,
        task_queue=task_queue,
        workflows=[NaiveAgentWorkflow],
        activities=NAIVE_ACTIVITIES,
        workflow_runner=workflow_runner(),
    )
    async with worker:
        progress(f"naive: workflow {workflow_id} started, {rounds} rounds")
        result: NaiveAgentResult = await asyncio.wait_for(
            temporal.execute_workflow(
                NaiveAgentWorkflow.run,
                NaiveAgentInput(
                    prompt=PROMPT,
                    script=str(script),
                    workspace=str(workspace),
                    tools=tools,
                    max_rounds=rounds + 5,
                ),
                id=workflow_id,
                task_queue=task_queue,
            ),
            timeout_seconds,
        )
        runs, breakdown = await _totals(temporal, workflow_id)
    note = None
    if result.status != "completed":
        note = f"stopped before model call {result.rounds + 1} ({result.status}): {result.stopped}"
    measured = RunMeasure(
        name="naive",
        workflow_id=workflow_id,
        status=result.status,
        rounds=result.rounds,
        history_bytes={k + 1: size for k, size in enumerate(result.history_bytes)},
        runs=runs,
        breakdown=breakdown,
        note=note,
    )
    progress(f"naive: {result.status} after {result.rounds} model calls, history {measured.total_bytes:,} bytes")
    return measured


async def measure(
    temporal: Client,
    store: Store,
    workdir: Path,
    *,
    rounds: int = DEFAULT_ROUNDS,
    result_bytes: int = DEFAULT_RESULT_BYTES,
    window: int = DEFAULT_WINDOW,
    progress: Progress = _quiet,
) -> HistoryReport:
    """Both runs against an existing server (only ``temporal``'s connection is used; each run
    picks its own data converter, see ``measure_agentrt`` and ``measure_naive``).

    Writes the workspace and script under ``workdir``; starts and stops its own workers on
    fresh task queues, so it can share a server and store with other tests.
    """
    check_parameters(rounds, result_bytes, window)
    workspace, script = prepare_workload(workdir, rounds, result_bytes)
    agentrt = await measure_agentrt(temporal, store, workspace, script, rounds, progress=progress)
    naive = await measure_naive(temporal, workspace, script, rounds, progress=progress)
    return HistoryReport(rounds=rounds, result_bytes=result_bytes, window=window, agentrt=agentrt, naive=naive)


def check_parameters(rounds: int, result_bytes: int, window: int) -> None:
    """Raise ``ValueError`` for parameters the workload cannot have."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if not 1 <= result_bytes <= MAX_READ_BYTES:
        raise ValueError(f"result_bytes must be 1..{MAX_READ_BYTES} (fs.read's largest read), got {result_bytes}")
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")


async def run_benchmark(
    *,
    rounds: int = DEFAULT_ROUNDS,
    result_bytes: int = DEFAULT_RESULT_BYTES,
    window: int = DEFAULT_WINDOW,
    workdir: Path | None = None,
    progress: Progress = _quiet,
) -> HistoryReport:
    """Self-contained: a dev server and a SQLite store in ``workdir`` (default: a temporary
    directory, removed afterwards), both runs, then everything stopped."""
    check_parameters(rounds, result_bytes, window)
    own_dir = workdir is None
    directory = Path(tempfile.mkdtemp(prefix="agentrt-history-")) if workdir is None else workdir
    directory.mkdir(parents=True, exist_ok=True)
    server = DevServer.on_free_ports(directory)
    store: Store | None = None
    try:
        await server.start()
        progress(f"temporal dev server on {server.address}; files in {directory}")
        store = Store.open(f"sqlite:///{directory / 'agentrt.db'}")
        temporal = await Client.connect(server.address, data_converter=pydantic_data_converter)
        return await measure(
            temporal, store, directory, rounds=rounds, result_bytes=result_bytes, window=window, progress=progress
        )
    finally:
        if store is not None:
            store.close()
        server.stop()
        if own_dir:
            shutil.rmtree(directory, ignore_errors=True)


# ---------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.history", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="tool rounds in the turn (default 200)")
    parser.add_argument(
        "--result-bytes", type=int, default=DEFAULT_RESULT_BYTES, help="bytes of each tool result (default 1024)"
    )
    parser.add_argument(
        "--window", type=int, default=DEFAULT_WINDOW, help="rounds averaged into each bytes/round value (default 5)"
    )
    parser.add_argument("--workdir", type=Path, default=None, help="keep run files here (default: a removed temp dir)")
    args = parser.parse_args(argv)
    try:
        check_parameters(args.rounds, args.result_bytes, args.window)
    except ValueError as err:
        parser.error(str(err))
    run_and_exit(
        lambda: run_benchmark(
            rounds=args.rounds,
            result_bytes=args.result_bytes,
            window=args.window,
            workdir=args.workdir,
            progress=print_progress,
        ),
        lambda report: report.agentrt.status == "completed",
    )


if __name__ == "__main__":
    main()
