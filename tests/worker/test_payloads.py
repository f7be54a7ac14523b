"""Big payloads through the SDK's ExternalStorage: the store and directory drivers, the data
converter, and a real workflow whose multi-megabyte values never enter its history."""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    import psycopg
    import pytest
    from pydantic import BaseModel
    from sqlalchemy import text
    from temporalio.client import Client
    from temporalio.converter import (
        StorageDriver,
        StorageDriverClaim,
        StorageDriverRetrieveContext,
        StorageDriverStoreContext,
        StorageDriverWorkflowInfo,
    )
    from temporalio.worker import Worker

    from agentrt.store import Store, get_payloads
    from agentrt.worker import (
        AgentrtConfig,
        DevServer,
        DirectoryPayloadDriver,
        PayloadConfig,
        PayloadNotFound,
        PayloadStorageError,
        StorePayloadDriver,
        build_data_converter,
        workflow_runner,
    )
    from agentrt.worker._payloads import payload_key
    from tests._pg import create_temp_database, drop_database

STORE_CONTEXT = StorageDriverStoreContext()
RETRIEVE_CONTEXT = StorageDriverRetrieveContext()
UNKNOWN_KEY = "0" * 64


def big_payload(size: int = 300 * 1024, fill: str = "a") -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(fill * size).encode())


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this module; skipped locally without a server, a failure in CI."""
    try:
        url = create_temp_database()
    except psycopg.OperationalError as e:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL is required in CI: {str(e).strip()}")
        pytest.skip(f"PostgreSQL unavailable: {str(e).strip()}")
    yield url
    drop_database(url)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def payload_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """An application store with an empty ``payloads`` table: a new SQLite file, or the module's PostgreSQL database."""
    url = f"sqlite:///{tmp_path / 'agentrt.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    with Store.open(url) as opened:
        yield opened
        if request.param == "postgresql":
            with opened.engine.begin() as conn:
                conn.execute(text("TRUNCATE payloads"))


# ---------------------------------------------------------------- the store driver


async def test_the_store_driver_round_trips_a_payload_kept_under_its_sha256(payload_store: Store) -> None:
    driver = StorePayloadDriver(payload_store)
    payload = big_payload()
    key, data = payload_key(payload)

    [claim] = await driver.store(STORE_CONTEXT, [payload])

    assert claim.claim_data == {"key": key}
    assert get_payloads(payload_store, [key]) == {key: data}
    assert await driver.retrieve(RETRIEVE_CONTEXT, [claim]) == [payload]


async def test_the_store_driver_stores_a_payload_twice_as_one_row(payload_store: Store) -> None:
    driver = StorePayloadDriver(payload_store)
    first, second = big_payload(fill="a"), big_payload(fill="b")

    claims = await driver.store(STORE_CONTEXT, [first, second, first])
    again = await driver.store(STORE_CONTEXT, [first])

    assert claims[0] == claims[2] == again[0] != claims[1]
    with payload_store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM payloads")).scalar() == 2
    assert await driver.retrieve(RETRIEVE_CONTEXT, claims) == [first, second, first]


async def test_the_store_driver_says_which_key_it_does_not_hold(payload_store: Store) -> None:
    driver = StorePayloadDriver(payload_store)
    with pytest.raises(PayloadNotFound, match=f"payload '{UNKNOWN_KEY}' in agentrt.store .*not found; every client and worker") as err:
        await driver.retrieve(RETRIEVE_CONTEXT, [StorageDriverClaim(claim_data={"key": UNKNOWN_KEY})])
    assert (err.value.driver, err.value.key) == ("agentrt.store", UNKNOWN_KEY)


async def test_the_store_driver_opens_its_database_only_when_a_payload_needs_it(tmp_path: Path) -> None:
    db = tmp_path / "lazy" / "agentrt.db"
    driver = StorePayloadDriver(url=f"sqlite:///{db}")
    assert not db.exists()

    [claim] = await driver.store(STORE_CONTEXT, [big_payload()])

    assert db.exists()
    assert await driver.retrieve(RETRIEVE_CONTEXT, [claim]) == [big_payload()]
    driver.close()


# ---------------------------------------------------------------- the directory driver


async def test_the_directory_driver_writes_one_content_addressed_file_per_payload(tmp_path: Path) -> None:
    driver = DirectoryPayloadDriver(tmp_path / "payloads")
    payload = big_payload()
    key, data = payload_key(payload)

    [claim] = await driver.store(STORE_CONTEXT, [payload])

    assert claim.claim_data == {"key": key}
    assert driver.path(key) == tmp_path / "payloads" / key[:2] / key
    assert driver.path(key).read_bytes() == data
    assert await driver.retrieve(RETRIEVE_CONTEXT, [claim]) == [payload]


async def test_the_directory_driver_stores_a_payload_twice_as_one_file_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    driver = DirectoryPayloadDriver(tmp_path)
    first, second = big_payload(fill="a"), big_payload(fill="b")

    claims = await driver.store(STORE_CONTEXT, [first, second, first])
    inode = driver.path(claims[0].claim_data["key"]).stat().st_ino
    again = await driver.store(STORE_CONTEXT, [first])

    assert claims[0] == claims[2] == again[0] != claims[1]
    assert driver.path(claims[0].claim_data["key"]).stat().st_ino == inode
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == sorted(c.claim_data["key"] for c in claims[:2])


async def test_the_directory_driver_says_which_key_it_does_not_hold(tmp_path: Path) -> None:
    driver = DirectoryPayloadDriver(tmp_path)
    with pytest.raises(PayloadNotFound, match=f"payload '{UNKNOWN_KEY}' in agentrt.directory \\({tmp_path}\\): not found"):
        await driver.retrieve(RETRIEVE_CONTEXT, [StorageDriverClaim(claim_data={"key": UNKNOWN_KEY})])


async def test_the_directory_driver_refuses_a_claim_that_is_not_a_sha256_key(tmp_path: Path) -> None:
    (tmp_path / "secret").write_bytes(b"not a payload")
    driver = DirectoryPayloadDriver(tmp_path / "payloads")
    with pytest.raises(PayloadStorageError, match="malformed claim"):
        await driver.retrieve(RETRIEVE_CONTEXT, [StorageDriverClaim(claim_data={"key": "../secret"})])


async def test_the_directory_driver_refuses_bytes_that_do_not_match_their_key(tmp_path: Path) -> None:
    driver = DirectoryPayloadDriver(tmp_path)
    [claim] = await driver.store(STORE_CONTEXT, [big_payload()])
    driver.path(claim.claim_data["key"]).write_bytes(payload_key(big_payload(fill="z"))[1])
    with pytest.raises(PayloadStorageError, match="do not match their SHA-256 key"):
        await driver.retrieve(RETRIEVE_CONTEXT, [claim])


# ---------------------------------------------------------------- the data converter


def reference_of(payload: Payload) -> dict[str, object]:
    assert payload.metadata["messageType"] == b"temporal.api.sdk.v1.ExternalStorageReference"
    return json.loads(payload.data)


async def test_the_converter_stores_values_at_the_threshold_and_keeps_smaller_ones_inline(tmp_path: Path) -> None:
    config = AgentrtConfig(payloads=PayloadConfig(driver="directory", path=str(tmp_path), threshold_bytes=1000))
    converter = build_data_converter(config)

    small, big = await converter.encode(["x" * 100, "y" * 2000])

    assert small.metadata["encoding"] == b"json/plain"
    assert reference_of(big)["driverName"] == "agentrt.directory"
    assert await converter.decode([small, big], [str, str]) == ["x" * 100, "y" * 2000]


async def test_a_copy_of_the_converter_shares_its_pydantic_converters_and_their_type_adapter_cache(tmp_path: Path) -> None:
    # The SDK copies the data converter (dataclasses.replace) for every payload it converts
    # with external storage on; each copy must not rebuild the converters or their cache.
    converter = build_data_converter(AgentrtConfig(payloads=PayloadConfig(driver="directory", path=str(tmp_path))))
    copy = dataclasses.replace(converter)

    class Note(BaseModel):
        text: str

    (payload,) = converter.payload_converter.to_payloads([Note(text="a")])
    assert converter.payload_converter.from_payloads([payload], [Note]) == [Note(text="a")]
    json_converter = copy.payload_converter._inner_payload_converter.converters[b"json/plain"]
    hits = json_converter._type_adapter.cache_info().hits

    assert copy.payload_converter.from_payloads([payload], [Note]) == [Note(text="a")]
    assert json_converter is converter.payload_converter._inner_payload_converter.converters[b"json/plain"]
    assert json_converter._type_adapter.cache_info().hits == hits + 1


async def test_copies_of_the_converter_share_one_payload_and_failure_converter_and_still_store_big_values(
    tmp_path: Path,
) -> None:
    # Each copy used to build a payload converter and a failure converter of its own.
    config = AgentrtConfig(payloads=PayloadConfig(driver="directory", path=str(tmp_path), threshold_bytes=1000))
    converter = build_data_converter(config)
    copy = dataclasses.replace(converter, payload_codec=None)

    assert copy.payload_converter is converter.payload_converter
    assert copy.failure_converter is converter.failure_converter
    small, big = await copy.encode(["x" * 10, "y" * 2000])
    assert reference_of(big)["driverName"] == "agentrt.directory"
    assert await converter.decode([small, big], [str, str]) == ["x" * 10, "y" * 2000]


async def test_the_converter_reads_references_of_a_driver_it_no_longer_stores_with(tmp_path: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'agentrt.db'}"
    payloads = PayloadConfig(driver="store", path=str(tmp_path / "files"))
    written = await build_data_converter(AgentrtConfig(database_url=db_url, payloads=payloads)).encode(["b" * 300_000])

    payloads.driver = "none"
    reader = build_data_converter(AgentrtConfig(database_url=db_url, payloads=payloads))

    assert reference_of(written[0])["driverName"] == "agentrt.store"
    assert await reader.decode(written, [str]) == ["b" * 300_000]
    assert (await reader.encode(["c" * 300_000]))[0].metadata["encoding"] == b"json/plain"


class MemoryDriver(StorageDriver):
    """A driver of the user's own (as an S3 driver would be), keeping payloads in a dict."""

    def __init__(self) -> None:
        self.blobs: dict[str, Payload] = {}
        self.contexts: list[StorageDriverStoreContext] = []

    def name(self) -> str:
        return "test.memory"

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        self.contexts.append(context)
        claims = []
        for payload in payloads:
            key = payload_key(payload)[0]
            self.blobs[key] = payload
            claims.append(StorageDriverClaim(claim_data={"key": key}))
        return claims

    async def retrieve(self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        return [self.blobs[c.claim_data["key"]] for c in claims]


async def test_a_driver_of_ones_own_stores_and_the_agentrt_drivers_still_read(tmp_path: Path) -> None:
    config = AgentrtConfig(payloads=PayloadConfig(driver="directory", path=str(tmp_path)))
    old = await build_data_converter(config).encode(["o" * 300_000])
    memory = MemoryDriver()
    converter = build_data_converter(config, driver=memory)

    new = await converter.encode(["n" * 300_000])

    assert reference_of(new[0])["driverName"] == "test.memory"
    assert len(memory.blobs) == 1
    assert await converter.decode(old + new, [str, str]) == ["o" * 300_000, "n" * 300_000]


async def test_binding_a_store_context_keeps_the_agentrt_converter_and_reaches_a_driver_of_ones_own(tmp_path: Path) -> None:
    # The SDK binds the workflow's or activity's store context for every payload it visits; the
    # agentrt drivers ignore it (content-addressed), so the converter is not copied for them.
    config = AgentrtConfig(payloads=PayloadConfig(driver="directory", path=str(tmp_path), threshold_bytes=1000))
    context = StorageDriverStoreContext(target=StorageDriverWorkflowInfo(namespace="default", id="session-a", run_id="r1"))
    converter = build_data_converter(config)

    bound = converter._with_store_context(context)

    assert bound is converter
    (big,) = await bound.encode(["y" * 2000])
    assert reference_of(big)["driverName"] == "agentrt.directory"
    memory = MemoryDriver()
    own = build_data_converter(config, driver=memory)
    await own._with_store_context(context).encode(["m" * 300_000])
    assert [c.target for c in memory.contexts] == [context.target]


# ---------------------------------------------------------------- end to end on the dev server

PRODUCED_BYTES = 5 * 1024 * 1024
FORWARDED_BYTES = 1_300_000
ECHO_BYTES = 400 * 1024
RETRY = RetryPolicy(maximum_attempts=3)


class BigPayloadInput(BaseModel):
    produce_bytes: int
    forward_bytes: int
    echo: str


class BigPayloadResult(BaseModel):
    produced_bytes: int
    forwarded_bytes: int
    echo: str


@activity.defn(name="test.big_text")
async def big_text(size: int) -> str:
    return "".join(chr(ord("a") + i % 26) for i in range(26)) * (size // 26) + "z" * (size % 26)


@activity.defn(name="test.text_length")
async def text_length(value: str) -> int:
    return len(value)


@workflow.defn
class BigPayloadWorkflow:
    """An activity returns ``produce_bytes`` of text; the workflow passes ``forward_bytes`` of
    it to a second activity and echoes its (big) input back as its (big) result."""

    @workflow.run
    async def run(self, input: BigPayloadInput) -> BigPayloadResult:
        produced = await workflow.execute_activity(
            big_text, input.produce_bytes, start_to_close_timeout=timedelta(seconds=60), retry_policy=RETRY
        )
        forwarded = await workflow.execute_activity(
            text_length, produced[: input.forward_bytes], start_to_close_timeout=timedelta(seconds=60), retry_policy=RETRY
        )
        return BigPayloadResult(produced_bytes=len(produced), forwarded_bytes=forwarded, echo=input.echo)


@pytest.mark.parametrize("driver", ["store", "directory"])
async def test_megabyte_payloads_complete_and_stay_out_of_workflow_history(
    temporal_server: DevServer, store: Store, store_url: str, tmp_path: Path, driver: str
) -> None:
    config = AgentrtConfig(database_url=store_url, payloads=PayloadConfig(driver=driver, path=str(tmp_path / "payloads")))
    # A workflow of its own, not a session: the converter alone, without the plugin's workflows.
    client = await Client.connect(temporal_server.address, data_converter=build_data_converter(config, store))
    task_queue = f"big-payloads-{uuid.uuid4().hex[:8]}"
    echo = "e" * ECHO_BYTES

    async with Worker(
        client,
        task_queue=task_queue,
        workflows=[BigPayloadWorkflow],
        activities=[big_text, text_length],
        workflow_runner=workflow_runner(),
    ):
        handle = await client.start_workflow(
            BigPayloadWorkflow.run,
            BigPayloadInput(produce_bytes=PRODUCED_BYTES, forward_bytes=FORWARDED_BYTES, echo=echo),
            id=f"big-payloads-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
        )
        result = await handle.result()

    assert result == BigPayloadResult(produced_bytes=PRODUCED_BYTES, forwarded_bytes=FORWARDED_BYTES, echo=echo)
    history = await handle.fetch_history()
    assert sum(event.ByteSize() for event in history.events) < 200_000
    produced = next(e for e in history.events if e.HasField("activity_task_completed_event_attributes"))
    [reference] = produced.activity_task_completed_event_attributes.result.payloads
    assert reference_of(reference)["driverName"] == f"agentrt.{driver}"
    assert reference.external_payloads[0].size_bytes > PRODUCED_BYTES
