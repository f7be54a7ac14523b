"""An offline model that replays a script of responses, for demos and tests without a network."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import threading
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentrt.activities._object_memo import ObjectMemo
from agentrt.activities.providers._base import OnDelta, arguments_problem, tool_call_from_text, valid_text
from agentrt.activities.tools import read_regular_file
from agentrt.schemas import (
    InvalidScriptError,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    ProviderHTTPError,
    ScriptExhaustedError,
    ToolCall,
    ToolError,
    ToolSpec,
    Usage,
)

_DELAY_STEP_SECONDS = 0.05
_WORDS_PER_DELTA = 3

__all__ = [
    "MAX_SCRIPT_BYTES", "Script", "ScriptAdvice", "ScriptNodeAttempt", "ScriptPlan", "ScriptReview", "ScriptSession", "ScriptedProvider", "load_script",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ScriptToolCall(_Strict):
    """One tool call: ``arguments`` (an object) or ``arguments_raw`` (text, parsed like a real model's)."""

    name: str = Field(min_length=1)
    arguments: dict[str, Any] | None = None
    arguments_raw: str | None = None

    @model_validator(mode="after")
    def _one_argument_form(self) -> "ScriptToolCall":
        if self.arguments is not None and self.arguments_raw is not None:
            raise ValueError("give either arguments or arguments_raw, not both")
        return self


class ScriptTurn(_Strict):
    """One model response: optional text, optional tool calls, and a delay (seconds) before it."""

    text: str = ""
    tool_calls: list[ScriptToolCall] = Field(default_factory=list)
    delay_seconds: float = Field(default=0.0, ge=0.0)


class ScriptAdvice(_Strict):
    """One advisor review's answer, in order: a ``verdict`` (``approve``, ``approve_with_warnings``,
    ``reject``) with ``concerns`` and a ``summary``, sent as fenced JSON as a model would; or
    ``text``, sent as it is (to script an answer that is not JSON); or ``error``, a provider
    failure with HTTP ``status`` (default 500). ``delay_seconds`` before answering."""

    verdict: str | None = None
    concerns: list[str] = Field(default_factory=list)
    summary: str = ""
    text: str | None = None
    error: str | None = None
    status: int = Field(default=500, ge=400, le=599)
    delay_seconds: float = Field(default=0.0, ge=0.0)


class ScriptReview(_Strict):
    """One acceptance review's answer (an autonomous task's ``task.review``), in order: a ``verdict``
    (``pass`` or ``fail``) with ``findings`` and a ``summary``, sent as fenced JSON as a model
    would; or ``text``, sent as it is (to script an answer that is not a verdict); or ``error``, a
    provider failure with HTTP ``status`` (default 500). ``delay_seconds`` before answering."""

    verdict: str | None = None
    findings: list[str] = Field(default_factory=list)
    summary: str = ""
    text: str | None = None
    error: str | None = None
    status: int = Field(default=500, ge=400, le=599)
    delay_seconds: float = Field(default=0.0, ge=0.0)


class ScriptSession(_Strict):
    """The replies of one session of an autonomous task (``sessions`` of a script), in order."""

    turns: list[ScriptTurn]


class ScriptPlan(_Strict):
    """One task graph planner's answer (``graph.plan``), in order: ``graph``, an object sent as a
    fenced JSON block as a model would (``{"max_parallel": N, "nodes": [...]}``); or ``text``, sent
    as it is (a direct answer, or a plan that is not JSON); or ``error``, a provider failure with
    HTTP ``status`` (default 500). Exactly one of the three. ``delay_seconds`` before answering."""

    graph: dict[str, Any] | None = None
    text: str | None = None
    error: str | None = None
    status: int = Field(default=500, ge=400, le=599)
    delay_seconds: float = Field(default=0.0, ge=0.0)

    @model_validator(mode="after")
    def _one_answer(self) -> "ScriptPlan":
        given = [name for name in ("graph", "text", "error") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of graph, text or error (given: {', '.join(given) or 'none'})")
        return self


class ScriptNodeAttempt(_Strict):
    """One attempt of a task graph's node (an element of ``nodes.<id>`` of a script): ``turns``,
    the replies of the node's session, in order, and ``review``, the reviewer's answer to that
    attempt (None: pass)."""

    turns: list[ScriptTurn]
    review: ScriptReview | None = None


class Script(_Strict):
    """A script file: one element of ``turns`` per model response, of ``advisor`` per advisor
    review and of ``reviews`` per acceptance review, each in order::

        {"turns": [ScriptTurn, ...], "advisor": [ScriptAdvice, ...], "reviews": [ScriptReview, ...]}

    An autonomous task's sessions may have replies of their own: ``sessions`` holds one
    ``{"turns": [...]}`` per session (the first for session 1, ...). A task graph's planner
    answers from ``plan`` (one ``ScriptPlan`` per planner call, in order), and its nodes from
    ``nodes``: node id -> one ``{"turns": [...], "review": ScriptReview | null}`` per attempt
    (the first for attempt 1, ...; past the last: the last again)::

        {"plan": [ScriptPlan, ...], "nodes": {"<node id>": [ScriptNodeAttempt, ...], ...}}

    ``turns`` may be left out when ``sessions``, ``plan`` or ``nodes`` is given. A review past
    the end of ``advisor`` (or with none scripted) approves; one past the end of ``reviews``, or
    of a node's attempt with no ``review``, passes."""

    turns: list[ScriptTurn] = Field(default_factory=list)
    sessions: list[ScriptSession] = Field(default_factory=list)
    advisor: list[ScriptAdvice] = Field(default_factory=list)
    reviews: list[ScriptReview] = Field(default_factory=list)
    plan: list[ScriptPlan] = Field(default_factory=list)
    nodes: dict[str, list[ScriptNodeAttempt]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _has_replies(self) -> "Script":
        if "turns" not in self.model_fields_set and not (self.sessions or self.plan or self.nodes):
            raise ValueError(
                "give turns (the model's replies), sessions (the replies of each session of a task), "
                "plan (a task graph planner's answers) or nodes (the replies of a task graph's nodes)"
            )
        empty = [node for node, attempts in self.nodes.items() if not attempts]
        if empty:
            raise ValueError(f"no attempts given for nodes {', '.join(map(repr, empty[:10]))} (each needs at least one)")
        return self


# The largest script file read (bytes): a script is a test's or a demo's replies, never this big.
MAX_SCRIPT_BYTES = 16 * 1024 * 1024

_cache: dict[str, tuple[tuple[int, int, int, int], Script]] = {}
_cache_lock = threading.Lock()


def load_script(path: str) -> Script:
    """Read and validate a script file; cached by path and the file's identity (device, inode,
    mtime, size). Blocking: async code calls it on a thread.

    ``.yaml``/``.yml`` files are YAML, anything else JSON. The file is read as
    ``read_regular_file`` reads (no symbolic link in any part of its path, no FIFO or device, at
    most ``MAX_SCRIPT_BYTES``). A missing, unreadable, unparsable or wrongly shaped file, or one
    read refuses, raises ``InvalidScriptError`` saying why.
    """
    try:
        file = read_regular_file(path, limit=MAX_SCRIPT_BYTES)
    except ToolError as e:  # a symlink, a FIFO or device, too large
        raise InvalidScriptError(path, f"cannot read it: {e}") from e
    except OSError as e:
        raise InvalidScriptError(path, f"cannot read it: {e.strerror or e}") from e
    key = os.path.abspath(path)
    identity = (file.device, file.inode, file.mtime_ns, file.size)
    with _cache_lock:
        cached = _cache.get(key)
    if cached is not None and cached[0] == identity:
        return cached[1]
    try:
        text = file.data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidScriptError(path, f"cannot read it: {e}") from e
    try:
        data = yaml.safe_load(text) if path.lower().endswith((".yaml", ".yml")) else json.loads(text)
    except (yaml.YAMLError, ValueError, RecursionError) as e:
        raise InvalidScriptError(path, f"does not parse: {e}") from e
    try:
        script = Script.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or '(top)'}: {err['msg']}" for err in e.errors())
        raise InvalidScriptError(path, f"wrong shape: {problems}") from e
    with _cache_lock:
        _cache[key] = (identity, script)
    return script


class ScriptedProvider:
    """Answers each request with the next response of the script at ``profile.script``.

    The response index is ``request.reply_index`` (the session's earlier assistant messages)
    or, when that is None, the number of ``assistant`` messages in ``request.messages``, so
    a session walks the script in order and a retried call gets the same answer. A
    ``purpose="summary"`` request (compaction) does not use the script: it answers with an
    extractive summary (the summary so far plus the first words of each user and assistant
    message) of at most ``profile.max_output_tokens * 4`` characters. A ``purpose="advisor"``
    request (an advisor review) answers with the script's ``advisor`` entry number
    ``request.review_index`` (``ScriptAdvice``; approve when there is none), and a
    ``purpose="review"`` request (an autonomous task's acceptance review) with its ``reviews``
    entry number ``request.review_index`` (``ScriptReview``; pass when there is none). A
    ``purpose="plan"`` request (a task graph's planner) answers with the script's ``plan`` entry
    number ``request.review_index`` (``ScriptPlan``; past the end: ``ScriptExhaustedError``).
    A request with ``request.script_node`` naming a node of the script's ``nodes`` (a task
    graph's node, ``request.script_session`` its attempt from 1) uses that node's entry for the
    attempt (past the last one: the last one): a reply takes its replies from the entry's
    ``turns``, a review answers with its ``review`` (pass when it has none). Otherwise a request
    with ``request.script_session`` N (an autonomous task's session N, from 1) takes its replies
    from the script's ``sessions`` section N, when the script has sections (past the last one:
    ``ScriptExhaustedError``); any other request takes them from ``turns``. Tool call ids are
    ``call_<response index>_<k>``. ``delay_seconds`` is
    slept in small cancellable steps before answering; text streams through ``on_delta``
    in word groups. Usage is estimated as ceil(characters / 4) tokens of the input and of
    the output (input: system prompt, tool specs as JSON and messages). Errors:
    ``InvalidScriptError`` for a bad script file; ``ScriptExhaustedError`` (not retryable) when
    asked for a reply past the end of the script, so such a turn fails as ``script_exhausted``
    instead of completing with an answer the script never gave.
    """

    def __init__(self, profile: ModelProfile) -> None:
        if not profile.script:
            raise InvalidScriptError("", f"profile {profile.name!r} has no script")
        self.profile = profile
        self.path = profile.script

    async def complete(self, request: ModelRequest, on_delta: OnDelta | None = None) -> ModelResponse:
        input_tokens = _estimate_tokens(_input_chars(request))
        if request.purpose == "summary":
            text = _extractive_summary(request.messages[-1].text if request.messages else "", request.profile.max_output_tokens * 4)
            return ModelResponse(
                text=text,
                usage=Usage(input_tokens=input_tokens, output_tokens=_estimate_tokens(len(text))),
                stop_reason="end_turn",
            )
        script = await asyncio.to_thread(load_script, self.path)  # a file: never read on the event loop
        node = request.script_node if request.script_node in script.nodes else None
        if request.purpose == "advisor":
            return await self._advice(script, request.review_index or 0, input_tokens)
        if request.purpose == "plan":
            return await self._plan(script, request.review_index or 0, input_tokens)
        if request.purpose == "review" and node is not None:
            return await self._node_review(script, node, request.script_session, input_tokens)
        if request.purpose == "review":
            return await self._review(script, request.review_index or 0, input_tokens)
        index = request.reply_index
        if index is None:
            index = sum(1 for m in request.messages if m.role == "assistant")
        if node is not None:
            label, turns = self._node_turns(script, node, request.script_session)
        else:
            label, turns = self._turns(script, request.script_session)
            if request.script_node is not None and script.nodes and not turns:
                # A graph script without this node: name it, not "0 replies".
                label = (f"{self.path} (its nodes section has no entry for node {request.script_node!r}; "
                         f"it has {', '.join(sorted(script.nodes)[:20])})")
        if index >= len(turns):
            err = ScriptExhaustedError(label, index, len(turns))
            err.partial_usage = Usage(input_tokens=input_tokens)
            raise err
        turn = turns[index]
        await _sleep_in_steps(turn.delay_seconds)
        text = valid_text(turn.text)  # as a real model's text is kept: no lone surrogate
        if on_delta is not None:
            for chunk in _word_groups(text):
                await on_delta(chunk)
        calls = [_tool_call(f"call_{index}_{k}", spec) for k, spec in enumerate(turn.tool_calls)]
        output_chars = len(text) + sum(len(c.name) + _argument_chars(c) for c in calls)
        return ModelResponse(
            text=text,
            tool_calls=calls,
            usage=Usage(input_tokens=input_tokens, output_tokens=_estimate_tokens(output_chars)),
            stop_reason="tool_use" if calls else "end_turn",
        )

    def _turns(self, script: Script, session: int | None) -> tuple[str, list[ScriptTurn]]:
        """The replies a request of task session ``session`` walks, and the script's name for an
        error: section ``session`` of ``sessions`` when the script has sections (none past the last
        one), else ``turns``."""
        if session is None or not script.sessions:
            return self.path, script.turns
        label = f"{self.path} session {session} (of {len(script.sessions)} scripted sessions)"
        if not 1 <= session <= len(script.sessions):
            return label, []
        return label, script.sessions[session - 1].turns

    def _node_turns(self, script: Script, node: str, attempt: int | None) -> tuple[str, list[ScriptTurn]]:
        """The replies of node ``node``'s session for ``attempt`` (see ``_node_attempt``), and the
        script's name for an error."""
        number, entry = _node_attempt(script, node, attempt)
        return f"{self.path} node {node!r} attempt {number} (of {len(script.nodes[node])} scripted)", entry.turns

    async def _node_review(self, script: Script, node: str, attempt: int | None, input_tokens: int) -> ModelResponse:
        """The scripted reviewer's answer to node ``node``'s ``attempt`` (its entry's ``review``; pass without one)."""
        number, entry = _node_attempt(script, node, attempt)
        review = entry.review or ScriptReview(verdict="pass", summary="no review verdict scripted for this attempt")
        body = {"verdict": review.verdict or "pass", "findings": review.findings, "summary": review.summary}
        return await self._scripted_verdict(review, f"nodes/{node}/{number}/review", body, input_tokens)

    async def _plan(self, script: Script, index: int, input_tokens: int) -> ModelResponse:
        """The scripted planner's answer to planner call ``index`` (see ``ScriptPlan``); past the
        end of ``plan``: ``ScriptExhaustedError``."""
        if index >= len(script.plan):
            err = ScriptExhaustedError(f"{self.path} plan", index, len(script.plan))
            err.partial_usage = Usage(input_tokens=input_tokens)
            raise err
        plan = script.plan[index]
        return await self._scripted_verdict(plan, f"plan/{index}", plan.graph or {}, input_tokens)

    async def _review(self, script: Script, index: int, input_tokens: int) -> ModelResponse:
        """The scripted reviewer's answer to acceptance review ``index`` (see ``ScriptReview``)."""
        review = script.reviews[index] if index < len(script.reviews) else ScriptReview(
            verdict="pass", summary="no review verdict scripted for this review"
        )
        body = {"verdict": review.verdict or "pass", "findings": review.findings, "summary": review.summary}
        return await self._scripted_verdict(review, f"reviews/{index}", body, input_tokens)

    async def _advice(self, script: Script, index: int, input_tokens: int) -> ModelResponse:
        """The scripted advisor's answer to review ``index`` (see ``ScriptAdvice``)."""
        advice = script.advisor[index] if index < len(script.advisor) else ScriptAdvice(
            verdict="approve", summary="no advisor verdict scripted for this review"
        )
        body = {"verdict": advice.verdict or "approve", "concerns": advice.concerns, "summary": advice.summary}
        return await self._scripted_verdict(advice, f"advisor/{index}", body, input_tokens)

    async def _scripted_verdict(
        self, entry: ScriptAdvice | ScriptReview | ScriptPlan, where: str, body: dict[str, Any], input_tokens: int
    ) -> ModelResponse:
        """A scripted verdict or plan: after ``entry.delay_seconds``, its ``error`` (a provider
        failure), its raw ``text``, or ``body`` as fenced JSON, as a model would answer."""
        await _sleep_in_steps(entry.delay_seconds)
        if entry.error is not None:
            raise ProviderHTTPError(entry.status, f"scripted:{self.path}#{where}", entry.error)
        text = entry.text if entry.text is not None else "```json\n" + json.dumps(body, indent=2) + "\n```"
        return ModelResponse(
            text=text, usage=Usage(input_tokens=input_tokens, output_tokens=_estimate_tokens(len(text))), stop_reason="end_turn"
        )


def _node_attempt(script: Script, node: str, attempt: int | None) -> tuple[int, ScriptNodeAttempt]:
    """Node ``node``'s entry for ``attempt`` (from 1; None is 1; past the last entry: the last
    one) and the entry's number."""
    attempts = script.nodes[node]
    number = min(max(attempt or 1, 1), len(attempts))
    return number, attempts[number - 1]


_SUMMARY_LINE = re.compile(r"^\[(\d+)\] (user|assistant): (.*)$")


def _extractive_summary(prompt: str, max_chars: int) -> str:
    """The summary so far plus ``[position] role: first words`` of each user and assistant line."""
    previous = ""
    if "Summary so far:\n" in prompt:
        previous = prompt.split("Summary so far:\n", 1)[1].split("\n\nNew messages:", 1)[0].strip()
    notes = []
    for line in prompt.splitlines():
        match = _SUMMARY_LINE.match(line)
        if match and match.group(3).strip():
            notes.append(f"[{match.group(1)}] {match.group(2)}: {' '.join(match.group(3).split()[:12])}")
    text = "\n".join(part for part in [previous, *notes] if part)
    if len(text) > max_chars:
        head = max_chars // 3
        text = text[:head] + "\n…\n" + text[len(text) - (max_chars - head - 3):]
    return text or "(nothing to summarise)"


def _tool_call(call_id: str, spec: ScriptToolCall) -> ToolCall:
    """The call a script asks for, kept as a real model's would be: arguments holding a lone
    surrogate or nested deeper than ``MAX_ARGUMENT_DEPTH`` are refused with their text, not
    kept (a reply holding them cannot be written to workflow history or read back from it)."""
    if spec.arguments_raw is not None:
        return tool_call_from_text(call_id, spec.name, spec.arguments_raw)
    arguments = spec.arguments or {}
    if arguments_problem(arguments) is not None:
        return tool_call_from_text(call_id, spec.name, json.dumps(arguments))
    return ToolCall(id=call_id, name=spec.name, arguments=arguments)


# Characters of each tool call's arguments, by the call object (a stored message is parsed once per
# process, so its calls are the same objects call after call).
_ARGUMENT_CHARS: ObjectMemo[ToolCall, int] = ObjectMemo(
    lambda call: len(json.dumps(call.arguments) if call.arguments is not None else call.arguments_raw or ""), limit=8192
)
# Characters of each tool spec's JSON, by the spec object (a registry hands out the same ones):
# dumping every spec for every call was a tenth of a scripted call's CPU.
_SPEC_CHARS: ObjectMemo[ToolSpec, int] = ObjectMemo(
    lambda spec: len(json.dumps(spec.model_dump(mode="json", exclude={"local_activity"}))), limit=1024
)


def _argument_chars(call: ToolCall) -> int:
    return _ARGUMENT_CHARS.of(call)


def _spec_chars(spec: ToolSpec) -> int:
    return _SPEC_CHARS.of(spec)


def _input_chars(request: ModelRequest) -> int:
    # As len(json.dumps(specs)): each spec's JSON, ", " between them, "[" and "]".
    specs = sum(_spec_chars(t) for t in request.tools) + 2 * max(len(request.tools) - 1, 0) + 2
    chars = len(request.system or "") + specs
    for message in request.messages:
        chars += len(message.text) + sum(len(c.name) + _argument_chars(c) for c in message.tool_calls)
    return chars


def _estimate_tokens(chars: int) -> int:
    return math.ceil(chars / 4)


async def _sleep_in_steps(seconds: float) -> None:
    """Sleep ``seconds`` in short steps, so cancellation lands promptly mid-delay."""
    if seconds <= 0:
        return
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    while (left := end - loop.time()) > 0:
        await asyncio.sleep(min(_DELAY_STEP_SECONDS, left))


def _word_groups(text: str) -> list[str]:
    """``text`` cut into pieces of a few words each; the pieces join back to ``text`` exactly."""
    words = re.findall(r"\s*\S+\s*", text) or ([text] if text else [])
    return ["".join(words[i : i + _WORDS_PER_DELTA]) for i in range(0, len(words), _WORDS_PER_DELTA)]
