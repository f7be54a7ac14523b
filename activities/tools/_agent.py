"""``Agent``: a named bundle of instructions, tools and settings that workers register and
services start sessions of by name (``SessionConfig.agent``). Only its ``AgentSpec`` crosses
history; its tools' code stays on the worker.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Any

from typing_extensions import is_typeddict

from pydantic import BaseModel, ValidationError

from agentrt.activities.tools._function import FunctionTool
from agentrt.activities.tools._registry import Tool
from agentrt.schemas import (
    AdvisorPolicy,
    AgentSpec,
    ApprovalPolicy,
    Budget,
    OUTPUT_TOOL,
    ConfigurationError,
    OutputSpec,
    SandboxPolicy,
    output_spec,
)

__all__ = ["Agent"]

AGENT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")


def _model(kind: type[BaseModel], value: Any, agent: str, field: str) -> Any:
    if value is None or isinstance(value, kind):
        return value
    try:
        return kind.model_validate(value)
    except ValidationError as err:
        raise ConfigurationError(f"agent {agent!r}: invalid {field}: {err}") from err


class Agent:
    """A named agent: ``Agent(name="support", instructions="...", tools=[lookup_order, refund])``.

    - ``name``: how services start it (``new_config(agent="support")``, ``POST /v1/sessions``
      ``{"agent": "support"}``, a task's or graph node's ``agent``); ``^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$``.
    - ``instructions``: the system prompt's agent part (before a session's own ``system_prompt``).
    - ``tools``: ``@tool`` functions, ``Tool`` objects, plain functions (made ``@tool`` with the
      default risk, ``effectful``) or names of tools the worker has (``"fs.read"``). The session
      offers exactly these (narrowed by its own ``tools`` when it has some).
    - ``output_type``: a pydantic model class (or a dataclass or ``TypedDict``), a JSON Schema dict
      or an ``OutputSpec`` for the agent's final answer;
      every final answer of its sessions must match it (``output``, an ``OutputSpec``; docs/structured-output.md).
    - ``profile`` (a model profile name), ``approval`` (``ApprovalPolicy`` or its dict),
      ``sandbox`` (narrows the session's), ``advisor`` (``AdvisorPolicy`` or its dict), ``budget``
      (``Budget`` or its dict; the session's when it has none): see ``apply_agent``.

    Raises ``ConfigurationError`` for a bad name, a tool that is none of the above, two tools of
    one name, a tool called ``final_result`` beside an ``output_type`` (the model's answer tool),
    or a setting that does not validate.
    """

    def __init__(
        self,
        name: str,
        instructions: str | None = None,
        tools: Sequence[Tool | Callable[..., Any] | str] = (),
        *,
        output_type: type[Any] | dict[str, Any] | OutputSpec | None = None,
        profile: str | None = None,
        approval: ApprovalPolicy | dict[str, Any] | None = None,
        sandbox: SandboxPolicy | None = None,
        advisor: AdvisorPolicy | dict[str, Any] | None = None,
        budget: Budget | dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(name, str) or not AGENT_NAME.fullmatch(name):
            raise ConfigurationError(f"agent name {name!r} must match {AGENT_NAME.pattern}")
        self.name = name
        self.instructions = instructions
        self.function_tools: list[Tool] = []
        self.tool_names: list[str] = []
        for item in tools:
            if isinstance(item, str):
                entry = item
            else:
                if not isinstance(item, Tool):
                    if not callable(item):
                        raise ConfigurationError(f"agent {name!r}: {item!r} is no tool (a @tool function, a Tool or a tool name)")
                    item = FunctionTool(item)
                self.function_tools.append(item)
                entry = item.name
            if entry in self.tool_names:
                raise ConfigurationError(f"agent {name!r}: two tools are called {entry!r}")
            self.tool_names.append(entry)
        if output_type is not None and not isinstance(output_type, (dict, OutputSpec)) and not (
            isinstance(output_type, type)
            and (issubclass(output_type, BaseModel) or output_type is str or dataclasses.is_dataclass(output_type) or is_typeddict(output_type))
        ):
            raise ConfigurationError(
                f"agent {name!r}: output_type must be a pydantic model class (or a dataclass or TypedDict), a JSON "
                f"Schema dict or an OutputSpec, not {output_type!r}: an answer is a JSON object, so wrap another type "
                "in a model with one field"
            )
        self.output_type = output_type
        self.output: OutputSpec | None = output_spec(output_type)  # InvalidOutputSchema for a bad schema
        if self.output is not None and OUTPUT_TOOL in self.tool_names:
            raise ConfigurationError(
                f"agent {name!r}: a tool is called {OUTPUT_TOOL!r}, the name of the tool the model gives its final "
                "answer with when there is an output_type; name it otherwise"
            )
        if sandbox is not None and sandbox not in ("read_only", "workspace_write", "danger_full_access"):
            raise ConfigurationError(f"agent {name!r}: sandbox must be read_only, workspace_write or danger_full_access")
        self.profile = profile
        self.sandbox: SandboxPolicy | None = sandbox
        self.approval: ApprovalPolicy | None = _model(ApprovalPolicy, approval, name, "approval")
        self.advisor: AdvisorPolicy | None = _model(AdvisorPolicy, advisor, name, "advisor")
        self.budget: Budget | None = _model(Budget, budget, name, "budget")

    def spec(self) -> AgentSpec:
        """What a worker registers and ``session.prepare`` returns for this agent."""
        return AgentSpec(
            name=self.name,
            instructions=self.instructions,
            tools=list(self.tool_names),
            profile=self.profile,
            approval=self.approval,
            sandbox=self.sandbox,
            advisor=self.advisor,
            budget=self.budget,
            output=self.output,
        )

    def __repr__(self) -> str:
        return f"<Agent {self.name} tools={self.tool_names}>"
