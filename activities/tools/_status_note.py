"""Status notes: memories that report the progress of the current work, not a lasting fact.

A ``workspace`` memory is meant for every later session of its owner on that workspace, so
"currently working on the parser" or "TODO: fix the tests" is stale by the time anyone reads
it. ``memory.write`` drops such a write at workspace scope instead of proposing it
(``status_note_marker``); the same text at ``session`` scope is kept.

The rule is narrow on purpose, plain string checks on untrusted model text (no regular
expression): after casefolding, stripping leading whitespace and list or heading marks
(``-*#>`` and spaces), the text's first line *starts with* one of ``STATUS_PREFIXES`` followed by
its end, a space or a punctuation mark; or the key's first segment (before ``.``, ``_``, ``:``,
``/`` or ``-``) is one of ``STATUS_KEYS``.
"""

from __future__ import annotations

__all__ = ["STATUS_KEYS", "STATUS_PREFIXES", "status_note_marker"]

# The phrasing a status note opens with (casefolded).
STATUS_PREFIXES = (
    "status",
    "todo",
    "wip",
    "done:",
    "in progress",
    "in-progress",
    "currently working on",
    "currently doing",
    "working on",
    "next step",
    "next steps",
    "progress",
    "still to do",
)
# A key whose first segment is one of these names a status note whatever its text.
STATUS_KEYS = frozenset({"status", "todo", "wip", "progress"})

_KEY_SEPARATORS = "._:/-"
_LEADING_MARKS = " \t-*#>"
# Opening words longer than this are not looked at (the text may be 4,000 characters).
_HEAD_CHARS = 64


def _first_segment(key: str) -> str:
    segment = key.casefold()
    for separator in _KEY_SEPARATORS:
        segment = segment.split(separator, 1)[0]
    return segment


def _starts_with_word(head: str, prefix: str) -> bool:
    """``head`` starts with ``prefix`` as whole words: what follows is its end, a space or a
    punctuation mark (so "status" matches "status: ..." but not "statusbar")."""
    if not head.startswith(prefix):
        return False
    rest = head[len(prefix) :]
    return not rest or prefix.endswith(":") or not (rest[0].isalnum() or rest[0] == "_")


def status_note_marker(key: str, text: str) -> str | None:
    """The status phrasing that makes ``key``/``text`` a status note (``"key status"`` or the
    matched prefix, e.g. ``"todo"``), or None for a memory that reads as a fact."""
    if _first_segment(key) in STATUS_KEYS:
        return f"key {_first_segment(key)}"
    head = text[: _HEAD_CHARS * 4].lstrip(_LEADING_MARKS).split("\n", 1)[0][:_HEAD_CHARS].casefold()
    for prefix in STATUS_PREFIXES:
        if _starts_with_word(head, prefix):
            return prefix
    return None
