"""What a tool call risks, read from its tool and its arguments: a risk class (``read_only``,
``idempotent``, ``effectful``, ``destructive``, ``network``) and the rule that gave it.

``classify_call`` takes the tool's own class unless the arguments say more; ``classify_command``
reads a shell command word by word (wrappers, nested shells, substitutions, redirections): one
that deletes recursively, escalates privileges, writes devices or secrets files, or writes
outside the workspace is ``destructive``, one that reaches the network is ``network``. Pure and
deterministic: the policy engine (``policy``) calls it inside the session workflow, so a change
to a rule here changes what running sessions replay and comes behind ``workflow.patched``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from posixpath import basename, join, normpath
from shlex import quote as shlex_quote
from shlex import shlex
from types import MappingProxyType
from typing import Any, Literal

from agentrt.schemas import PROTECTED_FILE_PATTERN, ToolSpec

__all__ = [
    "FILE_WRITE_TOOLS",
    "MAX_CLASSIFIED_COMMAND_CHARS",
    "CallRisk",
    "RiskClass",
    "classify_call",
    "classify_command",
    "file_write_outside",
    "is_outside",
]

RiskClass = Literal["read_only", "idempotent", "effectful", "destructive", "network"]


@dataclass(frozen=True)
class CallRisk:
    """One call's risk class and the rule that gave it (``"rm -r"``, ``"network: curl"``,
    ``"writes .env"``; the tool's own class gives ``""``); ``outside_workspace`` when the call
    names a path outside the workspace to write; ``network`` when it also reaches the network
    (a destructive ``curl … | sh``: the sandbox denies it without network all the same)."""

    risk: RiskClass
    rule: str = ""
    outside_workspace: bool = False
    network: str = ""  # also reaches the network (the rule that says so), whatever the class


_NETWORK_PROGRAMS = frozenset(
    {
        "curl", "wget", "ssh", "scp", "sftp", "rsync", "nc", "ncat", "netcat", "telnet", "ftp", "ping",
        "dig", "nslookup", "host", "socat", "aria2c", "http", "https", "gh", "npx", "kubectl", "psql", "mysql",
        "redis-cli", "mongosh", "nmap",
    }
)  # fmt: skip
_NETWORK_SUBCOMMANDS = MappingProxyType({
    "git": frozenset({"clone", "fetch", "pull", "push", "ls-remote", "submodule"}),
    "pip": frozenset({"install", "download"}),
    "pip3": frozenset({"install", "download"}),
    "uv": frozenset({"pip", "add", "sync", "run", "tool"}),
    "npm": frozenset({"install", "i", "ci", "publish", "update", "add"}),
    "pnpm": frozenset({"install", "i", "add", "update", "publish"}),
    "yarn": frozenset({"install", "add", "upgrade", "publish"}),
    "apt": frozenset({"install", "update", "upgrade"}),
    "apt-get": frozenset({"install", "update", "upgrade"}),
    "cargo": frozenset({"install", "fetch", "update", "publish"}),
    "go": frozenset({"get", "install", "mod"}),
    "docker": frozenset({"pull", "push", "run", "login", "compose", "build"}),
    "pipx": frozenset({"install", "run", "upgrade"}),
    "gem": frozenset({"install", "update"}),
    "poetry": frozenset({"install", "add", "update", "lock"}),
    "bun": frozenset({"install", "add", "x"}),
})
_PRIVILEGED_PROGRAMS = frozenset({"sudo", "su", "doas", "pkexec", "chroot", "nsenter", "unshare", "mount", "umount"})
_DESTRUCTIVE_PROGRAMS = frozenset(
    {"dd", "mkfs", "shred", "wipefs", "fdisk", "sfdisk", "parted", "shutdown", "reboot", "halt", "poweroff", "kill", "killall", "pkill"}
)
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "(", ")", "{", "}", "!", "|&"})
_WRAPPERS = frozenset({
    "env", "nohup", "setsid", "time", "nice", "ionice", "timeout", "stdbuf", "xargs", "exec", "command", "builtin",
    "sudo", "doas", "busybox", "chrt", "taskset", "flock", "unbuffer", "watch", "strace", "ltrace",
})  # fmt: skip
# Wrapper options that take the next word as their value (so that word is not the program).
_WRAPPER_OPTIONS_WITH_VALUE = frozenset({
    "-u", "--unset", "-C", "--chdir", "-s", "--signal", "-k", "--kill-after", "-n", "--adjustment", "-c", "--class",
    "-i", "-o", "-e", "-a", "--arg-file", "-d", "--delimiter", "-I", "-L", "-P", "--max-procs", "-E", "-f",
    "--format", "-S", "--split-string", "-w", "--timeout",
})  # fmt: skip
# Wrappers whose first operand is not the program: taskset MASK CMD, flock FILE CMD, chrt PRIO CMD.
_WRAPPER_POSITIONALS = MappingProxyType({"taskset": 1, "flock": 1, "chrt": 1})
# Shells and interpreters whose inline code (``sh -c CODE``, ``eval CODE``) is classified as a command.
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "fish", "busybox"})
_REDIRECT = re.compile(r"^(\d*|&)>>?\|?(.*)$")
_SECRET_FILE = re.compile(PROTECTED_FILE_PATTERN)
# File tools that write, and the argument naming the path they write. They write only inside the
# workspace whatever the sandbox policy (activities/tools/_workspace.resolve_in_workspace).
FILE_WRITE_TOOLS = MappingProxyType({"fs.write": "path"})
# Targets a write to is harmless whatever the workspace: the null device, the terminal, std streams.
_SAFE_TARGETS = frozenset({"/dev/null", "/dev/tty", "/dev/stdout", "/dev/stderr"})
# $(...), `...` and <(...) / >(...) whose text holds no further parentheses or backticks.
_SUBSTITUTION = re.compile(r"\$\(([^()`]*)\)|`([^`]*)`|[<>]\(([^()`]*)\)")
_INTERPRETER = re.compile(r"python\d?(\.\d+)?|pypy\d?")
_PIP = re.compile(r"^pip\d?(\.\d+)?$")
# git configuration keys whose value runs later, outside any sandbox (hooks, fsmonitor, aliases ...).
_GIT_CODE_CONFIG = re.compile(r"^(core\.(hookspath|fsmonitor|sshcommand|pager|editor|askpass)|alias\.|include|filter\.|diff\..*\.textconv)")
# Commands longer than this (characters) are not split into words: they are asked about
# (``destructive``, rule ``long command``) instead. Splitting costs time quadratic in runs of
# operator characters, and a workflow task must stay short.
MAX_CLASSIFIED_COMMAND_CHARS = 16 * 1024
# Nested shells (``sh -c "sh -c ..."``) classified at most this deep.
_MAX_NESTING = 4


def _words(command: str) -> list[str]:
    """Shell words of ``command`` with operators split off; a command shlex cannot split
    (an open quote) is split on whitespace."""
    lexer = shlex(command, posix=True, punctuation_chars=";&|()<>!{}")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return command.split()


def _segments(words: list[str]) -> list[list[str]]:
    segments: list[list[str]] = [[]]
    for word in words:
        if word in _SEPARATORS:
            segments.append([])
        else:
            segments[-1].append(word)
    return [s for s in segments if s]


def _program(segment: list[str]) -> tuple[str, list[str], list[str]]:
    """The program a segment runs (wrappers such as ``env``, ``nohup``, ``timeout -s KILL 5``
    and variable assignments skipped), its arguments, and the privileged wrappers passed
    (``sudo``, ``doas``)."""
    i = 0
    privileged: list[str] = []
    while i < len(segment):
        word = segment[i]
        if "=" in word and not word.startswith(("-", "/", ".")) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", word):
            i += 1
            continue
        name = basename(word)
        if name in _WRAPPERS and not (name == "busybox" and i + 1 < len(segment) and basename(segment[i + 1]) in _SHELLS):
            if name in _PRIVILEGED_PROGRAMS:
                privileged.append(name)
            i += 1
            while i < len(segment) and (segment[i].startswith("-") or re.fullmatch(r"[\d.]+[smhd]?", segment[i])):
                if name == "env" and segment[i] in ("-S", "--split-string") and i + 1 < len(segment):
                    return "sh", ["-c", segment[i + 1]], privileged  # env -S 'CMD ARGS' runs a command line
                i += 2 if segment[i] in _WRAPPER_OPTIONS_WITH_VALUE else 1
            i += _WRAPPER_POSITIONALS.get(name, 0)  # taskset MASK, flock FILE, chrt PRIORITY
            continue
        return name, segment[i + 1 :], privileged
    return "", [], privileged


def is_outside(path: str, workspace: str) -> bool:
    if not path or path.startswith("&") or path in _SAFE_TARGETS or path.startswith(("/dev/std", "/dev/fd/")):
        return False
    if path.startswith("~"):
        return True
    if not path.startswith("/"):
        return ".." in path.split("/") and not normpath(join(workspace, path)).startswith(workspace.rstrip("/") + "/")
    if path.startswith("/tmp/") or path == "/tmp":
        return False  # the sandbox's own private /tmp
    root = workspace.rstrip("/")
    return not (path == root or path.startswith(root + "/"))


def file_write_outside(spec: ToolSpec, arguments: dict[str, Any] | None, workspace: str) -> str | None:
    """The path a file tool's write names (``FILE_WRITE_TOOLS``) when it lies outside ``workspace``
    as written (``..`` resolved, no symlink followed: the tool itself checks the real path), else
    None. Relative paths are taken from the workspace, as the file tools take them; ``~`` is
    a name like any other there, and ``/tmp`` is the worker's, not a sandbox's."""
    key = FILE_WRITE_TOOLS.get(spec.name)
    path = (arguments or {}).get(key) if key is not None else None
    if not isinstance(path, str) or not path:
        return None
    root = normpath(workspace)
    resolved = normpath(join(root, path))
    inside = root == "/" or resolved == root or resolved.startswith(root.rstrip("/") + "/")
    return None if inside else path


def classify_command(command: str, workspace: str = "/") -> CallRisk:
    """The risk class of a ``shell.run`` command: ``destructive``, ``network`` or ``effectful``.

    Destructive: privilege escalation (``sudo``, ``su`` ...), recursive forced deletion
    (``rm -rf``, ``rm -r``), disk and process killers (``dd``, ``mkfs``, ``shred``, ``kill``
    ...), recursive ``chmod``/``chown``, a write (redirect, ``tee``, ``cp``/``mv`` target)
    to a secrets file such as ``.env`` or to a path outside ``workspace``. Network: a program
    that talks to the network (``curl``, ``wget``, ``ssh``, ``nc`` ...) or a subcommand that
    does (``git clone/fetch/pull/push``, ``pip install``, ``npm install`` ...). Destructive wins
    over network. A best effort on the command's text: the OS sandbox is what confines a
    command; this only decides who is asked first.
    """
    return _classify(command, workspace, 0)


def _classify(command: str, workspace: str, depth: int) -> CallRisk:
    if len(command) > MAX_CLASSIFIED_COMMAND_CHARS:
        return CallRisk("destructive", f"long command ({len(command):,} characters, not classified)")
    destructive: list[tuple[str, bool]] = []
    network: list[str] = []
    inner: list[CallRisk] = []
    # Commands inside $(...), `...` and <(...) run too: classified as commands of their own.
    for groups in _SUBSTITUTION.findall(command):
        code = next((g for g in groups if g.strip()), "")
        if code and depth < _MAX_NESTING:
            inner.append(_classify(code, workspace, depth + 1))
    words = _words(command)
    # `cd` out of the workspace (or into .git) first: relative paths written afterwards go there too.
    cd_targets = [
        next((t for t in words[i + 1 :] if not t.startswith("-") or t == "-"), "")
        for i, w in enumerate(words[:-1]) if basename(w) == "cd"
    ]
    away = any(is_outside(t, workspace) or t in ("/", "-") or t.startswith("..") for t in cd_targets)
    protected = any(_SECRET_FILE.search(t.rstrip("/")) for t in cd_targets)
    for i, word in enumerate(words):
        match = _REDIRECT.match(word)
        if match and (match.group(2) or (i + 1 < len(words))):
            _check_written(match.group(2) or words[i + 1], "writes", workspace, away, protected, destructive)
    segments = _segments([w for w in words if not _REDIRECT.match(w)])
    for number, segment in enumerate(segments):
        program, args, privileged = _program(segment)
        flags = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
        long_flags = {a for a in args if a.startswith("--")}
        sub = _git_subcommand(args) if program == "git" else ""
        if privileged:
            destructive.append((privileged[0], False))
        if any(c in program for c in "$`") or (not program and any(c in " ".join(segment) for c in "$`")):
            destructive.append(("a program named by an expansion", False))  # $(echo rm), ${X:-rm}, `...`
        elif program in _SHELLS or program in ("eval", "script", "parallel") or (program == "env" and "-S" in args):
            code = _inline_code(program, args)
            if code is not None and depth < _MAX_NESTING:
                inner.append(_classify(code, workspace, depth + 1))
            elif code is not None or number > 0 or any(a.startswith("<") for a in args):
                destructive.append((f"{program} running code not classified", False))  # too deep, `| sh`, `sh <<<`
        elif program in (".", "source") and any(a.startswith("<") or a == "/dev/stdin" for a in args):
            destructive.append((f"{program} running code not classified", False))
        elif _INTERPRETER.fullmatch(program) and "-m" in args and args[args.index("-m") + 1 :][:1] in (["pip"], ["ensurepip"]):
            network.append(f"{program} -m pip")
        if program in _PRIVILEGED_PROGRAMS:
            destructive.append((program, False))
        elif program in _DESTRUCTIVE_PROGRAMS or program.startswith("mkfs.") or program == "wipe":
            if not (program == "kill" and all(a.startswith("%") or a.startswith("-") for a in args)):
                destructive.append((program, False))
        elif program == "rm" and ("r" in flags or "R" in flags or _long(long_flags, "--recursive")):
            destructive.append(("rm -r", False))
        elif program == "rm" and any("$" in a or "`" in a for a in args):
            destructive.append(("rm of expanded arguments", False))
        elif program in ("chmod", "chown", "chgrp") and ("R" in flags or _long(long_flags, "--recursive")):
            destructive.append((f"{program} -R", False))
        elif program == "find" and ("-delete" in args or any(a in ("-exec", "-execdir", "-ok", "-okdir") for a in args)):
            risk = _find_action(args, workspace, depth)
            if risk is not None:
                destructive.append((risk, False))
        elif program == "git" and sub == "push" and ("f" in flags or _long(long_flags, "--force", "--force-with-lease")):
            destructive.append(("git push --force", False))
        elif program == "git" and (
            sub == "clean"
            or (sub in ("reset", "checkout", "restore") and (_long(long_flags, "--hard", "--force") or "f" in flags or "--" in args))
            or (sub == "restore")
            or (sub == "stash" and args[args.index("stash") + 1 :][:1] in (["clear"], ["drop"]))
            or (sub == "branch" and "D" in flags)
            or (sub == "rm" and ("r" in flags and "f" in flags))
        ):
            destructive.append((f"git {sub} (discards work)", False))
        elif program == "git" and sub == "config" and any(_GIT_CODE_CONFIG.match(a.lower()) for a in args):
            destructive.append(("git config that runs code later", False))
        elif program == "sed" and ("i" in flags or any(a.startswith("--in-place") for a in args)):
            for path in [a for a in args[1:] if not a.startswith("-")]:
                _check_written(path, "sed -i writes", workspace, away, protected, destructive)
        if program in ("tee", "cp", "mv", "install", "ln", "truncate", "touch", "rsync") and args:
            for path in _written_paths(program, args):
                if program == "mv" and (path == "/tmp" or path.startswith("/tmp/")):
                    destructive.append((f"mv to {path} (the sandbox's /tmp is gone when the command ends)", False))
                _check_written(path, f"{program} writes", workspace, away, protected, destructive)
        if program in _NETWORK_PROGRAMS or (program == "openssl" and "s_client" in args):
            network.append(program)
        subcommands = _NETWORK_SUBCOMMANDS.get(_PIP.sub("pip", program))
        if subcommands:
            first = sub if program == "git" else next((a for a in args if not a.startswith("-")), "")
            if first in subcommands or "*" in subcommands:
                network.append(f"{program} {first}".strip())
        if "/dev/tcp/" in " ".join(segment) or "/dev/udp/" in " ".join(segment):
            network.append("/dev/tcp")
    for risk in inner:
        if risk.risk == "destructive":
            destructive.append((risk.rule, risk.outside_workspace))
        elif risk.risk == "network":
            network.append(risk.rule.removeprefix("network: "))
        if risk.network:
            network.append(risk.network.removeprefix("network: "))
    uses_network = f"network: {network[0]}" if network else ""
    if destructive:
        rule, outside = destructive[0]
        return CallRisk("destructive", rule, outside_workspace=any(o for _, o in destructive), network=uses_network)
    if network:
        return CallRisk("network", uses_network, network=uses_network)
    return CallRisk("effectful")


def _check_written(
    path: str, verb: str, workspace: str, away: bool, protected: bool, found: list[tuple[str, bool]]
) -> None:
    """Add what writing ``path`` means: outside the workspace, a protected file, or a pattern."""
    if path in _SAFE_TARGETS:
        return  # not outside (``is_outside``), and no protected name or pattern either
    if is_outside(path, workspace) or (away and not path.startswith(("/", "&"))):
        found.append((f"{verb} {path} outside the workspace", True))
    elif _SECRET_FILE.search(path) or (protected and not path.startswith(("/", "&"))):
        found.append((f"{verb} {path}", False))
    elif any(c in path for c in "*?["):
        found.append((f"{verb} {path} (a pattern: which files is not known)", False))


def _written_paths(program: str, args: list[str]) -> list[str]:
    """The paths ``program ARGS`` writes: every operand of tee, truncate and touch; the target
    (``-t DIR`` or the last operand) of cp, mv, install, ln and rsync."""
    for i, arg in enumerate(args):
        if arg in ("-t", "--target-directory") and i + 1 < len(args):
            return [args[i + 1]]
        if arg.startswith("--target-directory="):
            return [arg.split("=", 1)[1]]
    operands = [a for a in args if not a.startswith("-")]
    return operands if program in ("tee", "truncate", "touch") else operands[-1:]


def _inline_code(program: str, args: list[str]) -> str | None:
    """The code a shell runs from its arguments (``-c CODE``, also in a cluster such as
    ``-lc``), ``eval``'s words, ``env -S``'s string, ``script -c``; None when there is none."""
    if program == "eval":
        return " ".join(args)
    option = "-S" if program == "env" else "-c"
    for i, arg in enumerate(args):
        if arg == option or (option == "-c" and arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]):
            return args[i + 1] if i + 1 < len(args) else None
    if program == "parallel":
        return " ".join(a for a in args if a != ":::") or None
    return None


def _find_action(args: list[str], workspace: str, depth: int) -> str | None:
    """Why ``find ARGS`` is destructive (``-delete``, or an ``-exec`` whose command is), or None."""
    if "-delete" in args:
        return "find -delete"
    for i, arg in enumerate(args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            command = []
            for word in args[i + 1 :]:
                if word in (";", "\\;", "+"):
                    break
                command.append(word)
            if command and basename(command[0]) in ("rm", "unlink", "shred", "truncate", "mv"):
                return f"find {arg} {basename(command[0])}"  # one file at a time, but every file found
            risk = _classify(" ".join(shlex_quote(w) for w in command), workspace, depth + 1) if depth < _MAX_NESTING else None
            if risk is None or risk.risk == "destructive":
                return f"find {arg} {risk.rule if risk else 'not classified'}"
    return None


def _long(flags: set[str], *names: str) -> bool:
    """A long option among ``flags`` that is ``names``' own or an unambiguous start of it
    (GNU tools and git accept ``--recu`` for ``--recursive``)."""
    return any(flag.split("=", 1)[0] == name or (len(flag) >= 5 and name.startswith(flag)) for flag in flags for name in names)


def _git_subcommand(args: list[str]) -> str:
    """The subcommand of ``git ARGS``, past global options (``-C DIR``, ``-c KEY=VALUE``, ``--git-dir=...``)."""
    i = 0
    while i < len(args):
        if args[i] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace"):
            i += 2
        elif args[i].startswith("-"):
            i += 1
        else:
            return args[i]
    return ""


def classify_call(spec: ToolSpec, arguments: dict[str, Any] | None, workspace: str = "/") -> CallRisk:
    """The risk class of one call: ``classify_command`` for ``shell.run``, ``destructive`` for a
    file write to a secrets file (``.env`` ...) and for a tool whose spec says ``destructive``
    (an MCP tool's ``destructiveHint``), the tool's own class otherwise."""
    arguments = arguments or {}
    if spec.name == "shell.run" and isinstance(arguments.get("command"), str):
        return classify_command(arguments["command"], workspace)
    if spec.name == "fs.write" and isinstance(arguments.get("path"), str) and _SECRET_FILE.search(arguments["path"]):
        return CallRisk("destructive", f"writes {arguments['path']}")
    if spec.destructive and spec.risk != "read_only":
        return CallRisk("destructive", spec.risk_reason or "destructive tool")
    return CallRisk(spec.risk)
