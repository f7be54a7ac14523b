"""bench.chaos_kinds at a tiny size: 2 autonomous tasks and 2 task graphs under 4 worker SIGKILLs
and a server restart all complete (one of each stops at its small budget instead), with nothing
applied twice, lost, left stuck, failing to replay or spent past a budget by more than one call; 2 delegating sessions and 2 sessions calling a stdio MCP server, under worker SIGKILLs and
SIGKILLs of the MCP server mid-call, complete too, with no orphaned child, no leaked server
process and no call applied but reported failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import chaos_kinds

pytestmark = pytest.mark.runs_first  # long: handed out first (tests/conftest.py)

LINE = (
    "chaos_kinds tasks=2 graphs=2 delegations=0 mcp=0 kills=4 mcp_kills=0 server_restarts=1 "
    "task_duplicates=0 task_lost=0 task_stuck=0 task_budget_overspent=0 "
    "graph_duplicates=0 graph_lost=0 graph_stuck=0 graph_budget_overspent=0 "
    "delegation_duplicates=0 delegation_lost=0 delegation_stuck=0 delegation_orphaned=0 "
    "mcp_failed=0 mcp_duplicates=0 mcp_lost=0 mcp_stuck=0 mcp_leaked=0 mcp_applied_but_failed=0 replay_failures=0"
)
SESSION_KINDS_LINE = (
    "chaos_kinds tasks=0 graphs=0 delegations=2 mcp=2 kills=2 mcp_kills=3 server_restarts=0 "
    "task_duplicates=0 task_lost=0 task_stuck=0 task_budget_overspent=0 "
    "graph_duplicates=0 graph_lost=0 graph_stuck=0 graph_budget_overspent=0 "
    "delegation_duplicates=0 delegation_lost=0 delegation_stuck=0 delegation_orphaned=0 "
    "mcp_failed=0 mcp_duplicates=0 mcp_lost=0 mcp_stuck=0 mcp_leaked=0 mcp_applied_but_failed=0 replay_failures=0"
)


def show(report: chaos_kinds.KindsReport) -> None:
    print(report.table())
    print(report.details())
    for problem in report.problems:
        print("  problem:", problem)


async def test_tasks_and_graphs_complete_once_each_under_worker_kills_and_a_server_restart(tmp_path: Path) -> None:
    report = await chaos_kinds.run_chaos_kinds(
        tasks=2, graphs=2, kills=4, server_restarts=1, seed=3, workdir=tmp_path, deadline_seconds=240,
        progress=print, fork_workers=True, budgets=1,
    )
    show(report)

    assert report.line() == LINE, report.problems
    assert report.ok
    # One task and one graph of each pair have a small budget: each ends at it (or completes
    # within it), its spend past the budget by no more than one call (budget_overspent=0 above).
    for kind in (report.tasks, report.graphs):
        assert (kind.started, kind.completed + kind.budget_stopped, kind.failed, kind.budgeted) == (2, 2, 0, 1), report.problems
    # Every task ran 2 or 3 sessions and every graph 3 or 4 nodes, each as a child session.
    assert 4 <= report.tasks.child_sessions <= 6, report.problems
    assert 6 <= report.graphs.child_sessions, report.problems
    assert report.reconnect_failures == 0 and report.worker_exits == 0, report.problems


async def test_delegating_and_mcp_sessions_complete_once_each_under_worker_and_mcp_server_kills(tmp_path: Path) -> None:
    report = await chaos_kinds.run_chaos_kinds(
        tasks=0, graphs=0, delegations=2, mcp=2, kills=2, mcp_kills=3, server_restarts=0, seed=5, workdir=tmp_path,
        deadline_seconds=240, progress=print, fork_workers=True,
    )
    show(report)

    # The MCP server is killed only with a call in flight: up to 3 times while the MCP sessions run.
    assert 1 <= report.mcp_kills <= 3, report.problems
    assert report.line() == SESSION_KINDS_LINE.replace("mcp_kills=3", f"mcp_kills={report.mcp_kills}"), report.problems
    assert report.ok
    for kind in (report.delegations, report.mcp):
        assert (kind.started, kind.completed, kind.failed) == (2, 2, 0), report.problems
    # Each delegating session started 1 or 2 children; each MCP server kill hit a call in flight,
    # which its session then reconciled (an outcome it could not know) instead of failing it.
    assert 2 <= report.delegations.child_sessions <= 4, report.problems
    assert report.mcp.reconciles >= report.mcp_kills, report.problems
