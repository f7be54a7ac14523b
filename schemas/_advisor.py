"""The advisor: a second model that reviews a batch of tool calls before the policy decides them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentrt.schemas._activities import StoreAppendInput
from agentrt.schemas._base import Model
from agentrt.schemas._messages import ToolCall, Usage

__all__ = [
    "ADVISOR_REQUEST_CHARS",
    "AdvisorReviewInput",
    "AdvisorReviewResult",
    "AdvisorVerdict",
]

AdvisorVerdict = Literal["approve", "approve_with_warnings", "reject"]
# Characters of the user's request an advisor sees (the start of the turn's message).
ADVISOR_REQUEST_CHARS = 2_000


class AdvisorReviewInput(Model):
    """Activity ``advisor.review``: judge ``calls`` (the batch a model proposed in round ``round``).

    ``request``: the start of the turn's user message (at most ``ADVISOR_REQUEST_CHARS``);
    ``risks``: per call, the high-risk rule it matched (``""`` for none); ``profile``: the
    advisor's model profile; ``script``: the session's scripted-model file, whose ``advisor``
    list scripts verdicts offline; ``review_index``: the session's earlier reviews (the
    scripted advisor's step); ``store_writes``: written first, so the review shows as it runs.
    """

    session_id: str
    turn_id: str
    round: int
    profile: str
    script: str | None = None
    review_index: int = 0
    workspace: str
    request: str = ""
    calls: list[ToolCall]
    risks: list[str] = Field(default_factory=list)
    # The workflow's staged events and messages, written before the review (left out when None).
    store_writes: StoreAppendInput | None = Field(default=None, exclude_if=lambda v: v is None)


class AdvisorReviewResult(Model):
    """The advisor's verdict. ``error`` is set when its answer could not be used (not JSON, no
    known verdict): ``verdict`` is then ``approve`` (fail-open)."""

    verdict: AdvisorVerdict
    concerns: list[str] = Field(default_factory=list)
    summary: str = ""
    usage: Usage = Field(default_factory=Usage)
    error: str | None = Field(default=None, exclude_if=lambda v: v is None)
