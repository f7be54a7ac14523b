"""Plain-text rendering of events and transcripts for the CLI."""

from __future__ import annotations

import json
import unicodedata

from agentrt.schemas import (
    AdvisorReviewCompleted,
    AdvisorReviewStarted,
    AssistantMessageCompleted,
    BudgetExceededEvent,
    BudgetRaised,
    CancelIgnored,
    CancelRequested,
    ContextAssembled,
    ContextCompactionCompleted,
    ContextCompactionFailed,
    ContextCompactionSkipped,
    ContextCompactionStarted,
    DelegatedSessionEnded,
    EffectReconciled,
    ElicitationAnswered,
    Event,
    McpToolsListed,
    MemoryAccepted,
    MemoryDropped,
    MemoryProposed,
    MemoryRejected,
    Message,
    ModelProfileSwitched,
    ModelProfileSwitchFailed,
    ModelRequestStarted,
    ModelToolCallRequested,
    PermissionDecisionIgnored,
    PermissionDenied,
    OutputValidationFailed,
    PermissionGranted,
    PermissionRequest,
    PermissionRequested,
    SessionArchived,
    SessionPaused,
    SessionResumed,
    SessionCancelled,
    SessionContinuedAsNew,
    SessionDelegated,
    SessionRenamed,
    SessionInitialized,
    SkillActivated,
    SkillDeactivated,
    SkillDiscovered,
    ToolInvocationCompleted,
    ToolInvocationFailed,
    ToolInvocationStarted,
    TrajectoryCompleted,
    TrajectoryStarted,
    TrajectoryStepRecorded,
    TurnEnded,
    TurnStarted,
    Usage,
    UserMessageAdded,
)

# Characters a terminal may act on or hide (escape sequences, direction and invisible format
# characters, line separators): model and tool text shows them as \uXXXX instead.
_UNPRINTABLE_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Zl", "Zp"})


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every control, format, private-use and separator character written as a
    ``\\uXXXX`` escape (newlines and tabs kept when ``keep_newlines``), so text a model or tool
    chose cannot drive the terminal (ANSI escapes) or hide from the reader."""
    if text.isprintable():
        return text
    kept = "\n\t" if keep_newlines else ""
    return "".join(
        _escape(c) if c not in kept and unicodedata.category(c) in _UNPRINTABLE_CATEGORIES else c for c in text
    )


def _escape(c: str) -> str:
    return f"\\u{ord(c):04x}" if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}"


def _short(value: object, limit: int = 100) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = printable(" ".join(text.split()))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe(event: Event) -> str:
    """One line for an event: what happened, without the envelope."""
    match event:
        case SessionInitialized():
            return f"session {event.config.session_id} for {event.config.owner} in {event.config.workspace}; tools: {', '.join(event.tools)}"
        case UserMessageAdded():
            return f"{event.principal}: {_short(event.text)}"
        case TurnStarted():
            return "turn started"
        case BudgetExceededEvent():
            return f"{event.crossing.text()}; the turn ends"
        case BudgetRaised():
            return f"budget raised by {event.principal} to {event.budget.describe()}"
        case SessionRenamed():
            title = repr(_short(event.title, 200)) if event.title else "no title"
            return f"renamed by {event.principal} to {title}" + (f" (was {_short(event.previous, 200)!r})" if event.previous else "")
        case SessionDelegated():
            how = "waits for its answer" if event.wait else "answer comes later as a message"
            tools = f"; tools: {', '.join(event.tools)}" if event.tools is not None else ""
            return f"delegated to session {event.child_session_id} (#{event.number}, call {event.call_id}): {how}{tools}"
        case DelegatedSessionEnded():
            error = f": {_short(event.error)}" if event.error else ""
            return f"delegated session {event.child_session_id} (#{event.number}) {event.status}{error}; spent {usage_text(event.spend.usage)}"
        case ModelRequestStarted():
            context = ""
            if event.context_tokens is not None:
                omitted = f", {event.omitted_messages} omitted" if event.omitted_messages else ""
                summary = f", summary {event.summary_id}" if event.summary_id is not None else ""
                context = f" with ~{event.context_tokens} tokens ({event.context_messages} messages{omitted}{summary})"
            return f"round {event.round}: calling model {event.profile}{context}"
        case ContextCompactionStarted():
            return (
                f"compacting ({event.reason}) with {event.profile}: positions {event.from_position}-{event.upto_position - 1}, "
                f"~{event.estimated_tokens} tokens"
            )
        case ContextCompactionCompleted():
            return (
                f"compacted into summary {event.summary_id} (~{event.summary_tokens} tokens, {event.chunks} chunk(s)); "
                f"context now ~{event.estimated_tokens} tokens" + (f": {_short(event.preview, 120)}" if event.preview else "")
            )
        case ContextCompactionFailed():
            fallback = "; the sliding window goes on" if event.fallback_used else ""
            return f"compaction failed: {_short(event.error)}{fallback}"
        case ContextCompactionSkipped():
            return f"compaction ({event.trigger}) skipped: {event.reason.replace('_', ' ')}, context ~{event.estimated_tokens} tokens"
        case ContextAssembled():
            b = event.breakdown
            sources = (
                f"system {b.system_prompt}, tools {b.tool_specs}, memories {b.memories}, summary {b.summary}, "
                f"history {b.history}, message {b.current_message}"
            )
            head = "not sent: pinned parts pass the window" if event.overflow else f"round {event.round} sent"
            return f"{head}: ~{b.total} of {b.budget} tokens ({sources})"
        case ModelProfileSwitched():
            compacted = " after compacting" if event.compacted else ""
            return (
                f"model switched {event.from_profile} -> {event.profile} by {event.principal}{compacted} "
                f"(window {event.context_window} tokens, output {event.max_output_tokens})"
            )
        case ModelProfileSwitchFailed():
            return f"switch to {event.profile} by {event.principal} failed: {_short(event.error)}"
        case SessionContinuedAsNew():
            why = " onto the deployment's new current build" if event.reason == "new_build" else ""
            return f"continued as new{why}: run {event.run} (previous run {event.history_events} events, {event.history_bytes} bytes)"
        case AssistantMessageCompleted():
            calls = f" + {event.tool_calls} tool call(s)" if event.tool_calls else ""
            reasoning = f" (after {event.reasoning_chars} characters of reasoning)" if event.reasoning_chars else ""
            return f"assistant: {_short(event.text) or '(no text)'}{calls}{reasoning} [{usage_text(event.usage)}]"
        case OutputValidationFailed():
            then = "fed back to the model" if event.position is not None else "the turn ends output_invalid"
            return f"answer {event.attempt}/{event.max_attempts} off the output schema ({then}): {_short('; '.join(event.errors))}"
        case ModelToolCallRequested():
            args = event.call.arguments if event.call.arguments is not None else event.call.arguments_raw
            return f"tool call {event.call.id}: {event.call.name} {_short(args)}"
        case PermissionRequested():
            r = event.request
            if r.kind == "elicitation":
                return f"{r.tool} asks ({r.request_id}): {_short(r.message or '', 200)} · schema {_short(r.requested_schema or {}, 200)}"
            what = "reconcile" if r.kind == "reconcile" else "approval"
            return f"{what} {r.request_id} requested for {r.tool} {_short(r.arguments)} ({r.reason})"
        case ElicitationAnswered():
            content = f" {_short(event.content, 120)}" if event.content is not None else ""
            return f"{event.request_id} answered by {event.principal}: {event.action}{content}"
        case McpToolsListed():
            failed = "; ".join(f"{name}: {_short(why, 120)}" for name, why in event.failures.items())
            return f"MCP tools listed: {event.tools} from {', '.join(event.servers)}" + (f" · unavailable: {failed}" if failed else "")
        case SkillDiscovered():
            return f"skill {event.name} found ({event.source}): {_short(event.description, 120)}"
        case SkillActivated():
            return f"skill {event.name} activated ({event.source})"
        case SkillDeactivated():
            return f"skill {event.name} deactivated"
        case PermissionGranted() if event.scope == "policy":
            return f"{_short(event.call_id, 80)} allowed by policy ({event.rule}): {_short(event.reason or '', 200)}"
        case PermissionGranted():
            return f"approval {event.request_id} granted by {event.principal}" + (f": {event.reason}" if event.reason else "")
        case PermissionDenied():
            return f"approval {event.request_id} denied by {event.principal}" + (f": {event.reason}" if event.reason else "")
        case EffectReconciled():
            note = f": {event.note}" if event.note else ""
            return f"{event.request_id}: {event.principal} says {event.call_id}'s effect was {event.outcome.replace('_', ' ')}{note}"
        case PermissionDecisionIgnored():
            return f"decision {event.decision} on {event.request_id} by {event.principal} ignored ({event.why})"
        case ToolInvocationStarted():
            return f"running {event.tool} ({event.call_id})"
        case ToolInvocationCompleted():
            return f"{event.tool} done ({event.size_bytes} bytes): {_short(event.preview, 80)}"
        case ToolInvocationFailed():
            return f"{event.tool} failed [{event.reason}]: {_short(event.error)}"
        case TurnEnded():
            tail = f": {event.error}" if event.error else ""
            code = f" [{event.error_type}]" if event.error_type else ""
            return f"turn ended {event.status}{code} after {event.rounds} round(s){tail} · {usage_text(event.usage)}"
        case CancelRequested():
            return "cancel requested" + (f" by {event.principal}" if event.principal else "") + (f": {event.reason}" if event.reason else "")
        case CancelIgnored():
            return f"cancel by {event.principal} ignored ({event.why})"
        case SessionCancelled():
            return "turn cancelled" + (f" by {event.principal}" if event.principal else "") + (f": {event.reason}" if event.reason else "")
        case SessionArchived():
            return f"session archived by {event.principal}"
        case SessionPaused():
            return f"session paused by {event.principal}" + (f": {_short(event.reason)}" if event.reason else "") + "; no model or tool call starts"
        case SessionResumed():
            why = f": {_short(event.reason)}" if event.reason else ""
            return f"session resumed by {event.principal}{why} after {event.paused_seconds:.1f} s paused"
        case AdvisorReviewStarted():
            calls = f"{len(event.call_ids)} call{'' if len(event.call_ids) == 1 else 's'}"
            why = event.reason if event.reason.startswith(f"{event.mode}:") else f"{event.mode}: {event.reason}".rstrip(": ")
            return f"advisor: reviewing {calls} ({why})"
        case AdvisorReviewCompleted():
            if event.error is not None:
                return f"advisor: review failed, calls approved (fail-open): {_short(event.error, 200)}"
            summary = f": {_short(event.summary, 160)}" if event.summary else ""
            concerns = "; ".join(f"{n}) {_short(c, 120)}" for n, c in enumerate(event.concerns, 1))
            return f"advisor: {event.verdict}{summary}" + (f" · concerns: {concerns}" if concerns else "")
        case MemoryDropped():
            return f"memory {event.key} ({event.scope}) dropped, not proposed: {_short(event.reason, 120)}"
        case MemoryProposed():
            return (
                f"memory {event.memory_id} proposed ({event.scope} {event.key}): {_short(event.preview, 80)} · "
                f"waits for the owner: agentrt memory accept {event.memory_id} (or reject)"
            )
        case MemoryAccepted():
            by = f" by {event.principal}" if event.principal else ""
            return f"memory {event.memory_id} accepted{by} ({event.scope} {event.key})"
        case MemoryRejected():
            why = f": {event.reason}" if event.reason else ""
            return f"memory {event.memory_id} rejected by {event.principal} ({event.scope} {event.key}){why}"
        case TrajectoryStarted():
            return "trajectory started"
        case TrajectoryStepRecorded():
            return f"step {event.index} (round {event.round}): {event.action} {event.outcome} in {event.duration_ms} ms"
        case TrajectoryCompleted():
            why = f" ({event.reason})" if event.reason else ""
            return f"trajectory {event.outcome}{why}: {event.steps} step(s), {event.rounds} round(s)"
    return event.type


# Events ``agentrt run`` does not print while a turn runs (one per step: noise next to the tool
# calls it shows); ``agentrt session events`` and ``agentrt session trajectory`` show them.
QUIET_LIVE_EVENTS = (TrajectoryStarted, TrajectoryStepRecorded, TrajectoryCompleted)


def event_line(event: Event) -> str:
    turn = event.turn_id or "-"
    return f"{event.seq:>4}  {turn:<8} {event.type:<26} {describe(event)}"


def transcript_lines(messages: list[tuple[int, Message]]) -> list[str]:
    lines = []
    for position, message in messages:
        if message.role == "tool":
            head = f"[{position}] tool {message.name} ({message.tool_call_id}){' ERROR' if message.is_error else ''}:"
            lines.append(f"{head} {_short(message.text, 300)}")
        elif message.role == "assistant":
            text = message.text or "(no text)"
            lines.append(f"[{position}] assistant: {text}")
            for call in message.tool_calls:
                args = call.arguments if call.arguments is not None else call.arguments_raw
                lines.append(f"      -> {call.name} {_short(args, 200)}")
        else:
            lines.append(f"[{position}] {message.role}: {message.text}")
    return lines


def usage_text(usage: Usage) -> str:
    """``"1200 in / 80 out tokens"``, plus the cached, cache-write and reasoning parts when any."""
    text = f"{usage.input_tokens} in / {usage.output_tokens} out tokens"
    parts = [
        f"{count} {label}"
        for count, label in (
            (usage.cache_read_tokens, "read from cache"),
            (usage.cache_write_tokens, "written to cache"),
            (usage.reasoning_tokens, "reasoning"),
        )
        if count
    ]
    return f"{text} ({', '.join(parts)})" if parts else text


def pending_request_line(session_id: str, request: PermissionRequest) -> str:
    """One line of ``agentrt session state`` for a pending request, naming the command that
    answers it: ``approval`` (a tool call: approve or deny), ``reconcile`` (an effect whose
    outcome is unknown: applied or not_applied) or ``question`` (an MCP server's question)."""
    rid = request.request_id
    if request.kind == "elicitation":
        return (
            f"question  {rid}: {request.tool} asks {json.dumps(request.message)[:200]} "
            f"(agentrt session answer {session_id} {rid} '{{...}}')"
        )
    arguments = json.dumps(request.arguments)[:200]
    if request.kind == "reconcile":
        return (
            f"reconcile {rid}: {request.tool} {arguments} may or may not have run "
            f"(agentrt session reconcile {session_id} {rid} applied|not_applied)"
        )
    return f"approval  {rid}: {request.tool} {arguments} (agentrt session approve|deny {session_id} {rid})"
