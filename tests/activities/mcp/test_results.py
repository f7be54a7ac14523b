"""MCP tool results as the text the model reads."""

from __future__ import annotations

import base64
import hashlib
import json
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

from agentrt.activities.mcp import MAX_RESULT_BYTES, result_text

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_text_blocks_are_kept_one_per_line() -> None:
    result = CallToolResult(content=[TextContent(text="one"), TextContent(text="two")])
    assert result_text(result) == "one\ntwo"


def test_an_image_is_saved_under_files_dir_and_referenced_by_path(tmp_path: Path) -> None:
    files = tmp_path / "files"
    text = result_text(CallToolResult(content=[ImageContent(data=b64(PNG), mime_type="image/png")]), files)
    saved = files / f"{hashlib.sha256(PNG).hexdigest()[:32]}.png"
    assert text == f"[image image/png, {len(PNG)} bytes: {saved}]"
    assert saved.read_bytes() == PNG


def test_the_same_image_twice_reuses_its_file(tmp_path: Path) -> None:
    result = CallToolResult(content=[ImageContent(data=b64(PNG), mime_type="image/png")])
    assert result_text(result, tmp_path) == result_text(result, tmp_path)
    assert len(list(tmp_path.iterdir())) == 1


def test_a_file_name_taken_by_a_symlink_is_not_written_through(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    files = tmp_path / "files"
    files.mkdir()
    (files / f"{hashlib.sha256(PNG).hexdigest()[:32]}.png").symlink_to(target)
    text = result_text(CallToolResult(content=[ImageContent(data=b64(PNG), mime_type="image/png")]), files)
    assert "could not be saved" in text
    assert not target.exists()


def test_without_files_dir_an_image_is_a_line_without_path() -> None:
    text = result_text(CallToolResult(content=[AudioContent(data=b64(b"RIFF1234"), mime_type="audio/wav")]))
    assert text == "[audio audio/wav, 8 bytes]"


def test_a_mime_type_never_makes_a_path_outside_files_dir(tmp_path: Path) -> None:
    files = tmp_path / "files"
    text = result_text(CallToolResult(content=[ImageContent(data=b64(PNG), mime_type="../../x/y")]), files)
    assert f"{files}/" in text and text.endswith(".bin]")
    assert [p.parent for p in files.iterdir()] == [files]


def test_invalid_base64_is_reported_not_saved(tmp_path: Path) -> None:
    text = result_text(CallToolResult(content=[ImageContent(data="not base64!", mime_type="image/png")]), tmp_path)
    assert text == "[image image/png: invalid base64 data, not shown]"


def test_embedded_text_resources_are_inline_and_blobs_saved(tmp_path: Path) -> None:
    result = CallToolResult(
        content=[
            EmbeddedResource(resource=TextResourceContents(uri="file:///a.txt", text="hello", mime_type="text/plain")),
            EmbeddedResource(resource=BlobResourceContents(uri="file:///b.zip", blob=b64(b"PK\x03\x04"), mime_type="application/zip")),
        ]
    )
    lines = result_text(result, tmp_path).splitlines()
    assert lines[:2] == ["[resource file:///a.txt (text/plain)]", "hello"]
    assert lines[2].startswith("[resource file:///b.zip application/zip, 4 bytes: ") and lines[2].endswith(".zip]")


def test_a_resource_link_is_one_line() -> None:
    link = ResourceLink(uri="file:///r.txt", name="r.txt", mime_type="text/plain")
    assert result_text(CallToolResult(content=[link])) == "[resource link: file:///r.txt (r.txt, text/plain)]"


def test_structured_content_is_appended_when_no_text_block_came() -> None:
    text = result_text(CallToolResult(content=[], structured_content={"sum": 3}))
    assert json.loads(text) == {"sum": 3}


def test_structured_content_beside_text_blocks_is_not_repeated() -> None:
    result = CallToolResult(content=[TextContent(text="the sum is 3")], structured_content={"sum": 3})
    assert result_text(result) == "the sum is 3"


def test_a_huge_result_is_cut_and_says_so() -> None:
    text = result_text(CallToolResult(content=[TextContent(text="é" * MAX_RESULT_BYTES)]))
    assert len(text.encode()) < MAX_RESULT_BYTES + 100
    assert text.endswith(f"[cut: {MAX_RESULT_BYTES} more bytes not shown]")


def test_an_image_is_not_saved_through_a_symlinked_agentrt_directory(tmp_path: Path) -> None:
    # a model planted `.agentrt -> elsewhere` in its workspace: nothing may be written there
    workspace, elsewhere = tmp_path / "ws", tmp_path / "elsewhere"
    workspace.mkdir()
    elsewhere.mkdir()
    (workspace / ".agentrt").symlink_to(elsewhere)
    text = result_text(CallToolResult(content=[ImageContent(data=b64(PNG), mime_type="image/png")]), workspace / ".agentrt" / "mcp-files")
    assert list(elsewhere.iterdir()) == []
    assert "image/png" in text
