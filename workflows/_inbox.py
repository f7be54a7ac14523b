"""The inbox and outcome memory: what a session will do next, and how its turns ended.

Pure bookkeeping over ``SessionState`` (``inbox``, ``turn_counter``, ``op_counter``,
``recent_outcomes``). Messages become turns ``turn-N``; model switches and compactions
are operations ``op-N`` whose update handlers wait for their results. The last
``RECENT_OUTCOMES`` turn outcomes are kept (and carried through continue-as-new); older
ones are in the store, and asking the workflow for them says so.
"""

from __future__ import annotations

from typing import Literal, Union

from agentrt.schemas import (
    CompactOutcome,
    OutputSpec,
    QueuedOperation,
    SessionState,
    SwitchModelResult,
    TurnOutcome,
)

# Turn outcomes the workflow still answers for after continue-as-new; older ones are in the store.
RECENT_OUTCOMES = 200
# How the workflow says a turn's outcome is no longer held (clients then read the store).
FORGOTTEN_TURN = "ended in an earlier run of the workflow"

OperationResult = Union[SwitchModelResult, CompactOutcome, str]


def turn_number(turn_id: str) -> int:
    return int(turn_id.removeprefix("turn-"))


class Inbox:
    """Queued operations in arrival order, turn numbering and the memory of turn outcomes."""

    def __init__(self, state: SessionState, session_id: str) -> None:
        self._state = state
        self._session_id = session_id
        self._outcomes: dict[str, TurnOutcome] = {o.turn_id: o for o in state.recent_outcomes}
        # The turn ``pop`` started whose outcome is not recorded yet. A known turn that is neither
        # queued, nor running, nor held has ended and its outcome was forgotten: turns end out of
        # numeric order (a queued turn can be cancelled before the running one ends), so no
        # "every turn below N" threshold can say which.
        self._running: str | None = None
        # Outcomes recorded while ``hold`` is on: ended, not published until ``publish_held``.
        self._held: dict[str, TurnOutcome] | None = None
        self._results: dict[str, OperationResult] = {}
        self._waiters: dict[str, int] = {}

    # ------------------------------------------------------------ the queue

    def __len__(self) -> int:
        return len(self._state.inbox)

    def add_message(self, principal: str, text: str, output: OutputSpec | None = None) -> str:
        """Queue a user message (with its own output spec, if any); returns its turn id."""
        self._state.turn_counter += 1
        turn_id = f"turn-{self._state.turn_counter}"
        self._state.inbox.append(QueuedOperation(kind="message", op_id=turn_id, principal=principal, text=text, output=output))
        return turn_id

    def add_operation(self, kind: Literal["switch_model", "compact"], principal: str, profile: str | None = None) -> str:
        """Queue a model switch or a compaction; a compaction joins one already queued. Returns the op id."""
        if kind == "compact":
            queued = next((q for q in self._state.inbox if q.kind == "compact"), None)
            if queued is not None:
                return queued.op_id
        self._state.op_counter += 1
        op_id = f"op-{self._state.op_counter}"
        self._state.inbox.append(QueuedOperation(kind=kind, op_id=op_id, principal=principal, profile=profile))
        return op_id

    def pop(self) -> QueuedOperation:
        queued = self._state.inbox.pop(0)
        if queued.kind == "message":
            self._running = queued.op_id
        return queued

    def pop_leading_operation(self) -> QueuedOperation | None:
        """Take the queued model switch or compaction at the head of the queue, if one is there."""
        if self._state.inbox and self._state.inbox[0].kind != "message":
            return self._state.inbox.pop(0)
        return None

    def message_first(self) -> bool:
        """A user message is at the head of the queue: the next operation is a turn."""
        return bool(self._state.inbox) and self._state.inbox[0].kind == "message"

    def has_operation(self) -> bool:
        return any(q.kind != "message" for q in self._state.inbox)

    def remove_turn(self, turn_id: str) -> QueuedOperation | None:
        """Take the queued (not yet started) turn ``turn_id`` out of the queue, if it is there."""
        for queued in self._state.inbox:
            if queued.kind == "message" and queued.op_id == turn_id:
                self._state.inbox.remove(queued)
                return queued
        return None

    def remove_turns(self) -> list[QueuedOperation]:
        """Take every queued turn out of the queue (operations stay); returns them."""
        turns = [q for q in self._state.inbox if q.kind == "message"]
        self._state.inbox = [q for q in self._state.inbox if q.kind != "message"]
        return turns

    def drain(self) -> list[QueuedOperation]:
        """Empty the queue; returns what was in it."""
        queued = list(self._state.inbox)
        self._state.inbox.clear()
        return queued

    def queued_turn_ids(self) -> list[str]:
        return [q.op_id for q in self._state.inbox if q.kind == "message"]

    def queued_ahead(self, turn_id: str, turn_running: bool) -> int:
        """Operations that run before the queued turn ``turn_id``: those queued ahead of it, and the
        running turn when ``turn_running``; 0 for a turn no longer queued (running or ended)."""
        for index, queued in enumerate(self._state.inbox):
            if queued.op_id == turn_id:
                return index + (1 if turn_running else 0)
        return 0

    # ------------------------------------------------------------ operation results

    def finish(self, op_id: str, result: OperationResult) -> None:
        """Publish an operation's result to the update handlers waiting for it."""
        self._results[op_id] = result

    def expect(self, op_id: str) -> None:
        """An update handler waits for ``op_id``; call ``collect`` once it has the result."""
        self._waiters[op_id] = self._waiters.get(op_id, 0) + 1

    def has_result(self, op_id: str) -> bool:
        return op_id in self._results

    def collect(self, op_id: str) -> OperationResult:
        """The result of ``op_id``; forgotten once every waiting handler has collected it."""
        result = self._results[op_id]
        self._waiters[op_id] -= 1
        if self._waiters[op_id] <= 0:
            del self._waiters[op_id]
            del self._results[op_id]
        return result

    # ------------------------------------------------------------ outcomes

    def hold(self) -> None:
        """Keep the outcomes ``record`` gets back until ``publish_held`` (their turns wait for a
        store write): ``outcome`` answers None for them and they count as not yet ended."""
        if self._held is None:
            self._held = {}

    def publish_held(self) -> None:
        """Record the outcomes kept back since ``hold``, in the order they ended; stop holding."""
        held, self._held = self._held or {}, None
        for outcome in held.values():
            self.record(outcome)

    def record(self, outcome: TurnOutcome) -> None:
        """Remember how a turn ended; the oldest outcomes beyond ``RECENT_OUTCOMES`` are forgotten.
        While ``hold`` is on, the outcome is kept back instead."""
        if self._held is not None:
            self._held[outcome.turn_id] = outcome
            return
        self._outcomes[outcome.turn_id] = outcome
        if outcome.turn_id == self._running:
            self._running = None
        while len(self._outcomes) > RECENT_OUTCOMES:
            del self._outcomes[next(iter(self._outcomes))]
        self._state.recent_outcomes = list(self._outcomes.values())

    def outcome(self, turn_id: str) -> TurnOutcome | None:
        return self._outcomes.get(turn_id)

    def is_known_turn(self, turn_id: str) -> bool:
        if not turn_id.startswith("turn-"):
            return False
        number = turn_id[len("turn-") :]
        # ASCII digits only: str.isdigit() also accepts "²", which int() rejects.
        return number.isascii() and number.isdigit() and 1 <= int(number) <= self._state.turn_counter

    def is_forgotten_turn(self, turn_id: str) -> bool:
        """A turn that ended (in this run or an earlier one) beyond the outcomes still held."""
        return (
            turn_id not in self._outcomes
            and turn_id != self._running
            and turn_id not in (self._held or {})
            and turn_id not in self.queued_turn_ids()
        )

    def unknown_or_forgotten(self, turn_id: str) -> str | None:
        """Why the workflow cannot answer for ``turn_id``, or None when it can."""
        if not self.is_known_turn(turn_id):
            return f"unknown turn {turn_id!r} in session {self._session_id}"
        if self.is_forgotten_turn(turn_id):
            return (
                f"turn {turn_id!r} of session {self._session_id} {FORGOTTEN_TURN}; "
                "its outcome is the TurnEnded event in the store (agentrt session events)"
            )
        return None
