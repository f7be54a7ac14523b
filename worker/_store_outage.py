"""StoreOutageInterceptor: an activity attempt that failed because the store does not answer (a
PostgreSQL server stopped or restarting, a SQLite file that cannot be opened or written) waits,
heartbeating, until the store takes writes again (``takes_writes``: a read-only file still answers
reads), then fails with a short, retryable ``StoreUnavailable`` error, so
Temporal retries it at once.

Without it, each attempt of a model or tool call (9 and 5 attempts, backoff from 0.5 s) failed
within milliseconds during an outage, so a 30 s outage spent a model call's retries and failed
its turn; and each failure carried the driver's traceback, which the server cuts to "Failure
exceeds size limit." in the pending activity (its 4 KB per-failure limit), so operators could
not see why. Now an outage costs one attempt per call that met it, and the failure says what
happened. The wait ends at the attempt's start-to-close bound (less ``MARGIN_SECONDS``), and a
cancel of the activity ends it at once.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from datetime import datetime, timezone
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from agentrt.activities import WORKER_PROCESS
from agentrt.schemas import STORE_UNAVAILABLE
from agentrt.store import Store, takes_writes, unreachable_reason

__all__ = ["STORE_UNAVAILABLE", "StoreOutageInterceptor", "store_unreachable_in", "store_wait_detail"]

log = logging.getLogger("agentrt.worker")
PROBE_SECONDS = 1.0  # between two probes of the store (and two heartbeats)
MARGIN_SECONDS = 2.0  # the wait ends this long before the attempt's start-to-close bound
MAX_WAIT_SECONDS = 300.0  # an attempt without a start-to-close bound waits at most this long


def store_wait_detail(since: datetime, url: str, reason: str) -> str:
    """The second detail of a heartbeat sent while an attempt waits for the store (the first names
    the worker process, ``WORKER_PROCESS``, for the retry to read): ``StoreUnavailable since
    <ISO 8601 UTC>: the store does not answer at <url>: <reason>``. ``AgentClient.waits`` reads it."""
    return f"{STORE_UNAVAILABLE} since {since.isoformat()}: the store does not answer at {url}: {reason}"


def store_unreachable_in(err: BaseException) -> str | None:
    """``unreachable_reason`` of ``err`` or of an exception in its chain (``__cause__``, ``__context__``)."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        reason = unreachable_reason(current)
        if reason is not None:
            return reason
        current = current.__cause__ or current.__context__
    return None


def _is_async(fn: Any) -> bool:
    """Whether the activity function is a coroutine function (the SDK's own test, temporalio/worker/_activity.py)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


class StoreOutageInterceptor(Interceptor):
    """Waits out an unreachable ``store`` in any activity attempt that met it (module docstring)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _StoreOutageInbound(next, self._store)


class _StoreOutageInbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, store: Store) -> None:
        super().__init__(next)
        self._store = store

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            return await self.next.execute_activity(input)
        except Exception as err:
            reason = store_unreachable_in(err)
            if reason is None:
                raise
        info = activity.info()
        url = self._store.engine.url.render_as_string(hide_password=True)
        log.warning("%s (attempt %d) met a store that does not answer at %s: %s; waiting for it", info.activity_type, info.attempt, url, reason)
        detail = store_wait_detail(datetime.now(timezone.utc), url, reason)
        waited, answered = await self._wait(info, detail, threaded=not _is_async(input.fn))
        after = f"it answered again after {waited:.1f} s" if answered else f"it still did not after {waited:.1f} s"
        raise ApplicationError(f"the store does not answer at {url}: {reason}; {after}", type=STORE_UNAVAILABLE) from None

    async def _wait(self, info: activity.Info, detail: str, *, threaded: bool) -> tuple[float, bool]:
        """Probe the store every ``PROBE_SECONDS``, heartbeating ``(WORKER_PROCESS, detail)``, until it
        answers or the attempt's bound is near: (seconds waited, whether it answered).

        ``threaded``: the activity is a sync function (run on the worker's thread pool). The SDK then
        makes its heartbeat a call that hands the heartbeat to the event loop and blocks up to 10 s
        for it, so it is called from a thread here: called on the loop, it blocked the whole worker
        for 10 s and then raised ``TimeoutError``."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        limit = MAX_WAIT_SECONDS
        if info.start_to_close_timeout is not None:
            used = (datetime.now(timezone.utc) - info.started_time).total_seconds()
            limit = min(limit, info.start_to_close_timeout.total_seconds() - used - MARGIN_SECONDS)
        while loop.time() - began < limit:
            if threaded:
                await asyncio.to_thread(activity.heartbeat, WORKER_PROCESS, detail)
            else:
                activity.heartbeat(WORKER_PROCESS, detail)
            await asyncio.sleep(min(PROBE_SECONDS, max(0.0, limit - (loop.time() - began))))
            if await asyncio.to_thread(self._answers):
                return loop.time() - began, True
        return loop.time() - began, False

    def _answers(self) -> bool:
        try:
            takes_writes(self._store.engine)  # a read would answer while a read-only file refuses every write
        except Exception as err:  # noqa: BLE001 - any failure of the probe means "not yet"
            if store_unreachable_in(err) is None:
                log.warning("probing the store failed: %s", err)
            return False
        return True
