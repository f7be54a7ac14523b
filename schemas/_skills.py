"""Skills: directories holding a ``SKILL.md`` that a session may activate (``skill.activate``)."""

from __future__ import annotations

from pydantic import Field

from agentrt.schemas._base import Model

__all__ = [
    "SKILL_ACTIVATE",
    "SKILL_DEACTIVATE",
    "SKILL_NAME_PATTERN",
    "SkillInfo",
]

# A skill's name (``SKILL.md`` front matter): lower-case words joined by hyphens.
SKILL_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,63}$"
# The tools that activate and deactivate a skill.
SKILL_ACTIVATE = "skill.activate"
SKILL_DEACTIVATE = "skill.deactivate"


class SkillInfo(Model):
    """A skill found on disk: a directory holding ``SKILL.md`` whose front matter gives ``name``
    and ``description``; ``source`` is the ``SKILL.md`` path (as the worker sees it)."""

    name: str = Field(pattern=SKILL_NAME_PATTERN)
    description: str
    source: str
