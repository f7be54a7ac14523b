"""What ``bench.idle`` measured and how it prints it: checkpoints of idle sessions, wakes, replays."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from bench._bench_worker import WorkerSettings
from bench.concurrency import percentile

KIB = 1024


@dataclass
class Footprint:
    """The worker, the dev server and both databases at one moment."""

    worker_rss_mib: float
    worker_peak_mib: float
    server_rss_mib: float
    server_db_bytes: int
    store_bytes: int


@dataclass
class Checkpoint:
    """``sessions`` idle sessions (each after one turn; ``failed`` of them did not complete it),
    ``seconds`` since the first start; ``load`` the machine's load average then (1, 5, 15 minutes)."""

    sessions: int
    failed: int
    seconds: float
    footprint: Footprint
    load: str = ""


@dataclass
class Wake:
    """One message to an idle session, as the client saw it (seconds from just before the send):
    ``accepted`` the send returned, ``first_token`` the first delta of the turn was read,
    ``end`` the turn's outcome was known. ``queue``/``run``: the first workflow task the message
    caused, from history: scheduled to started, started to completed (seconds)."""

    group: str
    session_index: int
    status: str
    accepted: float = math.nan
    first_token: float = math.nan
    end: float = math.nan
    queue: float = math.nan
    run: float = math.nan
    detail: str = ""


@dataclass
class Replays:
    """A fresh worker with a cache of ``cache`` after ``touched`` idle sessions were each asked a
    query (so replayed into its cache): its RSS before and after."""

    cache: int
    touched: int
    seconds: float
    rss_before_mib: float
    rss_after_mib: float
    failed: int = 0


@dataclass
class IdleReport:
    settings: WorkerSettings
    sessions: int
    start_concurrency: int
    baseline: Footprint | None = None
    checkpoints: list[Checkpoint] = field(default_factory=list)
    wakes: list[Wake] = field(default_factory=list)
    replays: list[Replays] = field(default_factory=list)
    load_before: str = ""
    load_after: str = ""
    poll_seconds: float = 0.1

    @property
    def cache(self) -> int:
        return self.settings.max_cached_workflows

    @property
    def started(self) -> int:
        last = self.checkpoints[-1] if self.checkpoints else None
        return last.sessions - last.failed if last else 0

    def group(self, name: str) -> list[Wake]:
        return [w for w in self.wakes if w.group == name]

    def wake_ms(self, group: str, what: str, q: float) -> float:
        values = [getattr(w, what) for w in self.group(group) if w.status == "completed"]
        return 1000 * percentile([v for v in values if not math.isnan(v)], q)

    def per_session(self, attribute: str, checkpoint: Checkpoint | None = None) -> float:
        """Bytes of ``attribute`` (``server_db_bytes``, ``store_bytes``) grown per session from the
        baseline to ``checkpoint`` (default the last)."""
        point = checkpoint or (self.checkpoints[-1] if self.checkpoints else None)
        if point is None or self.baseline is None or point.sessions == 0:
            return math.nan
        return (getattr(point.footprint, attribute) - getattr(self.baseline, attribute)) / point.sessions

    def rss_growth_kib(self) -> tuple[float, float]:
        """Worker RSS grown per session (KiB) up to the first checkpoint at or past the cache size,
        and per session after it (sessions that no longer stay in the cache)."""
        if self.baseline is None or not self.checkpoints:
            return math.nan, math.nan
        full = next((c for c in self.checkpoints if c.sessions >= self.cache), self.checkpoints[-1])
        filling = (full.footprint.worker_rss_mib - self.baseline.worker_rss_mib) * KIB / full.sessions
        last = self.checkpoints[-1]
        beyond = math.nan
        if last.sessions > full.sessions:
            beyond = (last.footprint.worker_rss_mib - full.footprint.worker_rss_mib) * KIB / (last.sessions - full.sessions)
        return filling, beyond

    @property
    def passed(self) -> bool:
        every_wake = all(w.status == "completed" for w in self.wakes)
        return bool(self.checkpoints) and self.checkpoints[-1].failed == 0 and every_wake

    def settings_text(self) -> str:
        return "\n".join([
            f"worker: {self.settings.describe()}",
            f"store: SQLite {self.settings.database_url}",
            (
                f"workload: {self.sessions} sessions, each one turn (one fs.read, then a short answer) and then idle; "
                f"at most {self.start_concurrency} first turns at once; deltas read by AgentClient.deltas "
                f"(poll {self.poll_seconds:g} s); machine: {os.cpu_count()} CPUs shared by server, worker and client"
            ),
        ])

    def table(self) -> str:
        lines = [
            f"{'sessions':>8}{'failed':>7}{'wall s':>8}{'worker RSS MiB':>15}{'peak MiB':>9}{'server RSS MiB':>15}"
            f"{'server db MB':>13}{'store MB':>9}{'db B/sess':>10}{'store B/sess':>13}  load average"
        ]
        rows = ([(None, self.baseline)] if self.baseline else []) + [(c, c.footprint) for c in self.checkpoints]
        for point, f in rows:
            head = f"{'0':>8}{'':>7}{'':>8}" if point is None else f"{point.sessions:>8}{point.failed:>7}{point.seconds:>8.0f}"
            db = "" if point is None else f"{self.per_session('server_db_bytes', point):>10,.0f}"
            store = "" if point is None else f"{self.per_session('store_bytes', point):>13,.0f}"
            lines.append(
                f"{head}{f.worker_rss_mib:>15.0f}{f.worker_peak_mib:>9.0f}{f.server_rss_mib:>15.0f}"
                f"{f.server_db_bytes / 1e6:>13.1f}{f.store_bytes / 1e6:>9.1f}{db:>10}{store:>13}"
                f"  {self.load_before if point is None else point.load}"
            )
        filling, beyond = self.rss_growth_kib()
        full = next((c.sessions for c in self.checkpoints if c.sessions >= self.cache), self.sessions)
        lines.append(
            f"worker RSS growth per session: {filling:.0f} KiB up to {full} sessions (cache {self.cache}), "
            f"{beyond:.1f} KiB after"
        )
        lines.extend(self._wake_lines())
        for r in self.replays:
            lines.append(
                f"fresh worker, cache {r.cache}: {r.touched} idle sessions replayed by a query in {r.seconds:.0f} s"
                f"{f' ({r.failed} failed)' if r.failed else ''}: RSS {r.rss_before_mib:.0f} -> {r.rss_after_mib:.0f} MiB"
            )
        if len(self.replays) == 2 and self.replays[0].cache != self.replays[1].cache:
            big, small = sorted(self.replays, key=lambda r: -r.cache)
            kept = min(big.cache, big.touched) - min(small.cache, small.touched)
            if kept > 0:
                each = (big.rss_after_mib - small.rss_after_mib) * KIB / kept
                lines.append(f"RSS per cached idle session (the two replay workers' difference): {each:.0f} KiB")
        lines.append(f"load average after: {self.load_after}")
        return "\n".join(lines)

    def _wake_lines(self) -> list[str]:
        if not self.wakes:
            return []
        lines = [
            f"{'wake':<10}{'done':>6}{'accepted p50/p95 ms':>21}{'first token p50/p95 ms':>24}{'end p50/p95 ms':>17}"
            f"{'wft queue ms':>14}{'wft run ms':>12}"
        ]
        for group in ("evicted", "cached"):
            wakes = self.group(group)
            done = sum(1 for w in wakes if w.status == "completed")
            pairs = [f"{self.wake_ms(group, what, 50):.0f}/{self.wake_ms(group, what, 95):.0f}"
                     for what in ("accepted", "first_token", "end")]
            lines.append(
                f"{group:<10}{f'{done}/{len(wakes)}':>6}{pairs[0]:>21}{pairs[1]:>24}{pairs[2]:>17}"
                f"{_number(self.wake_ms(group, 'queue', 50)):>14}{_number(self.wake_ms(group, 'run', 50)):>12}"
            )
        failures = [w for w in self.wakes if w.status != "completed"]
        if failures:
            lines.append(f"{len(failures)} wake(s) not completed, e.g. {failures[0].status}: {failures[0].detail}")
        return lines

    def line(self) -> str:
        rss = " ".join(f"rss_mib_at_{c.sessions}={c.footprint.worker_rss_mib:.0f}" for c in self.checkpoints)
        return (
            f"idle sessions={self.sessions} cache={self.cache} {rss} "
            f"wake_first_token_p95_ms={_number(self.wake_ms('evicted', 'first_token', 95))} "
            f"wake_end_p95_ms={_number(self.wake_ms('evicted', 'end', 95))} "
            f"cached_first_token_p95_ms={_number(self.wake_ms('cached', 'first_token', 95))} "
            f"server_db_bytes_per_session={_number(self.per_session('server_db_bytes'))} "
            f"store_bytes_per_session={_number(self.per_session('store_bytes'))}"
        )


def _number(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.0f}"
