"""Skills end to end: found when the session starts, activated by the model, its script run with
shell.run in the OS sandbox; a session with no skill is not offered the skill tools."""

from __future__ import annotations

from pathlib import Path

from agentrt.schemas import (
    SessionInitialized,
    SkillActivated,
    SkillDeactivated,
    SkillDiscovered,
    ToolInvocationCompleted,
)
from tests.conftest import Harness
from tests.e2e._support import ALLOW_ALL, session_config, write_script

SKILL_MD = """---
name: greeting
description: Greets in the house style. Use when asked to greet someone.
---
# Greeting

Run `sh {script}` with shell.run and repeat what it prints.
"""


def make_skill(workspace: Path) -> Path:
    skill = workspace / ".agentrt" / "skills" / "greeting"
    skill.mkdir(parents=True)
    script = skill / "greet.sh"
    script.write_text("echo 'hello from the greeting skill'\n")
    (skill / "SKILL.md").write_text(SKILL_MD.format(script=".agentrt/skills/greeting/greet.sh"))
    return script


async def test_a_skill_is_discovered_activated_and_its_script_run(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    make_skill(workspace)
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "skill.activate", "arguments": {"name": "greeting"}}]},
        {"tool_calls": [{"name": "shell.run", "arguments": {"command": "sh .agentrt/skills/greeting/greet.sh"}}]},
        {"tool_calls": [{"name": "skill.deactivate", "arguments": {"name": "greeting"}}]},
        {"text": "hello from the greeting skill"},
    ])
    sid = harness.new_session_id()
    client = harness.client
    started = await client.start(session_config(client, sid, workspace, script, approval=ALLOW_ALL), "greet me")
    outcome = await client.wait(sid, started.turn_id)
    assert outcome.status == "completed", outcome.error

    events = harness.store.events(sid, 0, 1000)
    [init] = [e for e in events if isinstance(e, SessionInitialized)]
    assert {"skill.activate", "skill.deactivate"} <= set(init.tools)
    [found] = [e for e in events if isinstance(e, SkillDiscovered)]
    assert (found.name, found.description) == ("greeting", "Greets in the house style. Use when asked to greet someone.")
    assert found.source.endswith(".agentrt/skills/greeting/SKILL.md")
    [activated] = [e for e in events if isinstance(e, SkillActivated)]
    assert (activated.name, activated.source) == ("greeting", found.source)
    assert [e.name for e in events if isinstance(e, SkillDeactivated)] == ["greeting"]
    ran = [e for e in events if isinstance(e, ToolInvocationCompleted) and e.tool == "shell.run"]
    assert "hello from the greeting skill" in ran[0].preview
    tool_texts = [m.text for _, m in harness.store.messages(sid) if m.role == "tool"]
    assert "Skill greeting" in tool_texts[0] and "greet.sh" in tool_texts[0]


async def test_a_session_without_skills_is_not_offered_the_skill_tools(harness: Harness, workspace: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": "nothing to do"}])
    sid = harness.new_session_id()
    client = harness.client
    started = await client.start(session_config(client, sid, workspace, script), "hi")
    assert (await client.wait(sid, started.turn_id)).status == "completed"
    events = harness.store.events(sid, 0, 1000)
    [init] = [e for e in events if isinstance(e, SessionInitialized)]
    assert not [t for t in init.tools if t.startswith("skill.")]
    assert not [e for e in events if isinstance(e, SkillDiscovered)]
