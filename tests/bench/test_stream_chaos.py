"""bench.stream_chaos at a tiny size: two SSE clients of one session, resuming with Last-Event-ID
through a gateway kill, a worker kill and a server restart, each end with exactly the session's
events and deltas; and the check that says so counts what a client missed or got twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import stream_chaos
from bench.stream_chaos import Reference, Tally, by_turn

pytestmark = pytest.mark.runs_first  # long: handed out first (tests/conftest.py)


async def test_sse_clients_resume_through_gateway_worker_and_server_kills_with_every_item_once(tmp_path: Path) -> None:
    report = await stream_chaos.run_stream_chaos(
        clients=2, sessions=1, turns=2, gateway_kills=1, worker_kills=1, server_restarts=1, seed=3,
        workdir=tmp_path, chunks=20, chunk_ms=25, drop_seconds=4, deadline_seconds=240, progress=print,
    )
    print(report.details())
    for problem in report.problems:
        print("  problem:", problem)

    assert (report.gateway_kills, report.worker_kills, report.server_restarts) == (1, 1, 1), report.problems
    assert (report.gaps, report.duplicates, report.unfinished, report.failed_turns) == (0, 0, 0, 0), report.problems
    assert report.ok, report.problems
    assert report.turns >= 2 and report.resumes > 0, report.details()


def test_a_missed_item_and_one_received_twice_are_counted_against_their_turn() -> None:
    ref = Reference(
        event_seqs={1, 2, 3, 4}, handed_out={("turn-1", 1, 1, 0), ("turn-1", 1, 1, 1)},
        written={("turn-1", 1, 1, 0), ("turn-1", 1, 1, 1)}, rows=2,
    )
    turn_of = {1: "-", 2: "turn-1", 3: "turn-1", 4: "turn-1"}
    tally = Tally("client1", "sse")
    for item_id, event, data in [
        ("1", "SessionStarted", {}),
        ("2", "TurnStarted", {}),
        ("3", "ModelRequestStarted", {}),
        ("3.1.0", "ModelTokenDelta", {"seq": 3, "turn_id": "turn-1", "round": 1, "attempt": 1, "idx": 0}),
        ("3.1.0", "ModelTokenDelta", {"seq": 3, "turn_id": "turn-1", "round": 1, "attempt": 1, "idx": 0}),
        ("4", "TurnEnded", {}),
    ]:
        tally.take_item(item_id, event, data)

    missing, extra = by_turn(tally, ref, turn_of)

    assert dict(missing) == {"turn-1": 1} and not extra
    assert tally.duplicates == 1


@pytest.mark.parametrize("args", [["--clients", "0"], ["--turns", "0"], ["--gateway-kills", "-1"]])
def test_options_out_of_range_are_refused(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        stream_chaos.main(args)
    assert exit.value.code == 2 and "must" in capsys.readouterr().err


def test_a_retried_calls_delta_without_retry_and_supersedes_is_mismatched() -> None:
    tally = Tally("client1", "sse")
    delta = {"seq": 3, "turn_id": "turn-1", "round": 1, "attempt": 2}
    tally.take_item("3.2.0", "ModelTokenDelta", {**delta, "idx": 0, "retry": True, "supersedes": [1]})
    tally.take_item("3.2.1", "ModelTokenDelta", {**delta, "idx": 1})

    assert tally.mismatched == 1
