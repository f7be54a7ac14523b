"""A hostile model against fused rounds (``fused-rounds-v1``): the read-only calls a model call runs
itself are the model's choice, so every path, id, argument and reply shape it sends is an attack.

Each test plays one kind of attack through a real session, fused, and most play it unfused too:
nothing outside the workspace (a file, the worker's environment) reaches the transcript, the
events or history; the worker goes on; and the fused session leaves the transcript and events
the same turn leaves unfused. Two differences are known and left as they are here: a follow-up
model call's retry is no ``ModelCallRetried`` event, and a follow-up that fails for good (a stream
that is not the API's, an empty reply) is asked again by the session instead of failing the turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrt import Agent, ToolContext, tool
from agentrt.schemas import ModelProfile, ModelRequestStarted, ToolInvocationCompleted
from agentrt.worker import build_worker
from tests.activities.providers._loopback import LoopbackServer, Reply, sse_typed
from tests.conftest import Harness
from tests.e2e._support import data_fields, scheduled_activity_counts, session_config, write_script
from tests.e2e.conftest import KEY_ENV

SECRET = "hostile-fused-secret-7f3a9c"
ENV_SECRET = "AGENTRT_HOSTILE_FUSED_TOKEN"


# ------------------------------------------------------------------ helpers


async def _turn(harness: Harness, workspace: Path, script: str | None, text: str = "go", **fields: Any) -> tuple[str, Any]:
    sid = harness.new_session_id()
    if script is None:  # a loopback provider's profile
        config = harness.client.new_config(str(workspace), session_id=sid, heartbeat_timeout_seconds=5.0, **fields)
    else:
        config = session_config(harness.client, sid, workspace, script, **fields)
    started = await harness.client.start(config, text)
    return sid, await harness.client.wait(sid, started.turn_id, timeout_seconds=60)


def _shape(harness: Harness, sid: str, ids: bool = True) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The session's event types and its transcript (call ids left out with ``ids=False``)."""
    events = harness.store.events(sid, 0, 10_000)
    messages = [
        (p, m.role, m.text, m.is_error, m.tool_call_id if ids else None,
         [(c.id if ids else None, c.name, c.arguments, c.arguments_raw) for c in m.tool_calls])
        for p, m in harness.store.messages(sid)
    ]
    return [e.type for e in events], messages


async def _everything(harness: Harness, sid: str) -> str:
    """What the session left anywhere a person or a model reads: transcript, events, history payloads."""
    history = await harness.handle(sid).fetch_history()
    payloads = b"\n".join(data_fields(json.loads(history.to_json()))).decode("utf-8", "replace")
    messages = json.dumps([m.model_dump(mode="json") for _, m in harness.store.messages(sid)])
    events = json.dumps([e.model_dump(mode="json") for e in harness.store.events(sid, 0, 10_000)])
    return "\n".join([payloads, messages, events])


def _tool_texts(harness: Harness, sid: str) -> list[str]:
    return [m.text for _, m in harness.store.messages(sid) if m.role == "tool"]


@pytest.fixture
def shm_workspace() -> Iterator[Path]:
    """A workspace on tmpfs where there is one (a directory of 100,000 entries is made in a second there)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    path = Path(os.path.realpath(tempfile.mkdtemp(prefix="agentrt-fused-", dir=base)))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------- paths that leave the workspace


async def test_fused_reads_of_paths_leaving_the_workspace_leak_nothing_and_match_the_unfused_turn(
    harness: Harness, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_SECRET, SECRET)
    outside = tmp_path / "secret.txt"
    outside.write_text(SECRET)
    (workspace / "env-link").symlink_to("/proc/self/environ")
    (workspace / "out-link").symlink_to(outside)
    (workspace / "out-dir").symlink_to(tmp_path)
    (workspace / "zero-link").symlink_to("/dev/zero")
    (workspace / "root-link").symlink_to("/")
    os.mkfifo(workspace / "pipe")
    reads = [
        "/proc/self/environ", "../secret.txt", str(outside), "env-link", "out-link", "out-dir/secret.txt",
        "zero-link", "/dev/zero", "/dev/urandom", "pipe", "root-link/proc/self/environ",
        "/proc/self/root" + str(outside), "/proc/self/cwd/../../../../../../../../proc/self/environ",
        "src/../../secret.txt",
    ]
    lists = ["..", "/", "out-dir", "root-link", "/proc/self", "/proc/self/cwd"]
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": p}} for p in reads]},
        {"tool_calls": [{"name": "fs.list", "arguments": {"path": p, "recursive": True}} for p in lists]},
        {"tool_calls": [{"name": "fs.list", "arguments": {"path": ".", "recursive": True}}]},
        {"text": "found nothing"},
    ])
    fused, outcome = await _turn(harness, workspace, script, fused_rounds=True)
    plain, plain_outcome = await _turn(harness, workspace, script)

    assert outcome.status == plain_outcome.status == "completed"
    assert (await scheduled_activity_counts(harness, fused))["tool.execute"] == 0  # every round ran inside the model call
    texts = _tool_texts(harness, fused)
    assert len(texts) == len(reads) + len(lists) + 1
    assert all(t.startswith("error: ") for t in texts[:-1]), texts
    listing = texts[-1].splitlines()  # links out of the workspace are not listed
    assert "env-link" not in listing and "out-link" not in listing and "out-dir/" not in listing
    for sid in (fused, plain):
        left = await _everything(harness, sid)
        assert SECRET not in left and ENV_SECRET not in left
    assert _shape(harness, fused) == _shape(harness, plain)


async def test_fused_reads_of_a_huge_sparse_file_and_a_directory_of_100k_entries_are_bounded(
    harness: Harness, shm_workspace: Path, tmp_path: Path
) -> None:
    many = shm_workspace / "many"
    many.mkdir()
    fd = os.open(many, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for n in range(100_000):
            os.mknod(f"f{n:06d}", dir_fd=fd)
    finally:
        os.close(fd)
    with open(shm_workspace / "huge.bin", "wb") as f:
        f.truncate(8 * 2**30)  # 8 GiB of holes
    script = write_script(tmp_path, [
        {"tool_calls": [
            {"name": "fs.list", "arguments": {"path": "many"}},
            {"name": "fs.read", "arguments": {"path": "huge.bin", "offset": 2**32, "limit": 100}},
        ]},
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "huge.bin", "limit": 2**20}}]},
        {"tool_calls": [{"name": "fs.list", "arguments": {"path": "many", "max_entries": 10_000}}]},
        {"text": "bounded"},
    ])
    sid, outcome = await _turn(harness, shm_workspace, script, fused_rounds=True)

    assert outcome.status == "completed" and outcome.rounds == 4
    listing, piece, whole, long_listing = _tool_texts(harness, sid)
    assert listing.splitlines()[-1] == "[truncated: showing the first 500 entries]"
    assert listing.splitlines()[0] == "many/f000000"
    assert piece.endswith(f"[truncated: showing bytes {2**32}-{2**32 + 100} of {8 * 2**30}]")
    assert whole.endswith(f"[truncated: showing bytes 0-{2**20} of {8 * 2**30}]")
    assert long_listing.splitlines()[-1] == "[truncated: showing the first 10000 entries]"
    # The first round ran inside the call; the 1 MiB read and the long listing are over the fused
    # bound, so each went back to the workflow and ran as a tool activity.
    assert (await scheduled_activity_counts(harness, sid))["tool.execute"] == 2


# ---------------------------------------------------------- a model on the wire: ids and broken streams


def _profile(harness: Harness, server: LoopbackServer) -> str:
    # Anthropic without extended thinking: a profile whose reasoning never goes back, so it fuses.
    profile = ModelProfile(
        name="hostile-wire", provider="anthropic", model="claude-sonnet-4-20250514", base_url=server.url,
        api_key_env=KEY_ENV, max_output_tokens=1024, context_window=200_000,
    )
    harness.config.profiles[profile.name] = profile
    return profile.name


def _message(blocks: list[dict[str, Any]], stop: str, *, end: bool = True) -> list[dict[str, Any]]:
    head = {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-20250514", "content": [],
        "stop_reason": None, "usage": {"input_tokens": 10, "output_tokens": 1},
    }}
    tail = [
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]
    return [head, *blocks, *(tail if end else [])]


def _calls(*calls: tuple[str, str, dict[str, Any] | str]) -> Reply:
    """One streamed reply asking for ``calls`` (id, tool, arguments as an object or raw JSON text)."""
    blocks: list[dict[str, Any]] = []
    for index, (call_id, name, arguments) in enumerate(calls):
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        blocks += [
            {"type": "content_block_start", "index": index,
             "content_block": {"type": "tool_use", "id": call_id, "name": name.replace(".", "__"), "input": {}}},
            {"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": text}},
            {"type": "content_block_stop", "index": index},
        ]
    return Reply(chunks=[b"".join(sse_typed(*_message(blocks, "tool_use")))])


def _text_blocks(text: str) -> list[dict[str, Any]]:
    return [
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
    ]


def _answer(text: str) -> Reply:
    return Reply(chunks=[b"".join(sse_typed(*_message(_text_blocks(text), "end_turn")))])


async def _wire_turn(harness: Harness, workspace: Path, server: LoopbackServer, replies: list[Reply], **fields: Any) -> tuple[str, Any]:
    server.reply(*replies)
    return await _turn(harness, workspace, None, profile=_profile(harness, server), **fields)


async def test_colliding_empty_and_repeated_call_ids_in_fused_rounds_keep_each_result_with_its_call(
    harness: Harness, workspace: Path, provider_server: LoopbackServer
) -> None:
    read = {"path": "README.md"}
    replies = [
        _calls(("dup", "fs.read", read), ("dup", "fs.list", {}), ("", "fs.read", read), ("", "fs.list", {"path": "src"})),
        _calls(("call_0", "fs.read", read)),
        _calls(("call_0", "fs.read", {"path": "src/main.py"})),
        _answer("ids sorted out"),
    ]
    fused, outcome = await _wire_turn(harness, workspace, provider_server, replies, fused_rounds=True)
    plain, plain_outcome = await _wire_turn(harness, workspace, provider_server, replies)

    assert outcome.status == plain_outcome.status == "completed" and outcome.rounds == 4
    assert (await scheduled_activity_counts(harness, fused))["tool.execute"] == 0
    messages = [m for _, m in harness.store.messages(fused)]
    for n, message in enumerate(messages):
        if message.role == "assistant" and message.tool_calls:
            ids = [c.id for c in message.tool_calls]
            assert len(set(ids)) == len(ids) and all(ids)
            answers = messages[n + 1 : n + 1 + len(ids)]
            assert [m.tool_call_id for m in answers] == ids
    assert _shape(harness, fused, ids=False) == _shape(harness, plain, ids=False)
    # The requests the model got back pair every result with its call, fused as unfused.
    for request in provider_server.requests[1:]:
        blocks = [b for m in request.json["messages"] if isinstance(m["content"], list) for b in m["content"]]
        asked = [b["id"] for b in blocks if b["type"] == "tool_use"]
        answered = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        assert asked == answered


async def test_a_one_megabyte_call_id_in_a_fused_round_is_recorded_as_unfused(
    harness: Harness, workspace: Path, provider_server: LoopbackServer
) -> None:
    huge = "i" * 2**20
    replies = [_calls((huge, "fs.read", {"path": "README.md"})), _answer("read it")]
    fused, outcome = await _wire_turn(harness, workspace, provider_server, replies, fused_rounds=True)
    plain, plain_outcome = await _wire_turn(harness, workspace, provider_server, replies)

    assert outcome.status == plain_outcome.status == "completed", (outcome, plain_outcome)
    assert _shape(harness, fused) == _shape(harness, plain)
    assert [m.tool_call_id for _, m in harness.store.messages(fused) if m.role == "tool"] == [huge]


_CUT = 10_000  # a Content-Length the body never reaches: the stream is cut


def _without_retries(shape: tuple[list[str], list[tuple[Any, ...]]]) -> tuple[list[str], list[tuple[Any, ...]]]:
    return [t for t in shape[0] if t != "ModelCallRetried"], shape[1]


@pytest.mark.parametrize(
    "broken",
    [
        Reply(chunks=[b"".join(sse_typed(*_message(_text_blocks("half an ans"), "end_turn", end=False)))], content_length=_CUT),
        Reply(chunks=[b"".join(sse_typed(*_message([
            {"type": "content_block_start", "index": 0,
             "content_block": {"type": "tool_use", "id": "c", "name": "fs__read", "input": {}}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"path": "READ'}},
        ], "tool_use", end=False)))], content_length=_CUT),
    ],
    ids=["cut-mid-text", "cut-mid-arguments"],
)
async def test_a_follow_up_reply_cut_mid_stream_is_asked_again_and_the_turn_ends_as_unfused(
    harness: Harness, workspace: Path, provider_server: LoopbackServer, broken: Reply
) -> None:
    replies = [_calls(("c1", "fs.read", {"path": "README.md"})), broken, _answer("whole answer")]
    fused, outcome = await _wire_turn(harness, workspace, provider_server, replies, fused_rounds=True)
    plain, plain_outcome = await _wire_turn(harness, workspace, provider_server, replies)

    assert outcome == plain_outcome and outcome.answer == "whole answer"
    # Known difference: the unfused retry is a ModelCallRetried event; the fused follow-up's is not.
    assert _without_retries(_shape(harness, fused)) == _without_retries(_shape(harness, plain))


@pytest.mark.parametrize(
    "broken",
    [
        Reply(chunks=[b'event: message_start\ndata: {"type": "message_start", "message": {"id": "m", "con\n\n']),
        Reply(chunks=[b"".join(sse_typed(*_message(_text_blocks(""), "end_turn")))]),
    ],
    ids=["invalid-json", "empty"],
)
async def test_a_follow_up_reply_that_is_not_an_answer_leaves_the_fused_rounds_recorded_once_and_the_session_serving(
    harness: Harness, workspace: Path, provider_server: LoopbackServer, broken: Reply
) -> None:
    replies = [_calls(("c1", "fs.read", {"path": "README.md"})), broken, _answer("whole answer"), _answer("next turn")]
    sid, outcome = await _wire_turn(harness, workspace, provider_server, replies, fused_rounds=True)

    assert outcome.status in ("completed", "failed") and outcome.rounds == 2
    sent = await harness.client.send(sid, "again")
    assert (await harness.client.wait(sid, sent.turn_id, timeout_seconds=60)).status == "completed"
    messages = harness.store.messages(sid)
    assert [p for p, _ in messages] == list(range(len(messages)))
    assert [m.role for _, m in messages][:3] == ["user", "assistant", "tool"]
    events = harness.store.events(sid, 0, 1000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert len([e for e in events if isinstance(e, ToolInvocationCompleted)]) == 1


# ---------------------------------------------------------- user tools a fused round runs


@tool(risk="read_only", local_activity=True)
def call_key(ctx: ToolContext, note: str = "") -> str:
    """Say the call's idempotency key (after the workflow id), as a tool passing it to a service would."""
    return ctx.idempotency_key.split("/", 1)[1]


@tool(risk="read_only", local_activity=True, timeout_seconds=1)
def wedged(ctx: ToolContext) -> str:
    """Wait on something that never comes, without looking at is_cancelled."""
    import threading

    threading.Event().wait()
    return "never"


@tool(risk="read_only", local_activity=True, secrets=["FUSED_WAREHOUSE_TOKEN"])
def careless_lookup(ctx: ToolContext, sku: str) -> str:
    """Look a SKU up (a careless tool: it prints its token)."""
    return f"{sku}: in stock (asked with token {ctx.secrets['FUSED_WAREHOUSE_TOKEN']})"


@tool(risk="read_only", local_activity=True)
def slow_lookup(ctx: ToolContext, n: int) -> str:
    """Look something up in 0.4 s (fast enough for a local activity, one at a time)."""
    import time

    time.sleep(0.4)
    return f"looked {n} up"


keyed = Agent(name="fused-keyed", tools=[call_key, slow_lookup])
careless = Agent(name="fused-careless", tools=[wedged, careless_lookup, "fs.read"])


async def test_a_call_id_repeated_across_fused_rounds_gets_the_idempotency_key_it_gets_unfused(
    harness: Harness, workspace: Path, provider_server: LoopbackServer
) -> None:
    # Servers that number calls per reply send the same id every round (a hostile model can too).
    # A read-only call's key has no position, fused or not (ToolCalls._idempotency_key), so both
    # rounds' calls share one key here.
    queue = harness.task_queue + "-keyed"
    replies = [_calls(("toolu_same", "call_key", {})), _calls(("toolu_same", "call_key", {"note": "again"})), _answer("keys")]
    async with build_worker(harness.temporal, harness.config, harness.store, task_queue=queue, agents=[keyed]):
        desk = harness.client_on(queue)
        keys = []
        for fused in (True, False):
            provider_server.reply(*replies)
            sid = harness.new_session_id()
            config = desk.new_config(
                str(workspace), session_id=sid, profile=_profile(harness, provider_server), agent="fused-keyed",
                heartbeat_timeout_seconds=5.0, fused_rounds=fused,
            )
            _, outcome = await desk.start_and_wait(config, "keys")
            assert outcome.status == "completed"
            keys.append(_tool_texts(harness, sid))
            if fused:
                assert (await scheduled_activity_counts(harness, sid))["tool.execute"] == 0

    assert keys[0] == keys[1] == ["turn-1/toolu_same", "turn-1/toolu_same"]


async def test_a_wedged_user_tool_and_one_that_prints_its_secret_in_a_fused_round_end_as_unfused(
    harness: Harness, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FUSED_WAREHOUSE_TOKEN", SECRET)
    (workspace / ".env").write_text(f"FUSED_WAREHOUSE_TOKEN={SECRET}\n")
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "wedged", "arguments": {}}, {"name": "careless_lookup", "arguments": {"sku": "A-1"}}]},
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": ".env"}}]},
        {"text": "looked"},
    ])
    queue = harness.task_queue + "-careless"
    async with build_worker(harness.temporal, harness.config, harness.store, task_queue=queue, agents=[careless]):
        desk = harness.client_on(queue)
        sids = []
        for fused in (True, False):
            sid = harness.new_session_id()
            config = session_config(desk, sid, workspace, script, agent="fused-careless", fused_rounds=fused)
            _, outcome = await asyncio.wait_for(desk.start_and_wait(config, "look"), 60)
            assert outcome.status == "completed"
            sids.append(sid)

    fused, plain = sids
    assert (await scheduled_activity_counts(harness, fused))["tool.execute"] == 0
    stuck, lookup, env = _tool_texts(harness, fused)
    assert stuck == "error: stopped after 1 s: the call's time bound"
    assert lookup == "A-1: in stock (asked with token [secret:FUSED_WAREHOUSE_TOKEN])"
    assert env == "FUSED_WAREHOUSE_TOKEN=[secret:FUSED_WAREHOUSE_TOKEN]\n"
    for sid in sids:
        assert SECRET not in await _everything(harness, sid)
    assert _shape(harness, fused) == _shape(harness, plain)


# ---------------------------------------------------------- arguments, many calls, endless rounds


async def test_hostile_arguments_in_fused_rounds_are_refused_or_failed_as_unfused(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    read = "fs.read"
    script = write_script(tmp_path, [
        # Valid for the schema, so the model call runs them: each is the tool's error.
        {"tool_calls": [
            {"name": read, "arguments": {"path": "READ\u0000ME.md"}},
            {"name": read, "arguments": {"path": "n" * 5000}},
            {"name": read, "arguments": {"path": "README.md", "limit": 2.0}},
            {"name": "fs.list", "arguments": {"path": "\u202e\ufeff\U0001f600"}},
        ]},
        # Not valid: the model call hands the reply back, and the session refuses each.
        {"tool_calls": [
            {"name": read, "arguments": {"path": 5}},
            {"name": read, "arguments": {"path": "README.md", "extra": {"nested": [1, 2]}}},
            {"name": read, "arguments_raw": '{"path": "README.md"'},
            {"name": read, "arguments_raw": "[1, 2]"},
            {"name": read, "arguments_raw": '{"path": "\\ud800"}'},
            {"name": read, "arguments": {"path": "README.md\ud800"}},
            {"name": "fs.list", "arguments": {"path": "\udcff"}},
            {"name": read, "arguments": {"path": "README.md", "offset": -1}},
            {"name": read, "arguments": {"path": "README.md", "limit": 1.5}},
            {"name": "fs.list", "arguments": {"max_entries": True}},
            {"name": "no.such.tool", "arguments": {}},
            {"name": "fs.read\u0000", "arguments": {"path": "README.md"}},
            {"name": read, "arguments": {"path": "README.md"}},
        ]},
        {"text": "argued"},
    ])
    fused, outcome = await _turn(harness, workspace, script, fused_rounds=True)
    plain, plain_outcome = await _turn(harness, workspace, script)

    assert outcome.status == plain_outcome.status == "completed" and outcome.rounds == 3
    scheduled = await scheduled_activity_counts(harness, fused)
    assert scheduled["provider.complete"] == 2 and scheduled["tool.execute"] == 1  # the refused batch's valid read
    first = _tool_texts(harness, fused)[:4]
    assert [t.startswith("error: ") for t in first] == [True, True, False, True], first
    assert _shape(harness, fused) == _shape(harness, plain)
    for sid in (fused, plain):
        assert all("\x00" not in m.text for _, m in harness.store.messages(sid))


async def test_five_hundred_read_only_calls_in_one_reply_run_in_one_model_call_and_are_each_recorded(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "one.txt").write_text("1")
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "one.txt"}}] * 500},
        {"text": "read 500"},
    ])
    sid, outcome = await _turn(harness, workspace, script, fused_rounds=True)

    assert outcome.status == "completed" and outcome.tool_calls == 500 and outcome.answer == "read 500"
    assert (await scheduled_activity_counts(harness, sid))["tool.execute"] == 0
    messages = harness.store.messages(sid)
    assert [p for p, _ in messages] == list(range(503))
    tools = [m for _, m in messages if m.role == "tool"]
    assert [m.text for m in tools] == ["1"] * 500
    assert [m.tool_call_id for m in tools] == [c.id for c in messages[1][1].tool_calls]
    events = harness.store.events(sid, 0, 10_000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert len([e for e in events if isinstance(e, ToolInvocationCompleted)]) == 500


async def test_a_model_that_reads_forever_is_stopped_at_the_round_limit_across_fused_calls_as_unfused(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    # Each reply takes 0.25 s and a model call may run follow-ups for half its 1.5 s timeout: the
    # rounds end by time in each call, and the round limit holds across the calls.
    limit = 7
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "fs.read", "arguments": {"path": "README.md"}}], "delay_seconds": 0.25}
    ] * (limit + 5))
    fields: dict[str, Any] = {"max_rounds_per_turn": limit, "model_timeout_seconds": 1.5}
    fused, outcome = await _turn(harness, workspace, script, fused_rounds=True, **fields)
    plain, plain_outcome = await _turn(harness, workspace, script, **fields)

    assert outcome == plain_outcome
    assert outcome.status == "round_limit" and outcome.rounds == limit and outcome.tool_calls == limit
    scheduled = await scheduled_activity_counts(harness, fused)
    # Some calls ran inside model calls, some (met at the time share) as tool activities.
    assert 1 < scheduled["provider.complete"] < limit and scheduled["tool.execute"] < limit
    events = harness.store.events(fused, 0, 1000)
    assert [e.round for e in events if isinstance(e, ModelRequestStarted)] == list(range(1, limit + 1))
    assert _shape(harness, fused) == _shape(harness, plain)


async def test_memory_recall_with_hostile_queries_in_a_fused_round_answers_as_unfused(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    recall = "memory.recall"
    script = write_script(tmp_path, [
        {"tool_calls": [
            {"name": recall, "arguments": {"query": "(a+)+$" * 80}},
            {"name": recall, "arguments": {"query": ("a" * 30 + "!") * 16}},
            {"name": recall, "arguments": {"query": "\u0000 .* [^] \\ \u202e"}},
            {"name": recall, "arguments": {"query": "x", "limit": 50, "scope": "user"}},
        ]},
        {"tool_calls": [
            {"name": recall, "arguments": {"query": "q" * 501}},
            {"name": recall, "arguments": {"scope": "everyone"}},
        ]},
        {"text": "recalled"},
    ])
    tools = ["memory.recall", "fs.read"]
    fused, outcome = await _turn(harness, workspace, script, fused_rounds=True, tools=tools)
    plain, plain_outcome = await _turn(harness, workspace, script, tools=tools)

    assert outcome.status == plain_outcome.status == "completed"
    assert (await scheduled_activity_counts(harness, fused))["provider.complete"] == 2
    assert _tool_texts(harness, fused)[:4] == ["no memories found", "no memories found", "no memories found", "no memories found of scope user"]
    assert _shape(harness, fused) == _shape(harness, plain)


async def test_many_slow_read_only_calls_in_one_reply_do_not_hold_the_model_call_past_its_timeout(
    harness: Harness, workspace: Path, tmp_path: Path
) -> None:
    # Six calls of 0.4 s each are more than the model call's 2 s: run inside it one after
    # another, they timed it out on every attempt (a turn that never ended), where the same
    # calls unfused, each a tool activity of its own, complete.
    script = write_script(tmp_path, [
        {"tool_calls": [{"name": "slow_lookup", "arguments": {"n": n}} for n in range(6)]},
        {"text": "looked them up"},
    ])
    queue = harness.task_queue + "-slow"
    async with build_worker(harness.temporal, harness.config, harness.store, task_queue=queue, agents=[keyed]):
        desk = harness.client_on(queue)
        sids = []
        for fused in (True, False):
            sid = harness.new_session_id()
            config = session_config(desk, sid, workspace, script, agent="fused-keyed", fused_rounds=fused, model_timeout_seconds=2.0)
            started = await desk.start(config, "look up")
            outcome = await asyncio.wait_for(desk.wait(sid, started.turn_id, timeout_seconds=30), 40)
            assert outcome.status == "completed" and outcome.answer == "looked them up", outcome
            sids.append(sid)

    fused, plain = sids
    assert _tool_texts(harness, fused) == [f"looked {n} up" for n in range(6)]
    scheduled = await scheduled_activity_counts(harness, fused)
    # No attempt timed out: the model call handed the reply back, the calls ran as tool activities.
    assert scheduled["provider.complete"] == 2 and scheduled["tool.execute"] == 6
    assert _shape(harness, fused) == _shape(harness, plain)
