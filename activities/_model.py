"""Model activities: ``provider.complete`` (one model call, content loaded from the store by the
workflow's context plan, deltas streamed to the store), ``context.compact`` (a compaction
summary), ``profiles.describe`` (a profile's context limits) and ``session.prepare`` (a new
session's tool specs and profile limits, in one call). What a call sees is read by
``_call_context.CallContext``."""

from __future__ import annotations

import asyncio
import traceback
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentrt.activities import _attempts
from agentrt.activities._retries import announce_lost_attempt, announce_retry
from agentrt.activities._call_context import CallContext, takes_reasoning_back
from agentrt.activities._call_failures import provider_failure, secrets_of
from agentrt.activities._call_gate import CallGate
from agentrt.activities._context_budget import assemble_context
from agentrt.activities._output import checked_answer, with_output_tool
from agentrt.activities._owners import claim_workflow_id
from agentrt.activities._telemetry import ModelCall, model_call
from agentrt.activities.providers import ProviderClients, bounded_message, provider_for, redact
from agentrt.activities.tools import discover_skills
from agentrt.schemas import (
    CONTEXT_COMPACT,
    PROFILES_DESCRIBE,
    PROVIDER_COMPLETE,
    SESSION_PREPARE,
    SKILL_ACTIVATE,
    SKILL_DEACTIVATE,
    AgentNotRegistered,
    CompactInput,
    CompactResult,
    ConfigurationError,
    ContextBreakdown,
    DescribeProfileInput,
    EmptyResponseError,
    FusedRound,
    ListToolsResult,
    Message,
    ModelCallInput,
    ModelCallResult,
    ModelProfile,
    ModelRequest,
    ModelResponse,
    PrepareSessionInput,
    PrepareSessionResult,
    ProfileInfo,
    ProfileLookup,
    ProviderError,
    SkillInfo,
    ToolSpec,
    UnknownProfileError,
    Usage,
    agent_tools,
    session_workflow_id,
)
from agentrt.workflows.context import BYTES_PER_TOKEN, truncate_middle

if TYPE_CHECKING:
    from agentrt.activities._fused_rounds import RoundFusion
    from agentrt.activities.tools import ToolRegistry
    from agentrt.store import Store

DELTA_FLUSH_SECONDS = 0.2
DELTA_FLUSH_COUNT = 32
PREVIEW_CHARS = 300
COMPACT_MAX_RETRY_DELAY_SECONDS = 10.0
SUMMARY_SYSTEM = (
    "You maintain the running summary of a long conversation between a user and an AI agent "
    "that uses tools. Write a faithful, dense summary: the user's goals and constraints, "
    "decisions made, facts learned (file names, values, errors), work done and still open. "
    "Keep what a successor needs to continue the work; drop pleasantries. Plain text."
)


# Tool listings (MCP tool specs by digest) a worker keeps for the model calls of a turn.
MAX_CACHED_LISTINGS = 256

# How often a model activity heartbeats while it waits for the provider, and when it first
# does (seconds).
HEARTBEAT_SECONDS = _attempts.HEARTBEAT_SECONDS


class ProfileSource(Protocol):
    """What the model activities read of the worker's configuration: its model profiles, by
    name. The worker's ``AgentrtConfig`` is one; any object with such a ``profiles`` is another."""

    @property
    def profiles(self) -> Mapping[str, ModelProfile]: ...


class ModelActivities:
    """Holds the worker's model profiles, store and tool registry; the workflow sends only a profile name."""

    def __init__(self, config: ProfileSource, store: "Store", registry: "ToolRegistry") -> None:
        self._config = config
        self._store = store
        self.registry = registry
        self.context = CallContext(store)
        self.gate = CallGate(store, config)  # the session's budget and the worker's [quotas]
        self._listings: OrderedDict[str, list[ToolSpec]] = OrderedDict()
        self.clients = ProviderClients()  # one HTTP client per profile, reused by every call
        # Runs the read-only rounds a call may run itself (fused-rounds-v1); set by ``activities_for``
        # where the worker runs tool calls too.
        self.fusion: RoundFusion | None = None

    def _profile(self, name: str, script: str | None, strict: bool = False) -> ModelProfile:
        """The profile called ``name``; with a session ``script`` it becomes a scripted profile
        that keeps the configured profile's context limits, compaction threshold and price (defaults and no price when
        unknown, unless ``strict``)."""
        if script:
            known = self._config.profiles.get(name)
            if known is None and strict:
                raise UnknownProfileError(name, list(self._config.profiles), self._profiles_read_from())
            limits = (
                {
                    "context_window": known.context_window, "max_output_tokens": known.max_output_tokens, "price": known.price,
                    "compact_threshold": known.compact_threshold,
                }
                if known
                else {}
            )
            return ModelProfile(name=name, provider="scripted", model="scripted", script=script, **limits)
        try:
            return self._config.profiles[name]
        except KeyError:
            raise UnknownProfileError(name, list(self._config.profiles), self._profiles_read_from()) from None

    def _profiles_read_from(self) -> str:
        """Where this worker's profiles came from, for an unknown-profile error."""
        source = getattr(self._config, "source", None)
        if source is None:
            return "the worker's configuration, from no agentrt.toml: restart the worker with the profile added"
        return f"this worker read its profiles from {source} when it started: restart it after adding one"

    @activity.defn(name=SESSION_PREPARE)
    def prepare(self, input: PrepareSessionInput) -> PrepareSessionResult:
        """A new session's tools (``tools.list``) and profile limits (``profiles.describe``) in one
        call: one local activity before the first turn instead of two. Same results, same errors.
        With ``input.workspace``, also the skills found there and in the worker's ``skill_paths``
        (``discover_skills``); with none, the skill tools are left out of the session's tools.
        With ``input.agent``, that agent's spec, tools (``agent_tools``) and profile; raises the
        non-retryable ``ApplicationError(type="AgentNotRegistered")`` naming it and this worker's
        task queue when the worker has no such agent. With ``input.session_id`` and ``input.owner``,
        claims the id for the owner first (``Store.claim_owner``): an id another owner has used (a
        start that went around the client, or after Temporal forgot the first session) raises the
        non-retryable ``ApplicationError(type="SessionIdTaken")``, so no stored transcript of that
        owner reaches this session's model. Heartbeats while it runs (``_attempts.beating``)."""
        with _attempts.beating():
            return self._prepare(input)

    def _prepare(self, input: PrepareSessionInput) -> PrepareSessionResult:
        if input.session_id is not None and input.owner is not None:
            self._claim(input.session_id, input.owner)
        names, profile, agent = input.tools, input.profile, None
        if input.agent is not None:
            agent = self.registry.agent(input.agent)
            if agent is None:
                error = AgentNotRegistered(input.agent, activity.info().task_queue, self.registry.agent_names())
                details = {"agent": input.agent, "task_queue": error.task_queue, "registered": error.registered}
                raise ApplicationError(str(error), details, type="AgentNotRegistered", non_retryable=True)
            names, profile = agent_tools(agent, input.tools), agent.profile or input.profile
        tools, unknown = self.registry.specs(names)
        skills: list[SkillInfo] = []
        if input.workspace is not None:
            paths = [Path(p) for p in getattr(self._config, "skill_paths", [])]
            found = discover_skills(Path(input.workspace), paths)
            for problem in found.problems:
                activity.logger.warning("skill skipped: %s", problem)
            skills = found.skills
            if not skills:  # nothing to activate: the skill tools would only take the model's attention
                tools = [t for t in tools if t.name not in (SKILL_ACTIVATE, SKILL_DEACTIVATE)]
        return PrepareSessionResult(
            tools=ListToolsResult(tools=tools, unknown=unknown),
            profile=self.describe(DescribeProfileInput(profile=profile, script=input.script)),
            skills=skills,
            agent=agent,
            task_queue=activity.info().task_queue if unknown or agent is not None else None,
        )

    def _claim(self, session_id: str, owner: str) -> None:
        claim_workflow_id(self._store, session_workflow_id(session_id), owner, "session", session_id, "SessionIdTaken")

    @activity.defn(name=PROFILES_DESCRIBE)
    def describe(self, input: DescribeProfileInput) -> ProfileLookup:
        """The context limits (tokens) of ``input.profile``, or, for a name the worker's
        configuration does not know, ``error`` naming the configured profiles (a result, not
        a failure: an operator's typo is not a worker problem)."""
        try:
            profile = self._profile(input.profile, input.script, strict=True)
        except ConfigurationError as err:
            return ProfileLookup(error=f"{type(err).__name__}: {err}")
        return ProfileLookup(
            info=ProfileInfo(
                name=profile.name,
                provider=profile.provider,
                model=profile.model,
                context_window=profile.context_window,
                max_output_tokens=profile.max_output_tokens,
                price=profile.price,
                compact_threshold=profile.compact_threshold,
            )
        )

    def _tool_listing(self, digest: str) -> list[ToolSpec]:
        """The MCP tool specs a turn listed (``mcp.list_tools`` stored them under ``digest``); kept
        per worker for the next call of the turn. Raises a non-retryable ``ApplicationError``
        typed ``ToolListingMissing`` when the store has none under it."""
        specs = self._listings.get(digest)
        if specs is None:
            specs = self._store.tool_listing(digest)
            if specs is None:
                raise ApplicationError(
                    f"the store holds no tool listing {digest}: the turn's mcp.list_tools wrote it to another database?",
                    type="ToolListingMissing",
                    non_retryable=True,
                )
            self._listings[digest] = specs
            while len(self._listings) > MAX_CACHED_LISTINGS:
                self._listings.popitem(last=False)
        else:
            self._listings.move_to_end(digest)
        return specs

    @activity.defn(name=PROVIDER_COMPLETE)
    async def complete(self, input: ModelCallInput) -> ModelCallResult:
        """Call the session's model with the transcript at positions < ``upto_position``.

        Writes ``input.store_writes`` (the workflow's staged events and messages) first.

        Raises ``ApplicationError`` typed ``ProviderHTTPError`` / ``ProviderTransportError``
        (retryable per status, Retry-After as the next delay) or a non-retryable
        configuration error (unknown profile, bad script, missing API key); a non-retryable
        ``BudgetExceeded`` or ``QuotaExceeded`` for a call its ``CallGate`` refuses (not sent).
        """
        # From the start: a store write that waits on a busy database must not look like a dead worker.
        async with _attempts.heartbeating():
            with model_call(input.session_id, activity.info().attempt, turn_id=input.turn_id, round=input.round) as call:
                return await self._complete(input, call)

    async def _complete(self, input: ModelCallInput, call: ModelCall) -> ModelCallResult:
        info = activity.info()
        try:
            profile = self._profile(input.profile, input.script)
            call.request(profile)
            provider = provider_for(profile, client=self.clients.client(profile))
        except ConfigurationError as err:
            if input.store_writes is not None:
                await asyncio.to_thread(self._store.append, input.store_writes)
            raise ApplicationError(str(err), type=type(err).__name__, non_retryable=True) from err
        tools, _unknown = self.registry.specs(input.tool_names)
        if input.tool_listing is not None:
            tools = tools + await asyncio.to_thread(self._tool_listing, input.tool_listing)
        await announce_lost_attempt(profile, input.turn_id, input.round)  # a retry no failing attempt announced
        # One transaction: the call's own events, its context, its "started" receipt.
        system, messages, breakdown, refusal = await asyncio.to_thread(self.begin_call, input, info.attempt, profile, tools)
        if refusal is not None:
            raise refusal
        request = ModelRequest(
            profile=profile, system=system, messages=messages, tools=with_output_tool(tools, input.output, profile),
            reply_index=input.reply_index, script_session=input.script_session, script_node=input.script_node,
            output=input.output,
        )
        buffer: list[str] = []
        written = 0
        loop = asyncio.get_running_loop()
        began = last_flush = loop.time()

        async def flush() -> None:
            nonlocal written, last_flush
            if buffer:
                texts = list(buffer)
                buffer.clear()
                await asyncio.to_thread(
                    self._store.append_deltas, input.session_id, input.turn_id, input.round, info.attempt, texts, written
                )
                written += len(texts)
            last_flush = loop.time()

        async def on_delta(text: str) -> None:
            buffer.append(text)
            if loop.time() - began >= HEARTBEAT_SECONDS:
                _attempts.heartbeat()
            # The first at once (the time to first token a user sees), then in batches.
            if not written or len(buffer) >= DELTA_FLUSH_COUNT or loop.time() - last_flush >= DELTA_FLUSH_SECONDS:
                await flush()

        async def end(
            status: str, usage: Usage | None = None, *, quiet: bool = False, response: ModelResponse | None = None
        ) -> None:
            """The deltas still buffered, the attempt's receipt and the reply's reasoning, in one
            transaction. ``quiet`` (on a failed call): a store error is logged, so the call's own
            error is what is raised."""
            texts = list(buffer)
            buffer.clear()
            try:
                await asyncio.to_thread(
                    self.end_call, input, info.attempt, texts, written, status, usage or Usage(), response, profile
                )
            except Exception:
                if not quiet:
                    raise
                activity.logger.exception("could not record the end (%s) of model call attempt %d", status, info.attempt)

        # A receipt per attempt: "started" (in begin_call), then "completed" or "interrupted". One
        # left "started" belongs to an attempt whose worker died; its retry is a fresh request.
        try:
            response = await provider.complete(request, on_delta)
        except ProviderError as err:
            partial = err.partial_usage if isinstance(err.partial_usage, Usage) else None
            await end("interrupted", partial, quiet=True)
            if partial is not None:
                call.reply(partial, None, profile)
            failure = provider_failure(err, profile)
            await announce_retry(failure, profile, input.turn_id, input.round)  # the session's ModelCallRetried
            raise failure from None
        except ConfigurationError as err:
            await end("interrupted", quiet=True)
            raise ApplicationError(str(err), type=type(err).__name__, non_retryable=True) from err
        except asyncio.CancelledError:
            await asyncio.shield(end("interrupted"))
            raise
        except Exception as err:
            # Not a provider's error (a store write of a delta failed, or an answer broke the
            # adapter): keep what streamed, and retry with the cause in a failure the server keeps.
            await end("interrupted", quiet=True)
            secrets = secrets_of(profile)
            # The traceback as text, redacted: the exception's own message may quote the key.
            activity.logger.warning("model call failed: %s", redact("".join(traceback.format_exception(err)), secrets))
            text = f"model call to {profile.provider} model {profile.model!r} failed: {type(err).__name__}: {err}"
            raise ApplicationError(bounded_message(text, secrets), type=type(err).__name__) from None
        await end("completed", response.usage, response=response)
        call.reply(response.usage, response.stop_reason, profile)
        if not response.text.strip() and not response.tool_calls:
            empty = EmptyResponseError(profile.provider, profile.model, response.stop_reason)
            raise provider_failure(empty, profile) from None
        fused: list[FusedRound] = []
        if input.fuse is not None and self.fusion is not None and not takes_reasoning_back(profile):
            fused, last, breakdown = await self.fusion.follow(input, profile, provider, tools, response, breakdown)
            if last is None:
                return ModelCallResult(position=input.reply_position, fused=fused, call_again=True)
            response = last
        check = None
        if input.output is not None:
            response, check = await checked_answer(input.output, response)
        return ModelCallResult(
            text=response.text,
            tool_calls=response.tool_calls,
            usage=response.usage,
            stop_reason=response.stop_reason,
            position=input.reply_position,
            reasoning_chars=sum(len(block.text) for block in response.reasoning),
            output=check.output if check else None,
            output_problems=check.problems if check else [],
            fused=fused,
            context=breakdown,
        )

    def begin_call(
        self, input: ModelCallInput, attempt: int, profile: ModelProfile, tools: list[ToolSpec],
        later: Sequence[tuple[int, Message]] = (),
    ) -> tuple[str | None, list[Message], ContextBreakdown | None, ApplicationError | None]:
        """In one transaction: write the call's staged writes (its own messages are part of its
        context), read its context (and the memories it shows; the budget note goes last), fit it
        to the window (``assemble_context``: a ``ContextOverflow`` is returned like a refusal), ask the
        ``CallGate``, write its "started" receipt. A context that cannot be read
        (a missing summary) writes nothing, so no receipt claims a request that was never sent;
        a call the gate refuses keeps its staged writes, gets no receipt and returns the refusal.
        ``later``: messages after the reply's position not stored yet (a fused round's, ``RoundFusion``)."""
        with self._store.transaction() as conn:
            if input.store_writes is not None:
                self._store.append(input.store_writes, conn=conn)
            fitted = assemble_context(self.context, input, profile, tools, conn, later=later)
            if isinstance(fitted, ApplicationError):  # its pinned parts alone pass the window: not sent
                return None, [], None, fitted
            system, messages = fitted.system, fitted.messages
            refusal = self.gate.refusal(input, profile, self.gate.prompt_tokens(input, system, messages, tools), conn)
            if refusal is None:
                self._store.record_usage(input.session_id, input.turn_id, input.round, attempt, "started", conn=conn)
        return system, messages, fitted.breakdown, refusal

    def end_call(
        self,
        input: ModelCallInput,
        attempt: int,
        texts: list[str],
        start_idx: int,
        status: str,
        usage: Usage,
        response: ModelResponse | None = None,
        profile: ModelProfile | None = None,
    ) -> None:
        """Write the last streamed ``texts``, the attempt's receipt (``status``, ``usage``, its cost
        by ``profile``'s price and the tool calls ``response`` asked for) and the reply's reasoning
        blocks (``response.reasoning``) in one transaction."""
        cost, calls = CallGate.priced(profile, usage, response) if profile is not None else (0.0, 0)
        with self._store.transaction() as conn:
            self._store.append_deltas(input.session_id, input.turn_id, input.round, attempt, texts, start_idx, conn=conn)
            self._store.record_usage(
                input.session_id, input.turn_id, input.round, attempt, status,  # type: ignore[arg-type]
                usage.input_tokens, usage.output_tokens,
                cache_read_tokens=usage.cache_read_tokens, cache_write_tokens=usage.cache_write_tokens,
                reasoning_tokens=usage.reasoning_tokens, cost_usd=cost, tool_calls=calls, conn=conn,
            )
            if response is not None and response.reasoning:
                self._store.put_reasoning(
                    input.session_id, input.reply_position, response.reasoning,
                    turn_id=input.turn_id, round=input.round, attempt=attempt, conn=conn,
                )

    @activity.defn(name=CONTEXT_COMPACT)
    async def compact(self, input: CompactInput) -> CompactResult:
        """Summarise the previous summary plus the messages in ``input.ranges`` and store the
        result as summary ``input.summary_id`` (standing for positions < ``upto_position``).

        The transcript is not changed. Raises the same ``ApplicationError``s as
        ``provider.complete`` (provider status, configuration mistakes).
        """
        with model_call(input.session_id, activity.info().attempt, purpose="summary") as call:
            return await self._compact(input, call)

    async def _compact(self, input: CompactInput, call: ModelCall) -> CompactResult:
        try:
            profile = self._profile(input.profile, input.script)
            profile = profile.model_copy(update={"max_output_tokens": input.max_summary_tokens})
            call.request(profile)
            provider = provider_for(profile, client=self.clients.client(profile))
        except ConfigurationError as err:
            raise ApplicationError(str(err), type=type(err).__name__, non_retryable=True) from err
        previous = None
        if input.previous_summary_id is not None:
            previous = await asyncio.to_thread(self._store.summary, input.session_id, input.previous_summary_id)
        rows = await asyncio.to_thread(self._store.messages_in, input.session_id, input.ranges)
        prompt = _summary_prompt(previous, rows, input.max_message_bytes, input.max_summary_tokens)
        request = ModelRequest(
            profile=profile, system=SUMMARY_SYSTEM, messages=[Message(role="user", text=prompt)], purpose="summary"
        )
        try:
            async with _attempts.heartbeating():
                response = await provider.complete(request, None)
        except ProviderError as err:
            # A summary is an optimisation: never wait long on a provider's Retry-After for it.
            raise provider_failure(err, profile, max_retry_delay=COMPACT_MAX_RETRY_DELAY_SECONDS) from None
        except ConfigurationError as err:
            raise ApplicationError(str(err), type=type(err).__name__, non_retryable=True) from err
        call.reply(response.usage, response.stop_reason, profile)
        text = truncate_middle(response.text.strip(), input.max_summary_tokens * BYTES_PER_TOKEN) or "(nothing to summarise)"
        await asyncio.to_thread(
            self._store.put_summary, input.session_id, input.summary_id, input.upto_position, profile.name, text
        )
        preview = " ".join(text.split())[:PREVIEW_CHARS]
        return CompactResult(summary_id=input.summary_id, summary_chars=len(text), preview=preview, usage=response.usage)


def _summary_prompt(previous: str | None, rows: list[tuple[int, Message]], max_message_bytes: int, max_tokens: int) -> str:
    """The summariser's one user message: the summary so far and the new messages, as text."""
    parts = [f"Write the updated summary in at most {max_tokens * 3 // 4} words."]
    if previous:
        parts.append(f"Summary so far:\n{previous}")
    lines = []
    for position, message in rows:
        label = message.role if message.role != "tool" else f"tool {message.name or ''} result".replace("  ", " ")
        text = truncate_middle(message.text, max_message_bytes)
        calls = "".join(f"\n  -> calls {c.name} {c.arguments_raw or c.arguments}"[:300] for c in message.tool_calls)
        lines.append(f"[{position}] {label}: {text}{calls}")
    parts.append("New messages:\n" + "\n".join(lines))
    return "\n\n".join(parts)
