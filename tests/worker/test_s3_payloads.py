"""The s3 payload driver (the SDK's ``S3StorageDriver`` over ``LazyAioboto3Client``) against moto's
S3 server on loopback: what it registers, where it says it stores, and its typed errors."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.converter import StorageDriverRetrieveContext, StorageDriverStoreContext, StorageDriverWorkflowInfo

from agentrt.schemas import ConfigurationError
from agentrt.worker import (
    AgentrtConfig,
    PayloadConfig,
    PayloadNotFound,
    PayloadStorageUnavailable,
    S3PayloadDriver,
    build_data_converter,
    driver_location,
    payload_storage,
)
from tests._s3 import S3Server, s3_server  # noqa: F401 (a fixture)

CONTEXT = StorageDriverStoreContext(target=StorageDriverWorkflowInfo(namespace="default", id="session-a", run_id="r1"))


@pytest.fixture
def bucket(s3_server: S3Server) -> str:  # noqa: F811
    return s3_server.create_bucket(f"agentrt-{uuid.uuid4().hex[:12]}")


def test_the_s3_driver_reads_whenever_a_bucket_is_set_and_writes_only_when_named() -> None:
    settings = PayloadConfig(driver="store", bucket="bucket-a", endpoint_url="http://127.0.0.1:9000")

    storage = payload_storage(AgentrtConfig(payloads=settings))

    (s3,) = [d for d in storage.readers if isinstance(d, S3PayloadDriver)]
    assert storage.writer is not s3 and driver_location(s3) == "s3://bucket-a at http://127.0.0.1:9000"
    writes = payload_storage(AgentrtConfig(payloads=PayloadConfig(driver="s3", bucket="bucket-a")))
    assert isinstance(writes.writer, S3PayloadDriver) and writes.writer in writes.readers
    assert driver_location(writes.writer) == "s3://bucket-a"
    assert not [d for d in payload_storage(AgentrtConfig()).readers if isinstance(d, S3PayloadDriver)]


def test_a_data_converter_for_the_s3_driver_without_a_bucket_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r'\[payloads\]: \[payloads\] driver = "s3" needs a bucket'):
        build_data_converter(AgentrtConfig(payloads=PayloadConfig(driver="s3")))


async def test_the_converter_stores_a_big_value_in_the_bucket_and_reads_it_back(
    s3_server: S3Server, bucket: str  # noqa: F811
) -> None:
    config = AgentrtConfig(payloads=PayloadConfig(driver="s3", bucket=bucket, endpoint_url=s3_server.endpoint_url, threshold_bytes=1000))
    converter = build_data_converter(config)

    encoded = await converter._with_store_context(CONTEXT).encode(["b" * 5000, "small"])

    assert encoded[1].metadata["encoding"] == b"json/plain"
    (key,) = s3_server.keys(bucket)
    assert key.startswith("v0/ns/default/wt/null/wi/session-a/ri/r1/d/sha256/")
    assert await build_data_converter(config).decode(encoded, [str, str]) == ["b" * 5000, "small"]


async def test_one_driver_serves_event_loops_of_several_threads(s3_server: S3Server, bucket: str) -> None:  # noqa: F811
    driver = S3PayloadDriver(bucket, endpoint_url=s3_server.endpoint_url)
    claims = await driver.store(CONTEXT, [Payload(data=b"from the test's loop")])

    def in_another_loop() -> list[Payload]:
        async def read() -> list[Payload]:
            try:
                return await driver.retrieve(StorageDriverRetrieveContext(), claims)
            finally:
                await driver.client.aclose()
        return asyncio.run(read())

    found: list[Payload] = []
    thread = threading.Thread(target=lambda: found.extend(in_another_loop()))
    thread.start()
    await asyncio.to_thread(thread.join)
    await driver.client.aclose()

    assert [p.data for p in found] == [b"from the test's loop"]


async def test_a_claim_naming_an_object_the_bucket_does_not_hold_is_payload_not_found(
    s3_server: S3Server, bucket: str  # noqa: F811
) -> None:
    driver = S3PayloadDriver(bucket, endpoint_url=s3_server.endpoint_url)
    (claim,) = await driver.store(CONTEXT, [Payload(data=b"kept")])
    s3_server.client().delete_object(Bucket=bucket, Key=claim.claim_data["key"])

    with pytest.raises(PayloadNotFound) as raised:
        await driver.retrieve(StorageDriverRetrieveContext(), [claim])
    await driver.client.aclose()

    assert (raised.value.driver, raised.value.key, raised.value.location) == ("aws.s3driver", claim.claim_data["key"], f"s3://{bucket}")
    assert "every client and worker must use the same payload storage" in str(raised.value)


async def test_no_aws_credentials_is_payload_storage_unavailable_saying_where_they_are_looked_for(
    s3_server: S3Server, bucket: str, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    # No key in the environment and no ~/.aws (the fixture points AWS_CONFIG_FILE at /dev/null).
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    driver = S3PayloadDriver(bucket, endpoint_url=s3_server.endpoint_url)

    with pytest.raises(PayloadStorageUnavailable) as raised:
        await driver.store(CONTEXT, [Payload(data=b"no credentials")])
    await driver.client.aclose()

    print(raised.value)
    assert "no AWS credentials found" in str(raised.value) and "AWS_PROFILE" in str(raised.value)
