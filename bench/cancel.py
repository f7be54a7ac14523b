"""How long a cancel takes to end a turn, wherever it lands, with default session settings.

    python -m bench.cancel [--repeat 3]

Starts its own Temporal dev server (free ports, headless), a SQLite store and an
in-process worker (``agentrt.worker.build_worker``, as ``agentrt worker`` builds it), then
for each scenario starts a session with the default heartbeat timeout (30 s), waits until
the turn is at the step named below, sends ``cancel_turn`` and measures the time from just
before the signal to the ``wait_turn`` update returning the ``cancelled`` outcome (the
outcome is published after the turn's events are in the store):

- ``model call``: the scripted model is asked for a reply it delays by 120 s;
- ``sleep 5 tool``: ``shell.run`` runs ``sleep 5``, cancelled 1 s after it started;
- ``approval wait``: an ``fs.write`` waits for approval.

Each scenario runs ``--repeat`` times; the table gives the median and the maximum
(seconds). The baseline in the same run is a turn that ends by itself (a 0.2 s model
reply), measured the same way from the message to the outcome: the floor of a turn's
round trip on this machine. The last line is exactly

    cancel model=S tool=S approval=S floor=S
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from pathlib import Path

from temporalio.client import Client

from agentrt.client import AgentClient
from agentrt.schemas import (
    ApprovalPolicy,
    Event,
    ModelRequestStarted,
    PermissionRequested,
    ToolInvocationStarted,
    TurnOutcome,
    WaitTurnInput,
)
from agentrt.workflows.session import SessionWorkflow
from bench.local import local_stack

OWNER = "bench"
SCENARIOS = {
    "model": ([{"text": "too late", "delay_seconds": 120}], ModelRequestStarted, 0.0, None),
    "tool": (
        [{"tool_calls": [{"name": "shell.run", "arguments": {"command": "sleep 5"}}]}, {"text": "unreached"}],
        ToolInvocationStarted,
        1.0,
        ApprovalPolicy(read_only="allow", idempotent="allow", effectful="allow"),
    ),
    "approval": (
        [{"tool_calls": [{"name": "fs.write", "arguments": {"path": "a.txt", "content": "a"}}]}, {"text": "unreached"}],
        PermissionRequested,
        0.0,
        None,
    ),
}


async def _wait_for(client: AgentClient, session_id: str, event_type: type[Event]) -> None:
    while True:
        page = await client.events(session_id)
        if any(isinstance(e, event_type) for e in page.events):
            return
        await asyncio.sleep(0.05)


async def _outcome(temporal: Client, session_id: str, turn_id: str) -> TurnOutcome:
    handle = temporal.get_workflow_handle_for(SessionWorkflow.run, f"session-{session_id}")
    while True:
        outcome = await handle.execute_update(SessionWorkflow.wait_turn, WaitTurnInput(turn_id=turn_id))
        if outcome.status != "pending":
            return outcome


async def _one(temporal: Client, client: AgentClient, workdir: Path, name: str) -> float:
    turns, event_type, pause, policy = SCENARIOS[name]
    run_dir = workdir / uuid.uuid4().hex[:8]
    (run_dir / "ws").mkdir(parents=True)
    script = run_dir / "script.json"
    script.write_text(json.dumps({"turns": turns}))
    fields = {"approval": policy} if policy is not None else {}
    config = client.new_config(str(run_dir / "ws"), script=str(script), profile="scripted", **fields)
    started = await client.start(config, "go")
    await _wait_for(client, config.session_id, event_type)
    await asyncio.sleep(pause)
    begin = time.perf_counter()
    await client.cancel(config.session_id)
    outcome = await _outcome(temporal, config.session_id, started.turn_id)
    elapsed = time.perf_counter() - begin
    if outcome.status != "cancelled":
        raise RuntimeError(f"{name}: the turn ended {outcome.status}, not cancelled")
    await client.archive(config.session_id)
    return elapsed


async def _floor(temporal: Client, client: AgentClient, workdir: Path) -> float:
    run_dir = workdir / uuid.uuid4().hex[:8]
    (run_dir / "ws").mkdir(parents=True)
    script = run_dir / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "done", "delay_seconds": 0.2}]}))
    config = client.new_config(str(run_dir / "ws"), script=str(script), profile="scripted")
    begin = time.perf_counter()
    started = await client.start(config, "go")
    await _outcome(temporal, config.session_id, started.turn_id)
    elapsed = time.perf_counter() - begin
    await client.archive(config.session_id)
    return elapsed


async def run_benchmark(repeat: int = 3) -> dict[str, list[float]]:
    """Run every scenario ``repeat`` times; returns seconds per scenario (and ``floor``)."""
    results: dict[str, list[float]] = {name: [] for name in [*SCENARIOS, "floor"]}
    async with local_stack(OWNER) as stack:
        for _ in range(repeat):
            for name in SCENARIOS:
                results[name].append(await _one(stack.temporal, stack.client, stack.root, name))
            results["floor"].append(await _floor(stack.temporal, stack.client, stack.root))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results = asyncio.run(run_benchmark(args.repeat))
    labels = {"model": "model call", "tool": "sleep 5 tool", "approval": "approval wait", "floor": "turn floor"}
    print(f"{'cancel during':<16}{'median s':>10}{'max s':>10}")
    for name, values in results.items():
        print(f"{labels[name]:<16}{statistics.median(values):>10.2f}{max(values):>10.2f}")
    medians = {name: statistics.median(values) for name, values in results.items()}
    print(
        f"cancel model={medians['model']:.2f} tool={medians['tool']:.2f} "
        f"approval={medians['approval']:.2f} floor={medians['floor']:.2f}"
    )


if __name__ == "__main__":
    main()
