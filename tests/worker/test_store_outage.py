"""StoreOutageInterceptor on a sync activity (run on the worker's thread pool, as ``tool.execute``
is): the attempt that met a stopped PostgreSQL waits within itself, heartbeating its wait, and
answers once the store is back. Its heartbeat used to be sent from the event loop, where the SDK's
heartbeat for a sync activity blocks waiting on that same loop: the worker froze for 10 s and the
attempt failed with ``TimeoutError``."""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

from sqlalchemy import text
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.common import RetryPolicy
from temporalio.worker import Worker

from agentrt.client import AgentClient
from agentrt.schemas import SESSION_ID_PREFIX, ActivityWait
from agentrt.store import Store
from agentrt.worker._store_outage import StoreOutageInterceptor
from tests._private_pg import PrivatePostgres, private_pg  # noqa: F401 - the fixture

OUTAGE_SECONDS = 12  # longer than the 10 s the SDK's sync heartbeat blocked for
READ_ONLY_SECONDS = 6  # a SQLite store that answers reads but refuses writes, this long


@workflow.defn(sandboxed=False)
class ReadsTheStore:
    @workflow.run
    async def run(self, name: str = "store.read_one") -> str:
        return await workflow.execute_activity(
            name, start_to_close_timeout=timedelta(seconds=120), heartbeat_timeout=timedelta(seconds=3),
            retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=100), maximum_attempts=5),
        )


async def test_a_sync_activity_waits_out_a_stopped_store_within_its_attempt(
    private_pg: PrivatePostgres, temporal_server  # type: ignore[no-untyped-def]
) -> None:
    store = Store.open(private_pg.create_database("outage"))

    @activity.defn(name="store.read_one")
    def read_one() -> str:
        with store.engine.connect() as conn:
            return str(conn.execute(text("SELECT 'answered'")).scalar())

    temporal = await Client.connect(temporal_server.address)
    queue = f"outage-{uuid.uuid4().hex[:8]}"
    session_id = uuid.uuid4().hex[:12]
    waits: list[ActivityWait] = []
    with ThreadPoolExecutor(4) as pool:
        async with Worker(
            temporal, task_queue=queue, workflows=[ReadsTheStore], activities=[read_one], activity_executor=pool,
            interceptors=[StoreOutageInterceptor(store)],
        ):
            await asyncio.to_thread(private_pg.stop)
            handle = await temporal.start_workflow(ReadsTheStore.run, id=SESSION_ID_PREFIX + session_id, task_queue=queue)
            client = AgentClient(temporal, task_queue=queue)
            loop = asyncio.get_running_loop()
            stopped = loop.time()
            while loop.time() - stopped < OUTAGE_SECONDS:
                waits += await client.sessions.waits(session_id)
                await asyncio.sleep(0.5)
            await asyncio.to_thread(private_pg.start)
            assert await asyncio.wait_for(handle.result(), 120) == "answered"
    store.close()

    assert waits, "no wait was ever shown"
    # One attempt waited the whole outage: no retry, no TimeoutError of a blocked heartbeat.
    assert {(w.activity, w.kind, w.attempt) for w in waits} == {("store.read_one", "store_unavailable", 1)}, waits
    assert "the store does not answer at postgresql+psycopg://" in waits[-1].message


async def test_a_store_that_answers_reads_but_refuses_writes_is_waited_out_until_it_takes_writes(
    tmp_path: Path, temporal_server  # type: ignore[no-untyped-def]
) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 'agentrt.db'}")
    # The database and its WAL, not the shared-memory file: SQLite maps that one, and a mapped page of
    # an immutable file is a SIGBUS, not an error.
    files = [str(p) for p in tmp_path.iterdir() if p.name in ("agentrt.db", "agentrt.db-wal")]

    @activity.defn(name="store.write_one")
    def write_one() -> str:
        with store.engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = version_num"))
        return "written"

    temporal = await Client.connect(temporal_server.address)
    queue = f"outage-{uuid.uuid4().hex[:8]}"
    session_id = uuid.uuid4().hex[:12]
    waits: list[ActivityWait] = []
    subprocess.run(["chattr", "+i", *files], check=True)  # immutable: unwritable even for root
    try:
        with ThreadPoolExecutor(4) as pool:
            async with Worker(
                temporal, task_queue=queue, workflows=[ReadsTheStore], activities=[write_one], activity_executor=pool,
                interceptors=[StoreOutageInterceptor(store)],
            ):
                handle = await temporal.start_workflow(
                    ReadsTheStore.run, "store.write_one", id=SESSION_ID_PREFIX + session_id, task_queue=queue
                )
                client = AgentClient(temporal, task_queue=queue)
                loop = asyncio.get_running_loop()
                began = loop.time()
                while loop.time() - began < READ_ONLY_SECONDS:
                    waits += await client.sessions.waits(session_id)
                    await asyncio.sleep(0.5)
                subprocess.run(["chattr", "-i", *files], check=True)
                assert await asyncio.wait_for(handle.result(), 120) == "written"
    finally:
        subprocess.run(["chattr", "-i", *files], check=False)
        store.close()

    # The reads it answered did not end the wait: the attempt waited until a write went through
    # (a read probe gave up at once and spent the activity's 5 attempts in seconds).
    assert waits and {(w.kind, w.attempt) for w in waits} == {("store_unavailable", 1)}, waits
