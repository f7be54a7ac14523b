"""bench.long_stream's accounting: what a follower received, against what the store says it should
have, by stream id for a follower of the gateway and by (turn, round, attempt, idx) for one of
``AgentClient.sessions.deltas``. The benchmark itself runs for minutes and is not run here."""

from __future__ import annotations

import pytest

from bench import long_stream
from bench.long_stream import Tally

TURN = "turn-1"


def delta(seq: int, attempt: int, idx: int, turn: str = TURN, round: int = 1) -> tuple[str, str, dict[str, object]]:
    data = {"type": "ModelTokenDelta", "seq": seq, "turn_id": turn, "round": round, "attempt": attempt, "idx": idx, "text": "w "}
    return f"{seq}.{attempt}.{idx}", "ModelTokenDelta", data


def event(seq: int, name: str = "TurnStarted") -> tuple[str, str, dict[str, object]]:
    return str(seq), name, {"type": name, "seq": seq}


def reference(events: range, deltas: list[tuple[int, int]]) -> long_stream.Reference:
    keys = {(TURN, 1, attempt, idx) for attempt, idx in deltas}
    return long_stream.Reference(set(events), keys, keys, len(keys))


def test_a_follower_that_resumed_exactly_after_its_last_item_has_every_item_once() -> None:
    tally = Tally("sse-01", "sse")
    for item in [event(1), event(2, "ModelRequestStarted"), delta(2, 1, 0), delta(2, 1, 1)]:
        tally.take_item(*item)
    for item in [delta(2, 1, 2), event(3, "AssistantMessageCompleted")]:  # after Last-Event-ID: 2.1.1
        tally.take_item(*item)

    ref = reference(range(1, 4), [(1, 0), (1, 1), (1, 2)])
    assert (tally.deltas, tally.events) == (3, 3)
    assert (tally.gaps(ref), tally.duplicates, tally.out_of_order, tally.extras(ref), tally.mismatched) == (0, 0, 0, 0, 0)


def test_a_resume_that_repeats_and_skips_items_is_counted_as_such() -> None:
    tally = Tally("sse-01", "sse")
    for item in [event(1), event(2, "ModelRequestStarted"), delta(2, 1, 0), delta(2, 1, 1)]:
        tally.take_item(*item)
    for item in [delta(2, 1, 1), event(3, "AssistantMessageCompleted")]:  # 2.1.1 again, 2.1.2 never
        tally.take_item(*item)

    ref = reference(range(1, 4), [(1, 0), (1, 1), (1, 2)])
    assert tally.duplicates == 1 and tally.out_of_order == 1
    assert tally.gaps(ref) == 1 and tally.extras(ref) == 0


def test_a_delta_whose_id_names_another_position_is_counted() -> None:
    tally = Tally("sse-01", "sse")
    item_id, name, data = delta(2, 1, 5)
    tally.take_item(item_id, name, {**data, "idx": 6})
    assert tally.mismatched == 1


def test_a_follower_of_the_python_client_is_held_to_every_row_written() -> None:
    tally = Tally("py-01", "python")
    for idx in (0, 1, 1, 3):
        tally.take_delta(TURN, 1, 1, idx)
    tally.take_delta(TURN, 1, 2, 0)  # a retried call's attempt: not among the rows below

    ref = reference(range(1, 4), [(1, 0), (1, 1), (1, 2), (1, 3)])
    assert tally.duplicates == 1 and tally.out_of_order == 1
    assert tally.gaps(ref) == 1  # (1, 2); events are not this follower's to receive
    assert tally.extras(ref) == 1


@pytest.mark.parametrize("argv", [["--clients", "0"], ["--clients", "2", "--python-clients", "3"], ["--minutes", "0"]])
def test_parameters_the_benchmark_cannot_run_with_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        long_stream.main(argv)
    assert caught.value.code == 2
