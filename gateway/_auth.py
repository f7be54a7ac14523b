"""Who an HTTP caller is and what it may reach: the bearer token names the principal (a body never
does) and its scopes; work of another principal is not found; paths stay under the workspace root.

Perimeter rules (docs/gateway.md, "Authentication"):
- ``Authorization: Bearer <token>`` on every ``/v1`` and ``/apps`` route; the gateway knows a token
  by its SHA-256 (``[[gateway.tokens]]``), compared in constant time (``GatewayConfig.token_for``).
- A route family needs its scope (``sessions``, ``tasks``, ``runs``); ``admin`` covers all of them
  and is also what ``sandbox = "danger_full_access"`` needs; ``network = true`` needs ``network``.
- A session, task or run is visible to its owner (``AgentOwner``) and the configuration's
  operators; to anyone else it answers 404, as a missing one does.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from fastapi import Depends, Header, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from agentrt.client import AgentClient
from agentrt.gateway._errors import Problem, problem_for
from agentrt.gateway._models import ID_PATTERN, MAX_PATH_ID_CHARS
from agentrt.gateway._stream import StreamHub
from agentrt.gateway._webhooks import WatchKind, WebhookDispatcher
from agentrt.gateway._workspaces import WorkspaceClaims
from agentrt.schemas import (
    GraphNotFound,
    SessionNotFound,
    TaskNotFound,
    idempotency_key_problem,
)
from agentrt.worker import GatewayConfig

T = TypeVar("T")

__all__ = ["MAX_STREAMS", "MAX_STREAMS_PER_PRINCIPAL", "Caller", "Gateway", "caller_for", "idempotency_key", "path_id"]

# The longest bearer token the gateway hashes (characters); a longer one is refused unread.
MAX_TOKEN_CHARS = 4_096
# Seconds a worker seen polling the task queue is believed to be there.
WORKER_SEEN_SECONDS = 10.0
# The longest a session update (create, send, cancel, archive, edit, answer) waits for a worker (seconds).
UPDATE_DEADLINE_SECONDS = 60.0
# The most session streams (SSE responses) one principal, and all callers together, hold open at once.
MAX_STREAMS_PER_PRINCIPAL = 16
MAX_STREAMS = 512
# Seconds a caller refused a stream is told to wait (Retry-After).
STREAM_RETRY_AFTER_SECONDS = 5
_ID = re.compile(ID_PATTERN)

bearer = HTTPBearer(
    auto_error=False, scheme_name="bearer",
    description="A token of `[[gateway.tokens]]` (the gateway keeps its SHA-256); it names the principal and scopes.",
)


@dataclass
class Gateway:
    """What every route of one app shares: the client (its principal replaced per request), the
    tokens, the workspace root, the known profiles (None: not checked), the stream hub and the
    webhook dispatcher (either may be None), the principal of an app without authentication,
    and the limits on open streams (per principal, in all)."""

    client: AgentClient
    config: GatewayConfig
    workspace_root: Path
    profiles: frozenset[str] | None = None
    hub: StreamHub | None = None
    webhooks: WebhookDispatcher | None = None
    insecure_principal: str | None = None
    max_streams_per_principal: int = MAX_STREAMS_PER_PRINCIPAL
    max_streams: int = MAX_STREAMS
    _worker_seen_until: float = 0.0
    _streams: Counter[str] = field(default_factory=Counter)
    _claims: WorkspaceClaims | None = None

    @property
    def claims(self) -> WorkspaceClaims:
        """Which principal owns each workspace under the root (made on first use)."""
        if self._claims is None:
            self._claims = WorkspaceClaims(self.client.store)
        return self._claims

    async def workspace_for(self, caller: "Caller", path: str) -> str:
        """``confined(path, "workspace", directory=True)``, claimed for ``caller`` (``WorkspaceClaims``):
        a workspace another principal owns (or one inside or above it) raises the ``Problem`` 422
        of a directory that does not exist, word for word."""
        real = self.confined(path, "workspace", directory=True)
        if not await self.claims.claim(real, caller.principal):
            raise _missing(path, "workspace", directory=True)
        return real

    async def script_for(self, caller: "Caller", path: str, what: str = "script") -> str:
        """``confined(path, what, directory=False)`` for ``caller``: a file in a workspace another
        principal owns raises the ``Problem`` 422 of a file that does not exist, word for word (a
        model script is read, and its parse errors quoted, by the session it starts)."""
        real = self.confined(path, what, directory=False)
        if await self.claims.inside_another_s(real, caller.principal):
            raise _missing(path, what, directory=False)
        return real

    def confined(self, path: str, what: str, *, directory: bool) -> str:
        """``path`` (relative to the workspace root, or absolute) resolved, symbolic links
        followed, as an absolute path; ``Problem`` 422 unless it is an existing directory (or,
        ``directory`` False, regular file) under the root."""
        if "\x00" in path:
            raise Problem(422, "invalid-request", f"{what} {_shown(path)!r} holds a NUL character")
        candidate = path if os.path.isabs(path) else os.path.join(self.workspace_root, path)
        real = Path(os.path.realpath(candidate))
        if real != self.workspace_root and self.workspace_root not in real.parents:
            raise Problem(422, "invalid-request", f"{what} {_shown(path)!r} is not under the gateway's workspace root")
        try:
            found = real.is_dir() if directory else real.is_file()
        except OSError:
            found = False
        if not found:
            raise _missing(path, what, directory=directory)
        return str(real)

    def check_profile(self, profile: str | None, what: str = "profile") -> None:
        if profile is not None and self.profiles is not None and profile not in self.profiles:
            hint = (
                '; give "script" (a scripted model\'s file under the workspace root) to run the offline scripted model, '
                "or define the profile in the gateway's agentrt.toml (docs/providers.md)"
            )
            raise Problem(
                422, "invalid-request",
                f"unknown {what} {profile[:200]!r}; configured profiles: {', '.join(sorted(self.profiles))}{hint}",
            )

    async def ensure_visible(self, caller: "Caller", workflow_id: str, not_found: Exception) -> None:
        """Raise ``not_found`` (404) unless the workflow exists and ``caller`` owns it or is one of
        the configuration's operators (``AgentClient.may_read`` of the request's own client: the
        answer lives as long as the request, so an owner change is seen by the next one)."""
        if not await caller.client.may_read(workflow_id):
            raise problem_for(not_found)

    async def needs_worker(self) -> None:
        """503 when no worker polls the client's task queue: an update to a session (a create, a
        send, a cancel ...) would wait for one without end. A worker seen is believed for
        ``WORKER_SEEN_SECONDS``."""
        now = time.monotonic()
        if now < self._worker_seen_until:
            return
        if not await self.client.has_worker():
            raise Problem(
                503, "unavailable", "no worker is running for the gateway's task queue; start one with `agentrt worker`",
                headers={"Retry-After": "5"},
            )
        self._worker_seen_until = now + WORKER_SEEN_SECONDS

    async def in_time(self, work: Awaitable[T]) -> T:
        """``work`` (a session update, which waits for a worker), after ``needs_worker``, bounded by
        ``UPDATE_DEADLINE_SECONDS``: past it, 503 (the request may still be applied later: repeat
        it with the same Idempotency-Key)."""
        try:
            await self.needs_worker()
            return await asyncio.wait_for(work, UPDATE_DEADLINE_SECONDS)
        except asyncio.TimeoutError:
            raise Problem(
                503, "unavailable",
                f"no worker answered within {UPDATE_DEADLINE_SECONDS:g} s; the request may still be applied "
                "(repeat it with the same Idempotency-Key)",
                headers={"Retry-After": "5"},
            ) from None
        finally:
            if inspect.iscoroutine(work) and inspect.getcoroutinestate(work) == inspect.CORO_CREATED:
                work.close()  # refused before it ran: no "never awaited" warning

    def open_stream(self, principal: str) -> Callable[[], None]:
        """Count one more open stream of ``principal``; the callable returned uncounts it (once,
        however often it is called). ``Problem`` 429 when ``principal`` holds
        ``max_streams_per_principal`` open already, 503 when all callers hold ``max_streams``;
        both with ``Retry-After``."""
        retry = {"Retry-After": str(STREAM_RETRY_AFTER_SECONDS)}
        if self._streams[principal] >= self.max_streams_per_principal:
            raise Problem(
                429, "too-many-streams",
                f"{self.max_streams_per_principal} streams of this principal are open; close one first", headers=retry,
            )
        if self._streams.total() >= self.max_streams:
            raise Problem(503, "unavailable", f"the gateway holds {self.max_streams} streams open, its most", headers=retry)
        self._streams[principal] += 1
        open_ = True

        def close() -> None:
            nonlocal open_
            if open_:
                open_ = False
                self._streams[principal] -= 1
                if not self._streams[principal]:
                    del self._streams[principal]

        return close

    def wake_stream(self, session_id: str) -> None:
        """Something is about to be written to the session: its stream's poller reads at its
        quickest again (``StreamHub.wake``)."""
        if self.hub is not None:
            self.hub.wake(session_id)

    async def watch(self, kind: WatchKind, item_id: str, principal: str) -> None:
        """Tell the webhook dispatcher about new work; a failure is logged, the work stands."""
        if self.webhooks is None:
            return
        try:
            await self.webhooks.watch(kind, item_id, principal)
        except Exception as err:  # noqa: BLE001 - the work was created; a webhook failure must not undo that answer
            problem_for(err)  # logs it


@dataclass(frozen=True)
class Caller:
    """The caller of one request: its principal, its token's scopes and a client acting as it."""

    principal: str
    scopes: tuple[str, ...]
    client: AgentClient

    @property
    def is_admin(self) -> bool:
        return "admin" in self.scopes

    def check_sandbox(self, sandbox: str, network: bool = False) -> None:
        """403 unless the token grants what a create asks for: ``danger_full_access`` needs ``admin``,
        ``network`` needs the ``network`` scope (or ``admin``)."""
        if sandbox == "danger_full_access" and not self.is_admin:
            raise Problem(403, "forbidden", "sandbox 'danger_full_access' needs a token with the admin scope")
        if network and not (self.is_admin or "network" in self.scopes):
            raise Problem(403, "forbidden", "network = true needs a token with the network scope (or admin)")


def gateway_of(request: Request) -> Gateway:
    gateway: Gateway = request.app.state.gateway
    return gateway


def caller_for(scope: str) -> Callable[..., Awaitable[Caller]]:
    """A dependency that authenticates the request's bearer token and checks ``scope``: 401
    (with ``WWW-Authenticate: Bearer``) without a known token, 403 without the scope."""

    async def authenticate(
        request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)
    ) -> Caller:
        gateway = gateway_of(request)
        if gateway.insecure_principal is not None:
            return Caller(gateway.insecure_principal, ("admin",), gateway.client.with_principal(gateway.insecure_principal))
        if credentials is None:
            raise Problem(401, "unauthenticated", "send Authorization: Bearer <token>", headers={"WWW-Authenticate": 'Bearer realm="agentrt"'})
        presented = credentials.credentials
        token = gateway.config.token_for(presented) if len(presented) <= MAX_TOKEN_CHARS else None
        if token is None:
            raise Problem(
                401, "unauthenticated", "the bearer token is not one of the gateway's",
                headers={"WWW-Authenticate": 'Bearer realm="agentrt", error="invalid_token"'},
            )
        if not token.allows(scope):
            raise Problem(
                403, "forbidden", f"the token's scopes ({', '.join(token.scopes)}) do not include {scope!r}",
                headers={"WWW-Authenticate": f'Bearer realm="agentrt", error="insufficient_scope", scope="{scope}"'},
            )
        return Caller(token.principal, token.scopes, gateway.client.with_principal(token.principal))

    return authenticate


def path_id(value: str, kind: str) -> str:
    """``value`` when it can name a session, task or run; otherwise 404 (no such thing can exist)."""
    if len(value) > MAX_PATH_ID_CHARS or not _ID.fullmatch(value):
        error = {"session": SessionNotFound, "task": TaskNotFound, "run": GraphNotFound}[kind](value[:64])
        raise problem_for(error)
    return value


def idempotency_key(
    idempotency_key: str | None = Header(
        default=None, alias="Idempotency-Key",
        description="Repeat a create or send with the same key (1 to 200 characters of `A-Z a-z 0-9 . _ : -`) and it happens once.",
    ),
) -> dict[str, str]:
    """The ``idempotency_key=`` argument for the client (nothing without the header); 400 for a
    key the client would refuse (``idempotency_key_problem``)."""
    if idempotency_key is None:
        return {}
    problem = idempotency_key_problem(idempotency_key)
    if problem is not None:
        raise Problem(400, "bad-request", f"Idempotency-Key: {problem}")
    return {"idempotency_key": idempotency_key}


def _shown(path: str) -> str:
    """``path`` as a message shows it: its first 200 characters."""
    return path if len(path) <= 200 else path[:200] + "…"


def _missing(path: str, what: str, *, directory: bool) -> Problem:
    """The 422 of a path that is not there: also what another principal's workspace or file answers."""
    kind = "directory" if directory else "file"
    return Problem(422, "invalid-request", f"{what} {_shown(path)!r} is not an existing {kind} under the gateway's workspace root")
