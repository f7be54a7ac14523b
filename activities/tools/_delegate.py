"""The ``delegate`` tool's spec: what the model sees when it may hand part of its work to a child session.

A call never runs here: the session workflow decides it with its policy like any effectful
call and, when it is allowed, starts the child ``SessionWorkflow`` itself (a workflow, not an
activity, starts a child). The spec lives in the registry so that the tool is listed, offered,
validated and decided like every built-in tool; ``run`` only answers a call that reached a
worker anyway (the workflow never sends one).
"""

from __future__ import annotations

from pydantic import Field

from agentrt.activities.tools._registry import Tool, ToolArgs, ToolContext, ToolOutput
from agentrt.schemas import DELEGATE_TOOL, ToolError

__all__ = ["MAX_DELEGATE_PROMPT_CHARS", "MAX_DELEGATE_TITLE_CHARS", "MAX_DELEGATE_TOOLS", "Delegate"]

# Bounds on the model's arguments (untrusted input that becomes the child's configuration):
# characters of the prompt (as a task graph's node prompt), tool names, characters of the title.
MAX_DELEGATE_PROMPT_CHARS = 20_000
MAX_DELEGATE_TOOLS = 64
MAX_DELEGATE_TITLE_CHARS = 200


class Delegate(Tool):
    name = DELEGATE_TOOL
    description = (
        "Hand a self-contained piece of work to a new child session (an agent like you, in the same workspace, "
        "with your sandbox and at most your tools) and get its final answer. `prompt` is everything the child "
        "knows about the work: state the goal, the context and what to answer. `tools` narrows the child's tools "
        "to a subset of yours (default: all of yours); a child cannot delegate further. `wait` true (default): "
        "this call returns the child's answer. `wait` false: it returns at once with the child's session id, and "
        "the child's answer arrives later in this conversation as a message starting with "
        "[delegated session <id> ...]. The child's spend counts against your budget."
    )
    risk = "effectful"

    class Args(ToolArgs):
        prompt: str = Field(
            min_length=1, max_length=MAX_DELEGATE_PROMPT_CHARS, description="The child session's task, self-contained."
        )
        tools: list[str] | None = Field(
            default=None, max_length=MAX_DELEGATE_TOOLS,
            description="Tool names for the child, a subset of yours; leave out to give it all of yours.",
        )
        wait: bool = Field(
            default=True, description="true: wait for the child's answer; false: run it in the background."
        )
        title: str | None = Field(
            default=None, max_length=MAX_DELEGATE_TITLE_CHARS, description="A short title for the child session."
        )

    def run(self, args: Args, ctx: ToolContext) -> ToolOutput:
        """Refuse: a delegation is carried out by the session workflow, never by a tool activity."""
        raise ToolError(f"{DELEGATE_TOOL} is carried out by the session workflow, not by a tool worker")
