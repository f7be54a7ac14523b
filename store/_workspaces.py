"""Who owns a workspace under the gateway's workspace root: the principal that first started work
in it. A claim covers the directory and everything below it, so another principal can neither use
it, nor a directory inside it, nor one that holds it. Kept in the store (not a marker file in the
workspace, which the model could write) by the SHA-256 of the real path.
"""

from __future__ import annotations

import hashlib
from pathlib import PurePosixPath

from sqlalchemy import or_, select

from agentrt.store._base import StoreBase, text_column
from agentrt.store._models import workspace_owners


def _digest(path: str) -> str:
    return hashlib.sha256(path.encode("utf-8", "surrogateescape")).hexdigest()


class WorkspaceOwners(StoreBase):
    """Table ``workspace_owners``."""

    def claim_workspace(self, path: str, principal: str) -> bool:
        """Claim the directory ``path`` (absolute and real, as the gateway resolves it) for
        ``principal``, in one transaction. True when ``principal`` owns it now (claimed here or
        before); False when another principal owns it, a directory above it or one below it (then
        nothing is written)."""
        c = workspace_owners.c
        ancestors = [_digest(str(p)) for p in (PurePosixPath(path), *PurePosixPath(path).parents)]
        below = path.rstrip("/") + "/"
        others = select(c.principal).where(
            c.principal != principal,
            or_(c.path_sha256.in_(ancestors), c.path.startswith(text_column(below), autoescape=True)),
        ).limit(1)
        with self.transaction() as conn:
            if conn.execute(others).first() is not None:
                return False
            row = {"path_sha256": _digest(path), "path": text_column(path), "principal": principal, "created_at": self._now()}
            conn.execute(self._insert_ignore(workspace_owners, ["path_sha256"]), row)
            owner = conn.execute(select(c.principal).where(c.path_sha256 == _digest(path))).scalar_one()
        return owner == principal

    def inside_workspace_of_another(self, path: str, principal: str) -> bool:
        """Whether ``path`` (absolute and real: a file or directory) is a workspace another principal
        than ``principal`` claimed, or lies inside one."""
        c = workspace_owners.c
        ancestors = [_digest(str(p)) for p in (PurePosixPath(path), *PurePosixPath(path).parents)]
        others = select(c.principal).where(c.principal != principal, c.path_sha256.in_(ancestors)).limit(1)
        with self._engine.connect() as conn:
            return conn.execute(others).first() is not None

    def workspace_owner(self, path: str) -> str | None:
        """The principal that claimed exactly ``path``, or None."""
        c = workspace_owners.c
        with self._engine.connect() as conn:
            return conn.execute(select(c.principal).where(c.path_sha256 == _digest(path))).scalar_one_or_none()
