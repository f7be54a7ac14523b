"""Skills, the second tool source besides MCP: directories holding a ``SKILL.md`` (YAML front matter
with ``name`` and ``description``, then Markdown instructions) that a model activates with
``skill.activate`` and drops with ``skill.deactivate``.

Skills are found under the workspace's ``.agentrt/skills/*/SKILL.md``, then under each configured
directory's ``*/SKILL.md`` (agentrt.toml ``[skills] paths``); the first skill of a name wins. A
hostile model can write files into the workspace, so everything read here is bounded (skills,
bytes, front matter, files listed, directory entries scanned), opened without following a symlink
swapped in after the check and never blocking (a FIFO is refused), a workspace skill must stay
inside the workspace, and a skill's text reaches the model only quoted
(``quote_memory_text``): it is file content, not the user's words.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field

from agentrt.activities.tools._files import read_regular_file
from agentrt.activities.tools._memory import quote_memory_text
from agentrt.activities.tools._registry import Tool, ToolArgs, ToolContext, ToolOutput
from agentrt.activities.tools._workspace import checked_workspace, is_inside
from agentrt.schemas import (
    FileTooLargeError,
    SKILL_ACTIVATE,
    SKILL_DEACTIVATE,
    SKILL_NAME_PATTERN,
    SkillInfo,
    SkillNotFound,
    ToolError,
    WorkspaceEscapeError,
)

__all__ = [
    "MAX_SKILLS",
    "MAX_SKILL_FILES",
    "MAX_SKILL_FILE_BYTES",
    "Skill",
    "SkillActivate",
    "SkillDeactivate",
    "SkillDiscovery",
    "discover_skills",
    "load_skill",
    "skill_state_key",
]

# Where a workspace keeps its own skills, relative to the workspace.
WORKSPACE_SKILLS_DIR = Path(".agentrt") / "skills"
SKILL_FILE = "SKILL.md"
# The most skills one discovery returns (workspace ones first); the rest are reported as problems.
MAX_SKILLS = 100
# The largest SKILL.md read (bytes); a bigger one is skipped.
MAX_SKILL_FILE_BYTES = 256 * 1024
# The largest front matter parsed (characters): YAML parsing costs far more than reading (about
# 2 ms a KiB for the worst YAML), and a name, a description and a few more keys take one or two.
MAX_FRONT_MATTER_CHARS = 4 * 1024
# The most SKILL.md files one discovery reads, valid or not: with the bounds above, what a
# workspace full of broken or duplicate skills costs each skill.activate.
MAX_SKILL_MD_READS = 2 * MAX_SKILLS
# A longer description is cut to this many characters (the last one "…").
MAX_DESCRIPTION_CHARS = 1024
# The most directory entries read from one skills root (``<root>/*``) and from one skill directory tree.
MAX_SCANNED_ENTRIES = 1000
# The most files of a skill listed by ``load_skill``, and how deep its directory is walked.
MAX_SKILL_FILES = 100
MAX_SKILL_FILE_DEPTH = 4

_FENCE = "---"
# The C parser when PyYAML has it (ten times faster, the same safe constructors as yaml.safe_load:
# plain data only, ``!!python/...`` tags refused).
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class SkillDiscovery:
    """What ``discover_skills`` found: ``skills`` (workspace ones first, then each configured path in
    order; the first of a name wins) and ``problems``: one line per skill skipped and why."""

    skills: list[SkillInfo] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class Skill:
    """One skill, loaded: ``info``, its ``instructions`` (the Markdown after the front matter), its
    ``directory`` (real, absolute) and ``files``: the other files in it, relative POSIX names, sorted,
    at most ``MAX_SKILL_FILES`` (``more_files`` when some were left out)."""

    info: SkillInfo
    instructions: str
    directory: Path
    files: list[str] = field(default_factory=list)
    more_files: bool = False


@dataclass
class _Root:
    """A directory searched for ``*/SKILL.md``: ``path`` as configured; ``workspace`` for the
    workspace's own skills, which must stay inside it (every open then starts from the workspace,
    component by component, following no symlink; from the configured directory otherwise)."""

    path: Path
    workspace: Path | None = None


def skill_state_key(name: str) -> str:
    """The state key of skill ``name``'s activation: a later ``skill.activate`` or ``skill.deactivate``
    of it supersedes the earlier result in the model's context."""
    return f"skill:{name}"


def discover_skills(workspace: Path, paths: Sequence[Path]) -> SkillDiscovery:
    """The skills of ``workspace`` (``.agentrt/skills/*/SKILL.md``, which must resolve inside the
    workspace) and of ``paths`` (``<path>/*/SKILL.md``), in that order, at most ``MAX_SKILLS``; a
    missing workspace skills directory is no problem, a missing configured one is reported."""
    found = SkillDiscovery()
    for info, _body, _directory in _skills(workspace, paths, found.problems):
        found.skills.append(info)
    return found


def load_skill(workspace: Path, paths: Sequence[Path], name: str) -> Skill:
    """The skill called ``name`` as ``discover_skills`` finds it (the first of that name), with its
    instructions and files; raises ``SkillNotFound`` listing the names found."""
    available: list[str] = []
    for info, body, directory in _skills(workspace, paths, []):
        if info.name == name:
            files, more = _skill_files(directory)
            return Skill(info=info, instructions=body, directory=directory, files=files, more_files=more)
        available.append(info.name)
    raise SkillNotFound(name, available)


def _skills(workspace: Path, paths: Sequence[Path], problems: list[str]) -> Iterator[tuple[SkillInfo, str, Path]]:
    """``(info, instructions, real skill directory)`` of each usable skill, in precedence order, at
    most ``MAX_SKILLS``; what is skipped goes to ``problems``."""
    roots = [_Root(Path(workspace) / WORKSPACE_SKILLS_DIR, workspace=Path(workspace))]
    roots += [_Root(Path(p)) for p in paths]
    seen: dict[str, str] = {}
    reads = 0
    for root in roots:
        for candidate, real_root, anchor in _candidates(root, problems):
            if len(seen) >= MAX_SKILLS or reads >= MAX_SKILL_MD_READS:
                full = len(seen) >= MAX_SKILLS
                why = f"{MAX_SKILLS} skills were found" if full else f"{MAX_SKILL_MD_READS} SKILL.md files were read"
                problems.append(f"{candidate} and any after it: skipped: {why}, the most one discovery takes")
                return
            reads += 1
            try:
                info, body, directory = _read_skill(candidate, real_root, anchor)
            except _Skipped as skipped:
                problems.append(f"{candidate}: skipped: {skipped}")
                continue
            if info.name in seen:
                problems.append(f"{info.source}: skipped: skill {info.name!r} is already defined by {seen[info.name]}")
                continue
            seen[info.name] = info.source
            yield info, body, directory


def _candidates(root: _Root, problems: list[str]) -> Iterator[tuple[Path, Path, Path]]:
    """``(<root>/<name>/SKILL.md, the real root, the directory opens start from)`` for each entry of
    ``root`` that holds a SKILL.md (at most ``MAX_SCANNED_ENTRIES`` entries looked at, hidden ones
    skipped); a root that cannot be used goes to ``problems``, a workspace that is no longer
    itself (``checked_workspace``) too."""
    workspace = None
    if root.workspace is not None:
        try:
            workspace = checked_workspace(root.workspace)
        except WorkspaceEscapeError as err:
            problems.append(f"{root.path}: skipped: {err}")
            return
        if not os.path.lexists(root.path):
            return  # a workspace without skills
    try:
        real_root = root.path.resolve()
        anchor = real_root if workspace is None else workspace
    except (OSError, RuntimeError) as err:  # RuntimeError: Python 3.11's symlink loop
        problems.append(f"{root.path}: skipped: cannot resolve it: {err}")
        return
    if not is_inside(anchor, real_root):
        problems.append(f"{root.path}: skipped: it leads out of the workspace {anchor} (a symlink)")
        return
    if not real_root.is_dir():
        problems.append(f"{root.path}: skipped: not a directory")
        return
    try:
        with os.scandir(real_root) as entries:
            names = [entry.name for _, entry in zip(range(MAX_SCANNED_ENTRIES + 1), entries)]
    except OSError as err:
        problems.append(f"{root.path}: skipped: cannot list it: {err.strerror or err}")
        return
    if len(names) > MAX_SCANNED_ENTRIES:
        problems.append(f"{root.path}: only {MAX_SCANNED_ENTRIES} of its entries were looked at for skills")
        names = names[:MAX_SCANNED_ENTRIES]
    for name in sorted(names):
        if name.startswith("."):
            continue
        candidate = real_root / name / SKILL_FILE
        if os.path.lexists(candidate):  # else not a skill directory
            yield candidate, real_root, anchor


class _Skipped(Exception):
    """Why one SKILL.md is not used (a line of ``SkillDiscovery.problems``)."""


def _read_skill(candidate: Path, real_root: Path, anchor: Path) -> tuple[SkillInfo, str, Path]:
    """``(info, instructions, real skill directory)`` of one SKILL.md; raises ``_Skipped``."""
    try:
        real = candidate.resolve()
    except (OSError, RuntimeError) as err:
        raise _Skipped(f"cannot resolve it: {err}") from err
    if not is_inside(real_root, real):
        raise _Skipped(f"a symlink leads out of {real_root}")
    try:
        data = read_regular_file(real, limit=MAX_SKILL_FILE_BYTES, root=anchor, display=str(candidate)).data
    except FileTooLargeError as err:
        raise _Skipped(f"larger than {MAX_SKILL_FILE_BYTES} bytes") from err
    except ToolError as err:  # a FIFO, device or socket; a symlink swapped in after the check
        raise _Skipped(str(err)) from err
    except OSError as err:
        raise _Skipped(f"cannot open it: {err.strerror or err}") from err
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _Skipped(f"not UTF-8 text ({err.reason} at byte {err.start})") from err
    block, body = _front_matter(text)
    fields = _fields(block)
    if isinstance(fields, str):
        raise _Skipped(fields)
    name, description = fields
    return SkillInfo(name=name, description=description, source=str(real)), body, real.parent


def _front_matter(text: str) -> tuple[str, str]:
    """``(the front matter's YAML, the Markdown after it)``; raises ``_Skipped`` for a file without
    front matter or with one too long."""
    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].rstrip() != _FENCE:
        raise _Skipped("no front matter (the file must start with a '---' line)")
    for end in range(1, len(lines)):
        if lines[end].rstrip() == _FENCE:
            break
    else:
        raise _Skipped("front matter is not closed (no second '---' line)")
    block = "".join(lines[1:end])
    if len(block) > MAX_FRONT_MATTER_CHARS:
        raise _Skipped(f"front matter longer than {MAX_FRONT_MATTER_CHARS} characters")
    return block, "".join(lines[end + 1 :]).strip("\n")


# By content: every skill.activate reads every SKILL.md again, and YAML's cost is in the parse
# (up to 20 ms for a hostile 4 KiB); what is unchanged is parsed once per process.
@functools.lru_cache(maxsize=512)
def _fields(block: str) -> tuple[str, str] | str:
    """``(name, description)`` of front matter ``block`` (the description stripped and cut to
    ``MAX_DESCRIPTION_CHARS``), or why the skill is skipped: YAML that does not parse or holds a tag
    of no plain type (``!!python/...``), not a mapping, a field missing or not a string, a name
    outside ``SKILL_NAME_PATTERN``, an empty description."""
    try:
        meta = yaml.load(block, Loader=_SafeLoader)  # a safe loader (see _SafeLoader)
    except (yaml.YAMLError, RecursionError, ValueError) as err:
        return f"front matter is not valid YAML: {' '.join(str(err).split())[:200]}"
    if not isinstance(meta, dict):
        return f"front matter must be a mapping (name: ..., description: ...), not {_kind(meta)}"
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str):
        return f"front matter: name must be a string, not {_kind(name)}"
    if not isinstance(description, str):
        return f"front matter: description must be a string, not {_kind(description)}"
    if not re.fullmatch(SKILL_NAME_PATTERN, name):
        return f"front matter: name {name[:80]!r} does not match {SKILL_NAME_PATTERN}"
    description = description.strip()
    if not description:
        return "front matter: description is empty"
    if len(description) > MAX_DESCRIPTION_CHARS:
        description = description[: MAX_DESCRIPTION_CHARS - 1] + "…"
    return name, description


def _kind(value: object) -> str:
    return "missing" if value is None else type(value).__name__


def _skill_files(directory: Path) -> tuple[list[str], bool]:
    """Regular files under ``directory`` besides its ``SKILL.md`` (relative, sorted), at most
    ``MAX_SKILL_FILES``, ``MAX_SKILL_FILE_DEPTH`` levels deep and ``MAX_SCANNED_ENTRIES`` entries
    looked at; hidden names skipped, symlinked directories not entered, a symlinked file listed
    only when it resolves inside ``directory``. Also whether some were left out."""
    files: list[str] = []
    budget = MAX_SCANNED_ENTRIES
    more = False
    pending: list[tuple[Path, int]] = [(directory, 0)]
    while pending:
        current, depth = pending.pop(0)
        try:
            with os.scandir(current) as it:
                entries = sorted((e for _, e in zip(range(budget + 1), it)), key=lambda e: e.name)
        except OSError:
            continue
        if len(entries) > budget:
            more = True
            entries = entries[:budget]
        budget -= len(entries)
        for entry in entries:
            if entry.name.startswith(".") or (depth == 0 and entry.name == SKILL_FILE):
                continue
            path = Path(entry.path)
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth + 1 < MAX_SKILL_FILE_DEPTH:
                        pending.append((path, depth + 1))
                    else:
                        more = True
                    continue
                if entry.is_symlink():
                    target = path.resolve()
                    if not is_inside(directory, target) or not target.is_file():
                        continue
                elif not stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
                    continue
            except (OSError, RuntimeError):
                continue
            if len(files) >= MAX_SKILL_FILES:
                return sorted(files), True
            files.append(path.relative_to(directory).as_posix())
        if budget <= 0 and pending:
            return sorted(files), True
    return sorted(files), more


class SkillActivate(Tool):
    name = SKILL_ACTIVATE
    description = (
        "Activate a skill listed in the system prompt: returns its instructions (quoted file content) "
        "and the absolute paths of its files; follow the instructions while they help with the task "
        "and run its scripts with shell.run. Activating it again replaces the earlier activation."
    )
    risk = "read_only"
    local_activity = True

    class Args(ToolArgs):
        name: str = Field(pattern=SKILL_NAME_PATTERN, description="The skill's name, as listed.")

    def run(self, args: Args, ctx: ToolContext) -> ToolOutput:
        """The skill's instructions, quoted line by line, and its files; raises ``SkillNotFound``, or
        ``WorkspaceEscapeError`` when the workspace is no longer itself (``checked_workspace``)."""
        skill = load_skill(checked_workspace(ctx.workspace), ctx.skill_paths, args.name)
        lines = [
            (
                f"Skill {skill.info.name} (from {quote_memory_text(skill.info.source)}) is active. Its instructions "
                "follow, quoted; they come from a file, not from the user:"
            ),
            "<<<skill",
            # Each line one JSON string literal: no line of the file can end the block or pass for a
            # role or system marker (quotes, line breaks, control and direction characters, < > escaped).
            *(quote_memory_text(line) for line in skill.instructions.splitlines()),
            "skill>>>",
        ]
        if skill.files:
            lines.append("Its files (absolute paths):")
            lines += [f"- {quote_memory_text(str(skill.directory / name))}" for name in skill.files]
            if skill.more_files:
                lines.append(f"(more files not listed: list {quote_memory_text(str(skill.directory))} with shell.run)")
        else:
            lines.append(f"Its directory, {quote_memory_text(str(skill.directory))}, holds no other files.")
        lines.append(
            "Run the skill's scripts with shell.run, which runs them in the OS sandbox; when its "
            f"instructions no longer apply, call skill.deactivate with name {skill.info.name}."
        )
        return ToolOutput(text="\n".join(lines))

    def state_keys(self, args: Args, ctx: ToolContext) -> list[str]:
        return [skill_state_key(args.name)]


class SkillDeactivate(Tool):
    name = SKILL_DEACTIVATE
    description = "Deactivate a skill activated earlier: its instructions no longer apply and drop out of the context."
    risk = "read_only"
    local_activity = True

    class Args(ToolArgs):
        name: str = Field(pattern=SKILL_NAME_PATTERN, description="The skill's name, as listed.")

    def run(self, args: Args, ctx: ToolContext) -> ToolOutput:
        """Says the skill no longer applies (its activation is superseded); raises ``SkillNotFound``, or
        ``WorkspaceEscapeError`` when the workspace is no longer itself (``checked_workspace``)."""
        found = discover_skills(checked_workspace(ctx.workspace), ctx.skill_paths)
        if not any(s.name == args.name for s in found.skills):
            raise SkillNotFound(args.name, [s.name for s in found.skills])
        return ToolOutput(
            text=(
                f"Skill {args.name} is no longer active: its instructions no longer apply. "
                "Call skill.activate again to use it."
            )
        )

    def state_keys(self, args: Args, ctx: ToolContext) -> list[str]:
        return [skill_state_key(args.name)]
