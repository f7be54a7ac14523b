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
    names a path outside the workspace to write."""

    risk: RiskClass
    rule: str = ""
    outside_workspace: bool = False


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
_WRAPPERS = frozenset({"env", "nohup", "setsid", "time", "nice", "ionice", "timeout", "stdbuf", "xargs", "exec", "command", "builtin"})
_REDIRECT = re.compile(r"^(\d*|&)>>?\|?(.*)$")
_SECRET_FILE = re.compile(r"(^|/)\.env(\.[^/]*)?$|(^|/)(id_rsa|id_ed25519|\.netrc|\.pgpass|credentials)$")


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


def _program(segment: list[str]) -> tuple[str, list[str]]:
    """The program a segment runs (wrappers such as ``env``, ``nohup``, ``timeout 5`` and
    variable assignments skipped) and its arguments."""
    i = 0
    while i < len(segment):
        word = segment[i]
        if "=" in word and not word.startswith(("-", "/", ".")) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", word):
            i += 1
            continue
        name = basename(word)
        if name in _WRAPPERS:
            i += 1
            while i < len(segment) and (segment[i].startswith("-") or re.fullmatch(r"[\d.]+[smhd]?", segment[i])):
                i += 1
            continue
        return name, segment[i + 1 :]
    return "", []


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
    destructive: list[tuple[str, bool]] = []
    network: list[str] = []
    words = _words(command)
    for i, word in enumerate(words):
        target = None
        match = _REDIRECT.match(word)
        if match and (match.group(2) or (i + 1 < len(words))):
            target = match.group(2) or words[i + 1]
        if target is not None:
            if _SECRET_FILE.search(target):
                destructive.append((f"writes {target}", False))
            elif _outside(target, workspace):
                destructive.append((f"writes {target} outside the workspace", True))
    for segment in _segments([w for w in words if not _REDIRECT.match(w)]):
        program, args = _program(segment)
        flags = "".join(a[1:] for a in args if a.startswith("-") and not a.startswith("--"))
        long_flags = {a for a in args if a.startswith("--")}
        if program in _PRIVILEGED_PROGRAMS:
            destructive.append((program, False))
        elif program in _DESTRUCTIVE_PROGRAMS or program.startswith("mkfs."):
            destructive.append((program, False))
        elif program == "rm" and ("r" in flags or "R" in flags or "--recursive" in long_flags):
            destructive.append(("rm -r", False))
        elif program in ("chmod", "chown", "chgrp") and ("R" in flags or "--recursive" in long_flags):
            destructive.append((f"{program} -R", False))
        elif program == "git" and args[:1] == ["push"] and ("f" in flags or long_flags & {"--force", "--force-with-lease"}):
            destructive.append(("git push --force", False))
        if program in ("tee", "cp", "mv", "install", "ln", "truncate", "touch") and args:
            paths = [a for a in args if not a.startswith("-")]
            written = paths if program in ("tee", "truncate", "touch") else paths[-1:]
            for path in written:
                if _SECRET_FILE.search(path):
                    destructive.append((f"{program} writes {path}", False))
                elif _outside(path, workspace):
                    destructive.append((f"{program} writes {path} outside the workspace", True))
        if program in _NETWORK_PROGRAMS:
            network.append(program)
        subcommands = _NETWORK_SUBCOMMANDS.get(program)
        if subcommands:
            sub = next((a for a in args if not a.startswith("-")), "")
            if sub in subcommands:
                network.append(f"{program} {sub}")
    if destructive:
        rule, outside = destructive[0]
        return CallRisk("destructive", rule, outside_workspace=any(o for _, o in destructive))
    if network:
        return CallRisk("network", f"network: {network[0]}")
    return CallRisk("effectful")


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
            return Allowed(f"approval policy never: {what} runs inside the sandbox without asking")
        return self._ask(f"{source}: ask; {what}", grant_rule)

    def _ask(self, reason: str, rule: str) -> Decision:
        if not self._interactive:
            return DeniedByPolicy(f"{NO_INTERACTIVE_ROUTE}: {reason}, but no one can answer an approval for this session")
        return NeedsApproval(reason, rule)

    def _sandbox_denies(self, spec: ToolSpec, risk: CallRisk) -> DeniedBySandbox | None:
        if self._sandbox == "danger_full_access":
            return None
        if risk.risk == "network" and not self._network:
            return DeniedBySandbox(f"sandbox: network access is off for this session ({risk.rule})")
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
