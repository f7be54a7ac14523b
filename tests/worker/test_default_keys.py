"""The machine's own codec keys: `$AGENTRT_HOME/codec-keys.toml` made once (mode 600, the keys file
format), and picked up by every configuration of that home when no keys are configured, unless
encryption is turned off; configured keys always win."""

from __future__ import annotations

import base64
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agentrt.schemas import ConfigurationError
from agentrt.worker import AgentrtConfig, ensure_home_keys, generate_codec_key, home_keys_file
from agentrt.worker._codec import load_keys_file


def home_env(home: Path, **extra: str) -> dict[str, str]:
    return {"AGENTRT_HOME": str(home), **extra}


def test_the_keys_file_is_made_once_with_mode_600_in_the_keys_file_format(tmp_path: Path) -> None:
    env = home_env(tmp_path / "home")

    codec, made = ensure_home_keys(env)
    again, made_again = ensure_home_keys(env)

    path = tmp_path / "home" / "codec-keys.toml"
    assert (made, made_again) == (True, False)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    keys, current = load_keys_file(path)
    assert list(keys) == [current] and codec.keys == again.keys == keys and codec.current_key == current
    assert codec.codec() is not None and codec.keys_file == str(path) == str(home_keys_file(env))


def test_processes_making_the_keys_at_once_end_with_one_file_and_the_same_keys(tmp_path: Path) -> None:
    env = home_env(tmp_path / "home")

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: ensure_home_keys(env), range(8)))

    assert sum(made for _, made in results) == 1
    assert len({tuple(codec.keys.items()) for codec, _ in results}) == 1
    assert [p.name for p in (tmp_path / "home").iterdir()] == ["codec-keys.toml"]


def test_every_configuration_of_the_home_picks_the_keys_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = home_env(tmp_path / "home")
    assert not AgentrtConfig.load(env=env).codec.enabled  # no file yet: in clear

    made, _ = ensure_home_keys(env)
    config = AgentrtConfig.load(env=env)

    assert config.codec.enabled and config.codec.keys == made.keys and config.encryption
    assert config.codec.codec() is not None


@pytest.mark.parametrize("off", [{"AGENTRT_ENCRYPTION": "off"}, {"AGENTRT_ENCRYPTION": "0"}, {"toml": "[codec]\nencryption = false\n"}])
def test_encryption_turned_off_leaves_the_keys_file_unused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, off: dict[str, str]) -> None:
    monkeypatch.chdir(tmp_path)
    env = home_env(tmp_path / "home")
    ensure_home_keys(env)
    if "toml" in off:
        (tmp_path / "agentrt.toml").write_text(off.pop("toml"))

    config = AgentrtConfig.load(env={**env, **off})

    assert not config.codec.enabled and not config.encryption


def test_configured_keys_win_over_the_home_file_and_over_encryption_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = home_env(tmp_path / "home", AGENTRT_CODEC_KEYS=f"mine:{base64.b64encode(generate_codec_key()).decode()}")
    ensure_home_keys(env)

    assert AgentrtConfig.load(env=env).codec.current_key == "mine"
    assert AgentrtConfig.load(env={**env, "AGENTRT_ENCRYPTION": "off"}).codec.current_key == "mine"


def test_a_world_readable_home_keys_file_is_a_configuration_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = home_env(tmp_path / "home")
    ensure_home_keys(env)
    (tmp_path / "home" / "codec-keys.toml").chmod(0o644)

    with pytest.raises(ConfigurationError, match="readable or writable by every user"):
        AgentrtConfig.load(env=env)


@pytest.mark.parametrize("value", ["maybe", "2"])
def test_a_bad_encryption_setting_is_a_configuration_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="AGENTRT_ENCRYPTION must be on or off"):
        AgentrtConfig.load(env=home_env(tmp_path, AGENTRT_ENCRYPTION=value))
    (tmp_path / "agentrt.toml").write_text('[codec]\nencryption = "no"\n')
    with pytest.raises(ConfigurationError, match=r"\[codec\] encryption must be true or false"):
        AgentrtConfig.load(env=home_env(tmp_path))
