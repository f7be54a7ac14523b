"""What ``bench.chaos_kinds`` reports: counts per kind of workflow (``KindCounts``) and the run's
chaos and findings (``KindsReport``: a table per kind and the last line)."""

from __future__ import annotations

from dataclasses import dataclass, field

KINDS = ("tasks", "graphs", "delegations", "mcp")


@dataclass
class KindCounts:
    """What one kind's runs came to.

    - ``started``: runs the harness started; ``completed`` / ``failed``: runs that ended so
      (``failed`` includes ``cancelled`` and, for graphs, ``rejected``; for the session kinds,
      ``delegations`` and ``mcp``, a run is one turn and ``failed`` any outcome but ``completed``).
    - ``stuck``: runs not ended within the bound (``awaiting_reconcile`` of them had a session
      waiting for a reconcile answer at the end).
    - ``duplicates``: distinct lines that occur more than once in a run's file (an effect applied twice).
    - ``lost``: one per item: a completed task without each of its sessions' lines in its file
      exactly once; a completed graph without each node's line (of the attempt that completed)
      exactly once; a session the task records as completed, or a node the graph records as
      completed, whose line is not in the file; a delegating turn that completed without each
      child's answer in its ``delegate`` result or each child's line in the file exactly once;
      and the durable-record violations of each session (``count_lost``: the user message,
      transcript positions, stored events, completed calls of the counted tool without their
      line, tool calls without exactly one final result, one ``TurnEnded`` per ended turn).
    - ``replay_failures``: histories (the run's workflow and its child sessions') that do not
      replay, or could not be fetched.
    - ``reconciles``: reconcile requests answered in the run's sessions; ``child_sessions``:
      child sessions the runs started (delegated sessions, for ``delegations``).
    - ``orphaned`` (``delegations``): delegated sessions still running after their parent's
      turn ended. ``leaked`` (``mcp``): MCP server processes alive 10 s after the last worker
      died. ``call_errors``: tool calls that ended in an error result (for ``mcp``: mostly the
      server killed mid-call, ``McpServerUnavailable``; not a fault, the model is told).
      ``applied_but_failed`` (``mcp``): calls that ended failed although their effect is in the
      file (an outcome the session did not know, told to the model as a failure, which a model
      answers by calling again: a duplicate in the making).
    - ``budgeted`` (``tasks``, ``graphs``): runs given a small budget; ``budget_stopped``: those
      that ended at it (a task stopped at ``budget_exceeded``, then cancelled by the harness; a
      graph failed ``budget_exceeded``), not counted ``failed``; ``overspent``: those whose spend
      passed their budget by more than one call (``bench/_chaos_budgets.py``).
    """

    started: int = 0
    completed: int = 0
    failed: int = 0
    stuck: int = 0
    awaiting_reconcile: int = 0
    duplicates: int = 0
    lost: int = 0
    replay_failures: int = 0
    reconciles: int = 0
    child_sessions: int = 0
    orphaned: int = 0
    leaked: int = 0
    call_errors: int = 0
    applied_but_failed: int = 0
    budgeted: int = 0
    budget_stopped: int = 0
    overspent: int = 0


@dataclass
class KindsReport:
    """A run of ``run_chaos_kinds``: counts per kind (``tasks``, ``graphs``, ``delegations``,
    ``mcp``; see ``KindCounts``), the chaos done (``kills``, ``server_restarts``, the phase each
    kill hit; ``mcp_kills`` of the MCP server's processes and the phase of the call each hit),
    worker starts and exits, reconnect failures, plans approved by hand (``plan_approvals``: a
    plan ``auto`` left waiting), and one line per finding in ``problems``."""

    tasks: KindCounts = field(default_factory=KindCounts)
    graphs: KindCounts = field(default_factory=KindCounts)
    delegations: KindCounts = field(default_factory=KindCounts)
    mcp: KindCounts = field(default_factory=KindCounts)
    kills: int = 0
    server_restarts: int = 0
    mcp_kills: int = 0
    kill_phases: dict[str, int] = field(default_factory=dict)
    mcp_kill_phases: dict[str, int] = field(default_factory=dict)
    worker_starts: int = 0
    worker_exits: int = 0
    reconnect_failures: int = 0
    plan_approvals: int = 0
    elapsed_seconds: float = 0.0
    run_dir: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def replay_failures(self) -> int:
        return sum(getattr(self, name).replay_failures for name in KINDS)

    @property
    def ok(self) -> bool:
        """Zeros where zeros are the bar: duplicates, lost work, stuck runs, budgets overspent and
        replay failures of every kind; failed turns and orphaned children of delegations; failed turns, leaked
        processes and calls applied but reported failed of the MCP sessions."""
        counts = [self.replay_failures]
        for name in KINDS:
            kind = getattr(self, name)
            counts += [kind.duplicates, kind.lost, kind.stuck, kind.overspent]
        counts += [self.delegations.failed, self.delegations.orphaned, self.mcp.failed, self.mcp.leaked, self.mcp.applied_but_failed]
        return not any(counts)

    def line(self) -> str:
        t, g, d, m = self.tasks, self.graphs, self.delegations, self.mcp
        return (
            f"chaos_kinds tasks={t.started} graphs={g.started} delegations={d.started} mcp={m.started} "
            f"kills={self.kills} mcp_kills={self.mcp_kills} server_restarts={self.server_restarts} "
            f"task_duplicates={t.duplicates} task_lost={t.lost} task_stuck={t.stuck} task_budget_overspent={t.overspent} "
            f"graph_duplicates={g.duplicates} graph_lost={g.lost} graph_stuck={g.stuck} graph_budget_overspent={g.overspent} "
            f"delegation_duplicates={d.duplicates} delegation_lost={d.lost} delegation_stuck={d.stuck} "
            f"delegation_orphaned={d.orphaned} "
            f"mcp_failed={m.failed} mcp_duplicates={m.duplicates} mcp_lost={m.lost} mcp_stuck={m.stuck} mcp_leaked={m.leaked} mcp_applied_but_failed={m.applied_but_failed} "
            f"replay_failures={self.replay_failures}"
        )

    def table(self) -> str:
        columns = (
            "started", "completed", "failed", "stuck", "awaiting_reconcile", "duplicates", "lost",
            "replay_failures", "reconciles", "child_sessions", "orphaned", "leaked", "call_errors", "applied_but_failed",
            "budgeted", "budget_stopped", "overspent",
        )
        headers = (
            "started", "completed", "failed", "stuck", "awaiting_rec", "duplicates", "lost",
            "replay_fail", "reconciles", "children", "orphaned", "leaked", "call_errors", "applied_failed",
            "budgeted", "budget_stop", "overspent",
        )
        rows = [("kind", *headers)]
        for name in KINDS:
            counts = getattr(self, name)
            rows.append((name, *(str(getattr(counts, c)) for c in columns)))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))) for row in rows)

    def details(self) -> str:
        phases = " ".join(f"{k}={v}" for k, v in sorted(self.kill_phases.items()))
        mcp_phases = " ".join(f"{k}={v}" for k, v in sorted(self.mcp_kill_phases.items()))
        return (
            f"worker_starts={self.worker_starts} worker_exits={self.worker_exits} "
            f"reconnect_failures={self.reconnect_failures} plan_approvals={self.plan_approvals} "
            f"kill_phases[{phases}] mcp_kill_phases[{mcp_phases}] elapsed={self.elapsed_seconds:.1f}s run_dir={self.run_dir}"
        )
