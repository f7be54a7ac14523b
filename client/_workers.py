"""What a client can learn about the workers of its task queue: whether one polls, and whether
they can read the payload storage this client writes big payloads to.

A message big enough to leave workflow history is stored by the client's own driver and
read by the worker through the reference in history. If the two are configured with
different storage (another directory's ``.agentrt``, another database) the worker cannot
resolve it and the session stalls with the message lost. Workers advertise the
fingerprints of the storage they read in their identity (``AgentrtPlugin``), visible to
clients through DescribeTaskQueue, so the client refuses such a message before sending it.
With ``[codec]`` keys every message is encrypted: workers advertise a fingerprint of each
key they hold too, and the client refuses a message no worker could decrypt.
"""

from __future__ import annotations

from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import PollerInfo, TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from agentrt.schemas import PayloadStorageMismatch
from agentrt.worker import PayloadCodecMismatch, driver_location, payload_fingerprints_of, plugin_of

__all__ = ["check_payload_storage", "workflow_pollers"]


async def workflow_pollers(temporal: Client, task_queue: str) -> list[PollerInfo]:
    """The workers the server has seen polling ``task_queue`` for workflow tasks recently."""
    response = await temporal.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=temporal.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    return list(response.pollers)


async def check_payload_storage(temporal: Client, task_queue: str, session_id: str, argument: Any) -> None:
    """Raise ``PayloadStorageMismatch`` when ``argument`` would leave history for storage that no
    worker polling ``task_queue`` reads, ``PayloadCodecMismatch`` when it would be encrypted with
    a key that no such worker holds.

    Nothing is checked (and nothing asked of the server) when the payload stays in history
    unencrypted, when the client was not connected with ``AgentrtPlugin``, or when no polling
    worker advertises its storage (none runs yet, or one of another make): then it cannot be told.
    """
    plugin = plugin_of(temporal)
    if plugin is None:
        return
    storage = plugin.payload_storage
    key_print = storage.codec_fingerprint
    size = 0
    if storage.writer is not None:
        size = temporal.data_converter.payload_converter.to_payloads([argument])[0].ByteSize()
    leaves_history = storage.writer is not None and size >= storage.threshold_bytes
    if not leaves_history and key_print is None:
        return
    advertised: dict[str, list[str]] = {}
    for poller in await workflow_pollers(temporal, task_queue):
        fingerprints = payload_fingerprints_of(poller.identity)
        if fingerprints is not None:
            advertised[poller.identity] = fingerprints
    if not advertised:
        return
    if storage.codec is not None and not any(key_print in prints for prints in advertised.values()):
        codec = storage.codec
        raise PayloadCodecMismatch(session_id, task_queue, codec.current, codec.current_fingerprint, advertised)
    mine = storage.writer_fingerprint
    if not leaves_history or any(mine in prints for prints in advertised.values()):
        return
    writer = storage.writer
    location = driver_location(writer) if writer is not None else None
    raise PayloadStorageMismatch(
        session_id=session_id,
        task_queue=task_queue,
        size_bytes=size,
        threshold_bytes=storage.threshold_bytes,
        client_storage=f"{writer.name() if writer else 'none'}{' at ' + location if location else ''}",
        client_fingerprint=mine or "none",
        worker_fingerprints=advertised,
    )
