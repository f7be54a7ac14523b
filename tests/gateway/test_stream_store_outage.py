"""A session's stream while its PostgreSQL store is stopped and started again: the subscriber keeps
its stream and gets every item written before and after the outage, once each, in order."""

from __future__ import annotations

import asyncio

from agentrt.gateway._stream import StreamHub
from agentrt.store import Store
from tests._private_pg import PrivatePostgres, private_pg  # noqa: F401 - the fixture
from tests.gateway.test_stream import SID, Events, ids, rest, take


async def test_a_stream_waits_out_a_stopped_store_and_carries_on(private_pg: PrivatePostgres) -> None:
    with Store.open(private_pg.create_database("streams")) as store:
        hub = StreamHub(store, poll_seconds=0.05, max_poll_seconds=0.1)  # reads during the outage
        events = Events(store)
        try:
            items = await hub.subscribe(SID)
            events.turn_start()
            before = await take(items, 3)
            await asyncio.to_thread(private_pg.stop)
            reading = asyncio.create_task(rest(items, timeout=60))  # the subscriber waits for more meanwhile
            reads = hub.store_reads
            await asyncio.sleep(3)
            assert hub.store_reads > reads  # the poller read (and found no store) during the outage
            await asyncio.to_thread(private_pg.start)
            events.deltas(1, 1, "after ", "the outage")
            events.turn_end("after the outage")
            after = await reading
        finally:
            await hub.aclose()
    assert [item.event for item in before] == ["TurnStarted", "UserMessageAdded", "ModelRequestStarted"]
    assert [item.event for item in after] == [
        "ModelTokenDelta", "ModelTokenDelta", "AssistantMessageCompleted", "TurnEnded", "SessionArchived",
    ]
    assert len(set(ids(before + after))) == 8
