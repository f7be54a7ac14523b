"""Activity ``provider.complete``: one model call, content loaded from the store, deltas streamed to it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.providers import application_error_from, provider_for
from schemas import (
    ConfigurationError,
    ModelCallInput,
    ModelCallResult,
    ModelProfile,
    ModelRequest,
    ProviderError,
    Usage,
)

if TYPE_CHECKING:
    from activities.tools import ToolRegistry
    from store import Store
    from worker._config import AgentrtConfig

DELTA_FLUSH_SECONDS = 0.2
DELTA_FLUSH_COUNT = 32


class ModelActivities:
    """Holds the worker's configuration, store and tool registry; the workflow sends only a profile name."""

    def __init__(self, config: "AgentrtConfig", store: "Store", registry: "ToolRegistry") -> None:
        self._config = config
        self._store = store
        self._registry = registry

    def _profile(self, input: ModelCallInput) -> ModelProfile:
        if input.script:
            return ModelProfile(name=input.profile, provider="scripted", model="scripted", script=input.script)
        return self._config.profile(input.profile)

    @activity.defn(name="provider.complete")
    async def complete(self, input: ModelCallInput) -> ModelCallResult:
        """Call the session's model with the transcript at positions < ``upto_position``.

        Raises ``ApplicationError`` typed ``ProviderHTTPError`` / ``ProviderTransportError``
        (retryable per status, Retry-After as the next delay) or a non-retryable
        configuration error (unknown profile, bad script, missing API key).
        """
        info = activity.info()
        try:
            profile = self._profile(input)
            provider = provider_for(profile)
        except ConfigurationError as err:
            raise ApplicationError(str(err), type=type(err).__name__, non_retryable=True) from err
        rows = await asyncio.to_thread(self._store.messages, input.session_id, input.upto_position)
        tools, _unknown = self._registry.specs(input.tool_names)
        request = ModelRequest(
            profile=profile, system=input.system_prompt, messages=[m for _, m in rows], tools=tools
        )
        buffer: list[str] = []
        written = 0
        loop = asyncio.get_running_loop()
        last_flush = loop.time()

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
            activity.heartbeat()
            if len(buffer) >= DELTA_FLUSH_COUNT or loop.time() - last_flush >= DELTA_FLUSH_SECONDS:
                await flush()

        async def keep_heartbeating() -> None:
            interval = max(0.5, (info.heartbeat_timeout.total_seconds() / 3) if info.heartbeat_timeout else 5.0)
            while True:
                activity.heartbeat()
                await asyncio.sleep(interval)

        async def receipt(status: str, usage: Usage | None = None) -> None:
            usage = usage or Usage()
            await asyncio.to_thread(
                self._store.record_usage,
                input.session_id,
                input.turn_id,
                input.round,
                info.attempt,
                status,
                usage.input_tokens,
                usage.output_tokens,
            )

        # A receipt per attempt: "started" now, then "completed" or "interrupted". One left
        # "started" belongs to an attempt whose worker died; its retry is a fresh request.
        await receipt("started")
        beating = asyncio.create_task(keep_heartbeating())
        try:
            response = await provider.complete(request, on_delta)
        except ProviderError as err:
            partial = err.partial_usage if isinstance(err.partial_usage, Usage) else None
            await receipt("interrupted", partial)
            raise application_error_from(err) from err
        except ConfigurationError as err:
            await receipt("interrupted")
            raise ApplicationError(str(err), type=type(err).__name__, non_retryable=True) from err
        except asyncio.CancelledError:
            await asyncio.shield(receipt("interrupted"))
            raise
        finally:
            beating.cancel()
            await flush()
        await receipt("completed", response.usage)
        return ModelCallResult(
            text=response.text,
            tool_calls=response.tool_calls,
            usage=response.usage,
            stop_reason=response.stop_reason,
            position=input.reply_position,
        )
