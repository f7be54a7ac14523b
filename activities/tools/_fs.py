"""File tools (``fs.list``, ``fs.read``, ``fs.search``, ``fs.write``), confined to the session's workspace."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path

import re2
from pydantic import Field, field_validator

from agentrt.activities.tools._registry import Tool, ToolArgs, ToolContext, ToolOutput
from agentrt.activities.tools._workspace import (
    checked_workspace,
    is_inside,
    make_directories,
    open_directory,
    open_regular,
    relative_display,
    resolve_in_workspace,
)
from agentrt.schemas import PROTECTED_FILE_PATTERN, ToolError

__all__ = ["FsList", "FsRead", "FsSearch", "FsWrite", "MAX_READ_BYTES"]

# The most bytes one fs.read returns (its ``limit`` argument is capped here).
MAX_READ_BYTES = 1024 * 1024
SKIP_DIRS = frozenset({".git"})
_BINARY_SNIFF_BYTES = 8192
_MAX_LINE_CHARS = 500
# A line longer than this (bytes) is searched in pieces of this size, the time bound checked between them.
_MAX_SCAN_LINE_BYTES = 16 * 1024
MAX_PATTERN_CHARS = 1000
# The largest RE2 program a pattern may compile to (instructions): with 16 KiB pieces, a piece
# costs well under a second even where RE2 falls back to its slowest matcher.
MAX_PROGRAM_SIZE = 10_000
MAX_GLOB_CHARS = 256
# fs.write does not reach a protected file through a link of another name.
_SECRET_NAME = re.compile(PROTECTED_FILE_PATTERN)
# The deepest a listing or search descends below where it starts (directories).
MAX_WALK_DEPTH = 64


def _walk(root: Path, start: Path, ctx: ToolContext, recursive: bool = True) -> Iterator[tuple[Path, bool]]:
    """Yield ``(path, is_dir)`` below ``start`` (a resolved directory) in sorted order, never leaving ``root``.

    Symlinked directories are listed but not descended into (no loops, no escape);
    symlinks whose target is outside ``root`` are skipped. ``.git`` is skipped. Each directory
    is read through an fd opened from its parent's without following a symlink (``start`` from
    ``/``: ``open_directory``), so a directory swapped for a symlink during the walk is not
    entered. Depth-first with a stack of its own (a tree thousands of levels deep is walked, not
    a recursion error), at most ``MAX_WALK_DEPTH`` levels below ``start``. Raises what
    ``open_directory`` raises for ``start``.
    """
    def entries(fd: int) -> Iterator[os.DirEntry[str]]:
        try:
            return iter(sorted(os.scandir(fd), key=lambda e: e.name))
        except OSError:
            return iter(())

    top = open_directory(start, relative_display(root, start), root=root)
    # (depth, directory fd, its path, entries left)
    stack: list[tuple[int, int, Path, Iterator[os.DirEntry[str]]]] = [(0, top, start, entries(top))]
    try:
        while stack:
            depth, fd, directory, pending = stack[-1]
            entry = next(pending, None)
            if entry is None:
                os.close(stack.pop()[1])
                continue
            ctx.check()
            if entry.name in SKIP_DIRS:
                continue
            path = directory / entry.name
            try:
                if entry.is_symlink():
                    target = path.resolve()
                    if is_inside(root, target):
                        yield path, target.is_dir()
                    continue
                is_dir = entry.is_dir(follow_symlinks=False)
            except (OSError, RuntimeError):
                continue
            yield path, is_dir
            if is_dir and recursive and depth + 1 < MAX_WALK_DEPTH:
                try:
                    inner = os.open(entry.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
                except OSError:  # gone, or swapped for a symlink or a file since it was listed
                    continue
                stack.append((depth + 1, inner, path, entries(inner)))
    finally:
        for _depth, fd, _directory, _pending in stack:
            os.close(fd)


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
        root = checked_workspace(ctx.workspace)
        directory = resolve_in_workspace(root, args.path)
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
        offset: int = Field(0, ge=0, le=2**53, description="First byte to read.")
        limit: int = Field(65_536, ge=1, le=MAX_READ_BYTES, description="Most bytes to read (at most 1 MiB).")

    def run(self, args: Args, ctx: ToolContext) -> ToolOutput:
        root = checked_workspace(ctx.workspace)
        path = resolve_in_workspace(root, args.path)
        if not path.exists():
            raise ToolError(f"no such file: {args.path!r}")
        if path.is_dir():
            raise ToolError(f"{args.path!r} is a directory, not a file (use fs.list)")
        try:
            fd = open_regular(path, args.path, os.O_RDONLY, root=root)
            with os.fdopen(fd, "rb") as f:
                size = os.fstat(f.fileno()).st_size
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
        "Search text files in the workspace for a regular expression (RE2 syntax: like Python's, "
        "without backreferences or look-around). Returns 'path:line: text' lines; binary files, "
        "special files and .git are skipped."
    )
    risk = "read_only"

    class Args(ToolArgs):
        pattern: str = Field(
            max_length=MAX_PATTERN_CHARS, description="RE2 regular expression, matched against each line."
        )
        path: str = Field(".", description="File or directory to search, relative to the workspace.")
        glob: str = Field(
            "*", max_length=MAX_GLOB_CHARS, description="Only files whose name (or relative path) matches this glob."
        )
        max_matches: int = Field(200, ge=1, le=10_000, description="Stop after this many matching lines.")

        @field_validator("pattern")
        @classmethod
        def _compiles(cls, value: str) -> str:
            _compile(value)
            return value

    def run(self, args: Args, ctx: ToolContext) -> ToolOutput:
        root = checked_workspace(ctx.workspace)
        regex = _compile(args.pattern)
        start = resolve_in_workspace(root, args.path)
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
            for lineno, line in _text_lines(real, root):
                ctx.check()  # every line: a pathological pattern can cost RE2 a second per long line
                if regex.search(line):
                    if len(line) > _MAX_LINE_CHARS:
                        line = line[:_MAX_LINE_CHARS] + " [line truncated]"
                    matches.append(f"{rel}:{lineno}: {line}")
                    if len(matches) >= args.max_matches:
                        matches.append(f"[stopped after {args.max_matches} matches]")
                        return ToolOutput(text="\n".join(matches))
        return ToolOutput(text="\n".join(matches) if matches else "no matches")


def _compile(pattern: str) -> re2._Regexp:
    """``pattern`` compiled by RE2, whose matching is linear in the text (no catastrophic
    backtracking: ``(a+)+$`` costs what ``a+$`` does). Raises ``ValueError`` when RE2 refuses it
    or its program is over ``MAX_PROGRAM_SIZE`` instructions (a search costs about text length
    × program size where RE2 cannot use its fast matcher)."""
    try:
        compiled = re2.compile(pattern)
    except re2.error as e:
        raise ValueError(f"invalid regular expression (RE2 syntax: no backreferences or look-around): {e}") from e
    if compiled.programsize > MAX_PROGRAM_SIZE:
        raise ValueError(
            f"regular expression too complex: an RE2 program of {compiled.programsize:,} instructions "
            f"(at most {MAX_PROGRAM_SIZE:,}); use fewer or smaller repetitions"
        )
    return compiled


def _text_lines(path: Path, root: Path) -> Iterator[tuple[int, str]]:
    """Numbered lines of a regular text file in the workspace ``root``, a long line in pieces of
    ``_MAX_SCAN_LINE_BYTES``; nothing for binary (NUL in the first 8 KiB), special (FIFO, device, socket),
    unreadable or swapped-out files."""
    try:
        fd = open_regular(path, str(path), os.O_RDONLY, root=root)
    except (OSError, ToolError, ValueError):
        return
    with os.fdopen(fd, "rb") as f:
        try:
            if b"\0" in f.read(_BINARY_SNIFF_BYTES):
                return
            f.seek(0)
            lineno = 0
            while raw := f.readline(_MAX_SCAN_LINE_BYTES):
                lineno += 1
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
        root = checked_workspace(ctx.workspace)
        path = resolve_in_workspace(root, args.path)
        if path == root or path.is_dir() or args.path.endswith("/"):
            raise ToolError(f"{args.path!r} is a directory, not a file")
        parent = path.parent
        if not parent.exists():
            if not args.create_dirs:
                raise ToolError(f"directory {relative_display(root, parent)!r} does not exist (set create_dirs to create it)")
            try:
                make_directories(parent, args.path, root=root)
            except OSError as e:
                raise ToolError(f"cannot create directory {relative_display(root, parent)!r}: {e.strerror or e}") from e
        requested = (root / args.path) if not Path(args.path).is_absolute() else Path(args.path)
        if path != requested and _SECRET_NAME.search(relative_display(root, path)) and not _SECRET_NAME.search(args.path):
            # Through a symlink to a file the policy would have asked about by its own name.
            raise ToolError(
                f"{args.path!r} is a link to {relative_display(root, path)!r}, a file written only when asked for by its own name"
            )
        data = args.content.encode("utf-8", errors="replace")  # a lone surrogate becomes "?"
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if args.append else 0)
        try:
            fd = open_regular(path, args.path, flags, root=root)
            with os.fdopen(fd, "ab" if args.append else "wb") as f:
                if not args.append:
                    f.truncate(0)
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
        return f"file:{relative_display(checked_workspace(workspace), resolve_in_workspace(workspace, path))}"
    except ToolError:
        return f"file:{path}"
