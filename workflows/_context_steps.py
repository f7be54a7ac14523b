"""Context steps of the session workflow: initialisation (tools, profile), compaction and model switching.

Part of ``SessionWorkflow`` (a base class of it); the decisions are the pure functions of
``_compaction``, this module runs the activities they plan. Workflow code only.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from agentrt.schemas import (
    DELEGATE_TOOL,
    CompactOutcome,
    CompactResult,
    ContextCompactionCompleted,
    ContextCompactionFailed,
    ContextCompactionStarted,
    DescribeProfileInput,
    ListToolsInput,
    ListToolsResult,
    ModelProfileSwitched,
    ModelProfileSwitchFailed,
    PrepareSessionInput,
    PrepareSessionResult,
    ProfileInfo,
    ProfileLookup,
    QueuedOperation,
    SessionInitialized,
    SkillDiscovered,
    SwitchModelResult,
    Usage,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows import _compaction as compaction
from agentrt.workflows import context
from agentrt.workflows._errors import (
    error_text,
)
from agentrt.workflows._session_core import SessionCore


class ContextSteps(SessionCore):
    """Keeps the conversation inside the model's context window."""

    async def _initialize(self) -> None:
        if self._carried:
            self._fixed_tokens = self._estimate_fixed_tokens()
            if self._lean_start:
                # The run before continued as new before its first write: its config is owed too.
                events, _ = self._journal.unflushed()
                self._config_unwritten = any(isinstance(e, SessionInitialized) for e in events)
                if self._inbox.message_first():
                    self._owner_unwritten = True  # carried events go with the turn's first model call
                    return
            self._set_status("idle", with_owner=True)
            await self._flush()
            return
        if self._lean_start:
            prepared = await self._tools_call(
                options.PREPARE_SESSION,
                PrepareSessionInput(
                    tools=self._config.tools, profile=self._config.profile, script=self._config.script,
                    workspace=self._config.workspace,
                ),
                PrepareSessionResult,
                "prepare session: list tools, describe profile",
            )
            listed, lookup = prepared.tools, prepared.profile
            self._state.skills = prepared.skills
        else:
            listed = await self._tools_call(
                options.LIST_TOOLS, ListToolsInput(names=self._config.tools), ListToolsResult, "list tools"
            )
            lookup = None
        self._tools = {t.name: t for t in listed.tools}
        if self._config.parent is not None and self._config.parent.kind != "task":
            self._tools.pop(DELEGATE_TOOL, None)  # a graph's node or a delegated session does the work itself
        self._state.tools = [self._tools[name] for name in sorted(self._tools)]
        if listed.unknown:
            workflow.logger.warning("session %s: unknown tools ignored: %s", self._config.session_id, listed.unknown)
        if self._context_enabled:
            if lookup is None:
                lookup = await self._describe_profile(self._config.profile)
            if lookup.info is not None:
                self._state.profile = lookup.info
            else:
                # The first model call reports an unknown profile as the turn's error; plan with defaults until then.
                workflow.logger.warning("session %s: %s", self._config.session_id, lookup.error)
            self._fixed_tokens = self._estimate_fixed_tokens()
        self._emit(SessionInitialized(config=self._config, tools=sorted(self._tools)))
        for skill in self._state.skills:
            self._emit(SkillDiscovered(name=skill.name, description=skill.description, source=skill.source))
        self._initialized = True
        if self._early_cancels:
            self._hold_outcomes()  # published below, once the cancelled turns' ends are written
        for early in self._early_cancels:
            self.cancel_turn(early)
        if self._lean_start and self._inbox.message_first() and not self._early_cancels:
            # The turn starts in this workflow task: config and first events go with its model
            # call, the owner with its "running" status. (A turn cancelled meanwhile has its
            # end written first: an outcome is published only once its events are stored.)
            self._config_unwritten = self._owner_unwritten = True
            return
        await self._flush(include_config=True)
        self._publish_held()
        self._set_status("idle", with_owner=True)

    async def _tools_call(self, config: options.ActivityConfig, arg: object, result_type: type, summary: str) -> Any:
        """``tools.list`` or ``session.prepare``; one that keeps failing fails the session (``ToolsUnavailable``)."""
        try:
            return await self._execute(config, arg, local=self._lean_rounds, result_type=result_type, summary=summary)
        except ActivityError as err:
            if self._cancelled_call(err):
                raise  # not a broken tool registry: the workflow was cancelled meanwhile
            raise ApplicationError(
                f"session {self._config.session_id} cannot list its tools: {error_text(err)}",
                type="ToolsUnavailable",
                non_retryable=True,
            ) from err

    async def _describe_profile(self, profile: str) -> ProfileLookup:
        return await self._execute(
            options.DESCRIBE_PROFILE,
            DescribeProfileInput(profile=profile, script=self._config.script),
            local=self._lean_rounds,
            result_type=ProfileLookup,
            summary=f"describe profile {profile}",
        )

    def _estimate_fixed_tokens(self) -> int:
        """Tokens of what every model call carries besides messages: system prompt and tool specs."""
        specs = context.specs_bytes(self._tools[name] for name in sorted(self._tools))
        return context.estimate_tokens(len((self._config.system_prompt or "").encode()) + specs)

    # ---------------------------------------------------------------- compaction and model switching

    async def _compact(self, reason: compaction.CompactionReason, target: ProfileInfo | None = None) -> CompactOutcome:
        """Summarise the older part of the conversation so the rest fits ``target``'s window.

        The current profile writes the summary in chunks that fit its window; the transcript
        in the store is never changed. Only the main loop calls it, one operation or turn
        end at a time, so compactions never overlap; ``compact`` requests join a queued one.
        """
        if not self._context_enabled:
            return CompactOutcome(compacted=False, reason="this session's history predates compaction")
        ctx = self._state.context
        plan = compaction.plan_compaction(
            ctx, fixed_tokens=self._fixed_tokens, target=target or self._profile, summarizer=self._profile, reason=reason
        )
        if isinstance(plan, CompactOutcome):
            return plan
        self._set_status("running")
        workflow.set_current_details(f"compacting the context ({reason}) with `{plan.summarizer}`")
        self._emit(
            ContextCompactionStarted(
                reason=reason,
                profile=plan.summarizer,
                from_position=plan.from_position,
                upto_position=plan.upto,
                estimated_tokens=plan.tokens_before,
            )
        )
        await self._flush()
        summary_id, usage, result = ctx.summary_id, Usage(), None
        try:
            for index, (start, end) in enumerate(plan.chunks):
                new_id = compaction.take_summary_id(ctx)
                result = await workflow.execute_activity(
                    options.COMPACTION.name,
                    plan.chunk_input(
                        index,
                        session_id=self._config.session_id,
                        script=self._config.script,
                        previous_summary_id=summary_id,
                        summary_id=new_id,
                    ),
                    result_type=CompactResult,
                    **options.COMPACTION.options(
                        summary=f"compact {start}-{end} with {plan.summarizer} ({index + 1}/{len(plan.chunks)})",
                        start_to_close=self._config.model_timeout_seconds,
                        heartbeat_timeout=self._config.heartbeat_timeout_seconds,
                    ),
                )
                summary_id, usage = new_id, usage + result.usage
        except ActivityError as err:
            self._emit(ContextCompactionFailed(error=error_text(err)))
            await self._flush()
            return CompactOutcome(
                compacted=False, error=error_text(err), tokens_before=plan.tokens_before, tokens_after=plan.tokens_before
            )
        assert result is not None and summary_id is not None
        context.apply_compaction(ctx, summary_id, plan.upto, context.estimate_tokens(result.summary_chars))
        self._state.usage = self._state.usage + usage
        after = context.context_tokens(ctx, self._fixed_tokens)
        self._emit(
            ContextCompactionCompleted(
                summary_id=summary_id,
                upto_position=plan.upto,
                summary_tokens=ctx.summary_tokens,
                estimated_tokens=after,
                chunks=len(plan.chunks),
                usage=usage,
                preview=result.preview,
            )
        )
        await self._flush()
        return CompactOutcome(
            compacted=True,
            summary_id=summary_id,
            upto_position=plan.upto,
            tokens_before=plan.tokens_before,
            tokens_after=after,
        )

    async def _switch_model(self, operation: QueuedOperation) -> SwitchModelResult | str:
        """Switch to ``operation.profile``, compacting first when the conversation would not fit it."""
        assert operation.profile is not None
        try:
            lookup = await self._describe_profile(operation.profile)
        except ActivityError as err:
            lookup = ProfileLookup(error=error_text(err))
        if lookup.info is None:
            error = lookup.error or f"profile {operation.profile!r} has no description"
            self._emit(ModelProfileSwitchFailed(principal=operation.principal, profile=operation.profile, error=error))
            await self._flush()
            return error
        target, previous = lookup.info, self._config.profile
        compacted, compaction_error = False, None
        if target.name != previous:
            if compaction.switch_needs_compaction(self._state.context, fixed_tokens=self._fixed_tokens, target=target):
                outcome = await self._compact("switch", target)
                compacted, compaction_error = outcome.compacted, outcome.error
            self._config = self._config.model_copy(update={"profile": target.name})
            self._state.profile = target
            self._state.context.calibration = 1.0  # another model, another tokenizer: learn it anew
            self._emit(
                ModelProfileSwitched(
                    principal=operation.principal,
                    from_profile=previous,
                    profile=target.name,
                    context_window=target.context_window,
                    max_output_tokens=target.max_output_tokens,
                    compacted=compacted,
                )
            )
            await self._flush()
        return SwitchModelResult(
            from_profile=previous,
            profile=target.name,
            context_window=target.context_window,
            max_output_tokens=target.max_output_tokens,
            compacted=compacted,
            compaction_error=compaction_error,
            estimated_tokens=compaction.planned_tokens(self._state.context, fixed_tokens=self._fixed_tokens, profile=target),
        )

