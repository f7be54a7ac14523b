"""Text cut to a bound, the same way wherever a bound applies: a model's concern or finding kept
in an event, a prompt's field, an error's message, a preview line. Characters, not bytes (the
context budget, which counts bytes, cuts with ``agentrt.workflows.context.truncate_middle``).
Pure functions: workflows may call them.

``code_span`` is how text that a model, a tool, an MCP server or a caller chose is shown in markdown
(the Temporal UI's summaries and details): one line inside a code span, where a renderer reads no
link, image, HTML, emphasis, list or table."""

from __future__ import annotations

__all__ = ["ELLIPSIS", "code_span", "cut_middle", "shorten"]

ELLIPSIS = "…"


def shorten(text: str, limit: int, *, one_line: bool = False, marker: str = ELLIPSIS) -> str:
    """``text`` whole when it fits ``limit`` characters, else its first characters and ``marker``,
    ``limit`` characters in all (for a ``marker`` shorter than ``limit``). ``one_line`` first joins every run of whitespace (newlines
    included) into one space. ``shorten("abcdef", 4) == "abc…"``."""
    if one_line:
        text = " ".join(text.split())
    return text if len(text) <= limit else text[: max(limit - len(marker), 0)] + marker


def cut_middle(text: str, limit: int) -> str:
    """``text`` whole when it fits ``limit`` characters, else its first and last ``limit // 2``
    characters around ``…[N characters cut]…``: both ends of a long argument or answer stay in
    view. ``cut_middle("abcdefgh", 4) == "ab…[4 characters cut]…gh"``."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}…[{len(text) - 2 * half} characters cut]…{text[-half:]}"


def code_span(text: str, limit: int) -> str:
    """``text`` as a one-line markdown code span of at most ``limit`` characters inside its
    backticks: every run of whitespace (newlines included) becomes one space, each backtick becomes
    ``ˋ`` (U+02CB) so the text cannot close the span, and a longer text is cut with ``…``. Inside
    the span, ``[a](javascript:…)``, ``<img onerror=…>``, ``|`` and ``**`` are shown as they are,
    never rendered. ``code_span("a`b\nc", 10) == "`aˋb c`"``; empty text is ``````."""
    flat = shorten(text.replace("`", "ˋ"), limit, one_line=True)
    return f"`{flat}`" if flat else "``"
