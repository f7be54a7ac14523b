"""``SecretVault`` and ``redact_secrets``: each source (environment, a file, a directory, a hook sync
or async), their failures as typed errors, and the forms of a value that redaction replaces."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
import types
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentrt.activities.tools import (
    SecretValues,
    SecretVault,
    ToolContext,
    redact_secrets,
    redacted_window,
    remember_secret,
    run_command,
)
from agentrt.activities.tools._secrets import read_secrets_path
from agentrt.schemas import ConfigurationError, SecretNotFound, SecretsConfig, SecretSourceFailed, SecretsMissing, ToolError


def fresh(prefix: str = "sk") -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


@pytest.fixture
def hooks() -> Iterator[types.ModuleType]:
    """A module ``agentrt_test_hooks`` whose functions the vault's ``hook`` may name."""
    module = types.ModuleType("agentrt_test_hooks")
    module.table = {}  # type: ignore[attr-defined]
    module.calls = []  # type: ignore[attr-defined]

    def lookup(name: str) -> str | None:
        module.calls.append(name)  # type: ignore[attr-defined]
        return module.table.get(name)  # type: ignore[attr-defined]

    async def lookup_async(name: str) -> str | None:
        await asyncio.sleep(0)
        return module.table.get(name)  # type: ignore[attr-defined]

    def slow(name: str) -> str:
        time.sleep(5)
        return "never-in-time"

    def broken(name: str) -> str:
        raise RuntimeError(f"vault sealed for {name}")

    def number(name: str) -> int:
        return 12345678

    for function in (lookup, lookup_async, slow, broken, number):
        setattr(module, function.__name__, function)
    sys.modules[module.__name__] = module
    yield module
    del sys.modules[module.__name__]


def test_the_environment_source_reads_the_variable_of_the_secret_s_name() -> None:
    value = fresh()
    vault = SecretVault(env={"ORDERS_API_KEY": value})

    values = vault.resolve(["ORDERS_API_KEY"], "orders")

    assert values["ORDERS_API_KEY"] == value
    assert repr(values) == "SecretValues(['ORDERS_API_KEY'])" and value not in repr(values)


def test_a_name_no_source_has_is_secret_not_found_naming_the_sources() -> None:
    with pytest.raises(SecretNotFound) as raised:
        SecretVault(env={}).resolve(["ORDERS_API_KEY"], "orders")

    assert (raised.value.name, raised.value.owner, raised.value.sources) == ("ORDERS_API_KEY", "orders", ["env"])


def test_a_tool_reading_a_secret_it_did_not_declare_gets_a_tool_error() -> None:
    values = SecretValues({"A_KEY": fresh()}, "orders")

    with pytest.raises(ToolError, match="secret 'OTHER' is not declared by orders"):
        values["OTHER"]


def test_a_value_shorter_than_eight_characters_is_refused_not_handed_out() -> None:
    with pytest.raises(SecretSourceFailed, match="shorter than 8 characters, too short to redact safely"):
        SecretVault(env={"PIN": "1234"}).resolve(["PIN"], "door")
    assert redact_secrets("1234 is a number") == "1234 is a number"
    with pytest.raises(SecretSourceFailed, match="longer than 4096 characters"):
        SecretVault(env={"PEM": "x" * 5000}).resolve(["PEM"], "door")


def test_sources_are_tried_in_order_and_the_first_that_has_the_name_wins(tmp_path: Path) -> None:
    file_value, env_value = fresh("file"), fresh("env")
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(f'A_KEY = "{file_value}"\n')
    secrets.chmod(0o600)
    config = SecretsConfig(sources=["file", "env"], path=str(secrets))

    vault = SecretVault(config, env={"A_KEY": env_value, "B_KEY": env_value})

    assert vault.resolve(["A_KEY", "B_KEY"], "t") == {"A_KEY": file_value, "B_KEY": env_value}


def test_a_directory_holds_one_file_per_secret_and_its_trailing_newline_is_dropped(tmp_path: Path) -> None:
    directory = tmp_path / "secrets.d"
    directory.mkdir(mode=0o700)
    value = fresh()
    (directory / "A_KEY").write_text(value + "\n")
    (directory / "A_KEY").chmod(0o600)
    (directory / "not a name.txt").write_text("ignored")
    (directory / "not a name.txt").chmod(0o600)

    assert read_secrets_path(directory) == {"A_KEY": value}


@pytest.mark.parametrize(("mode", "problem"), [(0o644, "readable or writable by every user"), (0o620, "writable by its group")])
def test_a_secrets_file_open_to_others_is_refused_as_the_codec_keys_file_is(tmp_path: Path, mode: int, problem: str) -> None:
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(f'A_KEY = "{fresh()}"\n')
    secrets.chmod(mode)

    with pytest.raises(ConfigurationError, match=problem):
        read_secrets_path(secrets)
    with pytest.raises(SecretSourceFailed, match=problem):  # at call time: the call's typed error
        SecretVault(SecretsConfig(sources=["file"], path=str(secrets))).resolve(["A_KEY"], "t")


def test_a_symlinked_secrets_file_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    real.write_text(f'A_KEY = "{fresh()}"\n')
    real.chmod(0o600)
    (tmp_path / "link.toml").symlink_to(real)

    with pytest.raises(ConfigurationError, match="is a symbolic link"):
        read_secrets_path(tmp_path / "link.toml")


def test_a_toml_value_that_is_not_a_string_is_refused(tmp_path: Path) -> None:
    secrets = tmp_path / "secrets.toml"
    secrets.write_text("A_KEY = 12345678\n")
    secrets.chmod(0o600)

    with pytest.raises(ConfigurationError, match="A_KEY must be strings"):
        read_secrets_path(secrets)


@pytest.mark.parametrize("function", ["lookup", "lookup_async"])
def test_a_hook_sync_or_async_gives_the_value(hooks: types.ModuleType, function: str) -> None:
    value = fresh()
    hooks.table["A_KEY"] = value  # type: ignore[attr-defined]
    vault = SecretVault(SecretsConfig(sources=["hook"], hook=f"agentrt_test_hooks:{function}"))

    assert vault.resolve(["A_KEY"], "t")["A_KEY"] == value
    with pytest.raises(SecretNotFound):
        vault.resolve(["B_KEY"], "t")


def test_a_hook_that_does_not_answer_in_time_is_a_typed_failure_not_a_hung_call(hooks: types.ModuleType) -> None:
    vault = SecretVault(SecretsConfig(sources=["hook"], hook="agentrt_test_hooks:slow", timeout_seconds=0.2))

    started = time.monotonic()
    with pytest.raises(SecretSourceFailed, match=r"gave no answer within 0.2 s"):
        vault.resolve(["A_KEY"], "t")
    assert time.monotonic() - started < 4


def test_a_hook_that_raises_or_gives_no_string_is_a_typed_failure(hooks: types.ModuleType) -> None:
    with pytest.raises(SecretSourceFailed, match="raised RuntimeError: vault sealed for A_KEY"):
        SecretVault(SecretsConfig(sources=["hook"], hook="agentrt_test_hooks:broken")).resolve(["A_KEY"], "t")
    with pytest.raises(SecretSourceFailed, match="gave a int, not a string"):
        SecretVault(SecretsConfig(sources=["hook"], hook="agentrt_test_hooks:number")).resolve(["A_KEY"], "t")


def test_a_hook_that_cannot_be_imported_is_a_typed_failure() -> None:
    with pytest.raises(SecretSourceFailed, match="cannot be loaded"):
        SecretVault(SecretsConfig(sources=["hook"], hook="agentrt_no_such_module:get")).resolve(["A_KEY"], "t")


def test_the_start_check_names_every_missing_secret_and_who_declares_it() -> None:
    vault = SecretVault(env={"A_KEY": fresh()})

    with pytest.raises(SecretsMissing) as raised:
        vault.missing({"A_KEY": ["t1"], "B_KEY": ["t2", "mcp:gh"], "C_KEY": ["t3"]})

    assert raised.value.missing == {"B_KEY": ["mcp:gh", "t2"], "C_KEY": ["t3"]}


def test_the_start_check_remembers_every_value_of_a_secrets_file_even_undeclared_ones(tmp_path: Path) -> None:
    spare = fresh("spare")
    secrets = tmp_path / "secrets.toml"
    secrets.write_text(f'SPARE_TOKEN = "{spare}"\n')
    secrets.chmod(0o600)

    SecretVault(SecretsConfig(sources=["file"], path=str(secrets))).missing({})

    assert redact_secrets(f"cat: {spare}") == "cat: [secret:SPARE_TOKEN]"


def test_redaction_replaces_the_value_as_it_is_json_escaped_url_encoded_and_base64() -> None:
    value = f"p/w<&>\"{uuid.uuid4().hex}é"
    remember_secret("DB_PASSWORD", value)
    raw = value.encode()
    marker = "[secret:DB_PASSWORD]"

    assert redact_secrets(f"pw={value}!") == f"pw={marker}!"
    assert redact_secrets(json.dumps({"pw": value})) == json.dumps({"pw": marker})
    assert redact_secrets(json.dumps({"pw": value}, ensure_ascii=False)) == json.dumps({"pw": marker})
    assert redact_secrets(f"?pw={urllib.parse.quote(value, safe='')}") == f"?pw={marker}"
    assert redact_secrets(base64.b64encode(raw).decode()) == marker
    assert redact_secrets(f"Exception: {value!r}") == f"Exception: '{marker}'"



def test_only_whole_values_are_replaced_so_redaction_tells_no_prefix() -> None:
    """Replacing the start of a value where an output ends would let a model print guesses one
    character longer each time and watch which one is replaced."""
    value = f"sk-proj-{uuid.uuid4().hex}"
    remember_secret("OPENAI_KEY", value)

    assert redact_secrets(f"guess: {value[:9]}") == f"guess: {value[:9]}"
    assert redact_secrets(f"guess: {value}") == "guess: [secret:OPENAI_KEY]"


def test_a_window_of_an_output_keeps_no_part_of_a_value_that_crosses_its_edges() -> None:
    value = f"crossing-{uuid.uuid4().hex}"
    remember_secret("CROSSING_KEY", value)
    text = "a" * 20 + value + "b" * 20 + value + "c" * 20

    head = redacted_window(text, 0, 25)  # cuts the first value after 5 characters
    tail = redacted_window(text, len(text) - 25, len(text))  # starts inside the second

    assert head == "a" * 20 + "[secret:CROSSING_KEY]" and tail == "[secret:CROSSING_KEY]" + "c" * 20


def test_shell_run_output_cut_through_a_secret_shows_its_name_not_a_part(workspace: Path) -> None:
    value = f"cut-{uuid.uuid4().hex}"
    remember_secret("CUT_KEY", value)
    # The value starts 8 bytes before the head's cut (32 KiB) and the output goes on past the cap.
    command = f"head -c 32760 /dev/zero | tr '\\0' a; printf %s {value}; head -c 100000 /dev/zero | tr '\\0' b"

    done = run_command(command, ToolContext(workspace=workspace, sandbox="danger_full_access"), 30)

    assert "[truncated:" in done.stdout and done.stdout.count("[secret:CUT_KEY]") == 1
    assert value[:8] not in done.stdout and value[-8:] not in done.stdout


def test_a_tool_context_s_repr_shows_no_secret(tmp_path: Path) -> None:
    value = fresh()
    ctx = ToolContext(workspace=tmp_path, secrets=SecretValues({"A_KEY": value}))

    assert value not in repr(ctx) and "A_KEY" not in repr(ctx)


def test_in_and_get_answer_for_undeclared_names_without_raising() -> None:
    values = SecretValues({"A_KEY": fresh()}, "orders")

    assert "A_KEY" in values and "OTHER" not in values
    assert values.get("OTHER") is None and values.get("OTHER", "x") == "x"


def test_hook_lookups_that_never_return_are_bounded_then_refused(hooks: types.ModuleType) -> None:
    vault = SecretVault(SecretsConfig(sources=["hook"], hook="agentrt_test_hooks:slow", timeout_seconds=0.05))

    for _ in range(4):
        with pytest.raises(SecretSourceFailed, match="gave no answer"):
            vault.resolve(["A_KEY"], "t")
    with pytest.raises(SecretSourceFailed, match="4 earlier lookups of hook agentrt_test_hooks:slow never returned"):
        vault.resolve(["A_KEY"], "t")
