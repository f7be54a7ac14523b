"""The store goes away mid-load: its timeline, and that no turn fails, nothing is lost and no effect
is applied twice.

    python -m bench.store_outage                          # PostgreSQL stopped for 30 s, then SQLite made unwritable
    python -m bench.store_outage --store postgresql --outage 30 --sessions 10
    python -m bench.store_outage --help

Runs ``bench.soak``'s stack and sessions (a dev server, an ``agentrt worker``, the gateway; each
session sends turns of one sandboxed ``shell.run`` and one effectful ``fs.write``, and a client of
the gateway follows its stream) with no worker kills. Its disruption is the store:

- ``postgresql``: the store is a PostgreSQL server of the bench's own (``initdb`` and ``pg_ctl`` on
  a free port, ``bench.private_pg``), stopped (``pg_ctl stop -m fast``) ``--before`` seconds into
  the load and started again ``--outage`` seconds later;
- ``sqlite``: the store is a SQLite file whose database and WAL are made immutable (``chattr +i``:
  unwritable even for root) for ``--outage`` seconds; reads still answer.

Every second while the store is away and until no call waits, every session's waits are read
(``AgentClient.sessions.waits``: the calls waiting for the store, ``store_unavailable``). The
timeline prints when the store went, when the first call waited, the most sessions waiting at
once, when the store came back, when the last wait ended and when the first turn completed after
it. The last line of each store is exactly

    store_outage store=S sessions=N outage_s=O turns=T failed=F lost=L duplicated=D sessions_waiting_max=W first_wait_s=A last_wait_after_return_s=B first_turn_after_return_s=C stream_duplicates=X followers_ended=E/N

(seconds from the store going, or coming back). Exit status 0 when, for every store, no turn
failed, none was lost or duplicated, the streams had no duplicate and every follower ended.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from agentrt.client import AgentClient
from bench._long_stream_stack import Stack
from bench.private_pg import PrivatePostgres
from bench.soak import Report, Soak, run_soak

STORES = ("postgresql", "sqlite")
WATCH_SECONDS = 1.0  # between two readings of every session's waits
QUIET_SECONDS = 5.0  # the watch ends once no call has waited this long after the store came back


@dataclass
class Timeline:
    """Seconds since the load began at which each thing happened (None: it did not)."""

    store: str
    marks: list[tuple[float, str]] = field(default_factory=list)
    gone: float | None = None
    back: float | None = None
    first_wait: float | None = None
    last_wait: float | None = None
    waiting_max: int = 0
    first_turn_after: float | None = None

    def mark(self, at: float, text: str) -> None:
        self.marks.append((at, text))
        print(f"[store_outage {at:7.1f}s] {text}", flush=True)

    def table(self) -> str:
        return "\n".join(f"{at:8.1f} s  {text}" for at, text in sorted(self.marks))


def _since(at: float | None, origin: float | None) -> str:
    return f"{at - origin:.1f}" if at is not None and origin is not None else "-"


class StoreOutage(Soak):
    """``Soak``'s sessions, followers and checks; what goes wrong is the store, once."""

    def __init__(self, args: argparse.Namespace, stack: Stack, agent: AgentClient, timeline: Timeline, pg: PrivatePostgres | None) -> None:
        super().__init__(args, stack, agent)
        self.timeline = timeline
        self.pg = pg

    def store_files(self) -> list[Path]:
        """The database and its WAL; not the shared-memory file, which SQLite maps (a mapped page of
        an immutable file is a SIGBUS in the process, not an error it can wait out)."""
        database = self.stack.run_dir / "agentrt.db"
        return [p for p in (database, Path(f"{database}-wal")) if p.exists()]

    def store_away(self) -> None:
        if self.pg is not None:
            self.pg.stop()
        else:
            subprocess.run(["chattr", "+i", *map(str, self.store_files())], check=True)

    def store_back(self) -> None:
        if self.pg is not None:
            self.pg.start()
        else:
            subprocess.run(["chattr", "-i", *map(str, self.store_files())], check=True)

    async def disrupt(self) -> None:
        line = self.timeline
        await asyncio.sleep(self.args.before)
        await asyncio.to_thread(self.store_away)
        line.gone = self.elapsed()
        line.mark(line.gone, "PostgreSQL stopped" if self.pg is not None else "SQLite files made immutable (chattr +i)")
        watch = asyncio.create_task(self.watch())
        await asyncio.sleep(self.args.outage)
        await asyncio.to_thread(self.store_back)
        line.back = self.elapsed()
        line.mark(line.back, "PostgreSQL started" if self.pg is not None else "SQLite files writable again")
        await watch

    async def watch(self) -> None:
        """Read every session's waits each ``WATCH_SECONDS`` until the store is back and none has
        waited for ``QUIET_SECONDS``."""
        line = self.timeline
        while True:
            now = self.elapsed()
            if line.back is not None and now - max(line.back, line.last_wait or 0.0) >= QUIET_SECONDS:
                break
            waits = await asyncio.gather(*(self.agent.sessions.waits(sid) for sid in self.ids), return_exceptions=True)
            waiting = sum(1 for w in waits if isinstance(w, list) and any(x.kind == "store_unavailable" for x in w))
            if waiting:
                if line.first_wait is None:
                    line.first_wait = now
                    line.mark(now, f"first call waits for the store ({waiting} session(s) show store_unavailable)")
                line.last_wait = now
                if waiting > line.waiting_max:
                    line.waiting_max = waiting
            await asyncio.sleep(WATCH_SECONDS)
        if line.last_wait is not None:
            line.mark(line.last_wait, f"last call seen waiting for the store (at most {line.waiting_max} sessions at once)")

    async def run(self) -> Report:
        report = await super().run()
        line = self.timeline
        if line.gone is not None and line.back is not None:
            during = [t for t in self.turn_ends if line.gone <= t < line.back]
            line.mark(line.back, f"{len(during)} turn(s) completed while the store was away")
            after = [t for t in self.turn_ends if t >= line.back]
            if after:
                line.first_turn_after = after[0]
                line.mark(after[0], "first turn completed after the store came back")
        return report


def summary(line: Timeline, report: Report, args: argparse.Namespace) -> str:
    return (
        f"store_outage store={line.store} sessions={args.sessions} outage_s={args.outage:g} turns={report.turns} "
        f"failed={report.failed} lost={report.lost} duplicated={report.duplicated} "
        f"sessions_waiting_max={line.waiting_max} first_wait_s={_since(line.first_wait, line.gone)} "
        f"last_wait_after_return_s={_since(line.last_wait, line.back)} "
        f"first_turn_after_return_s={_since(line.first_turn_after, line.back)} "
        f"stream_duplicates={report.stream_duplicates} followers_ended={sum(t.ended for t in report.tallies)}/{len(report.tallies)}"
    )


async def run_store(store: str, args: argparse.Namespace) -> tuple[Timeline, Report]:
    line = Timeline(store)
    pg = PrivatePostgres() if store == "postgresql" else None
    try:
        soak_args = argparse.Namespace(**vars(args))
        soak_args.minutes = (args.before + args.outage + args.after) / 60
        soak_args.kill_every = 1e9
        soak_args.sample_every = 1e9
        soak_args.database_url = ""
        soak_args.workdir = str(Path(args.workdir) / store) if args.workdir else ""
        if pg is not None:
            pg.start()
            soak_args.database_url = pg.create_database("agentrt")
        report = await run_soak(soak_args, lambda a, stack, agent: StoreOutage(a, stack, agent, line, pg))
    finally:
        if pg is not None:
            pg.close()
    return line, report


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.store_outage", description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=[*STORES, "both"], default="both", help="which store goes away")
    parser.add_argument("--sessions", type=int, default=10, help="sessions sending turns at once")
    parser.add_argument("--outage", type=float, default=30.0, help="seconds the store is away")
    parser.add_argument("--before", type=float, default=15.0, help="seconds of load before the store goes")
    parser.add_argument("--after", type=float, default=30.0, help="seconds of load after it is back")
    parser.add_argument("--think", type=float, default=1.0, help="mean pause between a session's turns (seconds)")
    parser.add_argument("--drop-seconds", type=float, default=20.0, help="mean seconds before a stream follower drops and resumes (0: never)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", default="", help="run directory (default: a new temporary one, removed after)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary run directory")
    args = parser.parse_args(argv)
    if args.sessions < 1 or args.outage <= 0 or args.before < 0 or args.after < 0 or args.think < 0:
        parser.error("--sessions >= 1, --outage > 0, --before, --after and --think >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    ok = True
    lines = []
    for store in STORES if args.store == "both" else (args.store,):
        line, report = asyncio.run(run_store(store, args))
        print(f"\n{store}: timeline (seconds since the load began)")
        print(line.table())
        for failure in report.failures[:20]:
            print(f"failed: {failure}")
        lines.append(summary(line, report, args))
        print(lines[-1], flush=True)
        ok = ok and report.ok and line.first_wait is not None
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
