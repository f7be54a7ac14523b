"""The worker's check that a session, task or graph id is its owner's: the store records each id's
first owner for good (``Store.claim_owner``), so an id once used never passes to another owner,
not even after Temporal forgot the first workflow, and a start that went around the client is
refused before the workflow reads anything its id's first owner left in the store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio.exceptions import ApplicationError

if TYPE_CHECKING:
    from agentrt.store import Store

__all__ = ["claim_workflow_id"]


def claim_workflow_id(store: "Store", workflow_id: str, owner: str, noun: str, item_id: str, error_type: str) -> None:
    """Claim ``workflow_id`` for ``owner`` (``Store.claim_owner``); an id another owner has used
    raises the non-retryable ``ApplicationError(type=error_type)`` (``SessionIdTaken``,
    ``TaskIdTaken``, ``GraphIdTaken``), worded for the ``noun`` and never naming the first owner."""
    if store.claim_owner(workflow_id, owner) != owner:
        raise ApplicationError(
            f"{noun} {item_id}: this id was used by another owner; {noun} ids are never reused "
            f"(start a new {noun} with another id)",
            type=error_type, non_retryable=True,
        )
