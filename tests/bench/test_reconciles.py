"""bench._reconciles' judges: how a bench decides, from the files a tool leaves, whether a call
whose outcome the session could not know was applied."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from bench.chaos import file_written, is_reconcile, line_in_file


def test_a_line_counts_as_applied_only_when_it_is_a_whole_line_of_the_file(tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    judge = line_in_file(log)
    assert not judge({"line": "s1 t1 c1"})  # no file yet
    log.write_text("s1 t1 c1\ns1 t1 c2 partial")
    assert judge({"line": "s1 t1 c1"})
    assert not judge({"line": "s1 t1 c2"})


def test_a_write_counts_as_applied_only_when_the_file_holds_exactly_its_content(tmp_path: Path) -> None:
    judge = file_written(tmp_path)
    call = {"path": "turn-3.txt", "content": "soak-001 turn 3\n"}
    assert not judge(call)  # not written
    (tmp_path / "turn-3.txt").write_text("soak-001 tu")
    assert not judge(call)  # cut short
    (tmp_path / "turn-3.txt").write_text("soak-001 turn 3\n")
    assert judge(call)


def test_a_write_naming_a_file_outside_the_workspace_never_counts_as_applied(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("x")
    assert not file_written(workspace)({"path": "../secret.txt", "content": "x"})
    assert not file_written(workspace)({"path": str(tmp_path / "secret.txt"), "content": "x"})


def test_only_requests_of_kind_reconcile_are_reconciles() -> None:
    assert is_reconcile(SimpleNamespace(kind="reconcile"))
    assert not is_reconcile(SimpleNamespace(kind="tool_call"))
    assert not is_reconcile(SimpleNamespace())
