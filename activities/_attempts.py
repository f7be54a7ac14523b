"""Which worker process ran an activity attempt: every heartbeat of a model, tool or store call names it.

A retried attempt reads the last heartbeat of the attempt before it
(``activity.info().heartbeat_details``, Temporal carries it to the next attempt). When that
names another process, or there is none, the attempt before may have died with its
worker, and the workflow's sticky queue may point at that dead worker (see
``agentrt.worker.ResumeInterceptor``).
"""

from __future__ import annotations

import _thread
import asyncio
import contextvars
import logging
import os
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

from temporalio import activity

log = logging.getLogger(__name__)

# host/pid/random: a restarted container keeps its host name and often its pid (1).
WORKER_PROCESS = f"{socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:12]}"

# How often an activity that heartbeats does so while it works, and when it first does (seconds).
HEARTBEAT_SECONDS = 0.5


def heartbeat() -> None:
    """``activity.heartbeat`` with this process's ``WORKER_PROCESS`` as the details."""
    activity.heartbeat(WORKER_PROCESS)


def previous_attempt_elsewhere(info: activity.Info) -> bool:
    """True for a retry (``attempt > 1``) of a regular activity whose previous attempt's last
    heartbeat came from another worker process or that sent none; False otherwise."""
    if info.attempt <= 1 or info.is_local:
        return False
    details = list(info.heartbeat_details or ())
    return not details or details[0] != WORKER_PROCESS


async def _keep_heartbeating() -> None:
    """Heartbeat every ``HEARTBEAT_SECONDS`` until cancelled (run it as a task beside an async
    activity's work): a provider may be silent for long, and a cancel reaches an activity only in
    the answer to a heartbeat (the worker sends them at most once per
    ``max_heartbeat_throttle_interval``). The first after ``HEARTBEAT_SECONDS``: a call that ends
    sooner sends none, and the server records no heartbeat for it. Each names this worker process
    (``WORKER_PROCESS``) for a retry to read. Returns at once in a local activity (it cannot heartbeat)."""
    if activity.info().is_local:
        return
    while True:
        await asyncio.sleep(HEARTBEAT_SECONDS)
        heartbeat()


@asynccontextmanager
async def heartbeating() -> AsyncIterator[None]:
    """Heartbeat (``_keep_heartbeating``, as a task beside it) while an async activity's block runs."""
    beating = asyncio.create_task(_keep_heartbeating())
    try:
        yield
    finally:
        beating.cancel()


@contextmanager
def beating() -> Iterator[None]:
    """Heartbeat every ``HEARTBEAT_SECONDS`` from a side thread while the block runs (a synchronous
    activity's work), the first after ``HEARTBEAT_SECONDS`` (a call that ends sooner sends none): a
    store write waiting on a busy database, or a tool working for long, must not look like a dead
    worker (the session's heartbeat timeout is a few seconds), and a cancel reaches the call in the
    answer to a heartbeat. A local activity cannot heartbeat: nothing is started for one, nor for a
    call outside an activity (a test, a tool run by hand)."""
    if not activity.in_activity() or activity.info().is_local:
        yield
        return
    done = threading.Event()
    context = contextvars.copy_context()  # the activity's context, for activity.heartbeat()

    def beat() -> None:
        while not done.wait(HEARTBEAT_SECONDS):
            try:
                context.run(heartbeat)
            except Exception:  # noqa: BLE001 - the worker's loop did not take it within 10 s: beat again
                log.debug("an activity heartbeat was not sent", exc_info=True)

    # _thread, not threading.Thread: Thread.start() waits until the new thread has run, and an
    # activity thread was once seen waiting there for good, holding the worker's shutdown.
    _thread.start_new_thread(beat, ())
    try:
        yield
    finally:
        done.set()
