"""Triage of a model's tool calls (workflows/_tool_calls.py): unknown tools, bad arguments, policy."""

from __future__ import annotations

from agentrt.schemas import ApprovalPolicy, ToolCall, ToolSpec
from agentrt.workflows._tool_calls import PREVIEW_CHARS, arguments_preview, preview, triage
from agentrt.workflows.policy import PolicyEngine

READ = ToolSpec(
    name="fs.read",
    description="read a file",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    risk="read_only",
)
WRITE = ToolSpec(
    name="fs.write",
    description="write a file",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
        "required": ["path", "text"],
        "additionalProperties": False,
    },
    risk="effectful",
)
TOOLS = {spec.name: spec for spec in (READ, WRITE)}
DEFAULT_POLICY = PolicyEngine(ApprovalPolicy())


def _call(name: str, arguments: dict | None, **fields: str) -> ToolCall:
    return ToolCall(id="call-1", name=name, arguments=arguments, **fields)


# ---------------------------------------------------------------- refusals


def test_an_unknown_tool_is_refused_naming_the_available_tools() -> None:
    verdict = triage(_call("shell.run", {"cmd": "ls"}), TOOLS, DEFAULT_POLICY)
    assert (verdict.action, verdict.failure) == ("refuse", "unknown_tool")
    assert verdict.text == "unknown tool 'shell.run' (not granted to this session); available tools: fs.read, fs.write"


def test_an_unknown_tool_in_a_session_without_tools_says_none_are_available() -> None:
    verdict = triage(_call("fs.read", {"path": "a"}), {}, DEFAULT_POLICY)
    assert verdict.failure == "unknown_tool" and verdict.text.endswith("available tools: (none)")


def test_arguments_that_are_not_json_are_refused_with_the_parse_error_and_what_was_received() -> None:
    call = _call("fs.read", None, arguments_raw='{"path": "a.md"', arguments_error="Expecting ',' delimiter")
    verdict = triage(call, TOOLS, DEFAULT_POLICY)
    assert (verdict.action, verdict.failure) == ("refuse", "invalid_arguments")
    assert "not a JSON object (Expecting ',' delimiter)" in verdict.text
    assert verdict.text.endswith('received: {"path": "a.md"')


def test_the_received_text_of_unparsable_arguments_is_cut_to_500_characters() -> None:
    call = _call("fs.read", None, arguments_raw="x" * 2_000, arguments_error="bad")
    verdict = triage(call, TOOLS, DEFAULT_POLICY)
    assert verdict.text.endswith("received: " + "x" * 500)


def test_arguments_missing_a_required_property_are_refused_with_the_schema_problem() -> None:
    verdict = triage(_call("fs.read", {}), TOOLS, DEFAULT_POLICY)
    assert (verdict.action, verdict.failure) == ("refuse", "invalid_arguments")
    assert verdict.text == "invalid arguments for fs.read: (arguments): 'path' is a required property"


def test_arguments_of_the_wrong_type_are_refused_naming_the_property() -> None:
    verdict = triage(_call("fs.read", {"path": 7}), TOOLS, DEFAULT_POLICY)
    assert verdict.failure == "invalid_arguments"
    assert "path: 7 is not of type 'string'" in verdict.text


def test_every_schema_problem_is_listed() -> None:
    verdict = triage(_call("fs.write", {"path": 1, "extra": True}), TOOLS, DEFAULT_POLICY)
    problems = verdict.text.removeprefix("invalid arguments for fs.write: ").split("; ")
    assert len(problems) == 3  # text missing, extra not allowed, path not a string


def test_invalid_arguments_are_refused_before_the_policy_is_asked() -> None:
    deny_all = PolicyEngine(ApprovalPolicy(read_only="deny"))
    assert triage(_call("fs.read", {}), TOOLS, deny_all).failure == "invalid_arguments"


# ---------------------------------------------------------------- policy


def test_a_tool_the_policy_denies_is_refused_with_the_policy_reason() -> None:
    policy = PolicyEngine(ApprovalPolicy(effectful="deny"))
    verdict = triage(_call("fs.write", {"path": "a", "text": "b"}), TOOLS, policy)
    assert (verdict.action, verdict.failure) == ("refuse", "denied")
    assert verdict.text == "tool call denied by policy (policy rule for effectful calls: deny)"


def test_a_tool_the_policy_allows_runs_with_the_reason_and_the_setting_that_allowed_it() -> None:
    verdict = triage(_call("fs.read", {"path": "a"}), TOOLS, DEFAULT_POLICY)
    assert (verdict.action, verdict.failure) == ("run", None)
    assert (verdict.text, verdict.rule) == ("policy rule for read_only calls: allow", "approval.read_only = allow")


def test_a_file_write_outside_the_workspace_is_refused_as_denied_before_any_approval() -> None:
    policy = PolicyEngine(ApprovalPolicy(), workspace="/work/ws")
    verdict = triage(_call("fs.write", {"path": "../../etc/passwd", "text": "x"}), TOOLS, policy)
    assert (verdict.action, verdict.failure) == ("refuse", "denied")
    assert verdict.text == "tool call denied by policy (fs.write writes only inside the workspace, and '../../etc/passwd' is outside it)"


def test_a_tool_the_policy_asks_about_waits_for_approval_with_the_reason() -> None:
    verdict = triage(_call("fs.write", {"path": "a", "text": "b"}), TOOLS, DEFAULT_POLICY)
    assert (verdict.action, verdict.failure) == ("ask", None)
    assert verdict.text == "policy rule for effectful calls: ask; fs.write (effectful)"


def test_a_per_tool_rule_beats_the_risk_rule() -> None:
    policy = PolicyEngine(ApprovalPolicy(effectful="deny", tools={"fs.write": "allow"}))
    assert triage(_call("fs.write", {"path": "a", "text": "b"}), TOOLS, policy).action == "run"


def test_the_triage_carries_the_call_it_judged() -> None:
    call = _call("fs.read", {"path": "a"})
    assert triage(call, TOOLS, DEFAULT_POLICY).call is call


# ---------------------------------------------------------------- preview


def test_a_short_text_is_previewed_as_it_is() -> None:
    assert preview("hello world") == "hello world"


def test_a_preview_is_on_one_line() -> None:
    assert preview("line one\n\n  line\ttwo  ") == "line one line two"


def test_a_long_text_is_cut_to_the_limit_with_an_ellipsis() -> None:
    text = preview("x" * 1_000)
    assert len(text) == PREVIEW_CHARS and text.endswith("…")


def test_a_text_of_exactly_the_limit_is_not_cut() -> None:
    assert preview("y" * 10, limit=10) == "y" * 10


def test_arguments_preview_shows_the_arguments_as_json() -> None:
    assert arguments_preview({"path": "a.md"}, 50) == '{"path": "a.md"}'
    assert arguments_preview(None, 50) == "null"
