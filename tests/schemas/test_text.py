"""Text cut to a bound: ``shorten`` keeps the head, ``cut_middle`` both ends; both leave text that fits alone."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agentrt.schemas import ELLIPSIS, cut_middle, shorten


def test_text_that_fits_is_returned_as_it_is() -> None:
    assert shorten("abcd", 4) == "abcd"
    assert cut_middle("abcd", 4) == "abcd"


def test_shorten_keeps_the_head_and_marks_the_cut_within_the_limit() -> None:
    assert shorten("abcdef", 4) == "abc…"
    assert shorten("abcdefghijkl", 10, marker=" [cut]") == "abcd [cut]"


def test_one_line_joins_whitespace_before_measuring() -> None:
    assert shorten("a\n\n b\tc  ", 10, one_line=True) == "a b c"
    assert shorten("one\ntwo three four", 9, one_line=True) == "one two …"


def test_cut_middle_keeps_both_ends_and_says_how_much_went() -> None:
    assert cut_middle("abcdefgh", 4) == "ab…[4 characters cut]…gh"


@given(st.text(), st.integers(min_value=1, max_value=200))
def test_shorten_never_exceeds_the_limit(text: str, limit: int) -> None:
    assert len(shorten(text, limit)) <= limit
    assert shorten(text, limit).startswith(text[: limit - len(ELLIPSIS)])
