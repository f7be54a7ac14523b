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
import logging
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.exc import DisconnectionError
from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from agentrt.activities import WORKER_PROCESS
from agentrt.schemas import STORE_UNAVAILABLE
from agentrt.store import Store, error_chain, raising_engine, takes_writes, unreachable_reason

__all__ = ["STORE_UNAVAILABLE", "StoreOutageInterceptor", "store_unreachable_in", "store_wait_detail"]

log = logging.getLogger("agentrt.worker")
PROBE_SECONDS = 1.0  # between two probes of the store (and two heartbeats)
MARGIN_SECONDS = 2.0  # the wait ends this long before the attempt's start-to-close bound
MAX_WAIT_SECONDS = 300.0  # an attempt without a start-to-close bound waits at most this long


def store_wait_detail(since: datetime, url: str, reason: str) -> str:
    """The second detail of a heartbeat sent while an attempt waits for the store (the first names
    the worker process, ``WORKER_PROCESS``, for the retry to read): ``StoreUnavailable since
    <ISO 8601 UTC>: the store does not answer at <url>: <reason>``. ``AgentClient.sessions.waits`` reads it."""
    return f"{STORE_UNAVAILABLE} since {since.isoformat()}: the store does not answer at {url}: {reason}"


def store_unreachable_in(err: BaseException, store: Engine) -> tuple[str, Engine] | None:
    """``unreachable_reason`` of ``err`` or of an exception in its chain (``__cause__``, ``__context__``)
    that a store's engine raised (``raising_engine``), with that engine; or of SQLAlchemy's pool
    losing a connection (``DisconnectionError``, which no engine marks), with ``store``. A database
    error of any other engine (a user's tool that reads its own database: its error is in the
    chain of the tool's ``ToolCrashed``) is not the store's: the attempt fails as it failed."""
    for current in error_chain(err):
        engine = store if isinstance(current, DisconnectionError) else raising_engine(current)
        reason = unreachable_reason(current) if engine is not None else None
        if reason is not None and engine is not None:
            return reason, engine
    return None


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
        met: tuple[str, Engine] | None = None
        try:
            return await self.next.execute_activity(input)
        except Exception as err:
            met = store_unreachable_in(err, self._store.engine)
            if met is None:
                raise
        reason, engine = met
        info = activity.info()
        url = engine.url.render_as_string(hide_password=True)
        log.warning("%s (attempt %d) met a store that does not answer at %s: %s; waiting for it", info.activity_type, info.attempt, url, reason)
        detail = store_wait_detail(datetime.now(timezone.utc), url, reason)
        waited, answered = await self._wait(info, detail, engine, sync=input.executor is not None)
        after = f"it answered again after {waited:.1f} s" if answered else f"it still did not after {waited:.1f} s"
        raise ApplicationError(f"the store does not answer at {url}: {reason}; {after}", type=STORE_UNAVAILABLE) from None

    async def _wait(self, info: activity.Info, detail: str, engine: Engine, *, sync: bool) -> tuple[float, bool]:
        """Probe ``engine`` (the store's that raised) every ``PROBE_SECONDS``, heartbeating
        ``(WORKER_PROCESS, detail)``, until it takes writes or the attempt's bound is near: (seconds waited, whether it answered). Heartbeats go on while a probe hangs
        (a PostgreSQL host that drops packets: its connect gives up after 10 s, longer than the
        session's heartbeat timeout). Raises ``CancelledError`` when the activity is cancelled."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        limit = MAX_WAIT_SECONDS
        if info.start_to_close_timeout is not None:
            used = (datetime.now(timezone.utc) - info.started_time).total_seconds()
            limit = min(limit, info.start_to_close_timeout.total_seconds() - used - MARGIN_SECONDS)
        probe: asyncio.Future[bool] | None = None
        while loop.time() - began < limit:
            await _heartbeat(WORKER_PROCESS, detail, sync=sync)
            if activity.is_cancelled():  # a sync activity's cancel sets its event; its task is not cancelled
                raise CancelledError("Cancelled")
            if probe is None:
                await asyncio.sleep(min(PROBE_SECONDS, max(0.0, limit - (loop.time() - began))))
                probe = asyncio.ensure_future(asyncio.to_thread(_answers, engine))
            done, _ = await asyncio.wait({probe}, timeout=min(PROBE_SECONDS, max(0.0, limit - (loop.time() - began))))
            if probe in done:
                if probe.result():
                    return loop.time() - began, True
                probe = None
        return loop.time() - began, False


def _answers(engine: Engine) -> bool:
    try:
        takes_writes(engine)  # a read would answer while a read-only file refuses every write
    except Exception as err:  # noqa: BLE001 - any failure of the probe means "not yet"
        if store_unreachable_in(err, engine) is None:
            log.warning("probing the store failed: %s", err)
        return False
    return True


async def _heartbeat(*details: str, sync: bool) -> None:
    """``activity.heartbeat(*details)``. For a sync activity the SDK's heartbeat hands the call to the
    event loop and blocks up to 10 s for it: called on the loop itself, it froze the whole worker
    (every other activity's heartbeats, every workflow task) for those 10 s and then raised
    ``TimeoutError``. It is called from a thread for those."""
    if sync:
        await asyncio.to_thread(activity.heartbeat, *details)
    else:
        activity.heartbeat(*details)
