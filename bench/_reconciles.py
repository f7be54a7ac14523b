"""Reconcile requests answered as an operator would, from what the effect left where it can be seen.

An effectful tool call whose worker died between its effect-ledger claim and its record comes
back as a ``reconcile`` request (``PermissionRequested`` with ``request.kind == "reconcile"``,
listed in the session's ``pending_approvals``); the turn waits until someone says whether the
effect happened (docs/effects.md). The benches that kill workers answer from the files their
tools write:

- ``line_in_file(path)``: ``chaos.append`` and ``fleet.append`` add one line per call (the
  call's ``line`` argument) to ``path``: applied when that line is in it;
- ``file_written(workspace)``: ``fs.write`` writes the call's ``content`` to its ``path`` under
  ``workspace``: applied when the file holds exactly that content.

``Reconciler`` sends the answers (``AgentClient.decisions.reconcile``) and counts the requests it answered.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentrt.client import AgentClient
from bench._turn_checks import read_lines

Judge = Callable[[Mapping[str, Any]], bool]  # a call's arguments -> whether its effect is there


def is_reconcile(request: Any) -> bool:
    """Whether a pending request (``SessionStateView.pending_approvals``) asks to reconcile a call."""
    return getattr(request, "kind", "tool_call") == "reconcile"


def line_in_file(path: Path) -> Judge:
    """Applied when the call's ``line`` argument is a line of ``path`` (none when it does not exist)."""
    return lambda arguments: str(arguments.get("line", "")) in read_lines(path)


def file_written(workspace: Path) -> Judge:
    """Applied when the file the call names (``path``, relative to ``workspace``; one outside it
    never counts) holds exactly the call's ``content``."""

    def applied(arguments: Mapping[str, Any]) -> bool:
        root = workspace.resolve()
        target = (root / str(arguments.get("path", ""))).resolve()
        if not target.is_relative_to(root) or not target.is_file():
            return False
        return target.read_text(errors="replace") == str(arguments.get("content", ""))

    return applied


class Reconciler:
    """Answers reconcile requests with ``client`` (the sessions' owner or an operator of theirs).

    ``count``: requests answered, each counted once however often it was answered. A request
    answered less than ``again_after`` seconds ago is left alone (its signal may not have
    reached the session yet); one still pending after that is answered again. ``timeout``
    bounds each call to the server (seconds); ``log`` gets a line per answer and per failure;
    ``who`` opens the note each answer carries."""

    def __init__(
        self, client: AgentClient, who: str, log: Callable[[str], None] = lambda _text: None,
        timeout: float = 10.0, again_after: float = 5.0,
    ) -> None:
        self.client = client
        self.who = who
        self.log = log
        self.timeout = timeout
        self.again_after = again_after
        self.count = 0
        self._answered: dict[tuple[str, str], float] = {}  # (session id, request id) -> when

    async def answer(self, session_id: str, request: Any, applied: Judge) -> bool:
        """Answer one reconcile request of ``session_id``: ``applied`` when ``applied(arguments)``
        says the effect is there, else ``not_applied``. True the first time this request is
        answered; False when it was answered moments ago. Raises what ``AgentClient.decisions.reconcile``
        raises (``RequestRejected`` for one decided meanwhile) and ``TimeoutError``."""
        key = (session_id, request.request_id)
        now = time.monotonic()
        if now - self._answered.get(key, -1e9) < self.again_after:
            return False
        arguments = dict(request.arguments or {})
        outcome = "applied" if await asyncio.to_thread(applied, arguments) else "not_applied"
        what = arguments.get("line") or arguments.get("path") or request.tool
        await asyncio.wait_for(
            self.client.decisions.reconcile(session_id, request.request_id, outcome, note=f"{self.who}: {what!r} {outcome}"), self.timeout
        )
        first = key not in self._answered
        self._answered[key] = now
        if first:
            self.count += 1
            self.log(f"{session_id}: reconcile {request.request_id} ({what}) -> {outcome}")
        return first

    async def answer_pending(self, session_id: str, applied: Judge) -> int:
        """Ask ``session_id``'s state and answer each reconcile request it holds; returns how many
        were answered for the first time. A state query or an answer that fails (server or worker
        gone, decided meanwhile) is logged and left for the next call."""
        try:
            state = await asyncio.wait_for(self.client.sessions.state(session_id), self.timeout)
        except Exception:  # noqa: BLE001 - not answering now; asked again next time
            return 0
        answered = 0
        for request in state.pending_approvals:
            if not is_reconcile(request):
                continue
            try:
                answered += await self.answer(session_id, request, applied)
            except Exception as err:  # noqa: BLE001 - answered again next time if still pending
                self.log(f"{session_id}: reconcile {request.request_id} not answered: {type(err).__name__}: {err}")
        return answered
