"""What a client can learn about the workers of its task queue: whether one polls, and whether
they can read what this client would send.

A message big enough to leave workflow history is stored by the client's own driver and
read by the worker through the reference in history. If the two are configured with
different storage (another directory's ``.agentrt``, another database) the worker cannot
resolve it and the session stalls with the message lost. Workers advertise the
fingerprints of the storage they read in their identity (``AgentrtPlugin``, ``AgentrtWorkerPlugin``), visible to
clients through DescribeTaskQueue, so the client refuses such a message before sending it.
With ``[codec]`` keys every message is encrypted: workers advertise a fingerprint of each
key they hold too, and the client refuses a message no worker could decrypt; a client
without keys refuses to write in clear to workers that encrypt.

What the workers advertise is asked once per client and task queue every
``ADVERTISED_TTL_SECONDS``, not on every start and send.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Callable
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import PollerInfo, TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError

from agentrt.client._patience import is_transient
from agentrt.schemas import PayloadStorageMismatch
from agentrt.worker import PayloadCodecMismatch, PayloadStorage, driver_location, payload_fingerprints_of, plugin_of

__all__ = [
    "ADVERTISED_TTL_SECONDS",
    "AdvertisedFingerprints",
    "advertised_fingerprints",
    "check_payload_storage",
    "workflow_pollers",
]

# How long a client acts on what a task queue's workers last advertised (seconds). A worker that
# starts polling with other keys or storage is seen by a client within this time; a check that
# would refuse asks the server again first, so a refusal never rests on an older answer.
ADVERTISED_TTL_SECONDS = 5.0

Advertised = dict[str, list[str]]  # worker identity -> the payload fingerprints it advertises


# A loaded server may cancel a DescribeTaskQueue ("operation was canceled"): a read, asked again.
DESCRIBE_ATTEMPTS = 4
DESCRIBE_RETRY_SECONDS = 0.25


async def workflow_pollers(temporal: Client, task_queue: str) -> list[PollerInfo]:
    """The workers the server has seen polling ``task_queue`` for workflow tasks recently. A call
    that fails transiently (``_patience.is_transient``: cancelled, timed out, unavailable, ...) is
    asked again, ``DESCRIBE_ATTEMPTS`` times in all (``DESCRIBE_RETRY_SECONDS`` apart, then the SDK's
    own retries); raises the last ``RPCError``."""
    request = DescribeTaskQueueRequest(
        namespace=temporal.namespace, task_queue=TaskQueue(name=task_queue), task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    )
    for attempt in range(1, DESCRIBE_ATTEMPTS + 1):
        try:
            response = await temporal.workflow_service.describe_task_queue(request, retry=True)
            return list(response.pollers)
        except RPCError as err:
            if not is_transient(err) or attempt == DESCRIBE_ATTEMPTS:
                raise
            await asyncio.sleep(DESCRIBE_RETRY_SECONDS * attempt)
    raise AssertionError("unreachable")


async def _advertised(temporal: Client, task_queue: str) -> Advertised:
    advertised: Advertised = {}
    for poller in await workflow_pollers(temporal, task_queue):
        fingerprints = payload_fingerprints_of(poller.identity)
        if fingerprints is not None:
            advertised[poller.identity] = fingerprints
    return advertised


class AdvertisedFingerprints:
    """One client's answers to "what do the workers polling this task queue advertise?", each
    used for ``ttl_seconds`` (measured with ``clock``, seconds). Calls that find no answer young
    enough at the same moment share one DescribeTaskQueue; a failed one is not kept."""

    def __init__(self, ttl_seconds: float = ADVERTISED_TTL_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_seconds = ttl_seconds
        self.clock = clock
        self._asked: dict[str, tuple[float, asyncio.Future[Advertised]]] = {}

    async def get(self, temporal: Client, task_queue: str, *, fresh: bool = False) -> tuple[Advertised, bool]:
        """``(advertised, reused)``: what the workers polling ``task_queue`` advertise (worker
        identity -> payload fingerprints; empty when none polls or none advertises), and whether
        that is an earlier answer. ``fresh`` asks the server whatever the age of the last answer."""
        now = self.clock()
        entry = self._asked.get(task_queue)
        reused = (
            not fresh and entry is not None and now - entry[0] < self.ttl_seconds
            and entry[1].get_loop() is asyncio.get_running_loop()
        )
        if not reused or entry is None:
            entry = (now, asyncio.ensure_future(_advertised(temporal, task_queue)))
            self._asked[task_queue] = entry
            entry[1].add_done_callback(lambda _, asked=entry: self._forget_failed(task_queue, asked))
        return await asyncio.shield(entry[1]), reused

    def _forget_failed(self, task_queue: str, entry: tuple[float, asyncio.Future[Advertised]]) -> None:
        asked = entry[1]
        if (asked.cancelled() or asked.exception() is not None) and self._asked.get(task_queue) is entry:
            del self._asked[task_queue]


_BY_CLIENT: weakref.WeakKeyDictionary[Client, AdvertisedFingerprints] = weakref.WeakKeyDictionary()


def advertised_fingerprints(temporal: Client) -> AdvertisedFingerprints:
    """The ``AdvertisedFingerprints`` of ``temporal`` (one per Temporal client, shared by every
    ``AgentClient`` on it; it goes with the client)."""
    found = _BY_CLIENT.get(temporal)
    if found is None:
        found = _BY_CLIENT[temporal] = AdvertisedFingerprints()
    return found


async def check_payload_storage(
    temporal: Client, task_queue: str, session_id: str, argument: Any, *, kind: str = "session"
) -> None:
    """Raise ``PayloadStorageMismatch`` when ``argument`` would leave history for storage that no
    worker polling ``task_queue`` reads, ``PayloadCodecMismatch`` when it would be encrypted with
    a key that no such worker holds, or when this client has no codec keys and a worker holds one
    (``PayloadStorage.codec_mismatch``). ``session_id`` and ``kind`` (``session``, ``task``,
    ``graph``) name what is sent or started in the error.

    Asks the server what the workers advertise at most once per ``ADVERTISED_TTL_SECONDS``
    (``AdvertisedFingerprints``), and again before refusing on an older answer. Nothing is checked
    when the client was not connected with an agentrt plugin, or when no polling worker advertises
    its storage (none runs yet, or one of another make): then it cannot be told.
    """
    plugin = plugin_of(temporal)
    if plugin is None:
        return
    storage = plugin.payload_storage
    size = 0
    if storage.writer is not None:
        size = temporal.data_converter.payload_converter.to_payloads([argument])[0].ByteSize()
    answers = advertised_fingerprints(temporal)
    advertised, reused = await answers.get(temporal, task_queue)
    problem = _problem(storage, task_queue, session_id, kind, size, advertised)
    if problem is not None and reused:  # the workers may have changed since: refuse only on a new answer
        advertised, _ = await answers.get(temporal, task_queue, fresh=True)
        problem = _problem(storage, task_queue, session_id, kind, size, advertised)
    if problem is not None:
        raise problem


def _problem(
    storage: PayloadStorage, task_queue: str, item_id: str, kind: str, size: int, advertised: Advertised
) -> PayloadCodecMismatch | PayloadStorageMismatch | None:
    """Why a payload of ``size`` bytes may not go to the workers that advertise ``advertised``, or None."""
    mismatch = storage.codec_mismatch(item_id, task_queue, advertised, kind)
    if mismatch is not None:
        return mismatch
    mine = storage.writer_fingerprint
    writer = storage.writer
    if writer is None or size < storage.threshold_bytes or not advertised or any(mine in p for p in advertised.values()):
        return None
    location = driver_location(writer)
    error = PayloadStorageMismatch(
        session_id=item_id,
        task_queue=task_queue,
        size_bytes=size,
        threshold_bytes=storage.threshold_bytes,
        client_storage=f"{writer.name()}{' at ' + location if location else ''}",
        client_fingerprint=mine or "none",
        worker_fingerprints=advertised,
    )
    if kind != "session":
        error.args = (str(error).replace(f"session {item_id}: message not sent", f"{kind} {item_id}: not started", 1),)
    return error
