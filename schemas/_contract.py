"""The activity contract: which builds may call each other's activities.

Temporal versions a workflow with its build (patches, Worker Versioning) but not the activities it
calls: while two builds run (a rolling update, or a tools worker polled by every build), a
workflow of one build may call an activity on a worker of the other. What crosses is the
activity's input, one way, and its result, back. Every build names the contract it speaks
(``ACTIVITY_CONTRACT``) and the oldest contract whose builds it still reads and writes for
(``ACTIVITY_CONTRACT_OLDEST``); each activity call carries the caller's pair in a header
(``ACTIVITY_CONTRACT_HEADER``, worker/_contract.py), and the worker that receives it runs the call
only when each side is inside the other's window (``ActivityContract.accepts``), else refuses it
with ``ActivityContractMismatch``, not retried, naming both.

The rule, N and N-1: a change to an activity's input or result that builds of the previous
contract read both ways (a new field with a default, left out of the payload at that default)
keeps the contract; one they cannot read is made over two contracts (expand, then contract:
build N reads both shapes and writes the old, build N+1 writes the new with
``ACTIVITY_CONTRACT_OLDEST = N``), so that any two builds that accept each other read each other.
Contract 1 is the builds from before contracts were carried: they send no header and check none.
"""

from __future__ import annotations

from typing import Final

from pydantic import Field, model_validator

from agentrt.schemas._base import Model

__all__ = [
    "ACTIVITY_CONTRACT",
    "ACTIVITY_CONTRACT_HEADER",
    "ACTIVITY_CONTRACT_OLDEST",
    "ActivityContract",
]

# This build's activity contract, and the oldest one whose builds it reads and writes for.
# 3: store writes carry events builds of 2 cannot read (PermissionGranted for every allowed call,
# ContextAssembled, ModelCallRetried, SessionRenamed, MemoryDropped, ...): builds of 2 and 3 refuse
# each other's activity calls, typed, instead of failing to read them on every attempt.
ACTIVITY_CONTRACT: Final = 3
ACTIVITY_CONTRACT_OLDEST: Final = 3
# The header an activity call carries the caller's contract in (JSON: {"version": N, "oldest": M}).
ACTIVITY_CONTRACT_HEADER: Final = "agentrt-activity-contract"


class ActivityContract(Model):
    """A build's activity contract: the ``version`` it speaks and the ``oldest`` it reads and writes for."""

    version: int = Field(ge=1)
    oldest: int = Field(ge=1)

    @model_validator(mode="after")
    def _oldest_not_newer(self) -> ActivityContract:
        if self.oldest > self.version:
            raise ValueError(f"oldest contract {self.oldest} is newer than version {self.version}")
        return self

    @classmethod
    def this_build(cls) -> ActivityContract:
        return cls(version=ACTIVITY_CONTRACT, oldest=ACTIVITY_CONTRACT_OLDEST)

    @classmethod
    def before_contracts(cls) -> ActivityContract:
        """What a call without the header comes from: a build from before contracts (contract 1)."""
        return cls(version=1, oldest=1)

    def accepts(self, caller: ActivityContract) -> bool:
        """Whether this build may run an activity for ``caller`` (and ``caller`` read its result): the
        caller's version is one this build still reads, and this build's is one the caller writes for."""
        return caller.version >= self.oldest and self.version >= caller.oldest

    def describe(self) -> str:
        """``2 (back to 1)``: the version and the oldest it reads and writes for."""
        return f"{self.version} (back to {self.oldest})"
