"""``StreamHub`` over a store filled by hand (in clear, and sealed at rest), where the store's timing
is the behaviour under test: subscribers share one poller, late and resuming subscribers read their
backlog first, retried attempts, slow subscribers, the end of a stream and hostile positions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agentrt.gateway._stream import SQLITE_CALL_POLL_SECONDS, StreamHub, StreamItem, StreamSubscription
from agentrt.schemas import (
    AssistantMessageCompleted,
    Event,
    InvalidStreamCursor,
    ModelRequestStarted,
    SessionArchived,
    StoreAppendInput,
    TurnEnded,
    TurnStarted,
    Usage,
    UserMessageAdded,
)
from agentrt.store import Store
from agentrt.worker import AesGcmStoreCipher, generate_codec_key

SID = "s1"
TURN = "t1"
POLL = 0.02


@pytest.fixture(params=["clear", "sealed"])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Store]:
    """A store in clear, and one sealing its content at rest with codec keys: streams read the same."""
    cipher = AesGcmStoreCipher({"k1": generate_codec_key()}, "k1") if request.param == "sealed" else None
    with Store.open(f"sqlite:///{tmp_path / 'stream.db'}", cipher=cipher) as s:
        yield s


@pytest.fixture
async def hub(store: Store) -> AsyncIterator[StreamHub]:
    hub = StreamHub(store, poll_seconds=POLL)
    yield hub
    await hub.aclose()


class Events:
    """Writes a session's events by hand, numbering them as the workflow does."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.seq = 0

    def put(self, *events: Event) -> None:
        for event in events:
            self.seq += 1
            event.seq = self.seq
        self.store.append(StoreAppendInput(session_id=SID, events=list(events)))

    def deltas(self, round: int, attempt: int, *texts: str, start: int = 0) -> None:
        self.store.append_deltas(SID, TURN, round, attempt, list(texts), start)

    def turn_start(self) -> None:
        self.put(
            TurnStarted(turn_id=TURN),
            UserMessageAdded(turn_id=TURN, principal="alice", text="hi", position=0),
            ModelRequestStarted(turn_id=TURN, round=1, profile="p"),
        )

    def turn_end(self, text: str = "done") -> None:
        self.put(
            AssistantMessageCompleted(turn_id=TURN, round=1, text=text, tool_calls=0, usage=Usage(), position=1),
            TurnEnded(turn_id=TURN, status="completed", rounds=1, usage=Usage()),
            SessionArchived(principal="alice"),
        )


@pytest.fixture
def events(store: Store) -> Events:
    return Events(store)


async def take(items: StreamSubscription, count: int, timeout: float = 10.0) -> list[StreamItem]:
    """The next ``count`` items."""
    async def collect() -> list[StreamItem]:
        return [await anext(items) for _ in range(count)]

    return await asyncio.wait_for(collect(), timeout)


async def rest(items: StreamSubscription, timeout: float = 10.0) -> list[StreamItem]:
    """Every item until the stream ends."""
    async def collect() -> list[StreamItem]:
        return [item async for item in items]

    return await asyncio.wait_for(collect(), timeout)


def ids(items: list[StreamItem]) -> list[str]:
    return [item.id for item in items]


async def until(condition, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    async def wait() -> None:
        while not condition():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(wait(), timeout)


async def test_two_subscribers_of_a_session_share_one_poller(hub: StreamHub, events: Events) -> None:
    events.turn_start()
    first, second = await hub.subscribe(SID), await hub.subscribe(SID)
    assert ids(await take(first, 3)) == ids(await take(second, 3)) == ["1", "2", "3"]
    waiting = [asyncio.ensure_future(take(first, 1)), asyncio.ensure_future(take(second, 1))]
    await until(lambda: hub.pollers == 1 and hub.followers(SID) == 2)
    events.deltas(1, 1, "live")
    assert [ids(await w) for w in waiting] == [["3.1.0"], ["3.1.0"]]
    assert hub.pollers == 1
    await first.aclose()
    await second.aclose()


async def test_the_poller_stops_when_its_last_subscriber_leaves(hub: StreamHub, events: Events) -> None:
    events.turn_start()
    items = await hub.subscribe(SID)
    await take(items, 3)
    waiting = asyncio.ensure_future(take(items, 1))
    await until(lambda: hub.pollers == 1)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await items.aclose()
    await until(lambda: hub.pollers == 0)
    reads = hub.store_reads
    await asyncio.sleep(POLL * 10)
    assert hub.store_reads == reads


async def following(hub: StreamHub, events: Events) -> tuple[StreamSubscription, asyncio.Future[list[StreamItem]]]:
    """A subscriber of a started turn that took its backlog and waits on the poller for one more item."""
    events.turn_start()
    items = await hub.subscribe(SID)
    await take(items, 3)
    waiting = asyncio.ensure_future(take(items, 1))
    await until(lambda: hub.followers(SID) == 1)
    return items, waiting


async def stop(*tasks: asyncio.Future[list[StreamItem]]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_an_idle_session_s_poller_reads_the_store_less_and_less_often(store: Store, events: Events) -> None:
    hub = StreamHub(store, poll_seconds=0.01, max_poll_seconds=0.08, call_poll_seconds=None)
    items, waiting = await following(hub, events)
    loop = asyncio.get_running_loop()
    start, reads = loop.time(), hub.store_reads
    await asyncio.sleep(0.01 * 100)  # about 100 cycles of poll_seconds with nothing new
    cycles = (loop.time() - start) / 0.01
    # at one read per poll_seconds, one per cycle; backing off, at most 4 while the wait doubles
    # (0.01, 0.02, 0.04, 0.08 s), one in flight, then one per max_poll_seconds (8 cycles)
    assert hub.store_reads - reads <= 5 + cycles / 8
    assert hub.poll_interval(SID) == 0.08
    await stop(waiting)
    await items.aclose()
    await hub.aclose()


async def test_new_rows_put_an_idle_poller_back_to_poll_seconds(store: Store, events: Events) -> None:
    hub = StreamHub(store, poll_seconds=0.25, max_poll_seconds=0.5, call_poll_seconds=None)
    items, waiting = await following(hub, events)
    await until(lambda: hub.poll_interval(SID) == 0.5)
    events.deltas(1, 1, "new")
    assert ids(await waiting) == ["3.1.0"]
    assert hub.poll_interval(SID) == 0.25
    await items.aclose()
    await hub.aclose()


async def test_a_subscriber_joining_puts_an_idle_poller_back_to_poll_seconds(store: Store, events: Events) -> None:
    hub = StreamHub(store, poll_seconds=0.25, max_poll_seconds=0.5, call_poll_seconds=None)
    first, waiting = await following(hub, events)
    await until(lambda: hub.poll_interval(SID) == 0.5)
    resumed = await hub.subscribe(SID, "2")
    assert ids(await take(resumed, 1)) == ["3"]
    joining = asyncio.ensure_future(take(resumed, 1))
    await until(lambda: hub.followers(SID) == 2)
    assert hub.poll_interval(SID) == 0.25
    await stop(waiting, joining)
    await first.aclose()
    await resumed.aclose()
    await hub.aclose()


async def test_waking_a_session_puts_its_idle_poller_back_to_poll_seconds(store: Store, events: Events) -> None:
    hub = StreamHub(store, poll_seconds=0.25, max_poll_seconds=0.5, call_poll_seconds=None)
    items, waiting = await following(hub, events)
    await until(lambda: hub.poll_interval(SID) == 0.5)
    hub.wake(SID)
    assert hub.poll_interval(SID) == 0.25
    hub.wake("another-session")  # no poller: nothing to wake
    assert hub.poll_interval("another-session") is None
    await stop(waiting)
    await items.aclose()
    await hub.aclose()


async def test_a_late_subscriber_reads_its_backlog_then_takes_the_live_items(hub: StreamHub, events: Events) -> None:
    events.turn_start()
    events.deltas(1, 1, "a", "b")
    early = await hub.subscribe(SID)
    await take(early, 5)
    waiting = asyncio.ensure_future(take(early, 1))
    await until(lambda: hub.pollers == 1)
    late = await hub.subscribe(SID)
    assert ids(await take(late, 5)) == ["1", "2", "3", "3.1.0", "3.1.1"]
    late_next = asyncio.ensure_future(take(late, 1))
    await until(lambda: hub.followers(SID) == 2)
    events.deltas(1, 1, "c", start=2)
    assert ids(await waiting) == ids(await late_next) == ["3.1.2"]
    assert hub.pollers == 1
    await early.aclose()
    await late.aclose()


async def test_a_subscriber_resuming_from_an_old_position_gets_exactly_the_rest(hub: StreamHub, events: Events) -> None:
    events.turn_start()
    events.deltas(1, 1, "a", "b")
    events.turn_end("ab")
    everything = ids(await rest(await hub.subscribe(SID)))
    assert everything == ["1", "2", "3", "3.1.0", "3.1.1", "4", "5", "6"]
    for i, last in enumerate(everything[:-1]):
        assert ids(await rest(await hub.subscribe(SID, last))) == everything[i + 1:]


async def test_a_retried_attempt_is_marked_and_the_abandoned_attempt_s_late_deltas_are_dropped(
    hub: StreamHub, events: Events
) -> None:
    events.turn_start()
    events.deltas(1, 1, "par")
    items = await hub.subscribe(SID)
    first = (await take(items, 4))[-1]
    assert first.data["attempt"] == 1 and "retry" not in first.data
    events.deltas(1, 2, "whole")
    retried = (await take(items, 1))[0]
    assert retried.id == "3.2.0"
    assert retried.data | {"retry": True, "supersedes": [1]} == retried.data
    events.deltas(1, 1, "tial", start=1)  # the abandoned attempt, still running, writes on
    events.deltas(1, 2, " answer", start=1)
    events.turn_end("whole answer")
    assert ids(await rest(items)) == ["3.2.1", "4", "5", "6"]


async def test_the_stream_ends_after_session_archived(hub: StreamHub, events: Events) -> None:
    events.turn_start()
    items = await hub.subscribe(SID)
    await take(items, 3)
    events.turn_end()
    assert [item.event for item in await rest(items)] == ["AssistantMessageCompleted", "TurnEnded", "SessionArchived"]
    await until(lambda: hub.pollers == 0)


async def test_resuming_after_session_archived_is_at_the_end(hub: StreamHub, events: Events) -> None:
    events.turn_start()
    events.turn_end()
    items = await hub.subscribe(SID, "6")
    assert items.at_end
    assert await rest(items) == []


async def test_a_subscriber_that_falls_behind_reads_the_store_itself_and_misses_nothing(store: Store, events: Events) -> None:
    hub = StreamHub(store, poll_seconds=POLL, max_queue=3)
    events.turn_start()
    slow = await hub.subscribe(SID)
    await take(slow, 3)
    waiting = asyncio.ensure_future(take(slow, 10))
    await until(lambda: hub.followers(SID) == 1)
    events.deltas(1, 1, *[f"w{i} " for i in range(10)])  # one read of 10 items: more than it may queue
    assert ids(await waiting) == [f"3.1.{i}" for i in range(10)]
    after = asyncio.ensure_future(rest(slow))
    await until(lambda: hub.followers(SID) == 1)  # back on the poller
    events.turn_end()
    assert ids(await after) == ["4", "5", "6"]
    await hub.aclose()


@pytest.mark.parametrize(
    "cursor",
    ["-1", "garbage", "2147483647", "2147483648", "99999999999999999999", "1.1.1.1", "3.1.5", "x" * 10_240, "4:0", "1\r\nX: y"],
)
async def test_a_hostile_last_event_id_is_an_invalid_stream_cursor_and_the_stream_stays_readable(
    hub: StreamHub, events: Events, cursor: str
) -> None:
    events.turn_start()
    with pytest.raises(InvalidStreamCursor) as caught:
        await hub.subscribe(SID, cursor)
    assert len(str(caught.value)) < 300
    assert hub.pollers == 0
    assert ids(await take(await hub.subscribe(SID), 3)) == ["1", "2", "3"]


@pytest.mark.parametrize("cursor", ["3:9", "3:", ":0", "3.1.0:0", "1:1:1"])
async def test_a_part_id_that_names_no_item_is_an_invalid_stream_cursor_in_the_ag_ui_encoding(
    hub: StreamHub, events: Events, cursor: str
) -> None:
    events.turn_start()
    with pytest.raises(InvalidStreamCursor):
        await hub.subscribe(SID, cursor, "ag-ui")


async def test_an_unknown_encoding_is_refused(hub: StreamHub) -> None:
    with pytest.raises(ValueError, match="unknown stream encoding"):
        await hub.subscribe(SID, None, "xml")  # type: ignore[arg-type]


async def test_a_write_in_this_process_is_read_at_once_not_at_the_next_poll(store: Store, events: Events) -> None:
    # A ten-minute poll: only being told of the write can bring the delta within the test.
    hub = StreamHub(store, poll_seconds=600, call_poll_seconds=None)
    items, waiting = await following(hub, events)
    reads = hub.store_reads
    events.deltas(1, 1, "first token")
    assert ids(await waiting) == ["3.1.0"]
    assert hub.store_reads == reads + 1
    await items.aclose()
    await hub.aclose()


async def test_on_sqlite_a_poller_does_not_back_off_while_a_model_call_is_open(store: Store, events: Events) -> None:
    # A writer in another process is not heard on SQLite: the first token must not wait out a back-off.
    hub = StreamHub(store, poll_seconds=0.1, max_poll_seconds=60)
    items, waiting = await following(hub, events)
    reads = hub.store_reads
    await until(lambda: hub.store_reads >= reads + 5)
    assert hub.poll_interval(SID) == SQLITE_CALL_POLL_SECONDS < 0.1
    events.turn_end()  # the call ended: an idle stream backs off again (here it ends, archived)
    assert ids(await waiting) == ["4"]
    await items.aclose()
    await hub.aclose()
