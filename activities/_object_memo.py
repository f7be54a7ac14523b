"""ObjectMemo: a value computed once per object, for objects handed out again and again (a
registry's tool specs, a store's parsed messages) whose measure costs more than a lookup."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
T = TypeVar("T")


class ObjectMemo(Generic[K, T]):
    """``of(obj)``: ``compute(obj)``, kept by the object's ``id()`` with the object itself held, so a
    hit is the very object (a reused id never answers for another) and a kept object is not freed.
    Holds at most ``limit`` entries (cleared when full). Safe across threads: each dict operation is
    atomic, and a race at worst computes a value twice. The objects are never changed in place."""

    def __init__(self, compute: Callable[[K], T], limit: int) -> None:
        self._compute = compute
        self._limit = limit
        self._entries: dict[int, tuple[K, T]] = {}

    def of(self, obj: K) -> T:
        cached = self._entries.get(id(obj))
        if cached is not None and cached[0] is obj:
            return cached[1]
        value = self._compute(obj)
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[id(obj)] = (obj, value)
        return value
