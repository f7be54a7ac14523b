"""Splits a ``<think>…</think>`` block off the start of streamed answer text, so reasoning that
models write inline (DeepSeek-R1 distills, QwQ, many local models) is never shown as the answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

OPEN_TAGS = ("<think>", "<thinking>")


@dataclass(frozen=True)
class Piece:
    """One output of the splitter: ``text`` (answer, in stream order) or ``reasoning`` (a whole block)."""

    kind: Literal["text", "reasoning"]
    value: str


class ThinkSplitter:
    """Feed answer text as it streams; get back answer text and reasoning blocks.

    Rules:
    - Only a block at the start counts: leading whitespace, then ``<think>`` or ``<thinking>``
      (lower case, as the models write them). A tag later in the text is answer text.
    - The block's inner text (surrounding whitespace stripped) comes out as one ``reasoning``
      piece when its closing tag (``</think>`` or ``</thinking>``, matching the opening one)
      arrives; whitespace right after the closing tag is dropped, the rest is answer text.
    - Tags may be cut anywhere across pieces: only text that could still be (part of) a tag
      is held back, everything else is returned at once.
    - A block still open at ``finish()`` was never reasoning the model finished: its text,
      opening tag included, comes out as answer text, exactly as the model wrote it.
    """

    def __init__(self) -> None:
        self._state: Literal["start", "think", "after", "text"] = "start"
        self._space: list[str] = []  # start: the leading whitespace so far
        self._held = ""  # start: text after it that may still become an opening tag (short)
        self._open = ""  # the opening tag seen
        self._close = ""
        self._inner: list[str] = []  # think: the block's text, without a possibly cut closing tag
        self._tail = ""  # think: text that may be the start of the closing tag

    def feed(self, text: str) -> list[Piece]:
        """The pieces ``text`` completes, in order; text that may still be a tag is held back."""
        out: list[Piece] = []
        while text:
            if self._state == "text":
                out.append(Piece("text", text))
                text = ""
            elif self._state == "start":
                text = self._feed_start(text, out)
            elif self._state == "think":
                text = self._feed_think(text, out)
            else:  # after: drop whitespace following the closing tag
                stripped = text.lstrip()
                if stripped:
                    self._state = "text"
                text = stripped
        return out

    def finish(self) -> list[Piece]:
        """What is still held back at the end of the stream, as answer text."""
        if self._state == "start" and (self._space or self._held):
            held = "".join(self._space) + self._held
            self._space, self._held = [], ""
            self._state = "text"
            return [Piece("text", held)]
        if self._state == "think":
            block = self._open + "".join(self._inner) + self._tail
            self._inner, self._tail = [], ""
            self._state = "text"
            return [Piece("text", block)]
        return []

    def _feed_start(self, text: str, out: list[Piece]) -> str:
        # Leading whitespace is kept apart, so whitespace in many small pieces is not copied
        # again with each piece.
        if self._held:
            body = self._held + text
        else:
            body = text.lstrip()
            if len(body) < len(text):
                self._space.append(text[: len(text) - len(body)])
            if not body:
                return ""  # whitespace only: wait for more
        for tag in OPEN_TAGS:
            if body.startswith(tag):
                self._open = "".join(self._space) + tag
                self._space, self._held = [], ""
                self._close = "</" + tag[1:]
                self._state = "think"
                return body[len(tag) :]
        if any(tag.startswith(body) for tag in OPEN_TAGS):
            self._held = body  # a tag cut short: wait for more
            return ""
        held = "".join(self._space) + body
        self._space, self._held = [], ""
        self._state = "text"
        out.append(Piece("text", held))
        return ""

    def _feed_think(self, text: str, out: list[Piece]) -> str:
        buffer = self._tail + text
        end = buffer.find(self._close)
        if end >= 0:
            self._inner.append(buffer[:end])
            reasoning = "".join(self._inner).strip()
            self._inner, self._tail = [], ""
            self._state = "after"
            if reasoning:
                out.append(Piece("reasoning", reasoning))
            return buffer[end + len(self._close) :]
        keep = _longest_tag_prefix_suffix(buffer, self._close)
        self._inner.append(buffer[: len(buffer) - keep])
        self._tail = buffer[len(buffer) - keep :]
        return ""


def _longest_tag_prefix_suffix(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that is a proper start of ``tag``."""
    for n in range(min(len(text), len(tag) - 1), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0
