"""Streams under chaos: SSE clients of the gateway keep reading while the gateway, the worker and
the Temporal server are killed and restarted, and each ends with exactly its session's stream.

    python -m bench.stream_chaos [--clients 20] [--sessions 4] [--turns 10] [--gateway-kills 10]
                                 [--worker-kills 10] [--server-restarts 10] [--chunks 40]
                                 [--chunk-ms 25] [--drop-seconds 8] [--database-url URL] [--seed N] [--workdir DIR]
                                 [--deadline SECONDS] [--fork-workers]

Starts its own Temporal dev server (free ports, headless), the paced model (a loopback
OpenAI-compatible server streaming every answer as ``--chunks`` chunks, one per ``--chunk-ms``), the
gateway (one port for the whole run) and worker subprocesses; runs ``--sessions`` sessions turn
after turn (at least ``--turns`` each, and until the chaos is over) while ``--clients`` SSE clients
follow their streams (client ``i`` follows session ``i mod --sessions``), and meanwhile SIGKILLs
the gateway ``--gateway-kills`` times and the worker ``--worker-kills`` times, and restarts the
server ``--server-restarts`` times, each at a random moment (see ``bench/_stream_chaos_harness.py``).
A client whose connection breaks, or that drops it on purpose (mean ``--drop-seconds``), resumes
with ``Last-Event-ID``. After the chaos each session is archived, each client reads to
``SessionArchived``, and what each received is compared, turn by turn, with its session's events
and deltas as the store's reader hands them out. Progress goes to stdout; run artefacts (server,
worker, gateway and model logs, the SQLite store) stay under ``--workdir`` (default: a new temporary
directory). The last line is exactly

    stream_chaos clients=C turns=T gateway_kills=G worker_kills=W server_restarts=R gaps=0 duplicates=0 unfinished=0 failed_turns=0

Exit status 0 when no item was missed, doubled, added or reordered, every client finished, every
turn completed, the durable record is whole and every history replays; else 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from bench._cli import print_progress, quiet_sdk_logs
from bench._long_stream_clients import Reference, Tally
from bench._stream_chaos_harness import StreamChaosReport, by_turn, run_stream_chaos

__all__ = ["Reference", "StreamChaosReport", "Tally", "by_turn", "main", "run_stream_chaos"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stream_chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--turns", type=int, default=10, help="turns per session at least (more while the chaos lasts)")
    parser.add_argument("--gateway-kills", type=int, default=10)
    parser.add_argument("--worker-kills", type=int, default=10)
    parser.add_argument("--server-restarts", type=int, default=10)
    parser.add_argument(
        "--worker-freezes", type=int, default=0,
        help="times the worker is stopped (SIGSTOP) past a heartbeat timeout and continued: abandoned attempts that stream on",
    )
    parser.add_argument("--chunks", type=int, default=40, help="chunks per model answer")
    parser.add_argument("--chunk-ms", type=float, default=25.0, help="milliseconds between chunks")
    parser.add_argument("--drop-seconds", type=float, default=8.0, help="mean time before a client drops on purpose (0: never)")
    parser.add_argument("--database-url", default="", help="the store (default: SQLite in the run directory)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--deadline", type=float, default=None, help="overall bound in seconds (default: from the sizes)")
    parser.add_argument(
        "--fork-workers", action="store_true",
        help="fork each worker from a process with its modules imported (less CPU) instead of a fresh interpreter",
    )
    args = parser.parse_args(argv)
    for name in ("clients", "sessions", "turns", "chunks"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1")
    for name in ("gateway_kills", "worker_kills", "server_restarts", "worker_freezes", "chunk_ms", "drop_seconds"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must not be negative")
    quiet_sdk_logs()  # this process is ours: the SDK's retry warnings (server restarts) stay out of the log
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="agentrt-stream-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    report = asyncio.run(
        run_stream_chaos(
            clients=args.clients, sessions=args.sessions, turns=args.turns, gateway_kills=args.gateway_kills,
            worker_kills=args.worker_kills, server_restarts=args.server_restarts, seed=args.seed, workdir=workdir,
            chunks=args.chunks, chunk_ms=args.chunk_ms, drop_seconds=args.drop_seconds, database_url=args.database_url, worker_freezes=args.worker_freezes,
            deadline_seconds=args.deadline, progress=print_progress, fork_workers=args.fork_workers,
        )
    )
    for problem in report.problems:
        print(f"problem: {problem}", flush=True)
    print(report.details(), flush=True)
    print(report.line(), flush=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
