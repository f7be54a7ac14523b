"""A server asking the user something during a call, answered without blocking a worker: the
k-th time a server asks during one run of a call, it gets ``answers[k]``; when it asks beyond
them, the call is stopped (its request cancelled at the server) and the question is returned
for the workflow to ask, after which the call runs again with one more answer.

- Protocol 2025-11-25 and earlier: the server sends ``elicitation/create`` during the call. The
  request names no call (the SDK gives the callback no related request id, on stdio or HTTP),
  so it is attributed to the one call in flight on the connection; with several in flight it
  is refused with a JSON-RPC error (the server's tool fails, the model may call again), never
  answered with another call's answer.
- Protocol 2026-07-28: the call returns ``InputRequiredResult`` rounds, answered in order from
  the same answers. A returned question's ``request_state`` is a token wrapping the server's
  state, the round's keys and the answers taken before it (``ResumeState``): the next run
  resumes that round; without it, or when the server refuses its old state (it restarted),
  the call runs from the start and each question is answered again.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
    ErrorData,
)
from pydantic import ValidationError

from agentrt.schemas import ElicitationAnswer, ElicitationRequest

if TYPE_CHECKING:
    from agentrt.activities.mcp._connections import Connection

# How long a server request for input waits for its call to cancel the call's request.
ELICITATION_STOP_WAIT_SECONDS = 5.0
# The token wrapping a 2026-07-28 server's request_state (see ResumeState).
_STATE_PREFIX = "agentrt-mcp-1:"


class CallRun:
    """One run of a call, as the elicitation callback sees it: the ``answers`` it may give, and
    the ``question`` it stopped at (``asked`` set) once they ran out; the run sets ``stopped``
    when it is over."""

    def __init__(self, answers: Sequence[ElicitationAnswer]) -> None:
        self.answers = answers
        self.count = 0  # server requests for input seen so far
        self.question: ElicitationRequest | None = None
        self.asked = asyncio.Event()
        self.stopped = asyncio.Event()


@dataclass(frozen=True)
class ResumeState:
    """What ``ElicitationRequest.request_state`` carries for a 2026-07-28 server: the server's own
    ``state``, the ``keys`` of the round's elicitation requests, and ``base``, how many answers
    earlier rounds took. With all of that round's answers, the next run resumes the round
    instead of running the call from the start."""

    state: str | None
    keys: list[str]
    base: int

    def encode(self) -> str:
        """The token: a prefix, then the fields as base64url JSON."""
        data = json.dumps({"state": self.state, "keys": self.keys, "base": self.base}, separators=(",", ":"))
        return _STATE_PREFIX + base64.urlsafe_b64encode(data.encode()).decode()

    @classmethod
    def decode(cls, token: str) -> ResumeState | None:
        """The state ``encode`` made ``token`` from; None for anything else (never raises)."""
        if not token.startswith(_STATE_PREFIX):
            return None
        try:
            data = json.loads(base64.urlsafe_b64decode(token[len(_STATE_PREFIX) :].encode()))
            state, keys, base = data["state"], data["keys"], data["base"]
        except (ValueError, KeyError, TypeError, binascii.Error):
            return None
        if not (state is None or isinstance(state, str)) or not isinstance(base, int) or base < 0:
            return None
        if not isinstance(keys, list) or not keys or not all(isinstance(k, str) for k in keys):
            return None
        return cls(state, keys, base)


async def answer_elicitation(conn: Connection, params: ElicitRequestParams) -> ElicitResult | ErrorData:
    """A server's ``elicitation/create`` (protocol 2025-11-25 and earlier), sent while a call runs.

    The request names no call, so it is attributed to the one call in flight on ``conn``; with
    several in flight it is refused (the server sees an error), since answering one call's
    question with another's answer would be worse. Beyond the call's answers, the question is
    handed to the call, which stops; the server then gets ``cancel`` (after at most
    ``ELICITATION_STOP_WAIT_SECONDS``).
    """
    calls = list(conn.calls)
    if len(calls) != 1:
        return ErrorData(
            code=INVALID_REQUEST,
            message=f"cannot tell which of the {len(calls)} calls in flight asks for input; call again",
        )
    call = calls[0]
    index = call.count
    call.count += 1
    if index < len(call.answers):
        try:
            return elicit_result(call.answers[index])
        except ValidationError as err:
            return ErrorData(code=INVALID_PARAMS, message=f"the answer does not fit the request: {err}")
    call.question = elicitation_request(params)
    call.asked.set()
    # The call cancels its request first; by then this answer is moot.
    with anyio.move_on_after(ELICITATION_STOP_WAIT_SECONDS):
        await call.stopped.wait()
    return ElicitResult(action="cancel")


def elicitation_request(
    params: ElicitRequestParams, *, key: str | None = None, request_state: str | None = None
) -> ElicitationRequest:
    """The question ``params`` asks, as the workflow asks it (form or URL mode)."""
    if isinstance(params, ElicitRequestURLParams):
        return ElicitationRequest(message=params.message, mode="url", url=params.url, key=key, request_state=request_state)
    return ElicitationRequest(
        message=params.message, requested_schema=dict(params.requested_schema), key=key, request_state=request_state
    )


def elicit_result(answer: ElicitationAnswer) -> ElicitResult:
    """The user's ``answer`` as the server reads it (content only with ``accept``). Raises
    ``ValidationError`` when the content does not fit an ``ElicitResult``."""
    if answer.action == "accept" and answer.content is not None:
        return ElicitResult(action="accept", content=answer.content)
    return ElicitResult(action=answer.action)
