"""An MCP tool result as the text the model reads: text blocks as they are, images, audio and
binary resources saved as files and referenced by a line, structured content as JSON.

Synchronous and writing files: the manager runs it in a worker thread, off the event loop.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import mimetypes
import os
import re
from pathlib import Path

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)

from agentrt.activities.tools import make_directories, open_regular, redact_secrets
from agentrt.schemas import ToolError

__all__ = [
    "MAX_EMBEDDED_TEXT_BYTES",
    "MAX_RESULT_BYTES",
    "MAX_SAVED_FILE_BYTES",
    "result_text",
]

# The whole text of a result, in UTF-8 bytes; the rest is cut, and the text says so.
MAX_RESULT_BYTES = 1024 * 1024
# The text of one embedded resource shown inline, in UTF-8 bytes.
MAX_EMBEDDED_TEXT_BYTES = 64 * 1024
# An image, audio clip or blob bigger than this (decoded bytes) is not saved.
MAX_SAVED_FILE_BYTES = 32 * 1024 * 1024

_EXTENSION = re.compile(r"^\.[A-Za-z0-9]{1,10}$")


def result_text(result: CallToolResult, files_dir: Path | None = None) -> str:
    """The text the model reads for ``result`` (its ``is_error`` is the caller's to pass on).

    - text blocks: as they are, one per line;
    - image and audio blocks, and blob resources: saved under ``files_dir`` (created if
      missing) as a new file named by the SHA-256 of the bytes, and shown as a line
      ``[image image/png, 1234 bytes: /path/to/file.png]``; without ``files_dir``, the line has
      no path;
    - text resources: ``[resource uri (mimeType)]`` and the text (cut at
      ``MAX_EMBEDDED_TEXT_BYTES``);
    - resource links: ``[resource link: uri (name, mimeType)]``;
    - ``structured_content``: appended as JSON when no text block came (servers are asked to
      repeat it as text, so beside text blocks it would be said twice).

    The whole text is cut at ``MAX_RESULT_BYTES`` (UTF-8), ending with a line saying how much
    was left out.
    """
    parts: list[str] = []
    texts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
            texts.append(block.text)
        elif isinstance(block, (ImageContent, AudioContent)):
            parts.append(_binary_line(block.type, block.mime_type, block.data, files_dir))
        elif isinstance(block, EmbeddedResource):
            parts.append(_resource_text(block.resource, files_dir))
        elif isinstance(block, ResourceLink):
            details = ", ".join(d for d in (block.name, block.mime_type) if d)
            parts.append(f"[resource link: {block.uri}" + (f" ({details})" if details else "") + "]")
        else:  # a content type of a later revision
            parts.append(f"[{getattr(block, 'type', type(block).__name__)} content not shown]")
    if result.structured_content is not None and not texts:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=2))
    return _bounded("\n".join(parts), MAX_RESULT_BYTES)


def _resource_text(resource: TextResourceContents | BlobResourceContents, files_dir: Path | None) -> str:
    mime = resource.mime_type or "application/octet-stream"
    if isinstance(resource, TextResourceContents):
        return f"[resource {resource.uri} ({mime})]\n" + _bounded(resource.text, MAX_EMBEDDED_TEXT_BYTES)
    return _binary_line(f"resource {resource.uri}", mime, resource.blob, files_dir)


def _binary_line(kind: str, mime: str, data: str, files_dir: Path | None) -> str:
    """``[kind mime, N bytes: path]`` for base64 ``data``, saved under ``files_dir``."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[{kind} {mime}: invalid base64 data, not shown]"
    if files_dir is None:
        return f"[{kind} {mime}, {len(raw)} bytes]"
    if len(raw) > MAX_SAVED_FILE_BYTES:
        return f"[{kind} {mime}, {len(raw)} bytes: too big to save (more than {MAX_SAVED_FILE_BYTES} bytes)]"
    try:
        path = _save(raw, mime, files_dir)
    except OSError as err:
        return f"[{kind} {mime}, {len(raw)} bytes: could not be saved: {err.strerror or err}]"
    except ToolError as err:  # a part of the files directory is a symlink (planted in the workspace)
        return f"[{kind} {mime}, {len(raw)} bytes: could not be saved: {err}]"
    return f"[{kind} {mime}, {len(raw)} bytes: {path}]"


def _save(raw: bytes, mime: str, files_dir: Path) -> Path:
    """Write ``raw`` to ``files_dir/<sha256 prefix><ext>`` unless that file holds it already.

    The name comes from the digest and a known extension only, so it never leaves
    ``files_dir``; the file is created exclusively and never through a symlink.
    """
    # Made and opened from the workspace one component at a time, following no symlink: a model
    # that plants `.agentrt -> /elsewhere` in its workspace gets an error, not files written there.
    root = files_dir.parents[1] if files_dir.parent.name == ".agentrt" else files_dir.parent
    root.mkdir(parents=True, exist_ok=True)
    make_directories(files_dir, "MCP files directory", root=root)
    extension = mimetypes.guess_extension(mime.split(";")[0].strip()) or ".bin"
    if not _EXTENSION.fullmatch(extension):
        extension = ".bin"
    path = files_dir / f"{hashlib.sha256(raw).hexdigest()[:32]}{extension}"
    try:
        fd = open_regular(path, path.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, root=root)
    except FileExistsError:
        if path.is_symlink() or not path.is_file() or path.stat().st_size != len(raw):
            raise OSError(f"{path.name} exists and is not this content") from None
        return path
    with os.fdopen(fd, "wb") as out:
        out.write(raw)
    return path


def _bounded(text: str, limit: int) -> str:
    data = text.encode()
    if len(data) <= limit:
        return text
    data = redact_secrets(text).encode()  # before the cut: a secret's value crossing it is replaced whole
    kept = data[:limit].decode(errors="ignore")
    return f"{kept}\n[cut: {len(data) - len(kept.encode())} more bytes not shown]"
