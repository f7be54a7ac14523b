"""Big Temporal payloads leave workflow history: agentrt's external-storage drivers and data converter.

The server fails a payload above 2 MiB and a gRPC message above 4 MB, and every byte in
history is replayed. With ``temporalio.converter.ExternalStorage`` the SDK hands each
payload at or above a threshold (256 KiB by default) to a driver and writes only a small
reference (driver name plus claim, about 200 bytes) into history. The drivers here are
content-addressed by the SHA-256 of the serialized payload, so a retried activity or a
replayed workflow task stores the same bytes under the same key once.

Whoever reads a reference needs the driver that wrote it: every client and worker of a
task queue must be built from the same payload settings (``AgentrtPlugin`` does it). Each
driver has a fingerprint (driver name and a hash of its location) that workers advertise
in their identity, so a client can tell before it sends a big payload whether they can
read it.

With ``[codec]`` keys the converter also encrypts every payload (``AesGcmCodec``). The SDK
applies the codec before external storage on the way out and after it on the way in, so
a big payload is encrypted first and the driver stores ciphertext: neither history nor
the store holds a payload in clear. Each key's fingerprint joins the storage fingerprints
a worker advertises, so a client refuses a message its workers could not decrypt, and a client
without keys one it would write in clear to workers that encrypt (``PayloadStorage.codec_mismatch``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import os
import re
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import (
    DataConverter,
    DefaultFailureConverter,
    DefaultFailureConverterWithEncodedAttributes,
    ExternalStorage,
    FailureConverter,
    PayloadConverter,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from agentrt.store import Store, database_url, get_payloads, put_payloads
from agentrt.worker._codec import AesGcmCodec, KeylessCodec, PayloadCodecMismatch, codec_fingerprints
from agentrt.worker._config import AgentrtConfig
from agentrt.worker._input_check import invalid_workflow_input
from agentrt.worker._payload_errors import PayloadNotFound, PayloadStorageError

__all__ = [
    "DIRECTORY_DRIVER_NAME",
    "STORE_DRIVER_NAME",
    "DirectoryPayloadDriver",
    "PayloadStorage",
    "StorePayloadDriver",
    "build_data_converter",
    "driver_fingerprint",
    "driver_location",
    "payload_key",
    "payload_storage",
]

STORE_DRIVER_NAME = "agentrt.store"
DIRECTORY_DRIVER_NAME = "agentrt.directory"
_KEY = re.compile(r"[0-9a-f]{64}")


class SharedPydanticPayloadConverter(PydanticPayloadConverter):
    """``PydanticPayloadConverter`` whose encoding converters are built once per process.

    ``DataConverter`` builds a new payload converter in ``__post_init__``, and with external
    storage the SDK copies the data converter (``dataclasses.replace``) for every payload it
    converts in a workflow activation or an activity; each copy would build the pydantic
    converters again, each with an empty ``TypeAdapter`` cache. Sharing them (they hold no
    per-call state; the cache is an ``lru_cache``, safe across threads) keeps a copy cheap.
    """

    def __init__(self) -> None:  # nullary, as DataConverter.payload_converter_class needs
        # CompositePayloadConverter's own __init__, with the shared converters (not Pydantic's, which builds new ones).
        super(PydanticPayloadConverter, self).__init__(*_SHARED_PYDANTIC_CONVERTERS)

    def from_payloads(self, payloads: Sequence[Payload], type_hints: list[type] | None = None) -> list[Any]:
        """Raises ``InvalidWorkflowInput`` (worker/_input_check.py) for a workflow input that does not validate."""
        try:
            return super().from_payloads(payloads, type_hints)
        except Exception as err:
            invalid = invalid_workflow_input(err, payloads, type_hints)
            if invalid is None:
                raise
            raise invalid from None


_SHARED_PYDANTIC_CONVERTERS = tuple(PydanticPayloadConverter().converters.values())


@dataclasses.dataclass(frozen=True)
class SharedDataConverter(DataConverter):
    """``DataConverter`` whose copies share one payload converter and one failure converter per class.

    With external storage the SDK copies the data converter (``dataclasses.replace``, which runs
    ``__post_init__``) for every activity task and workflow activation; each copy would build
    its converters anew. They hold no per-call state (a serialization context makes a new
    instance through ``with_context``), so copies share them.
    """

    def __post_init__(self) -> None:
        object.__setattr__(self, "payload_converter", _shared_payload_converter(self.payload_converter_class))
        object.__setattr__(self, "failure_converter", _shared_failure_converter(self.failure_converter_class))

    def _with_store_context(self, store_ctx: StorageDriverStoreContext) -> DataConverter:
        # The SDK binds a store context per payload visit (two dataclass copies each, several
        # percent of a busy worker's CPU); storage that ignores it stays this very converter.
        if isinstance(self.external_storage, ContextFreeExternalStorage):
            return self
        return super()._with_store_context(store_ctx)


@dataclasses.dataclass(frozen=True)
class ContextFreeExternalStorage(ExternalStorage):
    """``ExternalStorage`` whose drivers and selector ignore the store context (which workflow
    or activity a payload belongs to): agentrt's content-addressed drivers. Binding a context
    returns the same instance instead of a copy."""

    def _with_store_context(self, ctx: StorageDriverStoreContext) -> ExternalStorage:
        return self


@functools.cache
def _shared_payload_converter(cls: type[PayloadConverter]) -> PayloadConverter:
    return DataConverter(payload_converter_class=cls).payload_converter  # wrapped as the SDK wraps it


@functools.cache
def _shared_failure_converter(cls: type[FailureConverter]) -> FailureConverter:
    return cls()


def payload_key(payload: Payload) -> tuple[str, bytes]:
    """``(key, data)``: the payload serialized deterministically and the SHA-256 hex (64 characters) of those bytes."""
    data = payload.SerializeToString(deterministic=True)
    return hashlib.sha256(data).hexdigest(), data


def _claim_key(driver: str, location: str, claim: StorageDriverClaim) -> str:
    key = claim.claim_data.get("key", "")
    if not _KEY.fullmatch(key):
        raise PayloadStorageError(driver, key, location, "malformed claim: 'key' must be 64 lower-case hex digits")
    return key


def _parse(driver: str, location: str, key: str, data: bytes | None) -> Payload:
    if data is None:
        raise PayloadNotFound(driver, key, location)
    if hashlib.sha256(data).hexdigest() != key:
        raise PayloadStorageError(driver, key, location, "stored bytes do not match their SHA-256 key")
    payload = Payload()
    payload.ParseFromString(data)
    return payload


class StorePayloadDriver(StorageDriver):
    """Payloads in the ``payloads`` table of the application store (driver name ``agentrt.store``).

    Give an open ``store`` (shared; not closed here) or a ``url`` (``store.database_url``
    rules: ``None`` means ``AGENTRT_DATABASE_URL`` or ``./.agentrt/agentrt.db``), which is
    opened and migrated on the first store or retrieve, so building a client opens no
    database. Database calls run in a thread. ``retrieve`` raises ``PayloadNotFound`` for a
    key the table does not hold.
    """

    def __init__(self, store: Store | None = None, *, url: str | None = None) -> None:
        if store is not None and url is not None:
            raise ValueError("give StorePayloadDriver a store or a url, not both")
        self._store = store
        self._url = url
        self._owned = False
        self._lock = threading.Lock()

    def name(self) -> str:
        return STORE_DRIVER_NAME

    @property
    def location(self) -> str:
        """The database URL, password hidden; a relative SQLite file made absolute (as SQLite opens it)."""
        url = self._store.engine.url if self._store is not None else make_url(database_url(self._url))
        if url.drivername.startswith("sqlite") and url.database and url.database != ":memory:":
            url = url.set(database=os.path.abspath(url.database))
        return url.render_as_string(hide_password=True)

    def _open(self) -> Store:
        with self._lock:
            if self._store is None:
                self._store = Store.open(self._url)
                self._owned = True
            return self._store

    def close(self) -> None:
        """Close the store if this driver opened it (from ``url``); a shared store stays open."""
        with self._lock:
            if self._owned and self._store is not None:
                self._store.close()
                self._store = None
                self._owned = False

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        """Insert each payload under its content key (insert-ignore); one claim ``{"key": sha256 hex}`` per payload."""
        keyed = [payload_key(p) for p in payloads]
        if keyed:
            await asyncio.to_thread(lambda: put_payloads(self._open(), dict(keyed)))
        return [StorageDriverClaim(claim_data={"key": key}) for key, _ in keyed]

    async def retrieve(self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        """The payloads behind ``claims``, in order; ``PayloadNotFound`` / ``PayloadStorageError`` otherwise."""
        location = self.location
        keys = [_claim_key(STORE_DRIVER_NAME, location, c) for c in claims]
        if not keys:
            return []
        found = await asyncio.to_thread(lambda: get_payloads(self._open(), keys))
        return [_parse(STORE_DRIVER_NAME, location, key, found.get(key)) for key in keys]


class DirectoryPayloadDriver(StorageDriver):
    """Payloads as files ``<root>/<key[:2]>/<key>`` (driver name ``agentrt.directory``).

    ``root`` is made absolute against the working directory at construction and created on
    the first store. Each file holds the serialized payload, written to a temporary file in
    the same directory, fsynced and renamed into place (``os.replace``), so a reader never
    sees a partial file; an existing file is left as it is. File I/O runs in a thread.
    Every process reading these payloads must see the same directory (a shared volume).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self._root = Path(root).expanduser().absolute()

    def name(self) -> str:
        return DIRECTORY_DRIVER_NAME

    @property
    def root(self) -> Path:
        return self._root

    def path(self, key: str) -> Path:
        """The file that holds the payload with content key ``key``."""
        return self._root / key[:2] / key

    def _write(self, key: str, data: bytes) -> None:
        target = self.path(key)
        if target.exists():
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{key}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        if os.name == "posix":  # make the rename itself durable
            dir_fd = os.open(target.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def _read(self, key: str) -> bytes | None:
        try:
            return self.path(key).read_bytes()
        except FileNotFoundError:
            return None

    async def store(self, context: StorageDriverStoreContext, payloads: Sequence[Payload]) -> list[StorageDriverClaim]:
        """Write each payload to its content-addressed file; one claim ``{"key": sha256 hex}`` per payload."""
        keyed = [payload_key(p) for p in payloads]

        def write_all() -> None:
            for key, data in dict(keyed).items():
                self._write(key, data)

        if keyed:
            await asyncio.to_thread(write_all)
        return [StorageDriverClaim(claim_data={"key": key}) for key, _ in keyed]

    async def retrieve(self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]) -> list[Payload]:
        """The payloads behind ``claims``, in order; ``PayloadNotFound`` / ``PayloadStorageError`` otherwise."""
        location = str(self._root)
        keys = [_claim_key(DIRECTORY_DRIVER_NAME, location, c) for c in claims]
        blobs = await asyncio.to_thread(lambda: [self._read(key) for key in keys])
        return [_parse(DIRECTORY_DRIVER_NAME, location, key, data) for key, data in zip(keys, blobs)]


def driver_location(driver: StorageDriver) -> str | None:
    """Where ``driver`` keeps payloads, for people and fingerprints: the database URL (password
    hidden) of a store driver, the directory of a directory driver, ``s3://<bucket>`` (and the
    endpoint) of the configured s3 driver, None for other drivers."""
    if isinstance(driver, DirectoryPayloadDriver):
        return str(driver.root)
    location = getattr(driver, "location", None)  # StorePayloadDriver, S3PayloadDriver (not imported: botocore)
    return location if isinstance(location, str) else None


def driver_fingerprint(driver: StorageDriver) -> str:
    """``<driver name>@<first 12 hex digits of the SHA-256 of its location>``, or the bare driver
    name when the claims themselves say where the payload is (``driver_location`` is None).

    Two processes with the same fingerprint store and read payloads in the same place; the
    hash keeps database hosts and paths out of worker identities, which every client sees.
    """
    location = driver_location(driver)
    if location is None:
        return driver.name()
    return f"{driver.name()}@{hashlib.sha256(location.encode()).hexdigest()[:12]}"


_KEYLESS = KeylessCodec()


@dataclasses.dataclass(frozen=True)
class PayloadStorage:
    """One process's external payload storage: the drivers that read references, the one that
    writes big payloads (``writer``; None keeps every payload inline), the size from which a
    serialized payload leaves history (``threshold_bytes``), and the codec that encrypts every
    payload (``codec``; None leaves payloads in clear)."""

    readers: tuple[StorageDriver, ...]
    writer: StorageDriver | None
    threshold_bytes: int
    codec: AesGcmCodec | None = None

    async def aclose(self) -> None:
        """Close what the drivers opened for the running event loop (the s3 driver's client);
        a later use opens it again."""
        for driver in self.readers:
            close = getattr(driver, "aclose", None)
            if close is not None:
                await close()

    def data_converter(self) -> DataConverter:
        """Pydantic JSON with this external storage, encrypted by ``codec`` when there is one.

        With a codec, failure messages and stack traces move into the failure's encoded
        attributes (``DefaultFailureConverterWithEncodedAttributes``) and are encrypted too.
        Without one, a ``KeylessCodec`` passes payloads through and refuses encrypted ones
        with ``PayloadDecryptionError`` (a process missing the keys says so).
        """
        writer = self.writer
        own = all(isinstance(d, (StorePayloadDriver, DirectoryPayloadDriver)) for d in self.readers)
        external = (ContextFreeExternalStorage if own else ExternalStorage)(
            drivers=list(self.readers),
            driver_selector=lambda _context, _payload: writer,
            payload_size_threshold=self.threshold_bytes,
        )
        return SharedDataConverter(
            payload_converter_class=SharedPydanticPayloadConverter,
            payload_codec=self.codec or _KEYLESS,
            failure_converter_class=(
                DefaultFailureConverterWithEncodedAttributes if self.codec is not None else DefaultFailureConverter
            ),
            external_storage=external,
        )

    @property
    def writer_fingerprint(self) -> str | None:
        return driver_fingerprint(self.writer) if self.writer is not None else None

    @property
    def codec_fingerprint(self) -> str | None:
        """The fingerprint of the key new payloads are encrypted with (``aes-gcm:<id>@<hash>``), or None."""
        return self.codec.current_fingerprint if self.codec is not None else None

    def codec_mismatch(
        self, item_id: str, task_queue: str, advertised: dict[str, list[str]], kind: str = "session"
    ) -> PayloadCodecMismatch | None:
        """The ``PayloadCodecMismatch`` a message from a process with this codec to the workers that
        advertise ``advertised`` (worker identity -> payload fingerprints) would be, or None. With a
        codec: none of them holds its current key. Without one: any of them holds a key (it encrypts,
        so this process would write in clear what it keeps out of history, and could not read its
        answers). None when ``advertised`` is empty: no worker to tell by."""
        if not advertised:
            return None
        codec = self.codec
        if codec is None:
            if not any(codec_fingerprints(prints) for prints in advertised.values()):
                return None
            return PayloadCodecMismatch(item_id, task_queue, None, None, advertised, kind=kind)
        if any(codec.current_fingerprint in prints for prints in advertised.values()):
            return None
        return PayloadCodecMismatch(item_id, task_queue, codec.current, codec.current_fingerprint, advertised, kind=kind)

    @property
    def reader_fingerprints(self) -> list[str]:
        """Fingerprints of every driver that reads, the writer first, then of every codec key
        (the current one first)."""
        ordered = ([self.writer] if self.writer is not None else []) + [d for d in self.readers if d is not self.writer]
        return [driver_fingerprint(d) for d in ordered] + (self.codec.fingerprints if self.codec is not None else [])

    def describe(self) -> str:
        """One line for logs: where big payloads go, what else is read, and the encryption."""
        def one(driver: StorageDriver) -> str:
            location = driver_location(driver)
            where = f" at {location}" if location else ""
            return f"{driver.name()}{where} ({driver_fingerprint(driver)})"

        writes = f"big payloads (>= {self.threshold_bytes} bytes) go to {one(self.writer)}" if self.writer else "payloads stay in history"
        others = [one(d) for d in self.readers if d is not self.writer]
        codec = self.codec
        encryption = (
            f"payloads encrypted (AES-256-GCM) with key {codec.current!r} ({codec.current_fingerprint}), "
            f"decrypted with keys {', '.join(codec.key_ids)}"
            if codec is not None
            else "payloads not encrypted"
        )
        return writes + (f"; also reads {', '.join(others)}" if others else "") + f"; {encryption}"


def payload_storage(
    config: AgentrtConfig | None = None, store: Store | None = None, *, driver: StorageDriver | None = None
) -> PayloadStorage:
    """The drivers and codec ``build_data_converter`` uses for ``config``, ``store`` and ``driver``
    (same rules); ``ConfigurationError`` for bad ``[codec]`` keys or ``[payloads]`` settings
    (``PayloadConfig.check``: ``driver = "s3"`` without a bucket)."""
    config = config or AgentrtConfig()
    settings = config.payloads
    settings.check("[payloads]")
    store_driver = StorePayloadDriver(store) if store is not None else StorePayloadDriver(url=config.database_url)
    directory_driver = DirectoryPayloadDriver(settings.path)
    s3_driver: StorageDriver | None = None
    if settings.bucket:
        from agentrt.worker._s3_payloads import S3PayloadDriver  # botocore, loaded only where a bucket is set

        s3_driver = S3PayloadDriver(settings.bucket, endpoint_url=settings.endpoint_url, region=settings.region)
    readers: list[StorageDriver] = [store_driver, directory_driver] + ([s3_driver] if s3_driver is not None else [])
    writer: StorageDriver | None
    if driver is not None:
        writer = driver
        readers = [driver] + [d for d in readers if d.name() != driver.name()]
    else:
        writer = {"store": store_driver, "directory": directory_driver, "s3": s3_driver, "none": None}[settings.driver]
    return PayloadStorage(
        readers=tuple(readers), writer=writer, threshold_bytes=settings.threshold_bytes, codec=config.codec.codec()
    )


def build_data_converter(
    config: AgentrtConfig | None = None, store: Store | None = None, *, driver: StorageDriver | None = None
) -> DataConverter:
    """The project's data converter: pydantic JSON, every payload encrypted when ``config.codec``
    has keys (``AesGcmCodec``), and payloads of ``config.payloads.threshold_bytes`` or more
    (after encryption) stored externally by the driver ``config.payloads.driver`` names.

    ``config`` defaults to ``AgentrtConfig()`` (built-in defaults, no file or environment).
    ``store`` is used by the store driver when given (it must be the database at
    ``config.database_url``); otherwise that database is opened on first use. ``driver = "s3"``
    stores in ``config.payloads.bucket`` through the SDK's ``S3StorageDriver`` (``S3PayloadDriver``).
    ``driver``, a driver of your own, stores instead of the configured one.

    The store and directory drivers are always registered for reading, and the s3 driver whenever
    a bucket is configured, so references written before a change of ``[payloads] driver`` (or
    with ``driver = "none"``) stay readable; none touches its database, directory or bucket
    until a reference or a big payload needs it.
    ``AgentrtPlugin`` carries this converter for clients, workers and replayers.
    """
    return payload_storage(config, store, driver=driver).data_converter()
