"""The policy engine: a pure decision on each tool call before it runs, so workflows stay deterministic.

Two policies meet here (the pair Codex CLI and the seeds use):

- ``SandboxPolicy`` (``read_only``, ``workspace_write``, ``danger_full_access``) and the
  session's ``network`` switch say what a call may touch at all. A call outside them is
  ``DeniedBySandbox``: structural, and no approval widens it.
- ``ApprovalPolicy`` says who decides what the sandbox allows: its ``mode`` (``never``: no
  person is asked, ``on_request``: the rule of the call's risk class decides, ``always``:
  every call is asked about) and its rules per risk class and per tool (``allow``, ``ask``,
  ``deny``).

A call's risk class is its tool's (``read_only``, ``idempotent``, ``effectful``) unless its
arguments say more: a shell command that deletes recursively, escalates privileges, writes
devices or secrets files, or writes outside the workspace is ``destructive``; one that
reaches the network is ``network`` (``classify_command``); a file write to ``.env`` is
``destructive``. Decisions: ``Allowed | NeedsApproval | DeniedByPolicy | DeniedBySandbox``.

A decision picks the commands a session workflow issues: a change to any rule here changes
what running sessions replay, so it comes as a new ``version`` chosen with ``workflow.patched``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from posixpath import basename, join, normpath
from shlex import shlex
from types import MappingProxyType
from typing import Any, Literal

from agentrt.schemas import ApprovalPolicy, SandboxPolicy, ToolSpec

__all__ = [
    "Allowed",
    "CallRisk",
    "Decision",
    "DeniedByPolicy",
    "DeniedBySandbox",
    "NeedsApproval",
    "PolicyEngine",
    "RiskClass",
    "classify_call",
    "classify_command",
]

RiskClass = Literal["read_only", "idempotent", "effectful", "destructive", "network"]
# Tools whose processes run inside the OS sandbox: the OS confines what their commands touch.
OS_SANDBOXED_TOOLS = frozenset({"shell.run"})
NO_INTERACTIVE_ROUTE = "no_interactive_route"


@dataclass(frozen=True)
class Allowed:
    reason: str
    kind: Literal["allowed"] = "allowed"


@dataclass(frozen=True)
class NeedsApproval:
    reason: str
    rule: str = ""  # what a grant "for this session" covers: the tool and its risk rule
    kind: Literal["needs_approval"] = "needs_approval"


@dataclass(frozen=True)
class DeniedByPolicy:
    reason: str
    kind: Literal["denied"] = "denied"


@dataclass(frozen=True)
class DeniedBySandbox:
    reason: str
    kind: Literal["denied_by_sandbox"] = "denied_by_sandbox"


Decision = Allowed | NeedsApproval | DeniedByPolicy | DeniedBySandbox


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


# ---------------------------------------------------------------- shell command classification

_NETWORK_PROGRAMS = frozenset(
    {
        "curl", "wget", "ssh", "scp", "sftp", "rsync", "nc", "ncat", "netcat", "telnet", "ftp", "ping",
        "dig", "nslookup", "host", "socat", "aria2c", "http", "https", "gh",
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
    "docker": frozenset({"pull", "push", "run", "login"}),
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
    "-i", "-o", "-e", "-a", "--arg-file", "-d", "--delimiter", "-I", "-L", "-P", "--max-procs", "-E",
})  # fmt: skip
# Shells and interpreters whose inline code (``sh -c CODE``, ``eval CODE``) is classified as a command.
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "fish", "busybox"})
# Interpreters running inline code no classifier reads: effectful at least, never less.
_INTERPRETERS = frozenset({"python", "python3", "perl", "ruby", "node", "php", "lua", "deno", "bun", "awk", "gawk"})
_REDIRECT = re.compile(r"^(\d*|&)>>?\|?(.*)$")
# Files whose writing changes what runs later or holds secrets: secrets (.env, keys), agentrt's own
# configuration, git's hooks and config, shell start-up files.
_SECRET_FILE = re.compile(
    r"(^|/)\.env(\.[^/]*)?$|(^|/)(id_rsa|id_ed25519|\.netrc|\.pgpass|credentials)$"
    r"|(^|/)agentrt\.toml$|(^|/)\.git(/|$)|(^|/)\.envrc$|(^|/)\.(bashrc|profile|bash_profile|zshrc)$"
)
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
                i += 2 if segment[i] in _WRAPPER_OPTIONS_WITH_VALUE else 1
            continue
        return name, segment[i + 1 :], privileged
    return "", [], privileged


def _outside(path: str, workspace: str) -> bool:
    if not path or path.startswith("&") or path == "/dev/null" or path.startswith(("/dev/std", "/dev/fd/")):
        return False
    if path.startswith("~"):
        return True
    if not path.startswith("/"):
        return ".." in path.split("/") and not normpath(join(workspace, path)).startswith(workspace.rstrip("/") + "/")
    if path.startswith("/tmp/") or path == "/tmp":
        return False  # the sandbox's own private /tmp
    root = workspace.rstrip("/")
    return not (path == root or path.startswith(root + "/"))


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
    words = _words(command)
    # `cd` out of the workspace first: relative paths written afterwards are outside too.
    away = any(
        basename(w) == "cd" and i + 1 < len(words) and (_outside(words[i + 1], workspace) or words[i + 1] in ("/", "-"))
        for i, w in enumerate(words)
    )
    for i, word in enumerate(words):
        target = None
        match = _REDIRECT.match(word)
        if match and (match.group(2) or (i + 1 < len(words))):
            target = match.group(2) or words[i + 1]
        if target is not None:
            if _outside(target, workspace) or (away and not target.startswith(("/", "&"))):
                destructive.append((f"writes {target} outside the workspace", True))
            elif _SECRET_FILE.search(target):
                destructive.append((f"writes {target}", False))
    segments = _segments([w for w in words if not _REDIRECT.match(w)])
    for number, segment in enumerate(segments):
        program, args, privileged = _program(segment)
        flags = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
        long_flags = {a for a in args if a.startswith("--")}
        if privileged:
            destructive.append((privileged[0], False))
        if any(c in program for c in "$`") or (not program and any(c in " ".join(segment) for c in "$`")):
            destructive.append(("a program named by an expansion", False))  # $(echo rm), ${X:-rm}, `...`
        elif program in _SHELLS or program == "eval":
            code = args[args.index("-c") + 1] if "-c" in args and args.index("-c") + 1 < len(args) else None
            if program == "eval":
                code = " ".join(args)
            if code is not None and depth < _MAX_NESTING:
                inner.append(_classify(code, workspace, depth + 1))
            elif code is not None or number > 0:
                destructive.append((f"{program} running code not classified", False))  # too deep, or `... | sh`
        elif program in _INTERPRETERS and any(a in ("-c", "-e", "-E", "--eval", "-m") for a in args):
            if args[args.index(next(a for a in args if a in ("-c", "-e", "-E", "--eval", "-m"))) + 1 :][:1] in (["pip"], ["ensurepip"]):
                network.append(f"{program} -m pip")
        if program in _PRIVILEGED_PROGRAMS:
            destructive.append((program, False))
        elif program in _DESTRUCTIVE_PROGRAMS or program.startswith("mkfs.") or program == "wipe":
            destructive.append((program, False))
        elif program == "rm" and ("r" in flags or "R" in flags or "--recursive" in long_flags):
            destructive.append(("rm -r", False))
        elif program in ("chmod", "chown", "chgrp") and ("R" in flags or "--recursive" in long_flags):
            destructive.append((f"{program} -R", False))
        elif program == "find" and ("-delete" in args or any(a in ("-exec", "-execdir", "-ok") for a in args)):
            destructive.append(("find -delete/-exec", False))
        elif program == "git" and _git_subcommand(args) == "push" and ("f" in flags or long_flags & {"--force", "--force-with-lease"}):
            destructive.append(("git push --force", False))
        elif program == "git" and _git_subcommand(args) == "clean":
            destructive.append(("git clean", False))
        elif program == "git" and _git_subcommand(args) in ("reset", "checkout", "restore") and long_flags & {"--hard", "--force"}:
            destructive.append((f"git {_git_subcommand(args)} --hard", False))
        elif program == "sed" and ("i" in flags or any(a.startswith("--in-place") for a in args)):
            for path in [a for a in args[1:] if not a.startswith("-")]:
                if _SECRET_FILE.search(path):
                    destructive.append((f"sed -i writes {path}", False))
        if program in ("tee", "cp", "mv", "install", "ln", "truncate", "touch") and args:
            paths = [a for a in args if not a.startswith("-")]
            written = paths if program in ("tee", "truncate", "touch") else paths[-1:]
            for path in written:
                if _outside(path, workspace):
                    destructive.append((f"{program} writes {path} outside the workspace", True))
                elif _SECRET_FILE.search(path):
                    destructive.append((f"{program} writes {path}", False))
        if program in _NETWORK_PROGRAMS:
            network.append(program)
        subcommands = _NETWORK_SUBCOMMANDS.get(program)
        if subcommands:
            sub = _git_subcommand(args) if program == "git" else next((a for a in args if not a.startswith("-")), "")
            if sub in subcommands:
                network.append(f"{program} {sub}")
        if "/dev/tcp/" in " ".join(segment) or "/dev/udp/" in " ".join(segment):
            network.append("/dev/tcp")
    if any("/dev/tcp/" in w or "/dev/udp/" in w for w in words):
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
    file write to a secrets file (``.env`` ...), the tool's own class otherwise."""
    arguments = arguments or {}
    if spec.name == "shell.run" and isinstance(arguments.get("command"), str):
        return classify_command(arguments["command"], workspace)
    if spec.name == "fs.write" and isinstance(arguments.get("path"), str) and _SECRET_FILE.search(arguments["path"]):
        return CallRisk("destructive", f"writes {arguments['path']}")
    return CallRisk(spec.risk)


# ---------------------------------------------------------------- the engine


class PolicyEngine:
    """Decides ``Allowed | NeedsApproval | DeniedByPolicy | DeniedBySandbox`` for a call.

    ``approval``: the session's ``ApprovalPolicy``; ``sandbox`` and ``network``: its
    ``SandboxPolicy`` and network switch; ``interactive``: False when no person can answer an
    approval (then a call that needs one is denied with ``no_interactive_route`` instead of
    waiting forever); ``workspace``: for paths in commands. ``version=1`` keeps the first
    engine (a rule per the tool's own risk class; no sandbox, no mode), which sessions
    recorded before ``policy-sandbox-v1`` replay with.

    Order: the sandbox (structural), then a ``deny`` rule, then the mode and rule. A per-tool
    rule in ``ApprovalPolicy.tools`` wins over the rule for the risk class; ``destructive`` and
    ``network`` calls use the stricter of the two.
    """

    def __init__(
        self,
        policy: ApprovalPolicy,
        sandbox: SandboxPolicy = "workspace_write",
        *,
        network: bool = False,
        interactive: bool = True,
        workspace: str = "/",
        version: int = 2,
    ) -> None:
        self._policy = policy
        self._sandbox = sandbox
        self._network = network
        self._interactive = interactive
        self._workspace = workspace
        self.version = version

    def decide(self, spec: ToolSpec, arguments: dict[str, Any] | None = None) -> Decision:
        if self.version < 2:
            return self._decide_v1(spec)
        risk = classify_call(spec, arguments, self._workspace)
        denied = self._sandbox_denies(spec, risk)
        if denied is not None:
            return denied
        rule, source = self._rule(spec, risk)
        what = f"{spec.name} ({risk.risk}{': ' + risk.rule if risk.rule else ''})"
        grant_rule = f"{spec.name}:{risk.risk}:{risk.rule}"
        if rule == "deny":
            return DeniedByPolicy(f"{source}: deny")
        mode = self._policy.mode
        if mode == "always":
            return self._ask(f"approval policy always: every call is asked about; {what}", grant_rule)
        if rule == "allow":
            return Allowed(f"{source}: allow")
        if mode == "never":
            if risk.risk in ("destructive", "network"):
                return DeniedByPolicy(f"approval policy never: {what} would need an approval, and no one is asked")
            return Allowed(f"approval policy never: {what} runs without asking, confined by the sandbox policy")
        return self._ask(f"{source}: ask; {what}", grant_rule)

    def _ask(self, reason: str, rule: str) -> Decision:
        if not self._interactive:
            return DeniedByPolicy(f"{NO_INTERACTIVE_ROUTE}: {reason}, but no one can answer an approval for this session")
        return NeedsApproval(reason, rule)

    def _sandbox_denies(self, spec: ToolSpec, risk: CallRisk) -> DeniedBySandbox | None:
        if self._sandbox == "danger_full_access":
            return None
        if risk.network and not self._network:
            return DeniedBySandbox(f"sandbox: network access is off for this session ({risk.network})")
        if risk.outside_workspace:
            return DeniedBySandbox(f"sandbox {self._sandbox}: {risk.rule}")
        if self._sandbox == "read_only":
            if risk.risk == "destructive" or (risk.risk == "effectful" and spec.name not in OS_SANDBOXED_TOOLS):
                return DeniedBySandbox(f"sandbox read_only: {spec.name} would change the workspace ({risk.risk})")
        return None

    def _rule(self, spec: ToolSpec, risk: CallRisk) -> tuple[str, str]:
        class_rule = getattr(self._policy, risk.risk)
        class_source = f"policy rule for {risk.risk} calls"
        tool_rule = self._policy.tools.get(spec.name)
        if tool_rule is None:
            return class_rule, class_source
        tool_source = f"policy rule for tool {spec.name}"
        if risk.risk in ("destructive", "network"):
            order = {"deny": 0, "ask": 1, "allow": 2}
            return (tool_rule, tool_source) if order[tool_rule] <= order[class_rule] else (class_rule, class_source)
        return tool_rule, tool_source

    def _decide_v1(self, spec: ToolSpec) -> Decision:
        rule = self._policy.tools.get(spec.name)
        source = f"policy rule for tool {spec.name}"
        if rule is None:
            rule = getattr(self._policy, spec.risk)
            source = f"policy rule for {spec.risk} tools"
        if rule == "allow":
            return Allowed(f"{source}: allow")
        if rule == "deny":
            return DeniedByPolicy(f"{source}: deny")
        return NeedsApproval(f"{source}: ask")
