"""agentrt.toml and environment overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemas import ConfigurationError, UnknownProfileError
from worker import AgentrtConfig


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agentrt.toml"
    path.write_text(text)
    return path


def test_profiles_and_sections_are_read_and_the_environment_wins(tmp_path: Path) -> None:
    path = write(tmp_path, """
default_profile = "local"
[profiles.local]
provider = "openai"
model = "qwen"
base_url = "http://127.0.0.1:11434/v1"
context_window = 32000
[temporal]
address = "temporal:7233"
task_queue = "agents"
[store]
url = "sqlite:///x.db"
""")
    config = AgentrtConfig.load(path, env={"AGENTRT_TASK_QUEUE": "override"})
    assert config.default_profile == "local"
    assert config.profile("local").context_window == 32000
    assert config.temporal_address == "temporal:7233"
    assert config.task_queue == "override"
    assert config.database_url == "sqlite:///x.db"
    assert config.profile("scripted").provider == "scripted"


def test_a_misspelt_top_level_setting_is_an_error_not_silently_ignored(tmp_path: Path) -> None:
    path = write(tmp_path, 'default_profle = "x"\n[temporal]\nadress = "h:1"\n')
    with pytest.raises(ConfigurationError, match="unknown setting\\(s\\) default_profle, temporal.adress"):
        AgentrtConfig.load(path, env={})


def test_a_bad_profile_field_names_the_file_and_profile(tmp_path: Path) -> None:
    path = write(tmp_path, '[profiles.bad]\nprovider = "openai"\ncontext_windw = 5\n')
    with pytest.raises(ConfigurationError, match="profile 'bad' is invalid"):
        AgentrtConfig.load(path, env={})


def test_a_named_config_file_that_does_not_exist_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        AgentrtConfig.load(env={"AGENTRT_CONFIG": str(tmp_path / "nope.toml")})


def test_an_unknown_profile_lists_the_known_ones() -> None:
    with pytest.raises(UnknownProfileError, match="configured profiles: scripted"):
        AgentrtConfig().profile("gpt-9")
