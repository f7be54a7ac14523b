"""A session's events and token deltas as one resumable stream, on SQLite and PostgreSQL: the
order and ids, resuming after any id, retried attempts, the end, and positions that name nothing."""

from __future__ import annotations

import pytest

from agentrt.schemas import (
    AssistantMessageCompleted,
    Event,
    InvalidStreamCursor,
    ModelRequestStarted,
    ModelToolCallRequested,
    SessionArchived,
    StoreAppendInput,
    ToolCall,
    TurnEnded,
    TurnStarted,
    Usage,
    UserMessageAdded,
)
from agentrt.store import SessionStream, Store, StreamCall, StreamKey, StreamOpenText, parse_stream_id

SID = "s1"
TURN = "t1"


def put(store: Store, *events: Event) -> None:
    store.append(StoreAppendInput(session_id=SID, events=list(events)))


def numbered(first: int, *events: Event) -> list[Event]:
    for i, event in enumerate(events):
        event.seq = first + i
    return list(events)


def deltas(store: Store, round: int, attempt: int, *texts: str, start: int = 0) -> None:
    store.append_deltas(SID, TURN, round, attempt, list(texts), start)


def read_all(stream: SessionStream) -> list[str]:
    ids: list[str] = []
    while page := stream.read(max_events=2):
        ids.extend(e.id for e in page)
    return ids


def one_turn(store: Store) -> None:
    """A turn of two rounds: a tool call, then an answer; then the session is archived."""
    put(store, *numbered(
        1,
        TurnStarted(turn_id=TURN),
        UserMessageAdded(turn_id=TURN, principal="alice", text="hi", position=0),
        ModelRequestStarted(turn_id=TURN, round=1, profile="p"),
    ))
    deltas(store, 1, 1, "Let ", "me ", "look.")
    put(store, *numbered(
        4,
        AssistantMessageCompleted(turn_id=TURN, round=1, text="Let me look.", tool_calls=1, usage=Usage(), position=1),
        ModelToolCallRequested(turn_id=TURN, round=1, call=ToolCall(id="c1", name="fs.read", arguments={"path": "a"})),
        ModelRequestStarted(turn_id=TURN, round=2, profile="p"),
    ))
    deltas(store, 2, 1, "Done.")
    put(store, *numbered(
        7,
        AssistantMessageCompleted(turn_id=TURN, round=2, text="Done.", tool_calls=0, usage=Usage(), position=3),
        TurnEnded(turn_id=TURN, status="completed", rounds=2, usage=Usage()),
        SessionArchived(principal="alice"),
    ))


ALL_IDS = ["1", "2", "3", "3.1.0", "3.1.1", "3.1.2", "4", "5", "6", "6.1.0", "7", "8", "9"]


def test_events_and_deltas_come_in_one_order_each_delta_after_the_event_that_started_its_call(store: Store) -> None:
    one_turn(store)
    assert read_all(SessionStream.resume(store, SID, None)) == ALL_IDS


def test_a_delta_carries_its_call_attempt_and_text(store: Store) -> None:
    one_turn(store)
    page = SessionStream.resume(store, SID, "3").read()
    first = page[0].delta
    assert first is not None
    assert (first.call_seq, first.turn_id, first.round, first.attempt, first.idx, first.text) == (3, TURN, 1, 1, 0, "Let ")
    assert first.supersedes == []


@pytest.mark.parametrize("position", range(len(ALL_IDS)))
def test_resuming_after_any_id_gives_exactly_the_rest(store: Store, position: int) -> None:
    one_turn(store)
    assert read_all(SessionStream.resume(store, SID, ALL_IDS[position])) == ALL_IDS[position + 1:]


@pytest.mark.parametrize("position", range(len(ALL_IDS)))
def test_resuming_before_any_id_starts_with_that_item(store: Store, position: int) -> None:
    one_turn(store)
    assert read_all(SessionStream.resume(store, SID, ALL_IDS[position], before=True)) == ALL_IDS[position:]


def test_deltas_streamed_after_a_read_come_in_the_next_read_and_none_twice(store: Store) -> None:
    put(store, *numbered(1, TurnStarted(turn_id=TURN), ModelRequestStarted(turn_id=TURN, round=1, profile="p")))
    stream = SessionStream.resume(store, SID, None)
    assert [e.id for e in stream.read()] == ["1", "2"]
    deltas(store, 1, 1, "a", "b")
    assert [e.id for e in stream.read()] == ["2.1.0", "2.1.1"]
    assert stream.read() == []
    deltas(store, 1, 1, "c", start=2)
    put(store, *numbered(3, AssistantMessageCompleted(turn_id=TURN, round=1, text="abc", tool_calls=0, usage=Usage(), position=1)))
    assert [e.id for e in stream.read()] == ["2.1.2", "3"]


def test_a_retried_attempt_follows_the_abandoned_one_and_names_what_it_supersedes(store: Store) -> None:
    put(store, *numbered(1, TurnStarted(turn_id=TURN), ModelRequestStarted(turn_id=TURN, round=1, profile="p")))
    deltas(store, 1, 1, "par", "tial")
    deltas(store, 1, 2, "whole ", "answer")
    page = SessionStream.resume(store, SID, None).read()
    assert [e.id for e in page] == ["1", "2", "2.1.0", "2.1.1", "2.2.0", "2.2.1"]
    retried = page[4].delta
    assert retried is not None and retried.attempt == 2 and retried.supersedes == [1]


def test_late_deltas_of_an_abandoned_attempt_are_dropped_once_the_retry_streamed(store: Store) -> None:
    put(store, *numbered(1, TurnStarted(turn_id=TURN), ModelRequestStarted(turn_id=TURN, round=1, profile="p")))
    deltas(store, 1, 1, "par")
    stream = SessionStream.resume(store, SID, None)
    stream.read()
    deltas(store, 1, 2, "whole")
    assert [e.id for e in stream.read()] == ["2.2.0"]
    deltas(store, 1, 1, "tial", start=1)  # the first attempt, still running, writes on
    deltas(store, 1, 2, " answer", start=1)
    assert [e.id for e in stream.read()] == ["2.2.1"]


# Writes of one retried call (round 1 of TURN, started by event 2), in the order a worker and its
# abandoned predecessor make them: (attempt, start idx, texts).
RETRIES = {
    "late-first-attempt": [(1, 0, ["a1-0", "a1-1"]), (2, 0, ["a2-0"]), (1, 2, ["a1-late"]), (2, 1, ["a2-1", "a2-2"])],
    "three-attempts": [
        (1, 0, ["a1-0"]), (2, 0, ["a2-0"]), (1, 1, ["a1-late"]), (3, 0, ["a3-0"]), (2, 1, ["a2-late"]), (3, 1, ["a3-1"]),
    ],
    "late-row-read-with-the-retry": [(1, 0, ["a1-0"]), (2, 0, ["a2-0"]), (1, 1, ["a1-late"])],
}
RETRIED_IDS = {
    "late-first-attempt": ["1", "2", "2.1.0", "2.1.1", "2.2.0", "2.2.1", "2.2.2", "3"],
    "three-attempts": ["1", "2", "2.1.0", "2.2.0", "2.3.0", "2.3.1", "3"],
    "late-row-read-with-the-retry": ["1", "2", "2.1.0", "2.2.0", "3"],
}


def retried_call(store: Store, scenario: str, stream: SessionStream | None = None) -> list[str]:
    """Writes the scenario's call and completes it; the ids ``stream`` read after each write (live)."""
    put(store, *numbered(1, TurnStarted(turn_id=TURN), ModelRequestStarted(turn_id=TURN, round=1, profile="p")))
    seen = [e.id for e in stream.read()] if stream is not None else []
    writes = RETRIES[scenario]
    for i, (attempt, start, texts) in enumerate(writes):
        deltas(store, 1, attempt, *texts, start=start)
        if stream is not None and not (scenario == "late-row-read-with-the-retry" and i == 1):
            seen.extend(e.id for e in stream.read())  # (that scenario reads the retry and the late row at once)
    put(store, *numbered(3, AssistantMessageCompleted(turn_id=TURN, round=1, text="x", tool_calls=0, usage=Usage(), position=1)))
    if stream is not None:
        seen.extend(e.id for e in stream.read())
    return seen


@pytest.mark.parametrize("scenario", list(RETRIES))
def test_a_reader_following_a_retried_call_and_one_reading_it_after_the_fact_hand_out_the_same_items(
    store: Store, scenario: str
) -> None:
    live = retried_call(store, scenario, SessionStream.resume(store, SID, None))
    replay = read_all(SessionStream.resume(store, SID, None))
    assert live == replay == RETRIED_IDS[scenario]


@pytest.mark.parametrize("scenario", list(RETRIES))
def test_resuming_after_any_id_of_a_retried_call_gives_exactly_the_rest(store: Store, scenario: str) -> None:
    retried_call(store, scenario)
    everything = RETRIED_IDS[scenario]
    for i, last in enumerate(everything):
        assert read_all(SessionStream.resume(store, SID, last)) == everything[i + 1:], last


def test_a_delta_an_abandoned_attempt_wrote_before_its_retry_streamed_is_handed_out(store: Store) -> None:
    put(store, *numbered(1, TurnStarted(turn_id=TURN), ModelRequestStarted(turn_id=TURN, round=1, profile="p")))
    deltas(store, 1, 1, "a1-0")
    deltas(store, 1, 1, "a1-1", start=1)  # still before any delta of attempt 2
    deltas(store, 1, 2, "a2-0")
    assert read_all(SessionStream.resume(store, SID, None)) == ["1", "2", "2.1.0", "2.1.1", "2.2.0"]


def test_deltas_of_a_call_written_after_a_later_event_was_read_are_not_handed_out(store: Store) -> None:
    put(store, *numbered(1, TurnStarted(turn_id=TURN), ModelRequestStarted(turn_id=TURN, round=1, profile="p")))
    deltas(store, 1, 1, "a")
    put(store, *numbered(3, AssistantMessageCompleted(turn_id=TURN, round=1, text="a", tool_calls=0, usage=Usage(), position=1)))
    stream = SessionStream.resume(store, SID, None)
    assert [e.id for e in stream.read()] == ["1", "2", "2.1.0", "3"]
    deltas(store, 1, 1, "late", start=1)
    put(store, *numbered(4, TurnEnded(turn_id=TURN, status="completed", rounds=1, usage=Usage())))
    assert [e.id for e in stream.read()] == ["4"]


def test_an_event_not_yet_written_holds_back_the_ones_after_it(store: Store) -> None:
    put(store, *numbered(1, TurnStarted(turn_id=TURN)))
    put(store, *numbered(3, TurnEnded(turn_id=TURN, status="completed", rounds=0, usage=Usage())))
    stream = SessionStream.resume(store, SID, None)
    assert [e.id for e in stream.read()] == ["1"]
    put(store, *numbered(2, UserMessageAdded(turn_id=TURN, principal="alice", text="hi", position=0)))
    assert [e.id for e in stream.read()] == ["2", "3"]


def test_the_stream_ends_with_session_archived(store: Store) -> None:
    one_turn(store)
    stream = SessionStream.resume(store, SID, "8")
    assert [e.id for e in stream.read()] == ["9"]
    assert stream.ended
    put(store, *numbered(10, TurnStarted(turn_id="t2")))
    assert stream.read() == []


def test_a_page_holds_at_most_max_events_events_with_their_deltas(store: Store) -> None:
    one_turn(store)
    stream = SessionStream.resume(store, SID, None)
    assert [e.id for e in stream.read(max_events=3)] == ["1", "2", "3", "3.1.0", "3.1.1", "3.1.2"]
    assert [e.id for e in stream.read(max_events=1)] == ["4"]


def test_another_session_s_items_are_not_in_the_stream(store: Store) -> None:
    one_turn(store)
    store.append(StoreAppendInput(session_id="other", events=numbered(1, TurnStarted(turn_id="x"))))
    store.append_deltas("other", TURN, 1, 1, ["not mine"], 0)
    assert read_all(SessionStream.resume(store, SID, None)) == ALL_IDS


# ---------------------------------------------------------------- positions that name nothing


@pytest.mark.parametrize(
    "cursor",
    [
        "-1", "+1", " 1", "1 ", "01", "1.0.0", "1.01.0", "1.1", "1.1.1.1", "1..1", "abc", "1e3", "0x10", "１",
        "1.1.-1", "1\n2", "1\x002", "9" * 11, "2147483648", "1.2147483648.0", "1.1." + "9" * 10, "7" * 10_000, "3:0",
    ],
)
def test_a_malformed_position_is_an_invalid_stream_cursor(store: Store, cursor: str) -> None:
    one_turn(store)
    with pytest.raises(InvalidStreamCursor) as caught:
        SessionStream.resume(store, SID, cursor)
    assert caught.value.session_id == SID and len(caught.value.cursor) <= 64
    assert len(str(caught.value)) < 300


@pytest.mark.parametrize(
    ("cursor", "reason"),
    [
        ("10", "no event 10"),
        ("2147483647", "no event 2147483647"),
        ("1.1.0", "started no model call"),
        ("3.1.3", "no such delta"),
        ("3.2.0", "no such delta"),
        ("6.1.1", "no such delta"),
        ("0.1.0", "seq 0"),
    ],
)
def test_a_position_the_session_does_not_have_is_an_invalid_stream_cursor(store: Store, cursor: str, reason: str) -> None:
    one_turn(store)
    with pytest.raises(InvalidStreamCursor, match=reason):
        SessionStream.resume(store, SID, cursor)


def test_a_refused_position_leaves_the_stream_readable(store: Store) -> None:
    one_turn(store)
    with pytest.raises(InvalidStreamCursor):
        SessionStream.resume(store, SID, "x" * 10_000)
    assert read_all(SessionStream.resume(store, SID, "")) == ALL_IDS


def test_position_zero_is_the_start(store: Store) -> None:
    one_turn(store)
    assert parse_stream_id(SID, "0") == StreamKey(0)
    assert read_all(SessionStream.resume(store, SID, "0")) == ALL_IDS


# ---------------------------------------------------------------- the text open at a position


@pytest.mark.parametrize(
    ("cursor", "expected"),
    [
        (None, None),
        ("3", None),  # the call started, nothing streamed yet
        ("3.1.0", (3, 1, 1)),
        ("3.1.2", (3, 1, 1)),
        ("4", None),  # its AssistantMessageCompleted came
        ("6.1.0", (6, 2, 1)),
        ("8", None),
    ],
)
def test_the_open_text_at_a_position_is_the_streamed_attempt_of_a_call_not_yet_completed(
    store: Store, cursor: str | None, expected: tuple[int, int, int] | None
) -> None:
    one_turn(store)
    opened = SessionStream.resume(store, SID, cursor).open_text()
    if expected is None:
        assert opened is None
    else:
        seq, round, attempt = expected
        assert opened == StreamOpenText(StreamCall(seq, TURN, round), attempt)


def test_the_open_text_of_a_retried_call_is_its_newest_streamed_attempt(store: Store) -> None:
    put(store, *numbered(1, TurnStarted(turn_id=TURN), ModelRequestStarted(turn_id=TURN, round=1, profile="p")))
    deltas(store, 1, 1, "a")
    deltas(store, 1, 3, "b")
    assert SessionStream.resume(store, SID, "2.3.0").open_text() == StreamOpenText(StreamCall(2, TURN, 1), 3)
    assert SessionStream.resume(store, SID, "2.3.0", before=True).open_text() == StreamOpenText(StreamCall(2, TURN, 1), 1)
    put(store, *numbered(3, TurnEnded(turn_id=TURN, status="failed", rounds=1, usage=Usage())))
    assert SessionStream.resume(store, SID, "3").open_text() is None


@pytest.mark.parametrize(
    ("cursor", "turn"), [(None, None), ("1", TURN), ("3.1.2", TURN), ("7", TURN), ("8", None), ("9", None)]
)
def test_the_open_turn_at_a_position_is_the_turn_started_and_not_yet_ended(store: Store, cursor: str | None, turn: str | None) -> None:
    one_turn(store)
    assert SessionStream.resume(store, SID, cursor).open_turn() == turn


def test_a_stream_resumed_after_session_archived_has_ended(store: Store) -> None:
    one_turn(store)
    assert SessionStream.resume(store, SID, "9").ended
    assert not SessionStream.resume(store, SID, "9", before=True).ended
