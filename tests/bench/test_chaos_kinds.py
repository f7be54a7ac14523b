"""bench.chaos_kinds at a tiny size: 2 autonomous tasks and 2 task graphs under 4 worker SIGKILLs
and a server restart all complete, with nothing applied twice, lost, left stuck or failing to replay."""

from __future__ import annotations

from pathlib import Path

from bench import chaos_kinds

LINE = (
    "chaos_kinds tasks=2 graphs=2 kills=4 server_restarts=1 task_duplicates=0 task_lost=0 task_stuck=0 "
    "graph_duplicates=0 graph_lost=0 graph_stuck=0 replay_failures=0"
)


async def test_tasks_and_graphs_complete_once_each_under_worker_kills_and_a_server_restart(tmp_path: Path) -> None:
    report = await chaos_kinds.run_chaos_kinds(
        tasks=2, graphs=2, kills=4, server_restarts=1, seed=3, workdir=tmp_path, deadline_seconds=110,
        progress=print, fork_workers=True,
    )
    print(report.table())
    print(report.details())
    for problem in report.problems:
        print("  problem:", problem)

    assert report.line() == LINE, report.problems
    assert report.ok
    for kind in (report.tasks, report.graphs):
        assert (kind.started, kind.completed, kind.failed) == (2, 2, 0), report.problems
    # Every task ran 2 or 3 sessions and every graph 3 or 4 nodes, each as a child session.
    assert 4 <= report.tasks.child_sessions <= 6, report.problems
    assert 6 <= report.graphs.child_sessions, report.problems
    assert report.reconnect_failures == 0 and report.worker_exits == 0, report.problems
