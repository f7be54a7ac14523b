"""bench.overhead at a small size: what it counts per round and how it reports, never how fast it was."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from temporalio.client import Client

from agentrt.store import Store
from bench import overhead

pytestmark = pytest.mark.runs_first  # long: handed out first (tests/conftest.py)

LAST_LINE = re.compile(
    r"overhead agentrt_vs_floor=(\d+\.\d\d|n/a) pai_vs_floor=(\d+\.\d\d|n/a) oai_vs_floor=(\d+\.\d\d|n/a)"
    r" fused_vs_floor=(\d+\.\d\d|n/a) tools_vs_floor=(\d+\.\d\d|n/a) tools_vs_floor_tools=(\d+\.\d\d|n/a)"
    r" pinned_tools_vs_floor_tools=(\d+\.\d\d|n/a)"
)


@pytest.fixture(scope="module")
async def small_report(temporal_client: Client, store: Store, tmp_path_factory: pytest.TempPathFactory):
    return await overhead.measure(
        temporal_client,
        store,
        tmp_path_factory.mktemp("overhead"),
        rounds=[3],
        repeats=1,
        systems=("floor", "floor-tools", "agentrt", "agentrt-fused", "agentrt-tools", "agentrt-pinned-tools"),
        warmup=False,
    )


async def test_the_floor_and_an_agentrt_turn_complete_and_count_per_round(
    small_report: overhead.OverheadReport,
) -> None:
    for system in ("floor", "agentrt"):
        [sample] = small_report.samples[(system, 3)]
        assert sample.status == "completed", sample
        assert small_report.ms_per_round(system, 3) is not None and small_report.ms_per_round(system, 3) > 0
        assert small_report.per_round(system, 3, lambda s: float(s.workflow_tasks)) > 0
        assert small_report.per_round(system, 3, lambda s: float(s.activities)) > 0
        assert sample.history_bytes > 0 and sample.runs >= 1
        assert sample.client_seconds is not None and sample.history_seconds is not None


async def test_the_floor_schedules_two_activities_per_round_and_one_for_the_answer(
    small_report: overhead.OverheadReport,
) -> None:
    [sample] = small_report.samples[("floor", 3)]
    assert sample.activities == 2 * 3 + 1
    assert sample.local_activities == 0


async def test_agentrt_is_compared_with_the_floor_on_the_last_line(small_report: overhead.OverheadReport) -> None:
    line = small_report.line()
    found = LAST_LINE.fullmatch(line)
    assert found is not None, line
    assert found.group(1) != "n/a"
    assert small_report.vs_floor("floor", 3) == pytest.approx(1.0)
    table = small_report.table()
    assert "floor" in table and "agentrt" in table


async def test_pai_and_oai_rows_say_n_a_when_their_packages_are_absent(
    temporal_client: Client, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(overhead, "_import_probe", lambda module: None)
    report = await overhead.measure(
        temporal_client, store, tmp_path, rounds=[2], repeats=1, systems=("floor", "pai", "oai"), warmup=False
    )
    assert set(report.unavailable) == {"pai", "oai"}
    assert ("pai", 2) not in report.samples and ("oai", 2) not in report.samples
    assert report.samples[("floor", 2)][0].status == "completed"
    rows = {line.split()[1]: line for line in report.table().splitlines() if re.match(r"\s+2\s+(pai|oai)\s", line)}
    assert set(rows) == {"pai", "oai"} and all(row.rstrip().endswith("n/a") for row in rows.values())
    found = LAST_LINE.fullmatch(report.line())
    assert found is not None and found.groups() == ("n/a",) * 7


async def test_agentrt_local_is_n_a_without_the_local_tools_field(
    temporal_client: Client, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(overhead, "has_local_tools", lambda: False)
    report = await overhead.measure(temporal_client, store, tmp_path, rounds=[2], repeats=1, systems=("agentrt-local",))
    assert "agentrt-local" in report.unavailable and not report.samples
    assert "local_tools" in report.table()


def test_parameters_the_workload_cannot_have_are_refused() -> None:
    with pytest.raises(ValueError, match="rounds"):
        overhead.check_parameters([0], 1, 5120, ["floor"])
    with pytest.raises(ValueError, match="systems"):
        overhead.check_parameters([3], 1, 5120, ["floor", "langgraph"])


async def test_a_fused_turn_is_one_model_activity_and_its_ratio_is_on_the_last_line(
    small_report: overhead.OverheadReport,
) -> None:
    [sample] = small_report.samples[("agentrt-fused", 3)]
    assert sample.status == "completed", sample
    [plain] = small_report.samples[("agentrt", 3)]
    # The session's own preparation and last store write, and one model call for all three rounds.
    assert sample.activities == plain.activities - 2 * 3
    found = LAST_LINE.fullmatch(small_report.line())
    assert found is not None and found.group(4) != "n/a"


async def test_an_effectful_turn_on_a_tools_worker_writes_each_file_once(small_report: overhead.OverheadReport) -> None:
    [sample] = small_report.samples[("agentrt-tools", 3)]
    assert sample.status == "completed" and sample.note is None, sample
    # A model call and a tool call per round, the final answer's model call, the preparation and last
    # write; and a store write before each tool call, whose events do not travel to the tools worker
    # (tools-queue-writes-v1).
    [plain] = small_report.samples[("agentrt", 3)]
    assert sample.activities == plain.activities + 3
    found = LAST_LINE.fullmatch(small_report.line())
    assert found is not None and found.group(5) != "n/a"


async def test_the_effectful_floor_runs_its_tool_calls_on_their_own_queue_and_agentrt_tools_is_compared_with_it(
    small_report: overhead.OverheadReport,
) -> None:
    [sample] = small_report.samples[("floor-tools", 3)]
    assert sample.status == "completed" and sample.note is None, sample
    assert sample.activities == 2 * 3 + 1 and sample.local_activities == 0
    # Each write's content crosses history at least twice (the model's reply, the tool call's input).
    [floor] = small_report.samples[("floor", 3)]
    assert sample.history_bytes > floor.history_bytes + 2 * small_report.result_bytes
    found = LAST_LINE.fullmatch(small_report.line())
    assert found is not None and found.group(6) != "n/a"
    assert "agentrt-tools × floor-tools" in small_report.table()


async def test_a_pinned_effectful_turn_on_a_tools_worker_sends_its_events_in_the_tool_calls(
    small_report: overhead.OverheadReport,
) -> None:
    [sample] = small_report.samples[("agentrt-pinned-tools", 3)]
    assert sample.status == "completed" and sample.note is None, sample
    # Pinned to one build, whose tools worker Temporal gives the calls to: no store write of its own
    # before each tool call (pinned-tools-writes-v1), as many activities as a turn on one queue.
    [plain] = small_report.samples[("agentrt", 3)]
    assert sample.activities == plain.activities
    found = LAST_LINE.fullmatch(small_report.line())
    assert found is not None and found.group(7) != "n/a"
    assert "agentrt-pinned-tools × floor-tools" in small_report.table()
