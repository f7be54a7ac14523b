"""ParsedMessages: a store's transcript messages, parsed once per process by (session, position).

A model call reads its whole context back from the store (R messages in the call of round R, so
R²/2 over a turn): parsing every stored body again was a fifth of a worker's CPU in a turn of 100
rounds with 5 KB tool calls (docs/benchmarks.md, bench.overhead). A message is written once at its
position (``append`` is idempotent by position), and the cache never trusts the key alone: a hit
is a stored value equal, character for character, to the one it parsed, so a rewritten row (a
session id used again, another cipher's seal) is parsed anew.

The ``Message`` objects it hands out are shared between the calls that read them: readers never
change one in place (they ``model_copy`` it). Bounded by the characters of the stored values it
holds (``MAX_CHARS``); the oldest entry goes first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from agentrt.schemas import Message

# Characters of stored values (sealed or clear JSON) held at most: 16 Mi, about 3,000 messages of 5 KB.
MAX_CHARS = 16 * 1024 * 1024


class ParsedMessages:
    """``parse(session_id, position, stored, open_)``: the ``Message`` of a stored value, from the
    cache when that position's value is the same, else ``Message.model_validate_json(open_(stored))``.
    Safe to call from many threads. Raises what ``open_`` or the validation raises (nothing is cached then)."""

    def __init__(self, max_chars: int = MAX_CHARS) -> None:
        self._entries: OrderedDict[tuple[str, int], tuple[str, Message]] = OrderedDict()
        self._chars = 0
        self._max_chars = max_chars
        self._lock = threading.Lock()

    def parse(self, session_id: str, position: int, stored: str, open_: Callable[[str], str]) -> Message:
        key = (session_id, position)
        hit = self._entries.get(key)
        if hit is not None and hit[0] == stored:
            return hit[1]
        message = Message.model_validate_json(open_(stored))
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._chars -= len(old[0])
            if len(stored) <= self._max_chars:
                self._entries[key] = (stored, message)
                self._chars += len(stored)
            while self._chars > self._max_chars:
                _, (value, _) = self._entries.popitem(last=False)
                self._chars -= len(value)
        return message

    def __len__(self) -> int:
        return len(self._entries)
