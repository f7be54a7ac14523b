"""Behaviour of fs.list, fs.read, fs.search and fs.write on real directories, including confinement."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentrt.activities.tools import (
    FsList,
    FsRead,
    FsSearch,
    FsWrite,
    Tool,
    ToolArgs,
    ToolContext,
    ToolRegistry,
    resolve_in_workspace,
)
from agentrt.schemas import (
    InvalidPathError,
    NotARegularFileError,
    ToolArgumentsError,
    ToolCall,
    ToolCrashedError,
    ToolError,
    WorkspaceEscapeError,
)


def run(registry, ctx: ToolContext, name: str, **arguments) -> str:
    return registry.execute(ToolCall(id="c1", name=name, arguments=arguments), ctx).text


# --- resolve_in_workspace ----------------------------------------------------------


def test_relative_path_resolves_inside_the_workspace(workspace: Path) -> None:
    assert resolve_in_workspace(workspace, "a/b.txt") == workspace.resolve() / "a" / "b.txt"


def test_absolute_path_inside_the_workspace_is_allowed(workspace: Path) -> None:
    target = workspace / "x.txt"
    assert resolve_in_workspace(workspace, str(target)) == target.resolve()


def test_dotdot_escape_is_rejected(workspace: Path) -> None:
    with pytest.raises(WorkspaceEscapeError, match="outside the workspace"):
        resolve_in_workspace(workspace, "sub/../../outside/secret.txt")


def test_absolute_path_outside_the_workspace_is_rejected(workspace: Path, outside: Path) -> None:
    with pytest.raises(WorkspaceEscapeError):
        resolve_in_workspace(workspace, str(outside / "secret.txt"))


# --- fs.read -------------------------------------------------------------------------


def test_read_returns_file_text(registry, ctx, workspace: Path) -> None:
    (workspace / "hello.txt").write_text("hello\nworld\n")
    assert run(registry, ctx, "fs.read", path="hello.txt") == "hello\nworld\n"


def test_read_notes_truncation_with_byte_range(registry, ctx, workspace: Path) -> None:
    (workspace / "big.txt").write_bytes(b"x" * 100)
    text = run(registry, ctx, "fs.read", path="big.txt", limit=10)
    assert text == "x" * 10 + "\n[truncated: showing bytes 0-10 of 100]"


def test_read_from_offset_returns_the_later_bytes(registry, ctx, workspace: Path) -> None:
    (workspace / "abc.txt").write_text("abcdef")
    assert run(registry, ctx, "fs.read", path="abc.txt", offset=4).startswith("ef\n[truncated: showing bytes 4-6 of 6]")


def test_read_replaces_undecodable_bytes(registry, ctx, workspace: Path) -> None:
    (workspace / "bad.txt").write_bytes(b"ok \xff end")
    assert run(registry, ctx, "fs.read", path="bad.txt") == "ok \ufffd end"


def test_read_of_a_directory_is_a_tool_error(registry, ctx, workspace: Path) -> None:
    (workspace / "d").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        run(registry, ctx, "fs.read", path="d")


def test_read_of_a_missing_file_is_a_tool_error(registry, ctx) -> None:
    with pytest.raises(ToolError, match="no such file: 'nope.txt'"):
        run(registry, ctx, "fs.read", path="nope.txt")


def test_read_limit_above_one_mebibyte_is_an_argument_error(registry, ctx) -> None:
    with pytest.raises(ToolArgumentsError, match="limit: Input should be less than or equal to 1048576"):
        run(registry, ctx, "fs.read", path="a.txt", limit=2 * 1024 * 1024)


def test_read_through_a_symlink_inside_the_workspace_is_allowed(registry, ctx, workspace: Path) -> None:
    (workspace / "real.txt").write_text("real content")
    (workspace / "link.txt").symlink_to(workspace / "real.txt")
    assert run(registry, ctx, "fs.read", path="link.txt") == "real content"


def test_read_through_a_symlinked_file_leaving_the_workspace_is_rejected(
    registry, ctx, workspace: Path, outside: Path
) -> None:
    (workspace / "leak.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(WorkspaceEscapeError):
        run(registry, ctx, "fs.read", path="leak.txt")


def test_read_through_a_symlinked_directory_leaving_the_workspace_is_rejected(
    registry, ctx, workspace: Path, outside: Path
) -> None:
    (workspace / "leakdir").symlink_to(outside, target_is_directory=True)
    with pytest.raises(WorkspaceEscapeError):
        run(registry, ctx, "fs.read", path="leakdir/secret.txt")


def test_read_of_dotdot_path_is_rejected(registry, ctx) -> None:
    with pytest.raises(WorkspaceEscapeError):
        run(registry, ctx, "fs.read", path="../outside/secret.txt")


# --- fs.list -------------------------------------------------------------------------


def test_list_shows_sorted_entries_with_directories_marked(registry, ctx, workspace: Path) -> None:
    (workspace / "b.txt").write_text("")
    (workspace / "a").mkdir()
    (workspace / "a" / "inner.txt").write_text("")
    assert run(registry, ctx, "fs.list") == "a/\nb.txt"


def test_list_recursive_shows_nested_paths_relative_to_the_workspace(registry, ctx, workspace: Path) -> None:
    (workspace / "a" / "b").mkdir(parents=True)
    (workspace / "a" / "b" / "c.txt").write_text("")
    assert run(registry, ctx, "fs.list", recursive=True) == "a/\na/b/\na/b/c.txt"


def test_list_of_a_subdirectory_keeps_workspace_relative_paths(registry, ctx, workspace: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "f.txt").write_text("")
    assert run(registry, ctx, "fs.list", path="sub") == "sub/f.txt"


def test_list_skips_git_directory(registry, ctx, workspace: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "HEAD").write_text("ref")
    (workspace / "f.txt").write_text("")
    assert run(registry, ctx, "fs.list", recursive=True) == "f.txt"


def test_list_notes_truncation_at_max_entries(registry, ctx, workspace: Path) -> None:
    for name in "abcde":
        (workspace / f"{name}.txt").write_text("")
    assert run(registry, ctx, "fs.list", max_entries=2) == "a.txt\nb.txt\n[truncated: showing the first 2 entries]"


def test_list_does_not_follow_symlinks_out_of_the_workspace(
    registry, ctx, workspace: Path, outside: Path
) -> None:
    (workspace / "leakdir").symlink_to(outside, target_is_directory=True)
    (workspace / "leak.txt").symlink_to(outside / "secret.txt")
    (workspace / "ok.txt").write_text("")
    assert run(registry, ctx, "fs.list", recursive=True) == "ok.txt"


def test_list_of_a_symlinked_directory_leaving_the_workspace_is_rejected(
    registry, ctx, workspace: Path, outside: Path
) -> None:
    (workspace / "leakdir").symlink_to(outside, target_is_directory=True)
    with pytest.raises(WorkspaceEscapeError):
        run(registry, ctx, "fs.list", path="leakdir")


def test_list_of_a_file_is_a_tool_error(registry, ctx, workspace: Path) -> None:
    (workspace / "f.txt").write_text("")
    with pytest.raises(ToolError, match="not a directory"):
        run(registry, ctx, "fs.list", path="f.txt")


# --- fs.search -----------------------------------------------------------------------


def test_search_reports_path_line_and_text(registry, ctx, workspace: Path) -> None:
    (workspace / "src").mkdir()
    (workspace / "src" / "m.py").write_text("import os\ndef main():\n    pass\n")
    assert run(registry, ctx, "fs.search", pattern=r"def \w+") == "src/m.py:2: def main():"


def test_search_with_glob_only_looks_at_matching_files(registry, ctx, workspace: Path) -> None:
    (workspace / "a.py").write_text("needle\n")
    (workspace / "a.txt").write_text("needle\n")
    assert run(registry, ctx, "fs.search", pattern="needle", glob="*.py") == "a.py:1: needle"


def test_search_skips_binary_files_and_git(registry, ctx, workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(b"needle\0\x01\x02")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("needle\n")
    (workspace / "t.txt").write_text("a needle here\n")
    assert run(registry, ctx, "fs.search", pattern="needle") == "t.txt:1: a needle here"


def test_search_stops_at_max_matches(registry, ctx, workspace: Path) -> None:
    (workspace / "t.txt").write_text("x\n" * 5)
    assert run(registry, ctx, "fs.search", pattern="x", max_matches=2) == "t.txt:1: x\nt.txt:2: x\n[stopped after 2 matches]"


def test_search_with_no_match_says_so(registry, ctx, workspace: Path) -> None:
    (workspace / "t.txt").write_text("hay\n")
    assert run(registry, ctx, "fs.search", pattern="needle") == "no matches"


def test_search_with_invalid_regex_is_an_argument_error(registry, ctx) -> None:
    with pytest.raises(ToolArgumentsError, match="pattern: invalid regular expression"):
        run(registry, ctx, "fs.search", pattern="(unclosed")


def test_search_does_not_follow_symlinks_out_of_the_workspace(
    registry, ctx, workspace: Path, outside: Path
) -> None:
    (workspace / "leakdir").symlink_to(outside, target_is_directory=True)
    (workspace / "leak.txt").symlink_to(outside / "secret.txt")
    assert run(registry, ctx, "fs.search", pattern="secret") == "no matches"


def test_search_outside_the_workspace_is_rejected(registry, ctx) -> None:
    with pytest.raises(WorkspaceEscapeError):
        run(registry, ctx, "fs.search", pattern="x", path="..")


# --- fs.write ------------------------------------------------------------------------


def test_write_creates_the_file_and_reports_bytes(registry, ctx, workspace: Path) -> None:
    assert run(registry, ctx, "fs.write", path="new.txt", content="héllo") == "wrote 6 bytes to new.txt"
    assert (workspace / "new.txt").read_text(encoding="utf-8") == "héllo"


def test_write_replaces_existing_content(registry, ctx, workspace: Path) -> None:
    (workspace / "f.txt").write_text("old old old")
    run(registry, ctx, "fs.write", path="f.txt", content="new")
    assert (workspace / "f.txt").read_text() == "new"


def test_write_with_append_adds_to_the_end(registry, ctx, workspace: Path) -> None:
    (workspace / "log.txt").write_text("one\n")
    assert run(registry, ctx, "fs.write", path="log.txt", content="two\n", append=True) == "appended 4 bytes to log.txt"
    assert (workspace / "log.txt").read_text() == "one\ntwo\n"


def test_write_creates_missing_parent_directories(registry, ctx, workspace: Path) -> None:
    run(registry, ctx, "fs.write", path="a/b/c.txt", content="x")
    assert (workspace / "a" / "b" / "c.txt").read_text() == "x"


def test_write_without_create_dirs_into_missing_directory_is_a_tool_error(registry, ctx) -> None:
    with pytest.raises(ToolError, match="does not exist"):
        run(registry, ctx, "fs.write", path="a/b.txt", content="x", create_dirs=False)


def test_write_through_a_symlinked_directory_leaving_the_workspace_is_rejected(
    registry, ctx, workspace: Path, outside: Path
) -> None:
    (workspace / "leakdir").symlink_to(outside, target_is_directory=True)
    with pytest.raises(WorkspaceEscapeError):
        run(registry, ctx, "fs.write", path="leakdir/pwned.txt", content="x")
    assert not (outside / "pwned.txt").exists()


def test_write_to_absolute_path_outside_the_workspace_is_rejected(registry, ctx, outside: Path) -> None:
    with pytest.raises(WorkspaceEscapeError):
        run(registry, ctx, "fs.write", path=str(outside / "pwned.txt"), content="x")
    assert not (outside / "pwned.txt").exists()


def test_write_to_a_directory_is_a_tool_error(registry, ctx, workspace: Path) -> None:
    (workspace / "d").mkdir()
    with pytest.raises(ToolError, match="is a directory"):
        run(registry, ctx, "fs.write", path="d", content="x")


def test_file_tools_declare_their_risk_class() -> None:
    assert [t.risk for t in (FsList(), FsRead(), FsSearch(), FsWrite())] == [
        "read_only", "read_only", "read_only", "effectful",
    ]


def _keys(registry, ctx: ToolContext, name: str, **arguments) -> list[str]:
    return registry.execute(ToolCall(id="c1", name=name, arguments=arguments), ctx).state_keys


def test_a_whole_file_read_and_a_replacing_write_carry_the_file_state_key(registry, ctx, workspace: Path) -> None:
    (workspace / "abc.txt").write_text("abcdef")
    assert _keys(registry, ctx, "fs.read", path="./abc.txt") == ["file:abc.txt"]
    assert _keys(registry, ctx, "fs.write", path="abc.txt", content="x") == ["file:abc.txt"]


def test_a_partial_read_or_an_append_never_supersedes_a_whole_read(registry, ctx, workspace: Path) -> None:
    (workspace / "abc.txt").write_text("abcdef")
    assert _keys(registry, ctx, "fs.read", path="abc.txt", limit=2) == []
    assert _keys(registry, ctx, "fs.read", path="abc.txt", offset=1) == []
    assert _keys(registry, ctx, "fs.write", path="abc.txt", content="x", append=True) == []


# ---------------------------------------------------------------- hostile arguments


def test_a_catastrophic_backtracking_pattern_is_searched_in_linear_time(registry, ctx, workspace: Path) -> None:
    # With Python's re, (a+)+$ on this 30-byte line held the GIL and froze the worker.
    (workspace / "t.txt").write_text("a" * 29 + "!\n" + "a" * 30 + "\n")

    assert run(registry, ctx, "fs.search", pattern="(a+)+$") == "t.txt:2: " + "a" * 30


def test_a_pattern_with_a_backreference_is_an_argument_error_naming_re2(registry, ctx) -> None:
    with pytest.raises(ToolArgumentsError, match="RE2 syntax: no backreferences"):
        run(registry, ctx, "fs.search", pattern=r"(a)\1")


def test_a_huge_pattern_or_glob_is_an_argument_error(registry, ctx) -> None:
    with pytest.raises(ToolArgumentsError, match="pattern: String should have at most 1000 characters"):
        run(registry, ctx, "fs.search", pattern="a" * 1001)
    with pytest.raises(ToolArgumentsError, match="glob: String should have at most 256 characters"):
        run(registry, ctx, "fs.search", pattern="a", glob="*" * 257)


def test_reading_a_fifo_is_refused_instead_of_blocking_a_thread(registry, ctx, workspace: Path) -> None:
    # Seven such reads used to take every activity thread of the worker, for good.
    os.mkfifo(workspace / "pipe")

    with pytest.raises(NotARegularFileError, match="'pipe' is a fifo, not a regular file"):
        run(registry, ctx, "fs.read", path="pipe")


def test_writing_a_fifo_is_refused(registry, ctx, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")

    with pytest.raises(NotARegularFileError, match="is a fifo"):
        run(registry, ctx, "fs.write", path="pipe", content="x")


def test_search_skips_a_fifo(registry, ctx, workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    (workspace / "t.txt").write_text("needle\n")

    assert run(registry, ctx, "fs.search", pattern="needle") == "t.txt:1: needle"


def test_reading_a_device_through_a_symlink_is_refused(registry, ctx, workspace: Path) -> None:
    (workspace / "zero").symlink_to("/dev/zero")

    with pytest.raises(ToolError):
        run(registry, ctx, "fs.read", path="zero")


@pytest.mark.parametrize(
    "path, reason",
    [
        ("a\0b.txt", "it holds a NUL byte"),
        ("x" * 5000, "a name longer than 255 bytes"),
        ("loop/x.txt", "symlink loop"),
        ("\ud800.txt", "cannot be encoded as a file name"),
    ],
)
@pytest.mark.parametrize("tool", ["fs.write", "fs.read", "fs.list", "fs.search"])
def test_a_path_no_file_system_call_takes_is_an_invalid_path_error(
    registry, ctx, workspace: Path, tool: str, path: str, reason: str
) -> None:
    # These used to raise ValueError / OSError / RuntimeError: an effectful call's ledger row
    # stayed `claimed` and the session asked an operator to reconcile an effect that never started.
    (workspace / "loop").symlink_to("loop")
    arguments = {"fs.write": {"content": "x"}, "fs.search": {"pattern": "x"}}.get(tool, {})

    with pytest.raises(InvalidPathError, match=reason):
        run(registry, ctx, tool, path=path, **arguments)


def test_any_exception_of_a_tool_is_a_typed_tool_error(ctx) -> None:
    class Broken(Tool):
        name = "test.broken"
        description = "raises"
        risk = "effectful"

        class Args(ToolArgs):
            pass

        def run(self, args, ctx):
            raise KeyError("surprise")

    registry = ToolRegistry([Broken()])
    with pytest.raises(ToolCrashedError, match="test.broken failed unexpectedly: KeyError: 'surprise'"):
        registry.execute(ToolCall(id="c1", name="test.broken", arguments={}), ctx)


def test_a_search_stops_at_the_calls_time_bound(registry, workspace: Path) -> None:
    for i in range(50):
        (workspace / f"f{i}.txt").write_text("x\n")
    ctx = ToolContext(workspace=workspace, timeout_seconds=0)

    with pytest.raises(ToolError, match="the call's time bound is 0 s"):
        run(registry, ctx, "fs.search", pattern="y")


def test_an_exception_raised_while_the_call_is_cancelled_propagates_as_it_is(workspace: Path) -> None:
    # Temporal cancels a thread-pool activity by raising its CancelledError inside the tool's
    # thread: it must reach the runner, not turn into a tool error the model reads.
    class Cancelled(Exception):
        pass

    class Sleeper(Tool):
        name = "test.sleeper"
        description = "interrupted"
        risk = "read_only"

        class Args(ToolArgs):
            pass

        def run(self, args, ctx):
            raise Cancelled()

    ctx = ToolContext(workspace=workspace, is_cancelled=lambda: True)
    with pytest.raises(Cancelled):
        ToolRegistry([Sleeper()]).execute(ToolCall(id="c1", name="test.sleeper", arguments={}), ctx)


def test_a_directory_swapped_for_a_symlink_after_the_check_is_not_followed(workspace: Path, outside: Path) -> None:
    from agentrt.activities.tools._workspace import open_regular

    (workspace / "a").mkdir()
    (workspace / "a" / "secret.txt").write_text("inside")
    path = resolve_in_workspace(workspace, "a/secret.txt")
    (workspace / "a").rename(workspace / "a_moved")
    (workspace / "a").symlink_to(outside)  # the race: the checked directory is now a link out

    with pytest.raises(InvalidPathError, match="replaced while it was opened"):
        open_regular(path, "a/secret.txt", os.O_RDONLY, root=workspace.resolve())


def test_reading_a_socket_is_refused_and_says_it_is_a_socket(registry, ctx, workspace: Path) -> None:
    import socket

    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(workspace / "sock"))
        with pytest.raises(NotARegularFileError, match="is a socket"):
            run(registry, ctx, "fs.read", path="sock")


def test_a_tree_deeper_than_the_recursion_limit_is_listed_without_an_error(registry, ctx, workspace: Path) -> None:
    deep = workspace
    for _ in range(1200):  # os.makedirs itself recurses too deep for this
        deep = deep / "d"
        os.mkdir(deep)

    try:
        out = run(registry, ctx, "fs.list", recursive=True, max_entries=10_000)

        assert out.count("\n") + 1 == 64  # MAX_WALK_DEPTH levels of directories below the start
        assert run(registry, ctx, "fs.search", pattern="x") == "no matches"
    finally:
        while deep != workspace:  # pytest's own clean-up (shutil.rmtree) recurses too deep for it
            os.rmdir(deep)
            deep = deep.parent


def test_a_huge_offset_or_a_directory_path_for_a_write_is_refused(registry, ctx, workspace: Path) -> None:
    (workspace / "a.txt").write_text("a")
    with pytest.raises(ToolArgumentsError, match="offset"):
        run(registry, ctx, "fs.read", path="a.txt", offset=10**30)
    with pytest.raises(ToolError, match="is a directory"):
        run(registry, ctx, "fs.write", path="newdir/", content="x")
    assert not (workspace / "newdir").exists()


def test_a_pattern_that_compiles_to_a_huge_program_is_refused(registry, ctx) -> None:
    # One 64 KiB line against this ran 57 s past a 2 s bound: RE2's cost there is line x program size.
    pattern = r"(?:\w{0,30}a){30}" * 3 + "c"

    with pytest.raises(ToolArgumentsError, match="regular expression too complex: an RE2 program of"):
        run(registry, ctx, "fs.search", pattern=pattern)


def test_parents_are_not_made_through_a_directory_swapped_for_a_symlink(workspace: Path, outside: Path) -> None:
    from agentrt.activities.tools._workspace import make_directories

    (workspace / "d").mkdir()
    target = resolve_in_workspace(workspace, "d/new/deeper")
    (workspace / "d").rename(workspace / "d_moved")
    (workspace / "d").symlink_to(outside)

    with pytest.raises(InvalidPathError, match="not a directory"):
        make_directories(target, "d/new/deeper", root=workspace.resolve())
    assert not (outside / "new").exists()


def test_a_write_through_a_link_to_a_protected_file_is_refused(registry, ctx, workspace: Path) -> None:
    (workspace / ".env").write_text("KEY=1\n")
    (workspace / "notes.txt").symlink_to(".env")

    with pytest.raises(ToolError, match="a link to '.env', a file written only when asked for by its own name"):
        run(registry, ctx, "fs.write", path="notes.txt", content="KEY=stolen\n")
    assert (workspace / ".env").read_text() == "KEY=1\n"
