"""Big payloads in S3, for clients and workers on many machines: the SDK's own
``temporalio.contrib.aws.s3driver.S3StorageDriver`` with its aioboto3 client, built from ``[payloads]``.

Two small pieces sit around the SDK's driver. The data converter is built synchronously, but an
aioboto3 client is an async context manager bound to the event loop that opens it, so
``LazyAioboto3Client`` opens one on first use in each running loop and hands every call to the
SDK's ``new_aioboto3_client`` adapter. And ``S3PayloadDriver`` (the SDK's driver, its storing and
reading untouched) says where it stores, for fingerprints and logs, and raises agentrt's typed
``PayloadStorageUnavailable`` / ``PayloadNotFound`` instead of the SDK's bare ``RuntimeError``.

Credentials come from the standard AWS chain (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``,
``AWS_PROFILE`` and ``~/.aws``, an instance or task role), never from agentrt.toml. Calls time out
(``CONNECT_TIMEOUT_SECONDS``, ``READ_TIMEOUT_SECONDS``) and botocore tries each at most
``MAX_ATTEMPTS`` times, so storage that does not answer is an error within seconds, not a hang;
inside a worker, Temporal's retry of the failed task or activity is the longer loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError
from temporalio.api.common.v1 import Payload
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.converter import StorageDriverClaim, StorageDriverRetrieveContext, StorageDriverStoreContext

from agentrt.worker._payload_errors import PayloadNotFound, PayloadStorageError, PayloadStorageUnavailable

__all__ = ["CONNECT_TIMEOUT_SECONDS", "MAX_ATTEMPTS", "READ_TIMEOUT_SECONDS", "S3_DRIVER_NAME", "LazyAioboto3Client", "S3PayloadDriver"]

S3_DRIVER_NAME = "aws.s3driver"  # the SDK's default driver name, so its references read alike
CONNECT_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 60.0
MAX_ATTEMPTS = 3  # botocore "standard" retries: the first try included
_REFUSED = {"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken"}
_CREDENTIALS_HINT = (
    "check the AWS credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE, ~/.aws, "
    "an instance or task role) and the bucket's policy"
)


class LazyAioboto3Client(S3StorageDriverClient):
    """An ``S3StorageDriverClient`` that opens an aioboto3 S3 client on first use in each running
    event loop and delegates ``put_object`` / ``get_object`` / ``object_exists`` to the SDK's
    aioboto3 adapter (``new_aioboto3_client``) over it.

    ``endpoint_url`` (an S3-compatible server; path-style addressing then) and ``region`` are
    passed to aioboto3; None leaves them to the AWS configuration chain. Errors become
    ``PayloadStorageUnavailable`` (``PayloadNotFound`` for a missing object) naming
    ``driver_name``, the bucket and the key. A loop's client lives until ``aclose`` in that loop.
    """

    def __init__(self, *, driver_name: str = S3_DRIVER_NAME, endpoint_url: str | None = None, region: str | None = None) -> None:
        self.driver_name = driver_name
        self.endpoint_url = endpoint_url
        self.region = region
        self._opened: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[tuple[AsyncExitStack, S3StorageDriverClient]]]
        self._opened = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()  # loops of several threads (a client in a thread of its own) share this

    def describe(self) -> Mapping[str, str]:
        """The endpoint and region asked for, added to the SDK driver's error messages."""
        return {k: v for k, v in (("endpoint_url", self.endpoint_url), ("region", self.region)) if v}

    async def _open(self) -> tuple[AsyncExitStack, S3StorageDriverClient]:
        import aioboto3  # imported on first use: a process without the s3 driver never loads it
        from aiobotocore.config import AioConfig
        from temporalio.contrib.aws.s3driver.aioboto3 import new_aioboto3_client

        config = AioConfig(
            connect_timeout=CONNECT_TIMEOUT_SECONDS,
            read_timeout=READ_TIMEOUT_SECONDS,
            retries={"max_attempts": MAX_ATTEMPTS, "mode": "standard"},
            s3={"addressing_style": "path"} if self.endpoint_url else None,
        )
        stack = AsyncExitStack()
        client = await stack.enter_async_context(
            aioboto3.Session().client("s3", endpoint_url=self.endpoint_url, region_name=self.region, config=config)
        )
        return stack, new_aioboto3_client(client)

    async def _client(self) -> S3StorageDriverClient:
        loop = asyncio.get_running_loop()
        with self._lock:
            opening = self._opened.get(loop)
            if opening is None or (opening.done() and opening.exception() is not None):
                opening = self._opened[loop] = loop.create_task(self._open())
        return (await asyncio.shield(opening))[1]

    def is_open(self) -> bool:
        """Whether an aioboto3 client is open (or opening) for the running loop."""
        with self._lock:
            return asyncio.get_running_loop() in self._opened

    async def aclose(self) -> None:
        """Close the aioboto3 client of the running loop, if one was opened."""
        with self._lock:
            opening = self._opened.pop(asyncio.get_running_loop(), None)
        if opening is not None and opening.done() and opening.exception() is None:
            await opening.result()[0].aclose()

    @contextlib.contextmanager
    def _translated(self, bucket: str, key: str, missing_is_not_found: bool = False) -> Iterator[None]:
        location = f"s3://{bucket}"
        try:
            yield
        except ClientError as err:
            error: Any = err.response.get("Error", {})
            code = str(error.get("Code", ""))
            if missing_is_not_found and code in ("NoSuchKey", "404"):
                raise PayloadNotFound(self.driver_name, key, location) from err
            if code == "NoSuchBucket":
                reason = f"bucket {bucket!r} does not exist{self._at()}; create it, or set [payloads] bucket / AGENTRT_PAYLOAD_BUCKET to one that does"
            elif code in _REFUSED:
                reason = f"access refused ({code}){self._at()}; {_CREDENTIALS_HINT}"
            else:
                reason = f"{code or 'error'}{self._at()}: {error.get('Message') or err}"
            raise PayloadStorageUnavailable(self.driver_name, key, location, reason) from err
        except NoCredentialsError as err:
            raise PayloadStorageUnavailable(self.driver_name, key, location, f"no AWS credentials found; {_CREDENTIALS_HINT}") from err
        except BotoCoreError as err:  # cannot connect, timed out, bad endpoint
            raise PayloadStorageUnavailable(
                self.driver_name, key, location, f"cannot reach S3{self._at()}: {err}; check [payloads] endpoint_url / AGENTRT_PAYLOAD_ENDPOINT_URL"
            ) from err

    def _at(self) -> str:
        return f" at {self.endpoint_url}" if self.endpoint_url else ""

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        client = await self._client()
        with self._translated(bucket, key):
            await client.put_object(bucket=bucket, key=key, data=data)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        client = await self._client()
        with self._translated(bucket, key):
            return await client.object_exists(bucket=bucket, key=key)

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        client = await self._client()
        with self._translated(bucket, key, missing_is_not_found=True):
            return await client.get_object(bucket=bucket, key=key)


@contextlib.contextmanager
def _typed_errors() -> Iterator[None]:
    """The SDK driver wraps every client error in a ``RuntimeError``; raise agentrt's typed one instead."""
    try:
        yield
    except RuntimeError as err:
        cause = err.__cause__
        if isinstance(cause, PayloadStorageError):
            raise cause from cause.__cause__
        raise


class S3PayloadDriver(S3StorageDriver):
    """The SDK's ``S3StorageDriver`` over a ``LazyAioboto3Client``, storing in ``bucket``
    (driver name ``aws.s3driver``; object keys ``v0/ns/<namespace>/.../d/sha256/<hash>``, the SDK's).

    ``location`` (``s3://<bucket>``, plus `` at <endpoint_url>`` when one is set) is what its
    fingerprint hashes: a client and a worker with the same bucket and endpoint store and read in
    the same place. ``store`` and ``retrieve`` raise ``PayloadStorageUnavailable`` (or
    ``PayloadNotFound``) when S3 refuses or does not answer.
    """

    def __init__(self, bucket: str, *, endpoint_url: str | None = None, region: str | None = None) -> None:
        self.bucket = bucket
        self.endpoint_url = endpoint_url
        self.client = LazyAioboto3Client(endpoint_url=endpoint_url, region=region)
        super().__init__(client=self.client, bucket=bucket, driver_name=S3_DRIVER_NAME)

    async def aclose(self) -> None:
        """Close this loop's S3 client (``LazyAioboto3Client.aclose``); the next use opens another."""
        await self.client.aclose()

    @property
    def location(self) -> str:
        return f"s3://{self.bucket}" + (f" at {self.endpoint_url}" if self.endpoint_url else "")

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        with _typed_errors():
            return await super().store(context, payloads)

    async def retrieve(self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        with _typed_errors():
            return await super().retrieve(context, claims)
