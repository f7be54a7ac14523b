"""The scripted model for autonomous tasks and task graphs: a script's ``sessions`` sections (one per
task session, chosen by ``ModelRequest.script_session``), its ``reviews`` (acceptance reviews, by
``review_index``), its ``plan`` (a graph planner's answers, by ``review_index``) and its ``nodes``
(per graph node, by ``ModelRequest.script_node``, one entry per attempt: ``script_session``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentrt.activities.providers import ScriptedProvider
from agentrt.activities.providers.scripted import load_script
from agentrt.schemas import (
    InvalidScriptError,
    Message,
    ModelProfile,
    ModelRequest,
    ProviderHTTPError,
    ScriptExhaustedError,
)

PROFILE = ModelProfile(name="demo", provider="scripted", script="unused")


def write_json(path: Path, script: dict) -> str:
    path.write_text(json.dumps(script), encoding="utf-8")
    return str(path)


def provider(script: str) -> ScriptedProvider:
    return ScriptedProvider(PROFILE.model_copy(update={"script": script}))


def reply(script: str, index: int, session: int | None = None) -> ModelRequest:
    return ModelRequest(
        profile=PROFILE.model_copy(update={"script": script}), messages=[Message(role="user", text="go")],
        reply_index=index, script_session=session,
    )


def review(script: str, index: int, node: str | None = None, attempt: int | None = None) -> ModelRequest:
    return ModelRequest(
        profile=PROFILE.model_copy(update={"script": script}), messages=[Message(role="user", text="judge")],
        purpose="review", review_index=index, script_node=node, script_session=attempt,
    )


def node_reply(script: str, index: int, node: str, attempt: int | None) -> ModelRequest:
    return ModelRequest(
        profile=PROFILE.model_copy(update={"script": script}), messages=[Message(role="user", text="go")],
        reply_index=index, script_node=node, script_session=attempt,
    )


def plan(script: str, index: int) -> ModelRequest:
    return ModelRequest(
        profile=PROFILE.model_copy(update={"script": script}), messages=[Message(role="user", text="plan")],
        purpose="plan", review_index=index,
    )


def fenced(text: str) -> object:
    assert text.startswith("```json\n") and text.endswith("\n```")
    return json.loads(text.removeprefix("```json\n").removesuffix("\n```"))


SESSIONS = {
    "turns": [{"text": "plain"}],
    "sessions": [
        {"turns": [{"text": "s1 r0"}, {"text": "s1 r1"}]},
        {"turns": [{"text": "s2 r0"}]},
    ],
}


@pytest.mark.parametrize(("session", "index", "text"), [(1, 0, "s1 r0"), (1, 1, "s1 r1"), (2, 0, "s2 r0")])
async def test_a_task_session_walks_its_own_section(tmp_path: Path, session: int, index: int, text: str) -> None:
    path = write_json(tmp_path / "s.json", SESSIONS)

    assert (await provider(path).complete(reply(path, index, session))).text == text


async def test_a_request_without_a_session_number_uses_turns(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", SESSIONS)

    assert (await provider(path).complete(reply(path, 0))).text == "plain"


async def test_a_session_number_without_sections_uses_turns(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", {"turns": [{"text": "plain"}]})

    assert (await provider(path).complete(reply(path, 0, session=3))).text == "plain"


@pytest.mark.parametrize(("session", "index"), [(3, 0), (2, 1), (0, 0)])
async def test_past_the_last_section_or_reply_is_script_exhausted(tmp_path: Path, session: int, index: int) -> None:
    path = write_json(tmp_path / "s.json", SESSIONS)

    with pytest.raises(ScriptExhaustedError) as caught:
        await provider(path).complete(reply(path, index, session))

    assert caught.value.retryable is False and f"session {session} (of 2 scripted sessions)" in str(caught.value)


async def test_turns_may_be_left_out_when_sessions_are_given(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", {"sessions": [{"turns": [{"text": "only"}]}]})

    assert (await provider(path).complete(reply(path, 0, 1))).text == "only"
    with pytest.raises(ScriptExhaustedError):
        await provider(path).complete(reply(path, 0))


def test_a_script_without_turns_or_sessions_is_invalid(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", {"reviews": [{"verdict": "pass"}]})

    with pytest.raises(InvalidScriptError, match="give turns"):
        load_script(path)


def test_an_empty_list_of_turns_is_still_a_script(tmp_path: Path) -> None:
    assert load_script(write_json(tmp_path / "s.json", {"turns": []})).turns == []


async def test_reviews_answer_in_order_as_fenced_json(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", {"turns": [], "reviews": [
        {"verdict": "fail", "findings": ["no tests"], "summary": "not yet"},
        {"verdict": "pass", "summary": "done"},
    ]})

    first = await provider(path).complete(review(path, 0))
    second = await provider(path).complete(review(path, 1))

    assert first.text.startswith("```json\n") and first.text.endswith("\n```")
    assert json.loads(first.text.strip("`").removeprefix("json")) == {"verdict": "fail", "findings": ["no tests"], "summary": "not yet"}
    assert json.loads(second.text.strip("`").removeprefix("json"))["verdict"] == "pass"
    assert first.usage.output_tokens > 0


async def test_a_review_past_the_end_passes(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", {"turns": []})

    answer = await provider(path).complete(review(path, 5))

    assert json.loads(answer.text.strip("`").removeprefix("json"))["verdict"] == "pass"


async def test_a_review_may_answer_raw_text_or_a_provider_error(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", {"turns": [], "reviews": [{"text": "not json"}, {"error": "busy", "status": 529}]})

    assert (await provider(path).complete(review(path, 0))).text == "not json"
    with pytest.raises(ProviderHTTPError) as caught:
        await provider(path).complete(review(path, 1))
    assert caught.value.status == 529 and "#reviews/1" in str(caught.value.url)


async def test_reviews_and_advisor_reviews_are_counted_apart(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", {
        "turns": [], "advisor": [{"verdict": "reject"}], "reviews": [{"verdict": "fail"}],
    })
    advisor = ModelRequest(profile=PROFILE.model_copy(update={"script": path}), messages=[], purpose="advisor", review_index=0)

    assert '"reject"' in (await provider(path).complete(advisor)).text
    assert '"fail"' in (await provider(path).complete(review(path, 0))).text


# -- task graphs: plan and nodes ---------------------------------------------------------------

GRAPH = {"max_parallel": 2, "nodes": [{"id": "a", "prompt": "Do a"}, {"id": "b", "prompt": "Do b", "depends_on": ["a"]}]}

NODES = {
    "turns": [{"text": "plain"}],
    "sessions": [{"turns": [{"text": "session 1"}]}, {"turns": [{"text": "session 2"}]}],
    "reviews": [{"verdict": "fail", "findings": ["from reviews"]}],
    "nodes": {
        "a": [
            {"turns": [{"text": "a1 r0"}, {"text": "a1 r1"}], "review": {"verdict": "fail", "findings": ["a1 short"]}},
            {"turns": [{"text": "a2 r0"}]},
        ],
    },
}


async def test_planner_answers_come_in_order_as_fenced_graph_raw_text_or_error(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", {"plan": [{"graph": GRAPH}, {"text": "Paris."}, {"error": "busy", "status": 503}]})

    first = await provider(path).complete(plan(path, 0))
    second = await provider(path).complete(plan(path, 1))
    with pytest.raises(ProviderHTTPError) as caught:
        await provider(path).complete(plan(path, 2))

    assert fenced(first.text) == GRAPH and first.usage.output_tokens > 0
    assert second.text == "Paris."
    assert caught.value.status == 503 and "#plan/2" in str(caught.value.url)


async def test_a_planner_call_past_the_end_of_plan_is_script_exhausted(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", {"plan": [{"text": "only"}]})

    with pytest.raises(ScriptExhaustedError) as caught:
        await provider(path).complete(plan(path, 1))

    assert caught.value.retryable is False and "plan has 1 model replies" in str(caught.value)


@pytest.mark.parametrize("entry", [{}, {"graph": GRAPH, "text": "both"}, {"text": "x", "error": "y"}])
def test_a_plan_entry_gives_exactly_one_answer(tmp_path: Path, entry: dict) -> None:
    path = write_json(tmp_path / "s.json", {"plan": [entry]})

    with pytest.raises(InvalidScriptError, match="give exactly one of graph, text or error"):
        load_script(path)


@pytest.mark.parametrize(
    ("attempt", "index", "text"), [(1, 0, "a1 r0"), (1, 1, "a1 r1"), (2, 0, "a2 r0"), (7, 0, "a2 r0"), (None, 0, "a1 r0")]
)
async def test_a_node_s_session_walks_the_turns_of_its_attempt_and_the_last_one_past_the_end(
    tmp_path: Path, attempt: int | None, index: int, text: str
) -> None:
    path = write_json(tmp_path / "s.json", NODES)

    assert (await provider(path).complete(node_reply(path, index, "a", attempt))).text == text


async def test_a_node_s_reply_past_its_attempt_s_turns_is_script_exhausted(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", NODES)

    with pytest.raises(ScriptExhaustedError) as caught:
        await provider(path).complete(node_reply(path, 1, "a", 2))

    assert "node 'a' attempt 2 (of 2 scripted)" in str(caught.value)


@pytest.mark.parametrize(("attempt", "text"), [(1, "session 1"), (2, "session 2")])
async def test_a_node_absent_from_nodes_uses_sessions_as_before(tmp_path: Path, attempt: int, text: str) -> None:
    path = write_json(tmp_path / "s.json", NODES)

    assert (await provider(path).complete(node_reply(path, 0, "b", attempt))).text == text


async def test_a_node_s_review_answers_its_attempt_s_review_and_passes_without_one(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", NODES)

    first = await provider(path).complete(review(path, 0, node="a", attempt=1))
    second = await provider(path).complete(review(path, 1, node="a", attempt=2))

    assert fenced(first.text) == {"verdict": "fail", "findings": ["a1 short"], "summary": ""}
    assert fenced(second.text)["verdict"] == "pass"  # type: ignore[index]


async def test_a_review_of_a_node_absent_from_nodes_reads_reviews(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", NODES)

    answer = await provider(path).complete(review(path, 0, node="b", attempt=1))

    assert fenced(answer.text)["findings"] == ["from reviews"]  # type: ignore[index]


async def test_a_node_s_scripted_review_may_be_a_provider_error(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", {"nodes": {"a": [{"turns": [], "review": {"error": "busy", "status": 529}}]}})

    with pytest.raises(ProviderHTTPError) as caught:
        await provider(path).complete(review(path, 0, node="a", attempt=1))

    assert caught.value.status == 529 and "#nodes/a/1/review" in str(caught.value.url)


@pytest.mark.parametrize("script", [{"plan": [{"text": "x"}]}, {"nodes": {"a": [{"turns": []}]}}], ids=["plan", "nodes"])
def test_a_script_with_only_plan_or_nodes_is_valid(tmp_path: Path, script: dict) -> None:
    assert load_script(write_json(tmp_path / "s.json", script)).turns == []


def test_a_node_without_attempts_is_invalid(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", {"nodes": {"a": []}})

    with pytest.raises(InvalidScriptError, match="no attempts given for nodes 'a'"):
        load_script(path)


async def test_a_graph_script_without_the_requested_node_names_the_node_and_the_nodes_it_has(tmp_path) -> None:
    import json

    from agentrt.activities.providers.scripted import ScriptedProvider
    from agentrt.schemas import Message, ModelProfile, ModelRequest, ScriptExhaustedError

    path = tmp_path / "graph.json"
    path.write_text(json.dumps({"nodes": {"a": [{"turns": [{"text": "hi"}]}], "c": [{"turns": [{"text": "ho"}]}]}}))
    profile = ModelProfile(name="scripted", provider="scripted", script=str(path))
    request = ModelRequest(profile=profile, messages=[Message(role="user", text="go")], script_node="bb", script_session=1)
    with pytest.raises(ScriptExhaustedError) as err:
        await ScriptedProvider(profile).complete(request)
    assert "no entry for node 'bb'" in str(err.value) and "it has a, c" in str(err.value)
