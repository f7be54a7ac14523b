"""Waiting out a store that does not answer, for clients that follow a turn (``AgentClient.deltas``
and ``follow``, ``agentrt run``, ``agentrt session events --follow``): a read that fails because
the store is unreachable (``unreachable_reason``) is asked again with a backoff, the wait is said
once when it begins, again at most once a minute, and once when the store answers again. Any
other store error propagates as it is."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from agentrt.store import Store, unreachable_reason

logger = logging.getLogger("agentrt.client")
T = TypeVar("T")

FIRST_PAUSE_SECONDS = 0.2  # the first pause before asking again; each next one doubles
MAX_PAUSE_SECONDS = 5.0
SAY_EVERY_SECONDS = 60.0  # the least time between two sayings of one wait


def shown_url(store: Store) -> str:
    """The store's URL with its password hidden."""
    return store.engine.url.render_as_string(hide_password=True)


def log_line(line: str) -> None:
    logger.warning("%s", line)


class StoreWait:
    """Asks a store again while it does not answer. ``say`` gets each line to show (default: a
    warning of logger ``agentrt.client``): when a wait begins (``the store does not answer at
    URL: REASON; waiting``), every ``SAY_EVERY_SECONDS`` while it lasts, and when it ends."""

    def __init__(self, store: Store, say: Callable[[str], None] = log_line) -> None:
        self._url = shown_url(store)
        self._say = say
        self._since: float | None = None  # loop time the current wait began
        self._said = 0.0
        self._pause = FIRST_PAUSE_SECONDS

    @property
    def waiting(self) -> bool:
        return self._since is not None

    async def read(self, read: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``read(*args, **kwargs)`` in a thread, asked again while the store does not answer."""
        return await self.call(lambda: asyncio.to_thread(read, *args, **kwargs))

    async def call(self, call: Callable[[], Awaitable[T]]) -> T:
        """``await call()``, asked again while it fails because the store does not answer."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                result = await call()
            except Exception as err:
                reason = unreachable_reason(err)
                if reason is None:
                    raise
                now = loop.time()
                if self._since is None or now - self._said >= SAY_EVERY_SECONDS:
                    waited = "" if self._since is None else f" (for {now - self._since:.0f} s)"
                    self._since = self._since if self._since is not None else now
                    self._said = now
                    self._say(f"the store does not answer at {self._url}: {reason}; waiting{waited}")
                pause, self._pause = self._pause, min(self._pause * 2, MAX_PAUSE_SECONDS)
                await asyncio.sleep(pause)
                continue
            if self._since is not None:
                self._say(f"the store answers again (after {loop.time() - self._since:.1f} s)")
                self._since = None
            self._pause = FIRST_PAUSE_SECONDS
            return result
