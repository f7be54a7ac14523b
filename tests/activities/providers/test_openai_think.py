"""Tests for the ``<think>`` splitter the Chat Completions adapter runs its answer text through."""

from __future__ import annotations

import pytest

from agentrt.activities.providers._think import Piece, ThinkSplitter


def run(*chunks: str) -> tuple[list[Piece], list[Piece]]:
    """(pieces returned while feeding, pieces returned by finish)."""
    splitter = ThinkSplitter()
    fed = [piece for chunk in chunks for piece in splitter.feed(chunk)]
    return fed, splitter.finish()


def texts(pieces: list[Piece], kind: str) -> str:
    return "".join(p.value for p in pieces if p.kind == kind)


def test_plain_text_passes_through_at_once() -> None:
    fed, finished = run("Hello", " world")

    assert fed == [Piece("text", "Hello"), Piece("text", " world")]
    assert finished == []


def test_a_think_block_at_the_start_is_reasoning_and_the_rest_is_answer() -> None:
    fed, finished = run("<think>\nLet me see.\n</think>\n\nThe answer is 4.")

    assert fed == [Piece("reasoning", "Let me see."), Piece("text", "The answer is 4.")]
    assert finished == []


def test_a_thinking_block_closes_only_with_its_own_tag() -> None:
    fed, _ = run("<thinking>a </think> b</thinking>Answer")

    assert fed == [Piece("reasoning", "a </think> b"), Piece("text", "Answer")]


@pytest.mark.parametrize("cut", range(1, len("<think>plan</think>answer")))
def test_tags_cut_at_any_point_across_chunks_split_the_same_way(cut: int) -> None:
    stream = "<think>plan</think>answer"

    fed, finished = run(stream[:cut], stream[cut:])

    assert [p for p in fed + finished if p.kind == "reasoning"] == [Piece("reasoning", "plan")]
    assert texts(fed + finished, "text") == "answer"


def test_one_character_chunks_split_the_same_way() -> None:
    fed, finished = run(*"  <thinking>step 1\nstep 2</thinking>\nDone.")

    assert [p.value for p in fed if p.kind == "reasoning"] == ["step 1\nstep 2"]
    assert texts(fed + finished, "text") == "Done."


def test_nothing_of_the_think_block_is_returned_before_it_closes() -> None:
    splitter = ThinkSplitter()

    assert splitter.feed("<thi") == []
    assert splitter.feed("nk>secret plan, part one") == []
    assert splitter.feed(" and part two</thi") == []
    assert splitter.feed("nk>Hi") == [Piece("reasoning", "secret plan, part one and part two"), Piece("text", "Hi")]


def test_text_that_only_looks_like_the_start_of_a_tag_is_released_once_it_is_not() -> None:
    splitter = ThinkSplitter()

    assert splitter.feed("  <th") == []
    assert splitter.feed("ead>") == [Piece("text", "  <thead>")]


def test_a_think_tag_after_the_start_is_answer_text() -> None:
    fed, _ = run("Sure. <think>not reasoning</think>")

    assert texts(fed, "text") == "Sure. <think>not reasoning</think>"
    assert [p for p in fed if p.kind == "reasoning"] == []


def test_an_unclosed_think_block_becomes_answer_text_at_the_end_tag_included() -> None:
    fed, finished = run("\n<think>I was cut off by the to", "ken limit</th")

    assert fed == []
    assert finished == [Piece("text", "\n<think>I was cut off by the token limit</th")]


def test_whitespace_alone_is_held_and_released_at_the_end() -> None:
    fed, finished = run("\n", "  ")

    assert fed == []
    assert finished == [Piece("text", "\n  ")]


def test_an_empty_think_block_yields_no_reasoning() -> None:
    fed, _ = run("<think>\n\n</think>\n\nHi")

    assert fed == [Piece("text", "Hi")]


def test_leading_whitespace_in_many_small_pieces_costs_linear_time() -> None:
    # A model (or a hostile server) may stream whitespace one character a chunk before any
    # text: every piece re-copied and re-stripped all the whitespace held so far (quadratic:
    # 300,000 pieces took about 15 s; linear, well under a second).
    import time

    splitter = ThinkSplitter()
    began = time.perf_counter()
    fed = [piece for _ in range(300_000) for piece in splitter.feed(" ")]
    fed += splitter.feed("<think>r</think>answer")

    assert time.perf_counter() - began < 3.0
    assert fed == [Piece("reasoning", "r"), Piece("text", "answer")]


@pytest.mark.parametrize(
    ("chunks", "fed", "finished"),
    [
        (("  ", "\n", "<th", "ink>", "r</think>a"), [Piece("reasoning", "r"), Piece("text", "a")], []),
        (("  ", "<th", "e end"), [Piece("text", "  <the end")], []),
        (("  ", "\n"), [], [Piece("text", "  \n")]),
        ((" ", "<thi"), [], [Piece("text", " <thi")]),
        ((" ", "<think>", "r"), [], [Piece("text", " <think>r")]),
    ],
)
def test_leading_whitespace_is_held_with_a_cut_tag_and_given_back_as_written(chunks, fed, finished) -> None:  # type: ignore[no-untyped-def]
    assert run(*chunks) == (fed, finished)
