"""Context steps of the session workflow: initialisation (tools, profile), compaction and model switching.

``Context`` is one of ``SessionWorkflow``'s steps, over its ``SessionRun``; the decisions are the
pure functions of ``_compaction``, this module runs the activities they plan. Workflow code only.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from agentrt.schemas import (
    DELEGATE_TOOL,
    AgentSpec,
    CompactOutcome,
    CancelTurnInput,
    CompactResult,
    ContextCompactionCompleted,
    ContextCompactionFailed,
    ContextCompactionSkipped,
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
    ToolNotRegistered,
    Usage,
    apply_agent,
)
from agentrt.workflows import _activity_options as options
from agentrt.workflows import _compaction as compaction
from agentrt.workflows import context
from agentrt.workflows._errors import (
    error_text,
    error_type,
)
from agentrt.workflows._session_run import SessionRun


class Context:
    """Keeps the conversation inside the model's context window."""

    def __init__(self, run: SessionRun) -> None:
        self.run = run

    async def resume(self) -> None:
        """Open a run continued as new: its status and owner, and what the run before left unwritten."""
        run = self.run
        run.fixed_tokens = self._estimate_fixed_tokens()
        if run.gen.lean_start:
            # The run before continued as new before its first write: its config is owed too.
            events, _ = run.journal.unflushed()
            run.config_unwritten = any(isinstance(e, SessionInitialized) for e in events)
            if run.inbox.message_first():
                run.owner_unwritten = True  # carried events go with the turn's first model call
                return
        run.set_status("idle", with_owner=True)
        await run.flush()

    async def initialize(self) -> list[CancelTurnInput]:
        """Start a new session: its tools and profile (one activity, ``session.prepare``), then
        ``SessionInitialized``. Returns the cancels that came before it, for the workflow to
        apply now; then ``open``."""
        run, config = self.run, self.run.config
        if run.gen.lean_start:
            prepared = await self._tools_call(
                options.PREPARE_SESSION,
                PrepareSessionInput(
                    tools=config.tools, profile=config.profile, script=config.script, workspace=config.workspace,
                    agent=config.agent, session_id=config.session_id, owner=config.owner,
                ),
                PrepareSessionResult,
                "prepare session: list tools, describe profile",
            )
            listed, lookup = prepared.tools, prepared.profile
            run.state.skills = prepared.skills
            if prepared.agent is not None:
                self._apply_agent(prepared.agent)
                config = run.config
            if listed.unknown and self.run.gen.registered_tools():
                # Sessions recorded before registered-tools-v1 went on without the unknown tools.
                error = ToolNotRegistered(listed.unknown, prepared.task_queue or "")
                raise ApplicationError(
                    str(error), {"tools": listed.unknown, "task_queue": error.task_queue}, type="ToolNotRegistered", non_retryable=True
                )
        else:
            listed = await self._tools_call(options.LIST_TOOLS, ListToolsInput(names=config.tools), ListToolsResult, "list tools")
            lookup = None
        run.tools = {t.name: t for t in listed.tools}
        if config.parent is not None and config.parent.kind != "task":
            run.tools.pop(DELEGATE_TOOL, None)  # a graph's node or a delegated session does the work itself
        run.state.tools = [run.tools[name] for name in sorted(run.tools)]
        if listed.unknown:
            workflow.logger.warning("session %s: unknown tools ignored: %s", config.session_id, listed.unknown)
        if run.gen.context:
            if lookup is None:
                lookup = await self._describe_profile(config.profile)
            if lookup.info is not None:
                run.state.profile = lookup.info
            else:
                # The first model call reports an unknown profile as the turn's error; plan with defaults until then.
                workflow.logger.warning("session %s: %s", config.session_id, lookup.error)
            run.fixed_tokens = self._estimate_fixed_tokens()
        run.emit(SessionInitialized(config=run.config, tools=sorted(run.tools)))
        for skill in run.state.skills:
            run.emit(SkillDiscovered(name=skill.name, description=skill.description, source=skill.source))
        run.initialized = True
        early = run.early_cancels
        if early:
            run.hold_outcomes()  # published by open, once the cancelled turns' ends are written
        return early

    async def open(self, *, cancelled: bool) -> None:
        """After ``initialize`` and its early cancels (``cancelled``: there were some): write the
        start, or leave it to travel with the turn that starts in this workflow task."""
        run = self.run
        if run.gen.lean_start and run.inbox.message_first() and not cancelled:
            # The turn starts in this workflow task: config and first events go with its model
            # call, the owner with its "running" status. (A turn cancelled meanwhile has its
            # end written first: an outcome is published only once its events are stored.)
            run.config_unwritten = run.owner_unwritten = True
            return
        await run.flush(include_config=True)
        run.publish_held()
        run.set_status("idle", with_owner=True)

    def _apply_agent(self, agent: AgentSpec) -> None:
        """Run the session as its agent says (``apply_agent``): the config it keeps, writes and
        carries through continue-as-new; a budget the agent brought counts from the start."""
        run = self.run
        run.config = apply_agent(run.config, agent)
        if run.config.budget is not None and run.state.started_at is None:
            run.state.started_at = run.run_started

    async def _tools_call(self, config: options.ActivityConfig, arg: object, result_type: type, summary: str) -> Any:
        """``tools.list`` or ``session.prepare``; one that keeps failing fails the session (``ToolsUnavailable``),
        one that names an agent the worker lacks fails it at once (``AgentNotRegistered``), as one
        whose id another owner has used does (``SessionIdTaken``)."""
        try:
            return await self.run.execute(config, arg, local=self.run.gen.lean_rounds, result_type=result_type, summary=summary)
        except ActivityError as err:
            if self.run.cancelled_call(err):
                raise  # not a broken tool registry: the workflow was cancelled meanwhile
            if error_type(err) == "SessionIdTaken":
                message = error_text(err).removeprefix("SessionIdTaken: ")
                raise ApplicationError(message, type="SessionIdTaken", non_retryable=True) from err
            if error_type(err) == "AgentNotRegistered":
                cause = err.cause if isinstance(err.cause, ApplicationError) else None
                details = cause.details if cause is not None else ()
                message = error_text(err).removeprefix("AgentNotRegistered: ")
                raise ApplicationError(message, *details, type="AgentNotRegistered", non_retryable=True) from err
            raise ApplicationError(
                f"session {self.run.config.session_id} cannot list its tools: {error_text(err)}",
                type="ToolsUnavailable",
                non_retryable=True,
            ) from err

    async def _describe_profile(self, profile: str) -> ProfileLookup:
        return await self.run.execute(
            options.DESCRIBE_PROFILE,
            DescribeProfileInput(profile=profile, script=self.run.config.script),
            local=self.run.gen.lean_rounds,
            result_type=ProfileLookup,
            summary=f"describe profile {profile}",
        )

    def _estimate_fixed_tokens(self) -> int:
        """Tokens of what every model call carries besides messages: system prompt and tool specs."""
        specs = context.specs_bytes(self.run.tools[name] for name in sorted(self.run.tools))
        return context.estimate_tokens(len((self.run.config.system_prompt or "").encode()) + specs)

    # ---------------------------------------------------------------- compaction and model switching

    async def compact(
        self, reason: compaction.CompactionReason, target: ProfileInfo | None = None, principal: str | None = None
    ) -> CompactOutcome:
        """Summarise the older part of the conversation so the rest fits ``target``'s window.

        The current profile writes the summary in chunks that fit its window; the transcript
        in the store is never changed. Only the main loop calls it, one operation or turn
        end at a time, so compactions never overlap; ``compact`` requests join a queued one.
        ``SessionRun.compacting`` is True while a summary runs (a send-only-if-idle message is refused).
        Nothing old enough to summarise: ``ContextCompactionSkipped`` (``not_enough_history``,
        ``context-events-v1``). A failed summary leaves the sliding window (``fallback_used``).
        """
        if not self.run.gen.context:
            return CompactOutcome(compacted=False, reason="this session's history predates compaction")
        ctx = self.run.state.context
        plan = compaction.plan_compaction(
            ctx, fixed_tokens=self.run.fixed_tokens, target=target or self.run.profile, summarizer=self.run.profile, reason=reason
        )
        if isinstance(plan, CompactOutcome):
            if self.run.gen.context_events():
                self.run.emit(ContextCompactionSkipped(
                    trigger=reason, reason="not_enough_history", principal=principal, estimated_tokens=plan.tokens_before,
                ))
                await self.run.flush()
            return plan
        self.run.compacting = True
        try:
            return await self._run_plan(plan, reason)
        finally:
            self.run.compacting = False

    async def _run_plan(self, plan: compaction.CompactionPlan, reason: compaction.CompactionReason) -> CompactOutcome:
        ctx = self.run.state.context
        if self.run.state.paused is not None:  # a summary is a model call: none while the session is paused
            await self.run.hold_while_paused()
            if self.run.ending():
                return CompactOutcome(compacted=False, reason="the session ended first", tokens_before=plan.tokens_before)
        self.run.set_status("running")
        workflow.set_current_details(f"compacting the context ({reason}) with `{plan.summarizer}`")
        self.run.emit(
            ContextCompactionStarted(
                reason=reason,
                profile=plan.summarizer,
                from_position=plan.from_position,
                upto_position=plan.upto,
                estimated_tokens=plan.tokens_before,
            )
        )
        await self.run.flush()
        summary_id, usage, result = ctx.summary_id, Usage(), None
        try:
            for index, (start, end) in enumerate(plan.chunks):
                new_id = compaction.take_summary_id(ctx)
                result = await workflow.execute_activity(
                    options.COMPACTION.name,
                    plan.chunk_input(
                        index,
                        session_id=self.run.config.session_id,
                        script=self.run.config.script,
                        previous_summary_id=summary_id,
                        summary_id=new_id,
                    ),
                    result_type=CompactResult,
                    task_queue=self.run.config.model_task_queue,
                    **options.COMPACTION.options(
                        summary=f"compact {start}-{end} with {plan.summarizer} ({index + 1}/{len(plan.chunks)})",
                        start_to_close=self.run.config.model_timeout_seconds,
                        heartbeat_timeout=self.run.config.heartbeat_timeout_seconds,
                    ),
                )
                summary_id, usage = new_id, usage + result.usage
        except ActivityError as err:
            # The session goes on with the sliding window: each call sends the newest messages that fit.
            self.run.emit(ContextCompactionFailed(error=error_text(err), fallback_used=True))
            await self.run.flush()
            return CompactOutcome(
                compacted=False, error=error_text(err), tokens_before=plan.tokens_before, tokens_after=plan.tokens_before,
                fallback_used=True,
            )
        assert result is not None and summary_id is not None
        context.apply_compaction(ctx, summary_id, plan.upto, context.estimate_tokens(result.summary_chars))
        self.run.state.usage = self.run.state.usage + usage
        after = context.context_tokens(ctx, self.run.fixed_tokens)
        self.run.emit(
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
        await self.run.flush()
        return CompactOutcome(
            compacted=True,
            summary_id=summary_id,
            upto_position=plan.upto,
            tokens_before=plan.tokens_before,
            tokens_after=after,
        )

    async def switch_model(self, operation: QueuedOperation) -> SwitchModelResult | str:
        """Switch to ``operation.profile``, compacting first when the conversation would not fit it."""
        assert operation.profile is not None
        try:
            lookup = await self._describe_profile(operation.profile)
        except ActivityError as err:
            lookup = ProfileLookup(error=error_text(err))
        if lookup.info is None:
            error = lookup.error or f"profile {operation.profile!r} has no description"
            self.run.emit(ModelProfileSwitchFailed(principal=operation.principal, profile=operation.profile, error=error))
            await self.run.flush()
            return error
        target, previous = lookup.info, self.run.config.profile
        compacted, compaction_error = False, None
        if target.name != previous:
            if compaction.switch_needs_compaction(self.run.state.context, fixed_tokens=self.run.fixed_tokens, target=target):
                outcome = await self.compact("switch", target)
                compacted, compaction_error = outcome.compacted, outcome.error
            self.run.config = self.run.config.model_copy(update={"profile": target.name})
            self.run.state.profile = target
            self.run.state.context.calibration = 1.0  # another model, another tokenizer: learn it anew
            self.run.emit(
                ModelProfileSwitched(
                    principal=operation.principal,
                    from_profile=previous,
                    profile=target.name,
                    context_window=target.context_window,
                    max_output_tokens=target.max_output_tokens,
                    compacted=compacted,
                )
            )
            await self.run.flush()
        return SwitchModelResult(
            from_profile=previous,
            profile=target.name,
            context_window=target.context_window,
            max_output_tokens=target.max_output_tokens,
            compacted=compacted,
            compaction_error=compaction_error,
            estimated_tokens=compaction.planned_tokens(self.run.state.context, fixed_tokens=self.run.fixed_tokens, profile=target),
        )

