"""Activities ``tools.list``, ``tool.execute`` and ``effects.reconcile``: tools run on the worker.

Risk classes decide the protocol of ``tool.execute``:
- ``read_only`` and ``idempotent``: run on every attempt (retried freely).
- ``effectful``: at most once, through the effect ledger keyed by the idempotency key
  (``<workflow id>/<turn>/<position>/<call id>``): claim before the effect, record after. A retried
  attempt that finds ``applied``/``failed`` returns the recorded result; one that finds
  ``claimed`` with no record raises the non-retryable ``EffectOutcomeUnknown``, and the
  workflow asks an operator to reconcile instead of running it again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agentrt.activities import _attempts
from agentrt.activities._telemetry import tool_call
from agentrt.activities.providers import redact
from agentrt.activities.tools import (
    CrashToRetry,
    SecretValues,
    SecretVault,
    ToolContext,
    ToolLeftRunning,
    ToolRegistry,
    redact_secrets,
)
from agentrt.schemas import (
    EFFECTS_RECONCILE,
    TOOL_EXECUTE,
    TOOLS_LIST,
    EffectOutcomeUnknown,
    ListToolsInput,
    ListToolsResult,
    MemoryNote,
    Message,
    ReconcileEffectInput,
    StoreAppendInput,
    ToolError,
    ToolExecuteInput,
    ToolExecuteResult,
    ToolTimedOut,
)
from agentrt.store import text_column

if TYPE_CHECKING:
    from agentrt.store import EffectRecord, Store

PREVIEW_CHARS = 200


class ToolActivities:
    """``secrets``: the values to redact from every tool result before it is stored or crosses
    Temporal (the worker's provider keys); none by default. ``skill_paths``: the worker's
    ``[skills] paths`` (``skill.activate`` looks there; ``shell.run`` may read them). ``vault``:
    where the secrets a tool declares are read at each call (default: the worker's environment);
    every value read is recorded as ``[secret:NAME]`` in any tool's result (``redact_secrets``).
    ``egress_allow``: the worker's ``[sandbox] egress_allow`` (internal destinations a command with
    network may reach); ``cgroup``: its ``[sandbox] cgroup`` (a cgroup per sandboxed command under it)."""

    def __init__(
        self,
        registry: ToolRegistry,
        store: "Store",
        secrets: Callable[[], list[str]] = list,
        skill_paths: Sequence[str] = (),
        vault: SecretVault | None = None,
        egress_allow: Sequence[str] = (),
        cgroup: str | None = None,
    ) -> None:
        self._registry = registry
        self._store = store
        self._secrets = secrets
        self._skill_paths = tuple(Path(p) for p in skill_paths)
        self._vault = vault or SecretVault()
        self._egress_allow = tuple(egress_allow)
        self._cgroup = cgroup

    @activity.defn(name=TOOLS_LIST)
    def list_tools(self, input: ListToolsInput) -> ListToolsResult:
        """Specs of the requested tools (all when ``names`` is None) and the names not registered."""
        tools, unknown = self._registry.specs(input.names)
        return ListToolsResult(tools=tools, unknown=unknown)

    @activity.defn(name=TOOL_EXECUTE)
    def execute(self, input: ToolExecuteInput) -> ToolExecuteResult:
        """Run one tool call in the session's workspace and store its result at ``result_position``.

        A ``ToolError`` (bad path, workspace escape, invalid arguments, timeout) is a result
        with ``ok=False``, not an activity failure: the model sees the error and goes on.
        Raises ``ApplicationError(type="EffectOutcomeUnknown", non_retryable=True)`` for an
        effectful call claimed by an earlier attempt that never recorded its outcome, and the
        retryable ``ApplicationError(type="ToolCrashed")`` when a user tool (``@tool``) raised
        something else than ``ToolError`` on an attempt that is not the retry policy's last (an
        effectful one releases its claim first: the tool says, by raising, that it is done).
        Writes ``input.store_writes`` (the workflow's staged events and messages) first, or, run
        as a local activity (a tool whose spec says ``local_activity``), with the result.
        """
        info = activity.info()
        with tool_call(input, info.attempt, local=info.is_local) as call:
            try:
                return call.result(self._execute(input))
            except CrashToRetry as crash:
                # A user tool's exception: Temporal's retry policy runs the call again; its last
                # attempt makes the exception the call's ToolCrashedError (ToolRegistry.execute).
                # Its message is recorded in history: no secret in it, and no cause (whose message
                # would carry the exception's text as it is).
                message = redact(redact_secrets(str(crash)), self._secrets())
                raise ApplicationError(message, type="ToolCrashed") from None

    def _execute(self, input: ToolExecuteInput) -> ToolExecuteResult:
        with _attempts.beating():
            effectful = self._is_effectful(input.call.name)
            # A fast read-only tool (its spec says ``local_activity``; local or not) is short: its
            # staged writes go with its result, in one transaction. Any other call writes them
            # first, so they show while the tool runs.
            staged = input.store_writes if not effectful and self._is_fast(input.call.name) else None
            if input.store_writes is not None and staged is None:
                self._store.append(input.store_writes)
            if effectful:
                return self._execute_at_most_once(input)
            ok, text, error_type, keys, memory = self._run(input)
            return self._finish(input, ok, text, error_type, keys, staged=staged, memory=memory)

    def run_unstored(self, input: ToolExecuteInput) -> tuple[bool, str, str | None, list[str], MemoryNote | None]:
        """Run a read-only call and return ``(ok, text, error_type, state_keys, memory)`` without
        storing anything, its text redacted as ``finish_call`` stores it (a round a model call
        runs itself, ``RoundFusion``). Raises what the tool raised other than a ``ToolError``."""
        ok, text, error_type, keys, memory = self._run(input)
        return ok, redact(redact_secrets(text), self._secrets()), error_type, keys, memory

    @activity.defn(name=EFFECTS_RECONCILE)
    def reconcile(self, input: ReconcileEffectInput) -> None:
        """Record an operator's answer: ``applied`` closes the claim, ``not_applied`` releases it."""
        note = f"{input.principal}: {input.note}" if input.note else input.principal
        self._store.reconcile_effect(input.idempotency_key, input.outcome, note)

    def _is_effectful(self, name: str) -> bool:
        return any(spec.risk == "effectful" for spec in self._registry.specs([name])[0])

    def _is_fast(self, name: str) -> bool:
        """The tool says it is fast and read-only (its spec's ``local_activity``): it returns in
        well under a second."""
        return any(spec.local_activity for spec in self._registry.specs([name])[0])

    def _execute_at_most_once(self, input: ToolExecuteInput) -> ToolExecuteResult:
        claimed, record = self._store.claim_effect(input.idempotency_key, input.session_id, input.call.name)
        known = ledger_outcome(input, claimed, record)
        if known is not None:
            ok, text, error_type = known
            if not ok or record.session_id != input.session_id:
                return self._finish(input, ok, text, error_type)
            output = self._registry.recorded(input.call, self._context(input), text)
            return self._finish(input, True, text, None, output.state_keys, memory=output.memory)
        try:
            ok, text, error_type, keys, memory = self._run(input, passes=(ToolTimedOut, ToolLeftRunning))
        except CrashToRetry as crash:
            note = f"attempt {activity.info().attempt} raised {type(crash.error).__name__}; released for the retry"
            self._store.reconcile_effect(input.idempotency_key, "not_applied", note)
            raise
        except (ToolTimedOut, ToolLeftRunning) as stopped:
            # Stopped mid-call (a coroutine cancelled at its bound, a function left running on its
            # thread): the effect may have happened, or may yet. The claim stays open for a person
            # to reconcile, as after a worker that died mid-call (never "failed", which a model
            # would answer by calling again under a new key).
            still = "; the call still runs" if isinstance(stopped, ToolLeftRunning) else ""
            raise outcome_unknown(input.idempotency_key, f" ({input.call.name} {stopped}{still})") from None
        self._store.record_effect(input.idempotency_key, "applied" if ok else "failed", text)
        return self._finish(input, ok, text, error_type, keys, memory=memory)

    def _context(self, input: ToolExecuteInput, secrets: SecretValues | None = None) -> ToolContext:
        # No heartbeat hook: ``_attempts.beating`` beats for the whole call, the tool's own calls add nothing.
        info = activity.info()
        retry = info.retry_policy
        return ToolContext(
            workspace=Path(input.workspace),
            timeout_seconds=input.timeout_seconds,
            is_cancelled=activity.is_cancelled,
            sandbox=input.sandbox,
            network=input.network,
            session_id=input.session_id,
            call_key=input.idempotency_key,
            store=self._store,
            skill_paths=self._skill_paths,
            egress_allow=self._egress_allow,
            cgroup=self._cgroup,
            turn_id=input.turn_id,
            call_id=input.call.id,
            principal_of=lambda: self._owner(input.session_id),
            final_attempt=retry is None or 0 < retry.maximum_attempts <= info.attempt,
            runtime=self._registry.runtime,
            secrets=secrets if secrets is not None else SecretValues(),
        )

    def _owner(self, session_id: str) -> str:
        """The session's owner, from its config in the store (written before its first model call)."""
        config = self._store.session_config(session_id)
        return config.owner if config is not None else ""

    def _run(
        self, input: ToolExecuteInput, passes: tuple[type[ToolError], ...] = ()
    ) -> tuple[bool, str, str | None, list[str], MemoryNote | None]:
        """The call's ``(ok, text, error_type, state_keys, memory)``; a ``ToolError`` is its failed
        result, except one of ``passes``, which is raised."""
        try:
            tool = self._registry.get(input.call.name)
            secrets = self._vault.resolve(tool.secrets, tool.name) if tool.secrets else None
            output = self._registry.execute(input.call, self._context(input, secrets))
        except ToolError as err:
            if isinstance(err, passes):
                raise
            return False, self._clean(f"error: {err}"), type(err).__name__, [], None
        return True, self._clean(output.text), None, output.state_keys, output.memory

    def _clean(self, text: str) -> str:
        """``text`` as the effect ledger and the transcript may hold it: no secret's value, no NUL
        (binary output) and no lone surrogate (a name that is not UTF-8), which the store refuses."""
        return redact(redact_secrets(text_column(text)), self._secrets())

    def _finish(self, input: ToolExecuteInput, *args: Any, **kwargs: Any) -> ToolExecuteResult:
        """``finish_call`` with this worker's store and secrets."""
        return finish_call(self._store, self._secrets(), input, *args, **kwargs)


def ledger_outcome(input: ToolExecuteInput, claimed: bool, record: "EffectRecord") -> tuple[bool, str, str | None] | None:
    """What an effectful call's claim on the effect ledger (``Store.claim_effect``) leaves to do:
    None when this attempt claimed it (run the call, then record it); else ``(ok, text,
    error_type)`` of the result to return instead: another session's key (not run), or the
    outcome an earlier attempt recorded. Raises ``ApplicationError(type="EffectOutcomeUnknown",
    non_retryable=True)`` when an earlier attempt claimed it and recorded nothing. Shared by
    ``tool.execute`` and ``mcp.call_tool``."""
    key = input.idempotency_key
    if record.session_id != input.session_id:
        # Keys join ids with "/": a session id holding one and a model's chosen call id can
        # spell another session's key. Its effect and result are not this call's.
        return False, f"the effect ledger key {key!r} belongs to another session; {input.call.name} was not run", "ToolError"
    if claimed:
        return None
    if record.state in ("applied", "failed"):
        activity.logger.info("effect %s already %s; returning the recorded result", key, record.state)
        ok = record.state == "applied"
        return ok, record.result_text or "", None if ok else "ToolError"
    raise outcome_unknown(key)


def outcome_unknown(key: str, detail: str = "") -> ApplicationError:
    """The non-retryable ``EffectOutcomeUnknown`` failure of effect ``key`` (``detail`` appended to
    its message), which the session answers with a reconcile request."""
    message = f"{EffectOutcomeUnknown(key)}{detail}"
    return ApplicationError(message, {"idempotency_key": key}, type="EffectOutcomeUnknown", non_retryable=True)


def finish_call(
    store: "Store",
    secrets: list[str],
    input: ToolExecuteInput,
    ok: bool,
    text: str,
    error_type: str | None,
    state_keys: list[str] | None = None,
    *,
    staged: StoreAppendInput | None = None,
    memory: MemoryNote | None = None,
) -> ToolExecuteResult:
    """Store a call's result message (with ``staged``, the workflow's staged writes, in the
    same transaction) and return what the workflow keeps of it (``memory``: the memory a
    ``memory.write`` stored). ``secrets`` are redacted from the text first. Shared by
    ``tool.execute`` and ``mcp.call_tool``."""
    state_keys = state_keys or []
    if input.note:
        text = f"{input.note}\n{text}"
    # A key a tool printed reaches neither the store nor history; nor does a declared secret's value.
    text = redact(redact_secrets(text), secrets)
    if memory is not None and memory.preview:
        memory = memory.model_copy(update={"preview": redact(redact_secrets(memory.preview), secrets)})
    message = Message(
        role="tool", tool_call_id=input.call.id, name=input.call.name, text=text, is_error=not ok, state_keys=state_keys
    )
    with store.transaction() as conn:
        if staged is not None:
            store.append(staged, conn=conn)
        store.put_message(input.session_id, input.result_position, input.turn_id, message, conn=conn)
    return ToolExecuteResult(
        ok=ok,
        preview=" ".join(text.split())[:PREVIEW_CHARS],
        size_bytes=len(text.encode()),
        error=None if ok else text.removeprefix("error: "),
        error_type=error_type,
        position=input.result_position,
        state_keys=state_keys,
        memory=memory,
    )
