"""The CI chaos run: 4 sessions x 3 turns under 12+ worker SIGKILLs and 2 server restarts.

Nothing may be applied twice, lost, left stuck or fail to replay. Each worker is forked from one
process that imported the worker's modules once (``fork_workers``: about two CPU-seconds less per
worker start, the kills' timing unchanged); the bigger run, ``python -m bench.chaos``, starts each
as a fresh interpreter.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.chaos import run_chaos

pytestmark = pytest.mark.runs_first  # long: handed out first (tests/conftest.py)

SEED = 20240601


async def test_sessions_survive_worker_kills_and_server_restarts(tmp_path: Path) -> None:
    report = await run_chaos(
        sessions=4,
        turns_per_session=3,
        kills=12,
        server_restarts=2,
        seed=SEED,
        workdir=tmp_path,
        # Ends as soon as every turn has (about a minute and a half on an idle machine); the bound leaves room for
        # a machine busy with other work, where every kill and restart takes longer to recover from.
        deadline_seconds=420,
        progress=print,
        fork_workers=True,
    )
    print(report.details())
    for problem in report.problems:
        print("  problem:", problem)
    print(report.line())
    assert report.kills >= 12
    assert report.server_restarts >= 2
    assert report.duplicates == 0, report.problems
    assert report.lost == 0, report.problems
    assert report.stuck == 0, report.problems
    assert report.replay_failures == 0, report.problems
    assert report.reconnect_failures == 0, report.problems
