"""The owner record of workflow ids: the first claim wins, for good."""

from __future__ import annotations

from agentrt.schemas import SessionConfig, StoreAppendInput
from agentrt.store import Store


def test_first_claim_of_an_id_wins_and_a_later_owner_gets_the_first(store: Store) -> None:
    assert store.workflow_owner("session-s1") is None
    assert store.claim_owner("session-s1", "alice") == "alice"
    assert store.claim_owner("session-s1", "alice") == "alice"
    assert store.claim_owner("session-s1", "mallory") == "alice"
    assert store.workflow_owner("session-s1") == "alice"


def test_ids_of_each_kind_are_claimed_apart(store: Store) -> None:
    assert store.claim_owner("task-x", "alice") == "alice"
    assert store.claim_owner("graph-x", "bob") == "bob"
    assert store.claim_owner("session-x", "carol") == "carol"


def test_a_session_stored_before_claims_keeps_its_owner(store: Store, tmp_path) -> None:
    config = SessionConfig(session_id="old", owner="alice", workspace=str(tmp_path), profile="scripted")
    store.append(StoreAppendInput(session_id="old", config=config))
    assert store.workflow_owner("session-old") == "alice"
    assert store.claim_owner("session-old", "mallory") == "alice"
