"""Tests for ScriptedProvider: the offline model demos and most tests run on."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from agentrt.activities.providers import ScriptedProvider
from agentrt.schemas import InvalidScriptError, Message, ModelProfile, ModelRequest, ScriptExhaustedError, ToolCall


def write_json(path: Path, script: dict) -> str:
    path.write_text(json.dumps(script), encoding="utf-8")
    return str(path)


def request(script: str, messages: list[Message]) -> ModelRequest:
    return ModelRequest(profile=ModelProfile(name="demo", provider="scripted", script=script), messages=messages)


def provider(script: str) -> ScriptedProvider:
    return ScriptedProvider(ModelProfile(name="demo", provider="scripted", script=script))


SCRIPT = {
    "turns": [
        {"text": "I'll read it.", "tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}]},
        {"text": "The readme says hello."},
    ]
}


async def test_responses_come_in_script_order_across_calls(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", SCRIPT)
    history = [Message(role="user", text="What does the readme say?")]

    first = await provider(path).complete(request(path, history))
    history += [
        Message(role="assistant", text=first.text, tool_calls=first.tool_calls),
        Message(role="tool", tool_call_id=first.tool_calls[0].id, name="fs.read", text="hello"),
    ]
    second = await provider(path).complete(request(path, history))

    assert first.text == "I'll read it."
    assert first.tool_calls == [ToolCall(id="call_0_0", name="fs.read", arguments={"path": "README.md"})]
    assert first.stop_reason == "tool_use"
    assert second.text == "The readme says hello."
    assert second.tool_calls == []


async def test_the_same_history_gets_the_same_response(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", SCRIPT)
    history = [Message(role="user", text="hi")]

    first = await provider(path).complete(request(path, history))
    again = await provider(path).complete(request(path, history))

    assert first == again


async def test_text_streams_through_on_delta_in_pieces_that_join_to_the_text(tmp_path: Path) -> None:
    text = "one two three four five six seven  eight\nnine"
    path = write_json(tmp_path / "s.json", {"turns": [{"text": text}]})
    deltas: list[str] = []

    async def on_delta(piece: str) -> None:
        deltas.append(piece)

    response = await provider(path).complete(request(path, [Message(role="user", text="go")]), on_delta)

    assert len(deltas) > 1
    assert "".join(deltas) == text == response.text


async def test_raw_arguments_that_do_not_parse_become_arguments_error(tmp_path: Path) -> None:
    turn = {"tool_calls": [{"name": "fs.read", "arguments_raw": "{not json"}]}
    path = write_json(tmp_path / "s.json", {"turns": [turn]})

    response = await provider(path).complete(request(path, [Message(role="user", text="go")]))

    (call,) = response.tool_calls
    assert (call.id, call.arguments, call.arguments_raw) == ("call_0_0", None, "{not json")
    assert call.arguments_error is not None


async def test_raw_arguments_that_parse_become_arguments(tmp_path: Path) -> None:
    turn = {"tool_calls": [{"name": "fs.read", "arguments_raw": '{"path": "x"}'}]}
    path = write_json(tmp_path / "s.json", {"turns": [turn]})

    response = await provider(path).complete(request(path, [Message(role="user", text="go")]))

    assert response.tool_calls[0].arguments == {"path": "x"}


async def test_a_reply_with_lone_surrogates_or_deep_arguments_comes_back_as_a_real_model_s_would(tmp_path: Path) -> None:
    # Kept as they were, these made provider.complete fail on every attempt: its result could not
    # be written to workflow history (surrogates), or not read back from it (nesting).
    deep: dict = {}
    inner = deep
    for _ in range(100):
        inner["a"] = {}
        inner = inner["a"]
    path = write_json(tmp_path / "s.json", {"turns": [{"text": "bad \ud800 text", "tool_calls": [
        {"name": "fs.read", "arguments": {"path": "README.md\udcff"}},
        {"name": "fs.read", "arguments": deep},
        {"name": "fs.read", "arguments": {"path": "README.md", "limit": 2}},
    ]}]})

    response = await provider(path).complete(request(path, [Message(role="user", text="hi")]))

    surrogate, nested, fine = response.tool_calls
    assert response.text == "bad \ufffd text"
    assert surrogate.arguments is None and "lone UTF-16 surrogate" in (surrogate.arguments_error or "")
    assert nested.arguments is None and "nest deeper than" in (nested.arguments_error or "")
    assert fine == ToolCall(id="call_0_2", name="fs.read", arguments={"path": "README.md", "limit": 2})
    response.model_dump_json()  # what history holds


async def test_yaml_script_is_read(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        "turns:\n"
        "  - text: Listing files.\n"
        "    tool_calls:\n"
        "      - name: shell.run\n"
        "        arguments: {cmd: ls}\n"
        "      - name: fs.read\n"
        "        arguments: {path: a.txt}\n",
        encoding="utf-8",
    )

    response = await provider(str(path)).complete(request(str(path), [Message(role="user", text="go")]))

    assert response.text == "Listing files."
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_0_0", "shell.run", {"cmd": "ls"}),
        ("call_0_1", "fs.read", {"path": "a.txt"}),
    ]


async def test_a_reply_past_the_end_of_the_script_is_a_typed_not_retryable_error(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", {"turns": [{"text": "only one"}]})
    history = [
        Message(role="user", text="a"),
        Message(role="assistant", text="only one"),
        Message(role="user", text="b"),
    ]

    with pytest.raises(ScriptExhaustedError) as caught:
        await provider(path).complete(request(path, history))

    assert caught.value.retryable is False
    assert (caught.value.reply_index, caught.value.replies) == (1, 1)
    assert "script exhausted" in str(caught.value) and str(path) in str(caught.value)
    assert caught.value.partial_usage.input_tokens > 0


async def test_usage_is_estimated_at_four_characters_per_token(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", {"turns": [{"text": "12345"}]})

    response = await provider(path).complete(request(path, [Message(role="user", text="123456789")]))

    assert (response.usage.input_tokens, response.usage.output_tokens) == (3, 2)


@pytest.mark.parametrize("count", [0, 1, 5])
async def test_input_tokens_count_the_tool_specs_as_their_json_list(tmp_path: Path, count: int) -> None:
    from agentrt.activities.tools import default_registry

    path = write_json(tmp_path / "s.json", {"turns": [{"text": "ok"}] * 2})
    tools = default_registry().specs(None)[0][:count]
    specs_json = json.dumps([t.model_dump(mode="json", exclude={"local_activity"}) for t in tools])
    sent = request(path, [Message(role="user", text="hi")]).model_copy(update={"tools": tools, "system": "be brief"})

    for _ in range(2):  # the second call counts the same specs from its cache
        response = await provider(path).complete(sent)
        assert response.usage.input_tokens == -(-(len("be brief") + len(specs_json) + len("hi")) // 4)


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("bad.json", "{not json", "does not parse"),
        ("bad.yaml", "turns: [unclosed", "does not parse"),
        ("shape.json", json.dumps({"turns": [{"txt": "typo"}]}), "wrong shape"),
        ("list.json", json.dumps([{"text": "x"}]), "wrong shape"),
        (
            "both.json",
            json.dumps({"turns": [{"tool_calls": [{"name": "a", "arguments": {}, "arguments_raw": "{}"}]}]}),
            "wrong shape",
        ),
    ],
)
async def test_invalid_script_file_raises_invalid_script_error(
    tmp_path: Path, name: str, content: str, reason: str
) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")

    with pytest.raises(InvalidScriptError, match=reason) as caught:
        await provider(str(path)).complete(request(str(path), [Message(role="user", text="go")]))

    assert caught.value.path == str(path)


async def test_missing_script_file_raises_invalid_script_error(tmp_path: Path) -> None:
    path = str(tmp_path / "nope.json")

    with pytest.raises(InvalidScriptError, match="cannot read"):
        await provider(path).complete(request(path, [Message(role="user", text="go")]))


async def test_edited_script_is_reread(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", {"turns": [{"text": "before"}]})
    first = await provider(path).complete(request(path, [Message(role="user", text="go")]))
    write_json(tmp_path / "s.json", {"turns": [{"text": "after"}]})
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))

    second = await provider(path).complete(request(path, [Message(role="user", text="go")]))

    assert (first.text, second.text) == ("before", "after")


async def test_short_delay_is_waited_out_before_answering(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", {"turns": [{"text": "slow", "delay_seconds": 0.01}]})

    response = await provider(path).complete(request(path, [Message(role="user", text="go")]))

    assert response.text == "slow"


async def test_slow_model_call_can_be_cancelled_during_its_delay(tmp_path: Path) -> None:
    path = write_json(tmp_path / "s.json", {"turns": [{"text": "never said", "delay_seconds": 3600}]})
    deltas: list[str] = []

    async def on_delta(piece: str) -> None:
        deltas.append(piece)

    task = asyncio.create_task(provider(path).complete(request(path, [Message(role="user", text="go")]), on_delta))
    _, pending = await asyncio.wait({task}, timeout=0.05)
    task.cancel()

    assert task in pending
    with pytest.raises(asyncio.CancelledError):
        await task
    assert deltas == []


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda d: (d / "s.json").symlink_to("/etc/passwd"), "symbolic link"),
        (lambda d: (d / "s.json").symlink_to("/dev/zero"), "symbolic link"),
        (lambda d: os.mkfifo(d / "s.json"), "fifo"),
        (lambda d: open(d / "s.json", "wb").truncate(64 * 1024 * 1024), "more than the 16,777,216"),
    ],
    ids=["symlink-to-passwd", "symlink-to-dev-zero", "fifo-without-writer", "huge"],
)
async def test_a_script_that_is_no_bounded_regular_file_is_refused_without_blocking(
    tmp_path: Path, make, reason: str
) -> None:
    make(tmp_path)
    path = str(tmp_path / "s.json")

    with pytest.raises(InvalidScriptError, match=reason):
        await asyncio.wait_for(provider(path).complete(request(path, [Message(role="user", text="go")])), 30)


async def test_a_script_under_a_symlinked_directory_is_refused(tmp_path: Path) -> None:
    write_json(tmp_path / "s.json", {"turns": [{"text": "hi"}]})
    (tmp_path / "via").symlink_to(tmp_path)
    path = str(tmp_path / "via" / "s.json")

    with pytest.raises(InvalidScriptError, match="symbolic link"):
        await provider(path).complete(request(path, [Message(role="user", text="go")]))
