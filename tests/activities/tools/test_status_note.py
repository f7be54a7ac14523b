"""The status-note rule ``memory.write`` drops workspace memories by: narrow, on the text's
opening words and the key's first segment, and safe on any text a model sends."""

from __future__ import annotations

import pytest

from agentrt.activities.tools._status_note import status_note_marker


@pytest.mark.parametrize(
    ("key", "text", "marker"),
    [
        ("parser", "Currently working on the parser rewrite", "currently working on"),
        ("tests", "TODO: fix the flaky login test", "todo"),
        ("build", "  - status: build is red on main", "status"),
        ("refactor", "## In progress\nsplitting the store module", "in progress"),
        ("release", "Next step: tag v1.2 after the review", "next step"),
        ("migration", "WIP - half of the tables moved", "wip"),
        ("db", "done: the schema migration", "done:"),
        ("status.parser", "the lexer is finished", "key status"),
        ("todo-list", "write the changelog", "key todo"),
    ],
)
def test_status_phrasing_at_the_start_or_a_status_key_makes_a_status_note(key: str, text: str, marker: str) -> None:
    assert status_note_marker(key, text) == marker


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("build.cmd", "run `make test` to build and test"),
        ("statusbar", "the status bar lives in ui/status.py"),
        ("style", "Statusline colours come from the theme file"),
        ("db", "the database is PostgreSQL 16; the TODO list lives in docs/todo.md"),
        ("done-criteria", "a change is done when CI is green"),
        ("deploy", "Done means deployed to staging and smoke-tested"),
        ("workflow", "the team is working on Fridays only from home"),
    ],
)
def test_a_lasting_fact_is_not_a_status_note_even_when_it_mentions_status_words(key: str, text: str) -> None:
    assert status_note_marker(key, text) is None


def test_only_the_opening_of_a_hostile_text_is_read() -> None:
    padded = " " * 10_000 + "TODO: hidden after padding"
    assert status_note_marker("k", padded) is None
    assert status_note_marker("k", "x" * 4_000) is None
    assert status_note_marker("k", "\u202etodo: reversed") is None
