"""A fleet: worker processes share sessions on one task queue, and one of them is SIGKILLed mid-load.

    python -m bench.fleet [--sessions 300] [--turns 4] [--workers 3] [--kill-fraction 0.3]
                          [--think 60,120] [--sticky-timeout 3] [--heartbeat-timeout 3] [--sdk-defaults]
                          [--seed 1] [--database-url URL] [--workdir DIR]

Starts its own Temporal dev server (free ports, headless) and a loopback model speaking OpenAI
Chat Completions (``bench/_fleet_provider.py``: answers after 0.1-0.6 s, first with a call of
``fleet.append``, then ``done``), then ``--workers`` processes of ``agentrt worker`` on one task
queue, with the effectful tool ``fleet.append`` registered from an agents module
(``bench/_fleet_tools.py``; it sleeps 0.1-0.6 s, then appends the turn's line to the session's
file). ``--sessions`` sessions run ``--turns`` turns each, every turn after a pause drawn from
``--think`` (the offered load), each a model call, the tool call and a second model call. Once
``--kill-fraction`` of the turns have completed, the first worker's process group is SIGKILLed;
the others finish the run (``bench/_fleet_harness.py``).

What is counted:

- **turns**: completed of the total; **lost**: a completed turn whose line is not in its
  session's file exactly once, or any violation of the durable record (``bench/_turn_checks.py``:
  acknowledged messages, transcript positions, stored events, one result per tool call, one end
  per turn); **duplicated**: a line appended more than once. Both must be 0.
- **held sessions**: the sessions the dead worker held at the kill (``bench/_fleet_steps.py``): a
  workflow task in flight there, an activity running there, or the session's sticky queue being
  the dead worker's; **next step**: from when the session's next step was due (the kill, or for
  a session with nothing to do then, the first workflow task scheduled after it) to that step
  starting on another worker (history event times), p50 and max per kind and over all; of it,
  **queued** is the time its task waited on the task queue every live worker polls (capacity),
  the rest is **failover**.

``--sdk-defaults`` runs the same fleet first with the SDK's sticky schedule-to-start timeout
(10 s) and then with agentrt's (``--sticky-timeout``, default 3 s, ``[worker]
sticky_schedule_to_start_seconds``), on the same server, and prints both and their ratio. The
last line is exactly

    fleet sessions=N turns=T completed=C lost=L duplicated=D held=H next_step_p50=<s> next_step_max=<s>

for the agentrt-defaults run. Exit status 0 when lost and duplicated are 0, every turn completed
and every held session's next step came within 5 s; else 1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentrt.worker import DevServer
from bench._cli import print_progress, quiet_sdk_logs
from bench._fleet_harness import FleetResult, die_with_parent, run_fleet
from bench._fleet_provider import answer
from bench._fleet_steps import KINDS, HeldSession, held_session

__all__ = ["FleetResult", "HeldSession", "answer", "held_session", "main", "run_fleet"]

SDK_STICKY_SECONDS = 10.0
BOUND_SECONDS = 5.0


def _stat(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f}s {max(values):.2f}s"


def table(results: list[FleetResult]) -> str:
    head = f"{'run':17s} {'sticky':>6s} {'hb':>3s} {'turns':>11s} {'lost':>4s} {'dup':>3s} {'held':>4s}  {'next step p50/max':>17s}  "
    head += "  ".join(f"{k + ' n p50/max':>24s}" for k in KINDS) + f"  {'failover p50/max':>17s} {'queued max':>10s}"
    lines = [head]
    for r in results:
        delays = [h.delay for h in r.held if h.delay is not None]
        kinds = []
        for kind in KINDS:
            mine = [h.delay for h in r.held if h.kind == kind and h.delay is not None]
            kinds.append(f"{len(mine):>4d} {_stat(mine):>19s}")
        failover = [h.failover for h in r.held if h.failover is not None]
        queued = [h.queued for h in r.held if h.delay is not None]
        lines.append(
            f"{r.label:17s} {r.sticky_seconds:5.1f}s {r.heartbeat_seconds:2.0f}s "
            f"{r.turns_completed:5d}/{r.sessions * r.turns_per_session:<5d} {r.lost:4d} {r.duplicates:3d} "
            f"{len(r.held):4d}  {_stat(delays):>17s}  " + "  ".join(kinds)
            + f"  {_stat(failover):>17s} {max(queued, default=0.0):9.2f}s"
        )
    for r in results:
        missing = [h.session_id for h in r.held if h.delay is None]
        lines.append(
            f"{r.label}: workflow slots {r.workflow_slots or 'SDK default'}, live workers' workflow tasks timed out "
            f"{r.live_timeouts}, killed worker {r.killed_pid} at {r.kill_at:.1f} s, described in {r.describe_seconds:.1f} s, "
            f"reconciles {r.reconciles}, failed turns {r.turns_failed}, stuck {r.stuck}, elapsed {r.elapsed:.0f} s, "
            f"held with nothing left to do {len(missing)}, run dir {r.run_dir}"
        )
        slowest = sorted((h for h in r.held if h.delay is not None), key=lambda h: -(h.delay or 0))[:3]
        lines += [
            f"  slowest: {h.session_id} {h.kind} -> {h.next_step} after {h.delay:.2f} s ({h.queued:.2f} s of it queued)"
            for h in slowest
        ]
    if len(results) == 2:
        # Per kind: the two runs' kills hit different mixes of held sessions.
        for kind in KINDS:
            base, tuned = ([h.delay for h in r.held if h.kind == kind and h.delay is not None] for r in results)
            if base and tuned and max(tuned) > 0:
                lines.append(
                    f"{kind}: next step max, SDK defaults / agentrt defaults: {max(base):.2f} s / {max(tuned):.2f} s "
                    f"= {max(base) / max(tuned):.1f}x"
                )
    return "\n".join(lines)


def line(result: FleetResult) -> str:
    delays = [h.delay for h in result.held if h.delay is not None]
    p50 = statistics.median(delays) if delays else float("nan")
    return (
        f"fleet sessions={result.sessions} turns={result.sessions * result.turns_per_session} "
        f"completed={result.turns_completed} lost={result.lost} duplicated={result.duplicates} held={len(result.held)} "
        f"next_step_p50={p50:.2f} next_step_max={max(delays, default=float('nan')):.2f}"
    )


def passed(result: FleetResult) -> bool:
    delays = [h.delay for h in result.held if h.delay is not None]  # None: the session had nothing left to do
    return (
        result.lost == 0 and result.duplicates == 0
        and result.turns_completed == result.sessions * result.turns_per_session
        and all(d <= BOUND_SECONDS for d in delays)
    )


async def _provider(run_dir: Path) -> tuple[subprocess.Popen[bytes], int]:
    port_file = run_dir / "provider.port"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with open(run_dir / "provider.log", "ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "bench._fleet_provider", "--port-file", str(port_file)],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=die_with_parent,
        )
    limit = time.monotonic() + 30
    while not port_file.exists() or not port_file.read_text():
        if process.poll() is not None or time.monotonic() > limit:
            raise RuntimeError(f"the loopback model did not start; see {run_dir / 'provider.log'}")
        await asyncio.sleep(0.05)
    return process, int(port_file.read_text())


async def measure(args: argparse.Namespace, workdir: Path) -> list[FleetResult]:
    # A send the client gives up on (its own timeout) leaves the SDK's futures failing unobserved:
    # not the benchmark's business, and thousands of tracebacks otherwise.
    asyncio.get_running_loop().set_exception_handler(_quiet_unretrieved)
    server = DevServer.on_free_ports(workdir)
    await server.start()
    provider, port = await _provider(workdir)
    runs = [("SDK defaults", SDK_STICKY_SECONDS)] if args.sdk_defaults else []
    runs.append(("agentrt defaults", args.sticky_timeout))
    results = []
    try:
        for n, (label, sticky) in enumerate(runs, 1):
            results.append(await run_fleet(
                server.address, port, workdir / f"run{n}", label=label, sessions=args.sessions, turns=args.turns,
                workers=args.workers, sticky_seconds=sticky, heartbeat_seconds=args.heartbeat_timeout,
                kill_fraction=args.kill_fraction, database_url=args.database_url, progress=print_progress,
                think=args.think, seed=args.seed, workflow_slots=args.workflow_slots,
            ))
            (workdir / f"run{n}" / "result.txt").write_text(table(results[-1:]) + "\n" + line(results[-1]) + "\n")
    finally:
        os.killpg(provider.pid, signal.SIGKILL)
        provider.wait()
        server.stop()
    return results


def _range(text: str) -> tuple[float, float]:
    low, _, high = text.partition(",")
    bounds = (float(low), float(high or low))
    if not 0 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"MIN,MAX with 0 <= MIN <= MAX, not {text!r}")
    return bounds


def _quiet_unretrieved(loop: asyncio.AbstractEventLoop, context: dict[str, object]) -> None:
    if "never retrieved" not in str(context.get("message", "")):
        loop.default_exception_handler(context)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--turns", type=int, default=4, help="turns per session")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--kill-fraction", type=float, default=0.3, help="share of the turns completed before the kill")
    parser.add_argument("--sticky-timeout", type=float, default=3.0, help="[worker] sticky_schedule_to_start_seconds")
    parser.add_argument("--heartbeat-timeout", type=float, default=3.0, help="the sessions' heartbeat_timeout_seconds")
    parser.add_argument("--sdk-defaults", action="store_true", help="first run with the SDK's sticky timeout (10 s), as a baseline")
    parser.add_argument(
        "--think", type=_range, default=(60.0, 120.0), metavar="MIN,MAX",
        help="seconds a session pauses before each turn (default 60,120: the offered load stays below what the fleet can do)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--workflow-slots", type=int, default=None, metavar="N",
        help="[worker] max_concurrent_workflow_tasks of every worker (default: the SDK's, 100)",
    )
    parser.add_argument("--database-url", default=None, help="agentrt's store (default: SQLite in the run directory)")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.workers < 2 or args.sessions < 1 or args.turns < 1 or not 0 < args.kill_fraction < 1:
        parser.error("need --workers >= 2, --sessions >= 1, --turns >= 1 and 0 < --kill-fraction < 1")
    quiet_sdk_logs()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="agentrt-fleet-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results = asyncio.run(measure(args, workdir))
    for result in results:
        for problem in result.problems[:20]:
            print(f"problem ({result.label}): {problem}")
    print(table(results))
    print(line(results[-1]), flush=True)
    return 0 if passed(results[-1]) else 1


if __name__ == "__main__":
    sys.stdout.flush()
    code = main()
    sys.stdout.flush()
    os._exit(code)
