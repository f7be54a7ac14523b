"""File tools (``fs.list``, ``fs.read``, ``fs.search``, ``fs.write``), confined to the session's workspace."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import Field, field_validator

from agentrt.activities.tools._registry import Tool, ToolArgs, ToolContext, ToolOutput
from agentrt.activities.tools._workspace import is_inside, relative_display, resolve_in_workspace
from agentrt.schemas import ToolError

__all__ = ["FsList", "FsRead", "FsSearch", "FsWrite", "MAX_READ_BYTES"]

# The most bytes one fs.read returns (its ``limit`` argument is capped here).
MAX_READ_BYTES = 1024 * 1024
SKIP_DIRS = frozenset({".git"})
_BINARY_SNIFF_BYTES = 8192
_MAX_LINE_CHARS = 500


def _walk(root: Path, start: Path, ctx: ToolContext, recursive: bool = True) -> Iterator[tuple[Path, bool]]:
    """Yield ``(path, is_dir)`` below ``start`` (a resolved directory) in sorted order, never leaving ``root``.

    Symlinked directories are listed but not descended into (no loops, no escape);
    symlinks whose target is outside ``root`` are skipped. ``.git`` is skipped.
    """
    try:
        entries = sorted(os.scandir(start), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if ctx.is_cancelled():
            raise ToolError("cancelled")
        if entry.name in SKIP_DIRS:
            continue
        path = Path(entry.path)
        if entry.is_symlink():
            target = path.resolve()
            if not is_inside(root, target):
                continue
            yield path, target.is_dir()
            continue
        if entry.is_dir(follow_symlinks=False):
            yield path, True
            if recursive:
                yield from _walk(root, path, ctx)
        else:
            yield path, False


class FsList(Tool):
    name = "fs.list"
    description = (
        "List files and directories in the workspace. Paths are relative to the workspace; "
        "directories end with '/'. Set recursive to list the whole tree."
    )
    risk = "read_only"
    local_activity = True

    class Args(ToolArgs):
        path: str = Field(".", description="Directory to list, relative to the workspace.")
        recursive: bool = Field(False, description="List subdirectories too.")
        max_entries: int = Field(500, ge=1, le=10_000, description="Stop after this many entries.")

    def run(self, args: Args, ctx: ToolContext) -> ToolOutput:
        root = ctx.workspace.resolve()
        directory = resolve_in_workspace(ctx.workspace, args.path)
        if not directory.exists():
            raise ToolError(f"no such directory: {args.path!r}")
        if not directory.is_dir():
            raise ToolError(f"not a directory: {args.path!r} (use fs.read for files)")
        lines: list[str] = []
        truncated = False
        for path, is_dir in _walk(root, directory, ctx, recursive=args.recursive):
            if len(lines) >= args.max_entries:
                truncated = True
                break
            rel = relative_display(root, path)
            lines.append(rel + "/" if is_dir else rel)
        lines.sort()
        if truncated:
            lines.append(f"[truncated: showing the first {args.max_entries} entries]")
        if not lines:
            return ToolOutput(text="(empty directory)")
        return ToolOutput(text="\n".join(lines))


class FsRead(Tool):
    name = "fs.read"
    description = (
        "Read a text file from the workspace (UTF-8; undecodable bytes are replaced). "
        "offset and limit are in bytes; long files are truncated with a note saying which bytes are shown."
    )
    risk = "read_only"
    local_activity = True

    class Args(ToolArgs):
        path: str = Field(description="File to read, relative to the workspace.")
        offset: int = Field(0, ge=0, description="First byte to read.")
        limit: int = Field(65_536, ge=1, le=MAX_READ_BYTES, description="Most bytes to read (at most 1 MiB).")

    def run(self, args: Args, ctx: ToolContext) -> ToolOutput:
        path = resolve_in_workspace(ctx.workspace, args.path)
        if not path.exists():
            raise ToolError(f"no such file: {args.path!r}")
        if path.is_dir():
            raise ToolError(f"{args.path!r} is a directory, not a file (use fs.list)")
        try:
            size = path.stat().st_size
            with path.open("rb") as f:
                f.seek(args.offset)
                data = f.read(args.limit)
        except OSError as e:
            raise ToolError(f"cannot read {args.path!r}: {e.strerror or e}") from e
        text = data.decode("utf-8", errors="replace")
        end = args.offset + len(data)
        if args.offset > 0 or end < size:
            text += f"\n[truncated: showing bytes {args.offset}-{end} of {size}]"
            return ToolOutput(text=text)
        # A whole-file read is the file's state: a later whole read or a write of it supersedes this one.
        return ToolOutput(text=text, state_keys=[file_state_key(ctx.workspace, args.path)])


class FsSearch(Tool):
    name = "fs.search"
    description = (
        "Search text files in the workspace for a Python regular expression. "
        "Returns 'path:line: text' lines; binary files and .git are skipped."
    )
    risk = "read_only"

    class Args(ToolArgs):
        pattern: str = Field(description="Python regular expression, matched against each line.")
        path: str = Field(".", description="File or directory to search, relative to the workspace.")
        glob: str = Field("*", description="Only files whose name (or relative path) matches this glob.")
        max_matches: int = Field(200, ge=1, le=10_000, description="Stop after this many matching lines.")

        @field_validator("pattern")
        @classmethod
        def _compiles(cls, value: str) -> str:
            try:
                re.compile(value)
            except re.error as e:
                raise ValueError(f"invalid regular expression: {e}") from e
            return value

    def run(self, args: Args, ctx: ToolContext) -> ToolOutput:
        root = ctx.workspace.resolve()
        regex = re.compile(args.pattern)
        start = resolve_in_workspace(ctx.workspace, args.path)
        if not start.exists():
            raise ToolError(f"no such file or directory: {args.path!r}")
        if start.is_dir():
            files = (p for p, is_dir in _walk(root, start, ctx) if not is_dir)
        else:
            files = iter([start])
        matches: list[str] = []
        for n, path in enumerate(files):
            if n % 100 == 0:
                ctx.heartbeat()
            real = path.resolve()
            rel = relative_display(root, path)
            if not (fnmatch.fnmatch(path.name, args.glob) or fnmatch.fnmatch(rel, args.glob)):
                continue
            for lineno, line in _text_lines(real):
                if regex.search(line):
                    if len(line) > _MAX_LINE_CHARS:
                        line = line[:_MAX_LINE_CHARS] + " [line truncated]"
                    matches.append(f"{rel}:{lineno}: {line}")
                    if len(matches) >= args.max_matches:
                        matches.append(f"[stopped after {args.max_matches} matches]")
                        return ToolOutput(text="\n".join(matches))
        return ToolOutput(text="\n".join(matches) if matches else "no matches")


def _text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Numbered lines of a text file; nothing for binary (NUL in the first 8 KiB) or unreadable files."""
    try:
        with path.open("rb") as f:
            if b"\0" in f.read(_BINARY_SNIFF_BYTES):
                return
            f.seek(0)
            for lineno, raw in enumerate(f, start=1):
                yield lineno, raw.decode("utf-8", errors="replace").rstrip("\r\n")
    except OSError:
        return


class FsWrite(Tool):
    name = "fs.write"
    description = (
        "Write UTF-8 text to a file in the workspace, replacing it (or appending when append is true). "
        "Missing parent directories are created unless create_dirs is false."
    )
    risk = "effectful"

    class Args(ToolArgs):
        path: str = Field(description="File to write, relative to the workspace.")
        content: str = Field(description="Text to write (UTF-8).")
        append: bool = Field(False, description="Append to the file instead of replacing it.")
        create_dirs: bool = Field(True, description="Create missing parent directories.")

    def run(self, args: Args, ctx: ToolContext) -> ToolOutput:
        root = ctx.workspace.resolve()
        path = resolve_in_workspace(ctx.workspace, args.path)
        if path == root or path.is_dir():
            raise ToolError(f"{args.path!r} is a directory, not a file")
        parent = path.parent
        if not parent.exists():
            if not args.create_dirs:
                raise ToolError(f"directory {relative_display(root, parent)!r} does not exist (set create_dirs to create it)")
            parent.mkdir(parents=True, exist_ok=True)
        data = args.content.encode("utf-8")
        try:
            with path.open("ab" if args.append else "wb") as f:
                f.write(data)
        except OSError as e:
            raise ToolError(f"cannot write {args.path!r}: {e.strerror or e}") from e
        verb = "appended" if args.append else "wrote"
        return ToolOutput(text=f"{verb} {len(data)} bytes to {relative_display(root, path)}")

    def state_keys(self, args: Args, ctx: ToolContext) -> list[str]:
        """Replacing a file supersedes earlier reads of it; appending does not (they stay true in part)."""
        return [] if args.append else [file_state_key(ctx.workspace, args.path)]


def file_state_key(workspace: Path, path: str) -> str:
    """``file:<path relative to the workspace>``; the raw path when it does not resolve inside it."""
    try:
        return f"file:{relative_display(workspace.resolve(), resolve_in_workspace(workspace, path))}"
    except ToolError:
        return f"file:{path}"
