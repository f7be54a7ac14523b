"""``fit_context``: the worker's measure of a model call's input by source, and the window it
holds — pinned parts over the budget fail typed before anything is sent; the rest is fitted by
leaving out the memories, then the oldest messages, never a tool result without its call."""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

from agentrt.activities._call_context import OMITTED_NOTE
from agentrt.activities._context_budget import AssembledContext, fit_context
from agentrt.schemas import ContextPlan, Message, ModelCallInput, ModelProfile, ToolCall

PROFILE = ModelProfile(name="tiny", provider="scripted", context_window=2_000, max_output_tokens=500)  # 1,500 for input
CALL = ModelCallInput(session_id="s1", turn_id="t1", round=1, profile="tiny", upto_position=9, reply_position=9)


def fit(messages: list[Message], *, base: str = "You help.", memories: str = "", summary: str = "", call: ModelCallInput = CALL):
    summarised = base + summary
    return fit_context(
        call, PROFILE, [], base=base, summarised=summarised, with_memories=summarised + memories, budget_note=None,
        messages=messages,
    )


def test_a_call_that_fits_is_sent_whole_and_its_sources_add_up() -> None:
    messages = [Message(role="user", text="a" * 400), Message(role="assistant", text="b" * 400), Message(role="user", text="now?")]
    fitted = fit(messages, memories="\n\nRelevant memories: " + "m" * 200, summary="\n\nSummary: " + "s" * 100)

    assert isinstance(fitted, AssembledContext) and fitted.messages == messages
    b = fitted.breakdown
    assert (b.history, b.current_message, b.memories > 0, b.summary > 0) == (208, 5, True, True)
    assert b.total == b.system_prompt + b.tool_specs + b.memories + b.summary + b.history + b.current_message
    assert b.pinned == b.system_prompt + b.summary + b.current_message and b.budget == 1_500
    assert fitted.system is not None and fitted.system.endswith("m" * 200)


def test_a_current_message_over_the_window_fails_context_overflow_with_the_breakdown() -> None:
    fitted = fit([Message(role="user", text="x" * 1_000_000)])

    assert isinstance(fitted, ApplicationError)
    assert (fitted.type, fitted.non_retryable) == ("ContextOverflow", True)
    assert "nothing was sent" in fitted.message
    details = fitted.details[0]
    assert isinstance(details, dict) and details["current_message"] == 250_004 and details["budget"] == 1_500


def test_a_system_prompt_over_the_window_fails_context_overflow() -> None:
    fitted = fit([Message(role="user", text="hi")], base="rule " * 2_000)

    assert isinstance(fitted, ApplicationError) and fitted.type == "ContextOverflow"


def test_memories_are_left_out_first_when_the_whole_does_not_fit() -> None:
    messages = [Message(role="user", text="q" * 2_000)]
    fitted = fit(messages, memories="\n\n" + "m" * 4_000)

    assert isinstance(fitted, AssembledContext)
    assert fitted.breakdown.memories_dropped and fitted.breakdown.memories == 0
    assert fitted.system == "You help." and fitted.messages == messages


def test_the_oldest_messages_go_next_and_a_tool_result_never_stays_without_its_call() -> None:
    call = ToolCall(id="c1", name="fs.read", arguments={"path": "a"})
    messages = [
        Message(role="user", text="old"),
        Message(role="assistant", text="", tool_calls=[call]),
        Message(role="tool", tool_call_id="c1", name="fs.read", text="r" * 6_000),  # alone over the window's rest
        Message(role="assistant", text="read it"),
        Message(role="user", text="and now?"),
    ]
    fitted = fit(messages)

    assert isinstance(fitted, AssembledContext)
    assert [m.role for m in fitted.messages] == ["user", "assistant", "user"]
    assert fitted.messages[0].text == OMITTED_NOTE and fitted.breakdown.omitted_messages == 3
    assert fitted.breakdown.total <= fitted.breakdown.budget


def test_sizes_follow_the_plan_s_calibration() -> None:
    calibrated = CALL.model_copy(update={"plan": ContextPlan(ranges=[(0, 1)], estimated_tokens=200, raw_tokens=100)})
    plain = fit([Message(role="user", text="a" * 396)])
    doubled = fit([Message(role="user", text="a" * 396)], call=calibrated)

    assert isinstance(plain, AssembledContext) and isinstance(doubled, AssembledContext)
    assert (plain.breakdown.current_message, doubled.breakdown.current_message) == (103, 206)


def test_the_newest_tool_results_share_what_the_current_message_leaves() -> None:
    call = ToolCall(id="c1", name="fs.read", arguments={"path": "a"})
    messages = [
        Message(role="user", text="q" * 3_000),  # pinned: never cut
        Message(role="assistant", text="", tool_calls=[call, call.model_copy(update={"id": "c2"})]),
        Message(role="tool", tool_call_id="c1", name="fs.read", text="r" * 4_000),
        Message(role="tool", tool_call_id="c2", name="fs.read", text="s" * 4_000),
    ]
    fitted = fit(messages)

    assert isinstance(fitted, AssembledContext)
    assert fitted.messages[0].text == "q" * 3_000
    assert all("omitted to fit the context window" in m.text for m in fitted.messages[2:])
    assert fitted.breakdown.total <= fitted.breakdown.budget
