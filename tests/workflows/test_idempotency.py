"""The memory of idempotency keys (workflows/_idempotency.py) and the key's rules (schemas/_session.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentrt.schemas import (
    MAX_IDEMPOTENCY_KEY_CHARS,
    SendMessageInput,
    SessionState,
    idempotency_digest,
    idempotency_key_problem,
)
from agentrt.workflows._idempotency import MAX_SENT_KEYS, SentKeys, key_reused_text
from agentrt.workflows._inbox import Inbox


def _message(text: str = "hello", key: str | None = "k-1", principal: str = "alice") -> SendMessageInput:
    return SendMessageInput(text=text, principal=principal, idempotency_key=key)


def _carried(state: SessionState) -> SessionState:
    """The state of the next run, after continue-as-new carried ``state`` through JSON."""
    return SessionState.model_validate_json(state.model_dump_json())


def test_a_key_not_seen_before_has_no_first_message() -> None:
    assert SentKeys(SessionState()).first(_message()) is None


def test_a_remembered_key_answers_its_first_turn() -> None:
    keys = SentKeys(SessionState())
    keys.remember(_message(), "turn-3")
    sent = keys.first(_message())
    assert sent is not None and sent.turn_id == "turn-3"
    assert keys.reused_for(_message()) is None


def test_the_same_key_with_another_text_is_reused_for_another_message() -> None:
    keys = SentKeys(SessionState())
    keys.remember(_message("pay 10"), "turn-1")
    reused = keys.reused_for(_message("pay 1000"))
    assert reused is not None and reused.turn_id == "turn-1"


def test_the_same_key_from_another_principal_is_another_key() -> None:
    keys = SentKeys(SessionState())
    keys.remember(_message(principal="alice"), "turn-1")
    assert keys.first(_message(principal="bob")) is None
    assert keys.reused_for(_message("other text", principal="bob")) is None


def test_a_message_without_a_key_is_never_remembered() -> None:
    state = SessionState()
    keys = SentKeys(state)
    keys.remember(_message(key=None), "turn-1")
    assert keys.first(_message(key=None)) is None and state.sent_keys == {}


def test_the_oldest_keys_are_forgotten_beyond_the_bound() -> None:
    keys = SentKeys(SessionState())
    for n in range(MAX_SENT_KEYS + 5):
        keys.remember(_message(key=f"k{n}"), f"turn-{n + 1}")
    assert len(keys) == MAX_SENT_KEYS
    assert all(keys.first(_message(key=f"k{n}")) is None for n in range(5))
    newest = keys.first(_message(key=f"k{MAX_SENT_KEYS + 4}"))
    assert keys.first(_message(key="k5")) is not None and newest is not None


def test_remembered_keys_travel_through_continue_as_new_in_order() -> None:
    state = SessionState()
    keys = SentKeys(state)
    for n in range(3):
        keys.remember(_message(key=f"k{n}"), f"turn-{n + 1}")
    carried = SentKeys(_carried(state))
    sent = carried.first(_message(key="k1"))
    assert sent is not None and sent.turn_id == "turn-2"
    assert list(_carried(state).sent_keys) == list(state.sent_keys)


def test_a_state_without_keys_serializes_as_before() -> None:
    assert "sent_keys" not in SessionState().model_dump_json()


def test_a_full_memory_stays_small_whatever_the_keys_and_texts() -> None:
    """Digests, not keys or texts: each key costs about 110 bytes of the carried state."""
    state = SessionState()
    keys = SentKeys(state)
    for n in range(MAX_SENT_KEYS + 10):
        key = f"{n:0>{MAX_IDEMPOTENCY_KEY_CHARS}}"
        keys.remember(_message("x" * 10_000, key=key, principal="p" * 500), f"turn-{n + 1}")
    assert len(state.model_dump_json()) < 120 * MAX_SENT_KEYS


def test_a_digest_tells_apart_parts_that_join_to_the_same_text() -> None:
    assert idempotency_digest("ab", "c") != idempotency_digest("a", "bc")
    assert idempotency_digest("a", "b") == idempotency_digest("a", "b")


def test_the_reused_key_text_names_the_key_and_the_first_turn() -> None:
    text = key_reused_text("k-1", "turn-4", "s1")
    assert "'k-1' was used for another message" in text and "turn-4" in text


def test_a_repeat_is_queued_ahead_by_its_place_in_the_inbox() -> None:
    inbox = Inbox(SessionState(), "s1")
    first = inbox.add_message("alice", "one")
    second = inbox.add_message("alice", "two")
    assert inbox.queued_ahead(first, turn_running=True) == 1
    assert inbox.queued_ahead(second, turn_running=True) == 2
    inbox.pop()
    assert inbox.queued_ahead(first, turn_running=True) == 0  # running now
    assert inbox.queued_ahead(second, turn_running=False) == 0


# ---------------------------------------------------------------- the key's rules


@pytest.mark.parametrize("key", ["a", "order-42:retry.1_x", "0" * MAX_IDEMPOTENCY_KEY_CHARS, "018f3c1e-7b6a-7c3d-9f00-aa"])
def test_keys_of_allowed_characters_and_length_are_valid(key: str) -> None:
    assert idempotency_key_problem(key) is None
    assert SendMessageInput(text="t", principal="p", idempotency_key=key).idempotency_key == key


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("", "the idempotency key is empty"),
        ("k" * (MAX_IDEMPOTENCY_KEY_CHARS + 1), f"at most {MAX_IDEMPOTENCY_KEY_CHARS} characters, this one has 201"),
        ("a b", "this one has ' '"),
        ("abc\n", "this one has '\\n'"),
        ("ключ", "this one has 'к'"),
        ("a/../b", "this one has '/'"),
        ("k'; DROP TABLE x;--", "this one has \"'\""),
    ],
)
def test_malformed_keys_are_refused_with_the_reason(key: str, problem: str) -> None:
    found = idempotency_key_problem(key)
    assert found is not None and problem in found
    with pytest.raises(ValidationError, match="idempotency"):
        SendMessageInput(text="t", principal="p", idempotency_key=key)


def test_a_message_without_a_key_serializes_as_before() -> None:
    assert SendMessageInput(text="t", principal="p").model_dump_json() == '{"text":"t","principal":"p"}'
