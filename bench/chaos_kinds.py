"""Chaos for every kind: tasks, graphs, delegations and MCP calls keep their promises while workers, MCP servers and the server die.

    python -m bench.chaos_kinds [--tasks 10] [--graphs 10] [--delegations 10] [--mcp 10]
                                [--budgets 3] [--kills 40] [--mcp-kills 20] [--server-restarts 2]
                                [--seed N] [--workdir DIR] [--deadline SECONDS] [--risk effectful]
                                [--fork-workers]

``bench.chaos`` covers sessions; this covers the other kinds of work. It starts its own
Temporal dev server (free ports, headless, SQLite file) and worker subprocesses
(``bench._chaos_worker``: the effectful tool ``chaos.append`` writes one line to a file through
the effect ledger), then starts ``--tasks`` autonomous tasks (2 or 3 sessions each, the acceptance
reviewer passing only the last; a durable timer of 3-8 s between sessions) and ``--graphs`` task
graphs (a planned graph of 3 or 4 nodes with dependencies, two of them able to run side by side,
the plan approved automatically, each node's child session reviewed and passed), their starts
spread over the time the kills take. Every task session and graph node appends its own line
(``task<i> session<k>``, ``graph<i> node<id>``). ``--delegations`` sessions each delegate to 1 or 2
child sessions (``delegate``, waiting), each child appending ``deleg<i> child<k>``; ``--mcp``
sessions each call ``chaosmcp.append`` of a stdio MCP server (``bench/_chaos_mcp_server.py``,
effectful) 1 to 4 times, each call appending ``mcp<i> c<j>``, while the harness SIGKILLs the
server's process ``--mcp-kills`` times with a call in flight (``bench/_chaos_session_kinds.py``;
half of the MCP sessions start once the worker kills are over, so that their calls reach a server). Meanwhile the worker's process group is SIGKILLed
``--kills`` times and the server restarted ``--server-restarts`` times, as in ``bench.chaos``
(``bench/_chaos_harness.py``). Reconcile requests in child sessions (an effect claimed before a
kill, outcome unknown) are answered like an operator from the file's contents.

When the chaos stops, every task and graph must end within the bound. Counted per kind
(``bench/_chaos_kinds_harness.py``, ``KindCounts``): completed, failed, stuck (not ended), duplicated
effects (a line more than once in its file), lost work (a completed task or graph whose lines are
not each in the file exactly once, a session or node recorded as completed without its line, a
delegating turn completed without each child's answer, a session's durable record broken), replay
failures of every history; for delegations also orphaned children (running after their parent's
turn ended), for MCP sessions leaked server processes and calls applied but reported failed.
``--budgets B`` of the tasks, and of the graphs, get a small budget (fewer tool calls than they
make, a few model calls' worth of tokens; a budgeted graph runs one node at a time): they end at
it (a task stopped at ``budget_exceeded`` is cancelled, a graph fails ``budget_exceeded``), and
``budget_overspent`` counts those whose spend passed the budget by more than the one call the
rule allows (``bench/_chaos_budgets.py``, docs/autonomous-tasks.md#budgets). Progress goes to stdout, then a table per kind; run artefacts (server and
worker logs, scripts, workspaces, database, histories) stay under ``--workdir`` (default: a new
temporary directory). The last line is exactly

    chaos_kinds tasks=N graphs=M delegations=D mcp=P kills=K mcp_kills=Q server_restarts=R task_duplicates=.. task_lost=.. task_stuck=.. task_budget_overspent=.. graph_duplicates=.. graph_lost=.. graph_stuck=.. graph_budget_overspent=.. delegation_duplicates=.. delegation_lost=.. delegation_stuck=.. delegation_orphaned=.. mcp_failed=.. mcp_duplicates=.. mcp_lost=.. mcp_stuck=.. mcp_leaked=.. mcp_applied_but_failed=.. replay_failures=..

Exit status 0 when every one of those counts (and the delegations' failed turns) is zero, else 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

from bench._chaos_budgets import Overspend, largest_call, overspend, small_budget
from bench._chaos_kinds_harness import KindCounts, KindsReport, run_chaos_kinds
from bench._cli import print_progress, quiet_sdk_logs

__all__ = ["KindCounts", "KindsReport", "Overspend", "largest_call", "main", "overspend", "run_chaos_kinds", "small_budget"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.chaos_kinds", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--tasks", type=int, default=10, help="autonomous tasks to run, 2 or 3 sessions each (default 10)")
    parser.add_argument("--graphs", type=int, default=10, help="task graphs to run, 3 or 4 nodes each (default 10)")
    parser.add_argument("--delegations", type=int, default=10, help="sessions delegating to 1 or 2 child sessions (default 10)")
    parser.add_argument("--mcp", type=int, default=10, help="sessions calling the stdio MCP server 1 to 4 times (default 10)")
    parser.add_argument("--mcp-kills", type=int, default=20, help="SIGKILLs of the MCP server's processes (default 20)")
    parser.add_argument(
        "--budgets", type=int, default=3,
        help="of the tasks, and of the graphs, this many get a small budget and are checked against it (default 3)",
    )
    parser.add_argument("--kills", type=int, default=40, help="SIGKILLs of the worker's process group (default 40)")
    parser.add_argument("--server-restarts", type=int, default=2, help="stops (SIGKILL or SIGTERM) and starts of the Temporal server (default 2)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the scripts, start times and kill moments (default 1)")
    parser.add_argument("--workdir", type=Path, default=None, help="where the run directory goes (default: a new temporary directory)")
    parser.add_argument(
        "--deadline", type=float, default=None,
        help="overall bound in seconds (default: 180 + 4 per kill + 20 per restart + 3 per task or graph)",
    )
    parser.add_argument(
        "--risk", default="effectful",
        help="risk class of chaos.append (default effectful; idempotent: no effect ledger, expect duplicates)",
    )
    parser.add_argument(
        "--fork-workers", action="store_true",
        help="fork each worker from a process with its modules imported (less CPU) instead of a fresh interpreter",
    )
    args = parser.parse_args(argv)
    quiet_sdk_logs()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="agentrt-chaos-kinds-"))
    workdir.mkdir(parents=True, exist_ok=True)
    report = asyncio.run(
        run_chaos_kinds(
            tasks=args.tasks,
            graphs=args.graphs,
            kills=args.kills,
            server_restarts=args.server_restarts,
            seed=args.seed,
            workdir=workdir,
            deadline_seconds=args.deadline,
            progress=print_progress,
            fork_workers=args.fork_workers,
            append_risk=args.risk,
            delegations=args.delegations,
            mcp=args.mcp,
            mcp_kills=args.mcp_kills,
            budgets=args.budgets,
        )
    )
    for problem in report.problems:
        print(f"problem: {problem}", flush=True)
    print(report.table(), flush=True)
    print(report.details(), flush=True)
    print(report.line(), flush=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
