"""The big chaos run, by hand: sessions keep their promises while workers and the server die.

    python -m bench.chaos [--sessions 50] [--turns 10] [--kills 200] [--server-restarts 10]
                          [--seed N] [--workdir DIR] [--deadline SECONDS] [--risk effectful]
                          [--fork-workers]

Starts its own Temporal dev server (free ports, headless) and worker subprocesses, runs
``--sessions`` sessions of ``--turns`` turns each while the worker is SIGKILLed ``--kills``
times and the server restarted ``--server-restarts`` times (see ``bench/_chaos_harness.py``
for where the kills land and what is checked). A kill takes about 4 s of wall time (a
random 0.3-3 s wait plus a worker start), so pick ``--turns`` such that the sessions
are still working when the last kill lands; the log says when they are not. Progress
goes to stdout; run artefacts (server and worker logs, scripts, workspaces, databases)
stay under ``--workdir`` (default: a new temporary directory). The last line is exactly

    chaos sessions=N kills=K server_restarts=R turns_completed=T reconciles=C duplicates=D lost=L stuck=S

Each worker is a fresh ``python -m bench._chaos_worker``, as a restarted worker is in production:
it imports everything anew, competing for the CPU with the server and the other processes while
it does. That is the more faithful of the two ways; ``--fork-workers`` forks each worker from one
process that imported the worker's modules once (``bench/_chaos_zygote.py``, what the CI run
uses): about two CPU-seconds less per worker start. A forked worker starts after a wait as long as
the imports took, so the queue is without a worker after a kill about as long either way.

Exit status 0 when duplicates, lost, stuck and replay failures are all zero, else 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from bench._chaos_harness import run_chaos
from bench._chaos_zygote import WorkerForks
from bench._cli import print_progress, quiet_sdk_logs
from bench._reconciles import Reconciler, file_written, is_reconcile, line_in_file
from bench._turn_checks import workflow_events

__all__ = ["Reconciler", "WorkerForks", "file_written", "is_reconcile", "line_in_file", "main", "run_chaos", "workflow_events"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument(
        "--turns", type=int, default=10, help="turns per session (enough that the sessions outlast the kills)"
    )
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--server-restarts", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--risk", default="effectful", help="risk class of chaos.append (idempotent: no effect ledger, expect duplicates)"
    )
    parser.add_argument("--deadline", type=float, default=None, help="overall bound in seconds (default: from the sizes)")
    parser.add_argument(
        "--fork-workers", action="store_true",
        help="fork each worker from a process with its modules imported (less CPU) instead of a fresh interpreter",
    )
    args = parser.parse_args(argv)
    quiet_sdk_logs()  # this process is ours: the SDK's retry warnings (server restarts) stay out of the log
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="agentrt-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    report = asyncio.run(
        run_chaos(
            sessions=args.sessions,
            turns_per_session=args.turns,
            kills=args.kills,
            server_restarts=args.server_restarts,
            seed=args.seed,
            workdir=workdir,
            deadline_seconds=args.deadline,
            progress=print_progress,
            append_risk=args.risk,
            fork_workers=args.fork_workers,
        )
    )
    for problem in report.problems:
        print(f"problem: {problem}", flush=True)
    print(report.details(), flush=True)
    print(report.line(), flush=True)
    ok = report.duplicates == 0 and report.lost == 0 and report.stuck == 0 and report.replay_failures == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
