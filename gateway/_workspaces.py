"""The gateway's workspace root and who owns the workspaces under it.

A session's tools read and write its workspace, and the model chooses what they touch: a root
that holds the gateway's own configuration, its store, its codec keys or ``$AGENTRT_HOME`` would
let any caller's session read the token hashes and keys, or rewrite the store, through
``fs.read`` or ``shell.run``. ``check_workspace_root`` refuses such a root when the gateway starts
(``agentrt serve`` exits 2 naming what the root holds). It refuses a root that *holds* any of
them (is the directory or one above it), and a root *inside* ``$AGENTRT_HOME`` (the home is
agentrt's own state: payloads, logs, the dev server's database); a root beside them is fine.

Under the root, a workspace belongs to the principal that first started work in it
(``WorkspaceClaims``): another principal's start in it, in a directory inside it or in one that
holds it answers as a missing directory does. Claims are kept in the store (``workspace_owners``),
outside every workspace, so no model can forge one; a gateway without a store keeps them in memory.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path, PurePosixPath

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from agentrt.schemas import ConfigurationError
from agentrt.store import Store, agentrt_home
from agentrt.worker import AgentrtConfig

__all__ = ["WorkspaceClaims", "check_workspace_root", "protected_paths"]


def protected_paths(config: AgentrtConfig, env: dict[str, str] | None = None) -> dict[str, Path]:
    """What a workspace root may not hold, by what it is: the agentrt.toml read (``config.source``),
    the SQLite store file, the codec keys file, the payload directory (driver ``directory``) and
    ``$AGENTRT_HOME``; each as its real path."""
    found: dict[str, Path] = {"$AGENTRT_HOME": agentrt_home(os.environ if env is None else env)}
    if config.source is not None:
        found["the configuration file"] = Path(config.source)
    if config.database_url:
        try:
            url = make_url(config.database_url)
        except ArgumentError:
            url = None
        if url is not None and url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
            found["the SQLite store"] = Path(str(url.database))
    if config.codec.keys_file:
        found["the codec keys file"] = Path(config.codec.keys_file)
    if config.payloads.driver == "directory":
        found["the payload directory"] = Path(config.payloads.path)
    return {what: Path(os.path.realpath(path)) for what, path in found.items()}


def check_workspace_root(root: Path, config: AgentrtConfig, env: dict[str, str] | None = None) -> None:
    """Raise ``ConfigurationError`` naming the first protected path (``protected_paths``) that the
    real ``root`` is or holds, or when ``root`` lies inside ``$AGENTRT_HOME``."""
    real = Path(os.path.realpath(root))
    paths = protected_paths(config, env)
    for what, path in paths.items():
        if path == real or real in path.parents:
            raise ConfigurationError(
                f"the workspace root {str(real)!r} holds {what} ({str(path)!r}): every session could read or change it "
                "through its tools; serve a directory that holds only workspaces (--workspace-root)"
            )
    home = paths["$AGENTRT_HOME"]
    if home in real.parents:
        raise ConfigurationError(
            f"the workspace root {str(real)!r} is inside $AGENTRT_HOME ({str(home)!r}), agentrt's own state; "
            "serve a directory outside it (--workspace-root)"
        )


class WorkspaceClaims:
    """Which principal owns each workspace under the root: in ``store`` (``Store.claim_workspace``)
    when given, else in this object's memory."""

    def __init__(self, store: Store | None) -> None:
        self._store = store
        self._memory: dict[str, str] = {}
        self._lock = asyncio.Lock()

    async def claim(self, path: str, principal: str) -> bool:
        """True when ``principal`` owns the workspace ``path`` (a real, absolute path), claimed now
        or before; False when another principal owns it, one above it or one below it."""
        if self._store is not None:
            return await asyncio.to_thread(self._store.claim_workspace, path, principal)
        async with self._lock:
            mine = PurePosixPath(path)
            for claimed, owner in self._memory.items():
                other = PurePosixPath(claimed)
                if owner != principal and (other == mine or other in mine.parents or mine in other.parents):
                    return False
            self._memory.setdefault(path, principal)
            return True

    async def inside_another_s(self, path: str, principal: str) -> bool:
        """Whether ``path`` (a real, absolute path) is, or lies inside, a workspace another principal
        than ``principal`` owns."""
        if self._store is not None:
            return await asyncio.to_thread(self._store.inside_workspace_of_another, path, principal)
        async with self._lock:
            mine = PurePosixPath(path)
            return any(
                owner != principal and (PurePosixPath(claimed) == mine or PurePosixPath(claimed) in mine.parents)
                for claimed, owner in self._memory.items()
            )
