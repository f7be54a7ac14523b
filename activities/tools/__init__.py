"""Built-in tools and the registry that validates and runs model tool calls.

Pure, synchronous Python: the ``tool.execute`` activity wraps ``ToolRegistry.execute``
and passes heartbeat and cancellation hooks in through ``ToolContext``.
"""

from agentrt.activities.tools._agent import Agent
from agentrt.activities.tools._cgroup import CallCgroup, cgroup_problem
from agentrt.activities.tools._delegate import Delegate
from agentrt.activities.tools._egress import EgressProxy, egress_refusal, parse_egress_allow
from agentrt.activities.tools._files import RegularFile, read_regular_file, read_regular_file_async
from agentrt.activities.tools._fs import MAX_READ_BYTES, FsList, FsRead, FsSearch, FsWrite
from agentrt.activities.tools._memory import (
    MemoryRecall,
    MemoryWrite,
    memory_id_for,
    memory_line,
    quote_memory_text,
    rank_memories,
    recorded_memory_note,
)
from agentrt.activities.tools._function import FunctionTool, docstring_parts, tool
from agentrt.activities.tools._registry import (
    CrashToRetry,
    Tool,
    ToolArgs,
    ToolContext,
    ToolOutput,
    ToolRegistry,
    format_validation_error,
)
from agentrt.activities.tools._runtime import ToolLeftRunning, ToolRuntime
from agentrt.activities.tools._sandbox import (
    SandboxLimits,
    SandboxStatus,
    SandboxUnavailable,
    egress_environment,
    sandbox_status,
    sandboxed_argv,
)
from agentrt.activities.tools._secrets import (
    REDACTION_MARGIN,
    SecretValues,
    SecretVault,
    forget_secrets,
    redact_secrets,
    redacted_window,
    remember_secret,
)
from agentrt.activities.tools._shell import CommandRun, ShellRun, run_command, scrubbed_environment
from agentrt.activities.tools._skills import (
    MAX_SKILL_FILE_BYTES,
    MAX_SKILL_FILES,
    MAX_SKILLS,
    Skill,
    SkillActivate,
    SkillDeactivate,
    SkillDiscovery,
    discover_skills,
    load_skill,
    skill_state_key,
)
from agentrt.activities.tools._workspace import checked_workspace, make_directories, open_regular, resolve_in_workspace

__all__ = [
    "Agent",
    "CallCgroup",
    "CommandRun",
    "CrashToRetry",
    "Delegate",
    "EgressProxy",
    "FsList",
    "FsRead",
    "FsSearch",
    "FsWrite",
    "FunctionTool",
    "MAX_READ_BYTES",
    "MAX_SKILLS",
    "MAX_SKILL_FILES",
    "MAX_SKILL_FILE_BYTES",
    "MemoryRecall",
    "MemoryWrite",
    "REDACTION_MARGIN",
    "RegularFile",
    "SandboxLimits",
    "SandboxStatus",
    "SandboxUnavailable",
    "SecretValues",
    "SecretVault",
    "ShellRun",
    "Skill",
    "SkillActivate",
    "SkillDeactivate",
    "SkillDiscovery",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolLeftRunning",
    "ToolOutput",
    "ToolRegistry",
    "ToolRuntime",
    "cgroup_problem",
    "checked_workspace",
    "default_registry",
    "discover_skills",
    "docstring_parts",
    "egress_environment",
    "egress_refusal",
    "forget_secrets",
    "format_validation_error",
    "load_skill",
    "make_directories",
    "memory_id_for",
    "memory_line",
    "open_regular",
    "parse_egress_allow",
    "quote_memory_text",
    "rank_memories",
    "read_regular_file",
    "read_regular_file_async",
    "recorded_memory_note",
    "redact_secrets",
    "redacted_window",
    "remember_secret",
    "resolve_in_workspace",
    "run_command",
    "sandbox_status",
    "sandboxed_argv",
    "scrubbed_environment",
    "skill_state_key",
    "tool",
]


def default_registry() -> ToolRegistry:
    """A registry with the built-in tools: fs.list, fs.read, fs.search, fs.write, shell.run,
    memory.recall, memory.write, skill.activate, skill.deactivate, delegate (carried out by the
    session workflow; the registry holds its spec)."""
    return ToolRegistry([
        FsList(), FsRead(), FsSearch(), FsWrite(), ShellRun(), MemoryRecall(), MemoryWrite(), SkillActivate(), SkillDeactivate(),
        Delegate(),
    ])
