"""What a worker's tools share and nothing serializes: the dependencies (``deps``: an HTTP client, a
database pool), one event loop, on a thread of its own, for ``async`` tools, and a thread per call
for sync ones.

The ``tool.execute`` activity runs in a thread pool; an ``async`` tool's coroutine goes to this
loop, a sync tool's function to a new thread, and the activity's thread waits for either, bounded
by the call's time: a tool that never returns costs its own thread, not one of the pool's. The worker's own event loop never runs a user's
coroutine (a tool that blocks would stall every heartbeat of the worker), and no call pays for a
new loop; dependencies an async factory builds are bound to this loop, where every async tool runs.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from agentrt.schemas import ToolError, ToolTimedOut

__all__ = ["ToolLeftRunning", "ToolRuntime"]

# How often a thread waiting for an async tool checks for a cancel (seconds): Temporal delivers a
# cancel to a synchronous activity's thread, which sees it only between waits.
POLL_SECONDS = 0.2
# How long a cancelled coroutine may keep the tool loop before the loop is given up (seconds).
STUCK_SECONDS = 2.0
# Sync calls past their time bound whose threads may still run before new sync calls are refused.
MAX_STUCK_THREADS = 64

_UNSET = object()


class ToolRuntime:
    """``deps``: a factory (a callable of no argument, sync or async) called once, at the first
    call that reads ``ToolContext.deps``; its value is shared by every tool call of the worker
    (so it must be safe to use from several threads, or from the tool loop for async tools).
    None gives ``ctx.deps`` None. ``close()`` stops the tool loop (the worker does at shutdown)."""

    def __init__(self, deps: Callable[[], Any] | None = None) -> None:
        if deps is not None and not callable(deps):
            raise TypeError(f"deps must be a factory (a callable of no argument), not {deps!r}")
        self._factory = deps
        self._deps: Any = _UNSET
        self._lock = threading.Lock()  # building deps
        self._loop_lock = threading.Lock()  # starting the loop (deps' async factory needs it under _lock)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._async_deps = False
        self._stuck: list[threading.Thread] = []  # sync calls past their time bound, still running

    @property
    def has_deps(self) -> bool:
        return self._factory is not None

    def deps(self) -> Any:
        """The worker's dependencies, built on first use (once, under a lock)."""
        if self._deps is _UNSET:
            with self._lock:
                if self._deps is _UNSET:
                    value = self._factory() if self._factory is not None else None
                    if inspect.isawaitable(value):
                        value = _outcome(self._submit(value).result())
                        self._async_deps = True
                    self._deps = value
        return self._deps

    def run(
        self,
        coroutine: Coroutine[Any, Any, Any],
        *,
        timeout: float | None = None,
        is_cancelled: Callable[[], bool] = lambda: False,
        bound: float | None = None,
    ) -> Any:
        """Run ``coroutine`` on the tool loop and wait for it in this thread; cancels it and raises
        ``ToolTimedOut`` after ``timeout`` seconds (naming ``bound``, the whole call's time bound in
        seconds; default ``timeout``) or ``ToolError`` once ``is_cancelled()``; its own exception
        propagates (a ``SystemExit`` or ``KeyboardInterrupt`` too, raised here: the loop goes on). A coroutine
        that still holds the loop ``STUCK_SECONDS`` after its cancel (it never awaits) is left
        there with its loop (``ToolLeftRunning``): the next call starts another loop, and deps an
        async factory made on the stuck loop are made again."""
        loop = self._running_loop()
        future = asyncio.run_coroutine_threadsafe(_awaited(coroutine), loop)
        try:
            return _outcome(_waited(future, timeout, is_cancelled, bound))
        except BaseException as err:  # also Temporal's cancel, raised in this thread
            if not future.done():
                future.cancel()
                if self._leave_if_stuck(loop) and isinstance(err, ToolError):
                    raise ToolLeftRunning(str(err)) from None  # the coroutine runs on, on the given-up loop
            raise

    def call(
        self, function: Callable[..., Any], args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None, *,
        timeout: float | None = None, is_cancelled: Callable[[], bool] = lambda: False, bound: float | None = None,
    ) -> Any:
        """``function(*args, **kwargs)`` (a sync tool) on a thread of its own, waited for in this
        thread (in the caller's ``contextvars`` context); raises ``ToolTimedOut`` (naming ``bound``)
        after ``timeout`` seconds or ``ToolError`` once ``is_cancelled()``, leaving a function that does not return on its thread
        (Python cannot stop a thread), so that it holds neither this thread (one of the worker's
        activity slots) nor any other call: then ``ToolLeftRunning``. Its own exception propagates.
        Raises ``ToolError`` while ``MAX_STUCK_THREADS`` calls that did not return still run."""
        stuck = [t for t in self._stuck if t.is_alive()]
        self._stuck = stuck
        if len(stuck) >= MAX_STUCK_THREADS:
            raise ToolError(f"{len(stuck)} earlier tool calls of this worker never returned; restart the worker")
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        context = contextvars.copy_context()

        def target() -> None:
            try:
                future.set_result(context.run(function, *args, **(kwargs or {})))
            except BaseException as err:  # noqa: BLE001 - SystemExit too: raised in the waiting thread
                future.set_exception(err)

        thread = threading.Thread(target=target, name=f"agentrt-tool-{getattr(function, '__name__', 'call')}", daemon=True)
        thread.start()
        try:
            return _waited(future, timeout, is_cancelled, bound)
        except ToolError as err:
            if future.done():
                raise
            self._stuck.append(thread)
            raise ToolLeftRunning(str(err)) from None

    def _leave_if_stuck(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Give up ``loop`` when it does not run a callback within ``STUCK_SECONDS``: a coroutine
        holds it without awaiting (``while True: pass``, a blocking call), and would hold every
        async tool of the worker with it. True when it was given up."""
        alive = threading.Event()
        try:
            loop.call_soon_threadsafe(alive.set)
        except RuntimeError:  # closed meanwhile
            return False
        if alive.wait(STUCK_SECONDS):
            return False
        with self._loop_lock:
            if self._loop is loop:
                self._loop = self._thread = None
                if self._async_deps:
                    self._deps = _UNSET  # bound to the stuck loop
        return True

    def _submit(self, coroutine: Any) -> concurrent.futures.Future[Any]:
        return asyncio.run_coroutine_threadsafe(_awaited(coroutine), self._running_loop())

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            with self._loop_lock:
                if self._loop is None:
                    loop = asyncio.new_event_loop()
                    thread = threading.Thread(target=loop.run_forever, name="agentrt-tool-loop", daemon=True)
                    thread.start()
                    self._loop, self._thread = loop, thread
        assert self._loop is not None
        return self._loop

    def close(self) -> None:
        """Stop the tool loop, if it started; a later async call starts another."""
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()


class ToolLeftRunning(ToolError):
    """A sync call stopped at its time bound (or by a cancel) while its function still runs on its
    thread: whatever it does may still happen, so an effectful call's outcome is unknown."""


class _Stopped:
    """A ``SystemExit`` or ``KeyboardInterrupt`` a coroutine raised, carried out of the tool loop:
    raised there, it would stop the loop (and every async tool of the worker with it)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def _waited(
    future: concurrent.futures.Future[Any], timeout: float | None, is_cancelled: Callable[[], bool], bound: float | None = None
) -> Any:
    """``future``'s result, waited for in this thread; ``ToolTimedOut`` (naming ``bound``, default
    ``timeout``) after ``timeout`` seconds, ``ToolError`` once ``is_cancelled()`` (looked at every
    ``POLL_SECONDS``)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        wait = POLL_SECONDS if deadline is None else min(POLL_SECONDS, max(0.0, deadline - time.monotonic()))
        try:
            return future.result(wait)
        except concurrent.futures.TimeoutError:
            if is_cancelled():
                raise ToolError("cancelled") from None
            if timeout is not None and deadline is not None and time.monotonic() >= deadline:
                raise ToolTimedOut(bound if bound is not None else timeout) from None


async def _awaited(awaitable: Any) -> Any:
    try:
        return await awaitable
    except (SystemExit, KeyboardInterrupt) as err:
        return _Stopped(err)


def _outcome(value: Any) -> Any:
    if isinstance(value, _Stopped):
        raise value.error
    return value

