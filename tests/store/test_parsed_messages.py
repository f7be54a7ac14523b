"""ParsedMessages: a stored message is parsed once per process, and only the very same stored value is a hit."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from sqlalchemy import update

from agentrt.schemas import Message, PositionedMessage, StoreAppendInput
from agentrt.store import Store
from agentrt.store._models import messages
from agentrt.store._parsed_messages import ParsedMessages


def stored(text: str) -> str:
    return Message(role="user", text=text).model_dump_json()


class Opener:
    """``open_`` for ParsedMessages, counting the values it was asked to open."""

    def __init__(self) -> None:
        self.opened: list[str] = []

    def __call__(self, value: str) -> str:
        self.opened.append(value)
        return value


def test_the_same_stored_value_is_parsed_once_and_the_same_message_handed_out() -> None:
    cache, opener = ParsedMessages(), Opener()
    first = cache.parse("s1", 0, stored("hello"), opener)
    again = cache.parse("s1", 0, stored("hello"), opener)  # an equal string, not the same object
    assert again is first and first.text == "hello"
    assert len(opener.opened) == 1


def test_another_value_at_a_position_is_parsed_anew_and_other_sessions_are_apart() -> None:
    cache, opener = ParsedMessages(), Opener()
    before = cache.parse("s1", 0, stored("before"), opener)
    after = cache.parse("s1", 0, stored("after"), opener)  # a session id used again, a rewritten row
    other = cache.parse("s2", 0, stored("before"), opener)
    assert (before.text, after.text, other.text) == ("before", "after", "before")
    assert other is not before and len(opener.opened) == 3 and len(cache) == 2


def test_the_oldest_go_first_past_the_bound_and_a_value_over_it_is_not_kept() -> None:
    one = stored("x" * 100)
    cache, opener = ParsedMessages(max_chars=2 * len(one)), Opener()
    for position in range(3):
        cache.parse("s1", position, one, opener)
    assert len(cache) == 2
    cache.parse("s1", 0, one, opener)  # evicted: parsed again
    assert len(opener.opened) == 4
    cache.parse("s1", 9, stored("y" * 1000), opener)
    assert len(cache) <= 2 and cache.parse("s1", 9, stored("y" * 1000), opener).text == "y" * 1000
    assert len(opener.opened) == 6


def test_a_value_that_does_not_parse_raises_and_nothing_is_kept() -> None:
    cache, opener = ParsedMessages(), Opener()
    with pytest.raises(ValidationError):
        cache.parse("s1", 0, '{"role": "nobody", "text": 1}', opener)
    assert len(cache) == 0
    assert cache.parse("s1", 0, stored("fine"), opener).text == "fine"


def test_the_store_hands_out_one_message_per_row_until_the_row_changes(store: Store) -> None:
    store.append(StoreAppendInput(session_id="s1", messages=[
        PositionedMessage(position=p, turn_id="t1", message=Message(role="user", text=f"m{p}")) for p in range(3)
    ]))
    first = store.messages("s1")
    again = store.messages_in("s1", [(0, 3)])
    assert [m.text for _, m in first] == ["m0", "m1", "m2"]
    assert all(a is b for (_, a), (_, b) in zip(first, again, strict=True))
    with store.engine.begin() as conn:  # a row rewritten under the process: read as it now is
        conn.execute(update(messages).where(messages.c.position == 1).values(content_json=stored("changed")))
    assert [m.text for _, m in store.messages("s1")] == ["m0", "changed", "m2"]
