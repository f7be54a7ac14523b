"""``destructive_findings``: the destructive commands a graph node's answer holds, for its reviewer."""

from __future__ import annotations

from agentrt.activities._answer_risk import MAX_FINDINGS, destructive_findings


def test_a_recursive_delete_in_a_code_block_is_a_high_finding_naming_the_command_and_rule() -> None:
    assert destructive_findings("I cleaned up:\n```sh\n$ rm -rf /\n```") == [
        "high: a destructive command in the node's answer: 'rm -rf /' (rm -r)"
    ]


def test_a_destructive_line_a_diff_adds_is_found_and_one_it_removes_is_not() -> None:
    diff = "diff --git a/Makefile b/Makefile\n+++ b/Makefile\n-\tsudo rm -rf build\n+\tsudo make install"
    assert destructive_findings(diff) == ["high: a destructive command in the node's answer: 'sudo make install' (sudo)"]


def test_an_inline_code_span_and_a_write_to_a_secrets_file_are_found() -> None:
    findings = destructive_findings("Run `mkfs.ext4 /dev/sda1` first, then:\necho TOKEN=1 > .env")
    assert [f.rsplit(" (", 1)[1] for f in findings] == ["mkfs.ext4)", "writes .env)"]


def test_prose_and_safe_commands_raise_no_finding() -> None:
    assert destructive_findings("All done. I ran `pytest -q` (12 passed) and wrote notes.md; I did not delete anything.") == []


def test_a_hostile_answer_gets_bounded_work_and_at_most_max_findings() -> None:
    answer = "\n".join(f"rm -rf /data{i}" for i in range(100_000)) + "\n" + "x" * 1_000_000
    assert len(destructive_findings(answer)) == MAX_FINDINGS
