"""Workspace confinement: every path a tool touches is checked to stay inside the session's workspace."""

from __future__ import annotations

from pathlib import Path

from agentrt.schemas import WorkspaceEscapeError

__all__ = ["is_inside", "relative_display", "resolve_in_workspace"]


def is_inside(root: Path, path: Path) -> bool:
    """True when ``path`` (already resolved) is ``root`` (already resolved) or below it."""
    return path == root or path.is_relative_to(root)


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """Resolve ``path`` against ``workspace`` and return the real, absolute path.

    Relative paths are taken from the workspace; absolute paths are allowed only when
    they fall inside it. Symlinks are followed (``Path.resolve``), so a link whose target
    leaves the workspace is rejected just like ``..``. The path need not exist (e.g. a
    file about to be written); its existing prefix is resolved.

    Raises ``WorkspaceEscapeError`` when the real path is outside the resolved workspace.
    The check happens once, here: a concurrent process that swaps a symlink between this
    call and the open is not defended against (that needs an OS sandbox).
    """
    root = workspace.resolve()
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = root / candidate
    real = candidate.resolve()
    if not is_inside(root, real):
        raise WorkspaceEscapeError(path, str(root))
    return real


def relative_display(root: Path, path: Path) -> str:
    """``path`` relative to ``root`` in POSIX form, ``.`` for the root itself."""
    rel = path.relative_to(root).as_posix()
    return rel or "."
