"""What ``bench.chaos_kinds`` reports: counts per kind of workflow (``KindCounts``) and the run's
chaos and findings (``KindsReport``: a table per kind and the last line)."""

from __future__ import annotations

from dataclasses import dataclass, field

KINDS = ("tasks", "graphs")


@dataclass
class KindCounts:
    """What one kind's runs came to.

    - ``started``: runs the harness started; ``completed`` / ``failed``: runs that ended so
      (``failed`` includes ``cancelled`` and, for graphs, ``rejected``).
    - ``stuck``: runs not ended within the bound (``awaiting_reconcile`` of them had a child
      session waiting for a reconcile answer at the end).
    - ``duplicates``: distinct lines that occur more than once in a run's file (an effect applied twice).
    - ``lost``: one per item: a completed task without each of its sessions' lines in its file
      exactly once; a completed graph without each node's line (of the attempt that completed)
      exactly once; a session the task records as completed, or a node the graph records as
      completed, whose line is not in the file; and the durable-record violations of each child
      session (``count_lost``: transcript positions, stored events, completed calls of
      ``chaos.append`` without their line, tool calls without exactly one final result).
    - ``replay_failures``: histories (the run's workflow and its child sessions') that do not
      replay, or could not be fetched.
    - ``reconciles``: reconcile requests answered in the run's child sessions; ``child_sessions``:
      child sessions the runs started.
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


@dataclass
class KindsReport:
    """A run of ``run_chaos_kinds``: counts per kind (``tasks``, ``graphs``; see ``KindCounts``),
    the chaos done (``kills``, ``server_restarts``, the phase each kill hit), worker starts and
    exits, reconnect failures, plans approved by hand (``plan_approvals``: a plan ``auto`` left
    waiting), and one line per finding in ``problems``."""

    tasks: KindCounts = field(default_factory=KindCounts)
    graphs: KindCounts = field(default_factory=KindCounts)
    kills: int = 0
    server_restarts: int = 0
    kill_phases: dict[str, int] = field(default_factory=dict)
    worker_starts: int = 0
    worker_exits: int = 0
    reconnect_failures: int = 0
    plan_approvals: int = 0
    elapsed_seconds: float = 0.0
    run_dir: str = ""
    problems: list[str] = field(default_factory=list)

    @property
    def replay_failures(self) -> int:
        return self.tasks.replay_failures + self.graphs.replay_failures

    @property
    def ok(self) -> bool:
        counts = [self.replay_failures]
        for kind in (self.tasks, self.graphs):
            counts += [kind.duplicates, kind.lost, kind.stuck]
        return not any(counts)

    def line(self) -> str:
        t, g = self.tasks, self.graphs
        return (
            f"chaos_kinds tasks={t.started} graphs={g.started} kills={self.kills} server_restarts={self.server_restarts} "
            f"task_duplicates={t.duplicates} task_lost={t.lost} task_stuck={t.stuck} "
            f"graph_duplicates={g.duplicates} graph_lost={g.lost} graph_stuck={g.stuck} "
            f"replay_failures={self.replay_failures}"
        )

    def table(self) -> str:
        columns = (
            "started", "completed", "failed", "stuck", "awaiting_reconcile", "duplicates", "lost",
            "replay_failures", "reconciles", "child_sessions",
        )
        rows = [("kind", *columns)]
        for name in KINDS:
            counts = getattr(self, name)
            rows.append((name, *(str(getattr(counts, c)) for c in columns)))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        return "\n".join("  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))) for row in rows)

    def details(self) -> str:
        phases = " ".join(f"{k}={v}" for k, v in sorted(self.kill_phases.items()))
        return (
            f"worker_starts={self.worker_starts} worker_exits={self.worker_exits} "
            f"reconnect_failures={self.reconnect_failures} plan_approvals={self.plan_approvals} "
            f"kill_phases[{phases}] elapsed={self.elapsed_seconds:.1f}s run_dir={self.run_dir}"
        )
