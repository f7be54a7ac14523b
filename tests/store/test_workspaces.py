"""Workspace owners on SQLite and PostgreSQL: the first principal to claim a directory owns it, and
another principal can claim neither it, nor a directory inside it, nor one that holds it."""

from __future__ import annotations

from agentrt.store import Store


def test_the_first_principal_owns_a_workspace_and_keeps_it(store: Store) -> None:
    assert store.claim_workspace("/root/ws", "alice")
    assert store.claim_workspace("/root/ws", "alice")
    assert not store.claim_workspace("/root/ws", "bob")
    assert store.workspace_owner("/root/ws") == "alice"


def test_another_principal_claims_neither_inside_nor_above_an_owned_workspace(store: Store) -> None:
    assert store.claim_workspace("/root/ws", "alice")
    assert not store.claim_workspace("/root/ws/src", "bob")
    assert not store.claim_workspace("/root", "bob")
    assert not store.claim_workspace("/", "bob")
    assert store.workspace_owner("/root/ws/src") is None  # a refused claim writes nothing
    assert store.claim_workspace("/root/ws/src", "alice")


def test_a_sibling_whose_name_only_starts_alike_is_another_workspace(store: Store) -> None:
    assert store.claim_workspace("/root/ws", "alice")
    assert store.claim_workspace("/root/ws2", "bob")
    assert store.claim_workspace("/root/ws%", "bob")  # LIKE's wildcards are taken as they are
    assert store.claim_workspace("/root/w_", "bob")
    assert not store.claim_workspace("/root/w_/x", "alice")
