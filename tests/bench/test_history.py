"""bench.history at a small size: agentrt's history per round stays flat, the naive loop's grows."""

from __future__ import annotations

from pathlib import Path

from temporalio.client import Client

from bench import history
from agentrt.store import Store


async def test_agentrt_history_per_round_is_flat_where_the_naive_loop_grows(
    temporal_client: Client, store: Store, tmp_path: Path
) -> None:
    report = await history.measure(temporal_client, store, tmp_path, rounds=40, result_bytes=1024)
    assert report.agentrt.status == "completed" and report.naive.status == "completed"
    assert report.agentrt_growth < 1.2
    assert report.naive_growth > 2.5
    line = report.line()
    assert line.startswith("history agentrt_growth=") and "naive_growth=" in line and "total_naive=" in line
