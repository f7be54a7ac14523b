"""The session's memory of idempotency keys, so that a message sent again after a lost answer queues once.

Pure bookkeeping over ``SessionState.sent_keys``: for each (principal, key) the first message
sent with it (its turn id and the digest of its text), newest last, at most ``MAX_SENT_KEYS``
(the oldest forgotten first), carried through continue-as-new with the rest of the state.
Keys are held as ``idempotency_digest(principal, key)``, texts as ``idempotency_digest(text)``:
an entry is about 110 bytes of JSON whatever the key and text, so the carried state grows by
at most about 110 KB.
"""

from __future__ import annotations

from agentrt.schemas import SendMessageInput, SentMessage, SessionState, idempotency_digest

# Keys a session remembers; a key older than the last MAX_SENT_KEYS is forgotten (a message sent
# again with it then queues anew).
MAX_SENT_KEYS = 1_000


def key_reused_text(key: str, turn_id: str, session_id: str) -> str:
    """Why a message is refused: its key was used for another message (the first one stays)."""
    return (
        f"idempotency key {key!r} was used for another message (turn {turn_id} of session {session_id}); "
        "a key stands for one message: use a new key for a new message"
    )


class SentKeys:
    """Messages sent with an idempotency key: which turn each became, and whether a repeat is the same message."""

    def __init__(self, state: SessionState) -> None:
        self._state = state

    def __len__(self) -> int:
        return len(self._state.sent_keys)

    def first(self, message: SendMessageInput) -> SentMessage | None:
        """The first message sent with ``message``'s key by its principal, or None (no key, or a new one)."""
        if message.idempotency_key is None:
            return None
        return self._state.sent_keys.get(idempotency_digest(message.principal, message.idempotency_key))

    def reused_for(self, message: SendMessageInput) -> SentMessage | None:
        """The first message sent with ``message``'s key when its text differs from ``message``'s
        (the key was used for another message), else None."""
        sent = self.first(message)
        if sent is None or sent.text_digest == idempotency_digest(message.text):
            return None
        return sent

    def remember(self, message: SendMessageInput, turn_id: str) -> None:
        """Keep ``message`` (sent with a key not seen before) as the key's first message, queued as
        ``turn_id``; the oldest keys beyond ``MAX_SENT_KEYS`` are forgotten."""
        if message.idempotency_key is None:
            return
        keys = self._state.sent_keys
        keys[idempotency_digest(message.principal, message.idempotency_key)] = SentMessage(
            turn_id=turn_id, text_digest=idempotency_digest(message.text)
        )
        while len(keys) > MAX_SENT_KEYS:
            del keys[next(iter(keys))]
