"""Every `agentrt` command's help and docs/cli.md: each option says what it does, no help text
loses a word to rich's markup (`[secrets]` read as a style tag), and the CLI page names every
option of every command."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentrt.cli._app import COMMANDS, app, load_command

DOCS = Path(__file__).resolve().parents[2] / "docs"
# A bracket rich would take for the start of a markup tag (``[secrets]``), not escaped as ``\[``.
MARKUP = re.compile(r"(?<!\\)\[[A-Za-z#/@]")


def leaf_commands() -> Iterator[tuple[str, Any]]:
    """Every command that runs (not a group), by its path: ``session cancel``."""

    def walk(command: Any, path: list[str]) -> Iterator[tuple[str, Any]]:
        if hasattr(command, "list_commands"):
            for name in command.list_commands(None):
                yield from walk(command.get_command(None, name), [*path, name])
            return
        yield " ".join(path), command

    for name in COMMANDS:
        yield from walk(load_command(name), [name])


def options(command: Any) -> list[Any]:
    return [p for p in command.params if p.param_type_name == "option" and not getattr(p, "hidden", False)]


def test_every_option_of_every_command_says_what_it_does() -> None:
    silent = [f"{path} {p.opts[0]}" for path, command in leaf_commands() for p in options(command) if not (p.help or "").strip()]
    assert silent == []


def test_no_help_text_has_a_bracket_rich_would_swallow() -> None:
    swallowed = [
        f"{path} {getattr(p, 'opts', ['?'])[0]}: {p.help}"
        for path, command in leaf_commands()
        for p in command.params
        if MARKUP.search(getattr(p, "help", None) or "")
    ] + [f"{path}: {command.help[:80]}" for path, command in leaf_commands() if MARKUP.search(command.help or "")]
    assert swallowed == []


def test_the_secret_option_of_mcp_add_names_where_the_worker_reads_it() -> None:
    result = CliRunner().invoke(app, ["mcp", "add", "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert "reads from its [secrets] sources (repeat)" in " ".join(result.stdout.replace("│", " ").split())


def test_docs_cli_names_every_option_of_every_command() -> None:
    page = (DOCS / "cli.md").read_text()
    missing = [
        f"{path} {p.opts[0]}"
        for path, command in leaf_commands()
        for p in options(command)
        if not any(re.search(re.escape(flag) + r"(?![\w-])", page) for flag in [*p.opts, *p.secondary_opts])
    ]
    assert missing == []


@pytest.mark.parametrize("command", ["send", "compact", "switch-model"])
def test_docs_cli_gives_json_to_the_session_commands_that_take_it(command: str) -> None:
    synopsis = [line for line in (DOCS / "cli.md").read_text().splitlines() if f" {command} ID" in line and "session" in line]
    assert synopsis, command
    part = synopsis[0].split(f"{command} ID", 1)[1].split(" | ")[0].split("#")[0]
    assert "[--json]" in part
