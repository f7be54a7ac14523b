"""ObjectMemo: one computation per object, never an answer for another object with the same id()."""

from __future__ import annotations

from agentrt.activities._object_memo import ObjectMemo
from agentrt.schemas import Message


def test_a_value_is_computed_once_per_object_and_equal_objects_are_apart() -> None:
    computed: list[str] = []

    def measure(message: Message) -> int:
        computed.append(message.text)
        return len(message.text)

    memo: ObjectMemo[Message, int] = ObjectMemo(measure, limit=10)
    one, twin = Message(role="user", text="abc"), Message(role="user", text="abc")
    assert (memo.of(one), memo.of(one), memo.of(twin)) == (3, 3, 3)
    assert computed == ["abc", "abc"]  # the twin is another object: measured on its own


def test_when_full_it_starts_over_and_still_answers_right() -> None:
    memo: ObjectMemo[Message, int] = ObjectMemo(lambda m: len(m.text), limit=2)
    messages = [Message(role="user", text="x" * n) for n in range(5)]
    assert [memo.of(m) for m in messages] == [0, 1, 2, 3, 4]
    assert [memo.of(m) for m in reversed(messages)] == [4, 3, 2, 1, 0]
