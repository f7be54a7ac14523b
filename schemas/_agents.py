"""Named agents as the workflow sees them: ``AgentSpec`` (what a worker registered under a name)
and ``apply_agent``, the one rule that turns a session's config and its agent into the config
the session runs with. The ``Agent`` class users write lives with the tools
(``agentrt.activities.tools``); only its serializable part crosses history.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from agentrt.schemas._base import Model
from agentrt.schemas._budget import Budget
from agentrt.schemas._config import SANDBOX_ORDER, AdvisorPolicy, ApprovalPolicy, SandboxPolicy, SessionConfig
from agentrt.schemas._output import OutputSpec

__all__ = ["AgentSpec", "agent_tools", "apply_agent"]


class AgentSpec(Model):
    """A named agent a worker registered (``Agent.spec()``): what ``session.prepare`` returns for
    ``SessionConfig.agent``. Every field but ``name`` and ``tools`` may be None: the session's own
    value then stands.

    - ``instructions``: put before the session's own ``system_prompt`` (extending agentrt's prompt).
    - ``tools``: the tool names the agent offers (its function tools and any built-in it names).
    - ``profile``, ``approval``, ``advisor``: replace the session's.
    - ``sandbox``: narrows the session's (never widens it); ``budget``: the session's when it has none.
    - ``output``: what every final answer must be (``OutputSpec``, from the agent's ``output_type``): the
      session's when it has none; a turn's own spec still wins (docs/structured-output.md).
    """

    name: str
    instructions: str | None = None
    tools: list[str] = Field(default_factory=list)
    profile: str | None = Field(default=None, exclude_if=lambda v: v is None)
    approval: ApprovalPolicy | None = Field(default=None, exclude_if=lambda v: v is None)
    sandbox: SandboxPolicy | None = Field(default=None, exclude_if=lambda v: v is None)
    advisor: AdvisorPolicy | None = Field(default=None, exclude_if=lambda v: v is None)
    budget: Budget | None = Field(default=None, exclude_if=lambda v: v is None)
    output: OutputSpec | None = Field(default=None, exclude_if=lambda v: v is None)


def agent_tools(agent: AgentSpec, allowed: list[str] | None) -> list[str]:
    """The tool names a session of ``agent`` offers: the agent's, those ``allowed`` lets through
    (the session's ``tools``; None allows every one)."""
    return [name for name in agent.tools if allowed is None or name in allowed]


def apply_agent(config: SessionConfig, agent: AgentSpec) -> SessionConfig:
    """The config a session started with ``agent`` runs with (a copy; ``config`` is unchanged).

    An agent narrows the grants its starter gave and never widens them: ``tools`` are the agent's
    that the session's ``tools`` allow (all of the agent's when the session's is None), ``sandbox``
    the narrower of the two. The agent's ``profile``, ``approval`` and ``advisor`` replace the
    session's when set; its ``budget`` applies when the session has none (a task's or graph's
    remaining budget stands), and so does its ``output``. ``instructions`` come first in the system
    prompt, then the session's own ``system_prompt``.
    """
    update: dict[str, Any] = {"tools": agent_tools(agent, config.tools)}
    if agent.instructions:
        update["system_prompt"] = "\n\n".join(p for p in (agent.instructions, config.system_prompt) if p)
    if agent.sandbox is not None and SANDBOX_ORDER[agent.sandbox] < SANDBOX_ORDER[config.sandbox]:
        update["sandbox"] = agent.sandbox
    for name in ("profile", "approval", "advisor"):
        value = getattr(agent, name)
        if value is not None:
            update[name] = value
    if config.budget is None and agent.budget is not None:
        update["budget"] = agent.budget
    if config.output is None and agent.output is not None:
        update["output"] = agent.output
    return config.model_copy(update=update)
