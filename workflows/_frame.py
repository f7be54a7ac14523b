"""The frame a task and a graph workflow share: the check of their own workflow id, the status
board (current details and search attributes) and the standing check of update validators.

Workflow code only (``workflow.info``, ``workflow.patched``, upserts); each piece is an object the
workflow holds, given what it uses when it is made.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from agentrt.schemas import SESSION_STATUS
from agentrt.workflows import _console as console
from agentrt.workflows._approvals import standing_refusal
from agentrt.workflows._errors import rejected


def require_workflow_id(kind: console.Kind, object_id: str, expected: str) -> None:
    """Fail the run (``<Kind>IdMismatch``, not retried) unless it runs as workflow ``expected``:
    a ``kind`` with id ``object_id`` has one workflow id, so two runs cannot both be it."""
    actual = workflow.info().workflow_id
    if actual != expected:
        raise ApplicationError(
            f"workflow {actual!r} cannot run {kind} {object_id!r}: a {kind} runs as workflow {expected!r}",
            type=f"{kind.capitalize()}IdMismatch",
            non_retryable=True,
        )


class StatusBoard:
    """What the Temporal UI shows of one workflow: its current details and its search attributes.

    Asks ``console-v1`` once, when it is made (in the run's first workflow task): with it, every
    attribute of ``console.Listing`` is written when its value changes; before it,
    ``AgentSessionStatus`` alone, when the status changes.
    """

    def __init__(self, kind: console.Kind, owner: str, profile: str) -> None:
        self.kind: console.Kind = kind
        self.owner = owner
        self.profile = profile
        self.console = workflow.patched(console.CONSOLE_PATCH)
        self._written: str | None = None

    def show(self, details: str) -> None:
        workflow.set_current_details(details)

    def set(self, status: str, details: str, *, cost_usd: float, pending_approvals: int = 0) -> None:
        """Show ``details`` and write the search attributes that changed for ``status`` and the
        spend so far (``cost_usd``, US dollars)."""
        workflow.set_current_details(details)
        if self.console:
            listing = console.Listing(
                kind=self.kind, owner=self.owner, status=status, profile=self.profile,
                pending_approvals=pending_approvals, spend_usd=console.spend_or_none(cost_usd),
            )
            updates = console.changed(listing, workflow.info().typed_search_attributes)
            if updates:
                workflow.upsert_search_attributes(updates)
        elif status != self._written:
            self._written = status
            workflow.upsert_search_attributes([SESSION_STATUS.value_set(status)])


class Standing:
    """Who may act on a workflow: its ``owner``, or one of its ``operators`` giving a reason.
    ``what`` names it in the refusal (``task t1``, ``graph g1``)."""

    def __init__(self, owner: str, operators: list[str], what: str) -> None:
        self.owner = owner
        self.operators = list(operators)
        self.what = what

    def refusal(self, principal: str, reason: str | None, verb: str) -> str | None:
        """Why ``principal`` may not ``verb`` it, or None (``standing_refusal``)."""
        return standing_refusal(self.owner, self.operators, principal, reason, verb, self.what)

    def check(self, principal: str, reason: str | None, verb: str) -> None:
        """Refuse (an update validator's rejection) a principal that may not ``verb`` it."""
        refusal = self.refusal(principal, reason, verb)
        if refusal is not None:
            raise rejected(refusal)
