"""``agentrt serve`` refuses a workspace root that holds its own configuration, store, codec keys,
payload directory or ``$AGENTRT_HOME``, or that lies inside ``$AGENTRT_HOME``: every session could
otherwise read the token digests and keys, or rewrite the store, with its tools."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrt.gateway import check_workspace_root
from agentrt.schemas import ConfigurationError
from agentrt.worker import AgentrtConfig, CodecConfig, PayloadConfig, token_sha256
from tests.gateway.test_gateway import cli


def config_in(tmp_path: Path, **fields: object) -> AgentrtConfig:
    return AgentrtConfig(database_url=f"sqlite:///{tmp_path / 'elsewhere' / 'agentrt.db'}", **fields)  # type: ignore[arg-type]


def env_home(path: Path) -> dict[str, str]:
    return {"AGENTRT_HOME": str(path)}


def test_a_root_beside_agentrt_s_files_is_served(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    check_workspace_root(tmp_path / "root", config_in(tmp_path, source=tmp_path / "agentrt.toml"), env_home(tmp_path / "home"))


@pytest.mark.parametrize(
    ("layout", "what"),
    [
        ("home", "$AGENTRT_HOME"),
        ("config", "the configuration file"),
        ("store", "the SQLite store"),
        ("keys", "the codec keys file"),
        ("payloads", "the payload directory"),
    ],
)
def test_a_root_holding_agentrt_s_own_files_is_refused(tmp_path: Path, layout: str, what: str) -> None:
    root = tmp_path / "root"
    (root / "deep").mkdir(parents=True)
    home = root / "deep" / "home" if layout == "home" else tmp_path / "home"
    fields: dict[str, object] = {}
    if layout == "config":
        fields["source"] = root / "deep" / "agentrt.toml"
    if layout == "keys":
        fields["codec"] = CodecConfig(keys_file=str(root / "deep" / "keys.toml"))
    if layout == "payloads":
        fields["payloads"] = PayloadConfig(driver="directory", path=str(root / "payloads"))
    config = config_in(tmp_path, **fields)
    if layout == "store":
        config.database_url = f"sqlite:///{root / 'deep' / 'agentrt.db'}"

    with pytest.raises(ConfigurationError, match="holds " + what.replace("$", r"\$")):
        check_workspace_root(root, config, env_home(home))


def test_a_root_inside_agentrt_home_is_refused(tmp_path: Path) -> None:
    (tmp_path / "home" / "work").mkdir(parents=True)
    with pytest.raises(ConfigurationError, match="inside \\$AGENTRT_HOME"):
        check_workspace_root(tmp_path / "home" / "work", config_in(tmp_path), env_home(tmp_path / "home"))


def test_a_root_that_reaches_the_home_through_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real-home").mkdir()
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "home").symlink_to(tmp_path / "real-home")
    with pytest.raises(ConfigurationError, match="holds \\$AGENTRT_HOME"):
        check_workspace_root(tmp_path, config_in(tmp_path), env_home(tmp_path / "root" / "home"))


def test_serve_with_its_home_as_the_workspace_root_exits_2_naming_it(tmp_path: Path) -> None:
    result = cli("serve", "--port", "0", "--insecure-no-auth", cwd=tmp_path)  # cli() sets AGENTRT_HOME = cwd

    assert result.returncode == 2, result.stderr
    said = " ".join(result.stderr.split())
    assert "holds $AGENTRT_HOME" in said and "--workspace-root" in said


def test_serve_with_a_root_holding_its_configuration_exits_2(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "root").mkdir()
    config = tmp_path / "root" / "agentrt.toml"
    config.write_text(f'[[gateway.tokens]]\nsha256 = "{token_sha256("t" * 32)}"\nprincipal = "alice"\n')

    result = cli(
        "serve", "--port", "0", "--config", str(config), "--workspace-root", str(tmp_path / "root"), cwd=tmp_path,
        env={"AGENTRT_HOME": str(tmp_path / "home")},
    )

    assert result.returncode == 2, result.stderr
    assert "holds the configuration file" in " ".join(result.stderr.split())
