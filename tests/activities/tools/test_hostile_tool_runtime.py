"""Careless tools against the worker's shared tool loop and the registry: a tool that calls
``sys.exit()`` or never awaits costs its own call, never the async tools of every other session;
a result too big, endless or recursive is bounded or refused; and argument text JSON does not
allow never reaches a tool."""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentrt.activities.providers import tool_call_from_text
from agentrt.activities.tools import CrashToRetry, ToolContext, ToolLeftRunning, ToolRegistry, ToolRuntime, tool
from agentrt.activities.tools import _runtime
from agentrt.activities.tools._function import MAX_RESULT_BYTES, MAX_RESULT_ITEMS
from agentrt.schemas import ConfigurationError, ToolArgumentsError, ToolCall, ToolCrashedError, ToolError


@tool
async def quits() -> str:
    sys.exit(3)


@tool
async def interrupts() -> str:
    raise KeyboardInterrupt


# Set after each test: a spinning coroutine left on a given-up loop would burn a core until the
# test process ends.
RELEASE_SPINNERS = threading.Event()


@tool
async def spins() -> str:
    while not RELEASE_SPINNERS.is_set():  # never awaits: holds the loop it runs on
        pass
    return "released"


@pytest.fixture(autouse=True)
def release_spinners() -> Iterator[None]:
    RELEASE_SPINNERS.clear()
    yield
    RELEASE_SPINNERS.set()


@tool
def quits_sync() -> str:
    sys.exit(3)


@tool
async def fine() -> str:
    await asyncio.sleep(0)
    return "fine"


REGISTRY = ToolRegistry([quits, interrupts, spins, quits_sync, fine])


def run(runtime: ToolRuntime | None, name: str, tmp_path: Path, **fields: object) -> str:
    context = ToolContext(workspace=tmp_path, runtime=runtime, **fields)  # type: ignore[arg-type]
    return REGISTRY.execute(ToolCall(id="c1", name=name, arguments={}), context).text


@pytest.fixture
def runtime() -> object:
    runtime = ToolRuntime()
    yield runtime
    runtime.close()


@pytest.mark.parametrize(("name", "error"), [("quits", "SystemExit: 3"), ("interrupts", "KeyboardInterrupt")])
def test_an_async_tool_that_exits_is_a_crash_and_the_tool_loop_goes_on(
    runtime: ToolRuntime, tmp_path: Path, name: str, error: str
) -> None:
    with pytest.raises(ToolCrashedError, match=f"{name} failed unexpectedly: {error}"):
        run(runtime, name, tmp_path, timeout_seconds=5)
    assert run(runtime, "fine", tmp_path, timeout_seconds=5) == "fine"


def test_a_sync_tool_that_calls_sys_exit_is_retried_then_a_crash(tmp_path: Path) -> None:
    with pytest.raises(CrashToRetry) as retried:
        run(None, "quits_sync", tmp_path, final_attempt=False)
    assert isinstance(retried.value.error, SystemExit)
    with pytest.raises(ToolCrashedError, match="quits_sync failed unexpectedly: SystemExit: 3"):
        run(None, "quits_sync", tmp_path)


def test_an_async_tool_that_never_awaits_is_stopped_and_later_async_tools_get_another_loop(
    runtime: ToolRuntime, tmp_path: Path
) -> None:
    with pytest.raises(ToolLeftRunning, match="stopped after"):
        run(runtime, "spins", tmp_path, timeout_seconds=0.5)
    assert run(runtime, "fine", tmp_path, timeout_seconds=5) == "fine"


def test_deps_an_async_factory_made_on_a_stuck_loop_are_made_again_on_the_next(tmp_path: Path) -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def make() -> dict[str, object]:
        loops.append(asyncio.get_running_loop())
        return {"loop": loops[-1]}

    @tool
    async def same_loop(ctx: ToolContext) -> bool:
        return asyncio.get_running_loop() is ctx.deps["loop"]

    registry = ToolRegistry([spins, same_loop])
    runtime = ToolRuntime(make)
    try:
        context = ToolContext(workspace=tmp_path, runtime=runtime, timeout_seconds=5)
        assert registry.execute(ToolCall(id="a", name="same_loop", arguments={}), context).text == "true"
        with pytest.raises(ToolError, match="stopped after"):
            registry.execute(ToolCall(id="b", name="spins", arguments={}), ToolContext(workspace=tmp_path, runtime=runtime, timeout_seconds=0.5))
        context = ToolContext(workspace=tmp_path, runtime=runtime, timeout_seconds=5)
        assert registry.execute(ToolCall(id="c", name="same_loop", arguments={}), context).text == "true"
        assert len(loops) == 2 and loops[0] is not loops[1]
    finally:
        runtime.close()


@pytest.mark.parametrize(("raw", "word"), [("{\"x\": NaN}", "NaN"), ("{\"x\": [Infinity]}", "Infinity"), ("{\"x\": -Infinity}", "-Infinity")])
def test_nan_and_infinity_in_argument_text_are_refused_as_not_json(raw: str, word: str) -> None:
    call = tool_call_from_text("c1", "measure", raw)

    assert call.arguments is None and call.arguments_raw == raw
    assert call.arguments_error == f"arguments hold {word}, which is not a JSON number"


def test_a_number_too_large_for_a_float_is_refused_not_read_as_infinity() -> None:
    call = tool_call_from_text("c1", "measure", '{"x": 1e400}')

    assert call.arguments is None and call.arguments_error == "arguments hold 1e400, a number too large for a 64-bit float"
    assert tool_call_from_text("c1", "measure", '{"x": 1.5e3}').arguments == {"x": 1500.0}


def test_a_huge_result_is_cut_at_a_mebibyte_saying_how_much_was_left_out(tmp_path: Path) -> None:
    @tool
    def dump() -> str:
        return "é" * (3 * MAX_RESULT_BYTES)  # two bytes each in UTF-8

    text = ToolRegistry([dump]).execute(ToolCall(id="c1", name="dump", arguments={}), ToolContext(workspace=tmp_path)).text

    body, note = text.rsplit("\n", 1)
    assert len(body.encode()) == MAX_RESULT_BYTES and set(body) == {"é"}
    assert note == f"[cut: {6 * MAX_RESULT_BYTES - MAX_RESULT_BYTES:,} more bytes of dump's result not shown]"


def test_a_generator_result_is_its_items_and_one_that_never_ends_is_a_tool_error_not_a_hang(tmp_path: Path) -> None:
    @tool
    def few() -> Iterator[int]:
        yield from range(3)

    @tool
    def endless() -> Iterator[int]:
        return itertools.count()

    registry = ToolRegistry([few, endless])
    context = ToolContext(workspace=tmp_path)
    assert registry.execute(ToolCall(id="c1", name="few", arguments={}), context).text == "[0,1,2]"
    with pytest.raises(ToolError, match=f"endless returned an iterator of more than {MAX_RESULT_ITEMS:,} items"):
        registry.execute(ToolCall(id="c2", name="endless", arguments={}), context)


@pytest.mark.parametrize("make", [lambda: _cycle(), lambda: _deep(10_000)])
def test_a_recursive_or_bottomless_result_is_a_tool_error(tmp_path: Path, make: Any) -> None:
    @tool
    def odd() -> object:
        return make()

    with pytest.raises(ToolError, match="has no JSON form"):
        ToolRegistry([odd]).execute(ToolCall(id="c1", name="odd", arguments={}), ToolContext(workspace=tmp_path))


def _cycle() -> list[object]:
    items: list[object] = []
    items.append(items)
    return items


def _deep(depth: int) -> list[object]:
    root: list[object] = []
    level = root
    for _ in range(depth):
        level.append([])
        level = level[0]  # type: ignore[assignment]
    return root


@pytest.mark.parametrize("name", ["ctx", "context"])
def test_an_unannotated_context_parameter_is_refused_where_the_tool_is_defined(name: str) -> None:
    """Unannotated, ``ctx`` would be an argument of the schema: the model would choose its value."""
    namespace: dict[str, Any] = {}
    exec(f"def lookup({name}, order_id: str) -> str:\n    return order_id\n", namespace)

    with pytest.raises(ConfigurationError, match=f"parameter '{name}' has no annotation; write `{name}: ToolContext`"):
        tool(namespace["lookup"])


def test_a_parameter_called_context_with_a_type_is_an_argument_like_any_other() -> None:
    @tool
    def note(context: str) -> str:
        return context

    assert list(note.spec().parameters["properties"]) == ["context"]


@pytest.mark.parametrize("arguments", [{"ctx": {"session_id": "other"}}, {"deps": {"payments": "mine"}}, {"__class__": "x"}])
def test_a_model_cannot_set_the_call_s_context_or_its_deps(tmp_path: Path, arguments: dict[str, Any]) -> None:
    seen: list[object] = []

    @tool
    def whoami(ctx: ToolContext) -> str:
        seen.append(ctx)
        return ctx.session_id

    with pytest.raises(ToolArgumentsError, match=f"extra field '{next(iter(arguments))}' not allowed"):
        ToolRegistry([whoami]).execute(ToolCall(id="c1", name="whoami", arguments=arguments), ToolContext(workspace=tmp_path))
    assert seen == []


def test_a_sync_tool_that_never_returns_is_stopped_at_its_bound_on_a_thread_of_its_own(runtime: ToolRuntime, tmp_path: Path) -> None:
    release = threading.Event()
    threads: list[str] = []

    @tool
    def hangs() -> str:
        threads.append(threading.current_thread().name)
        release.wait()
        return "late"

    try:
        with pytest.raises(ToolLeftRunning, match="stopped after 0.3 s"):
            ToolRegistry([hangs]).execute(ToolCall(id="c1", name="hangs", arguments={}),
                                          ToolContext(workspace=tmp_path, runtime=runtime, timeout_seconds=0.3))
        assert threads == ["agentrt-tool-hangs"]
    finally:
        release.set()


def test_a_sync_tool_on_its_thread_sees_its_arguments_and_the_caller_s_context_and_raises_as_it_would(
    runtime: ToolRuntime, tmp_path: Path
) -> None:
    where: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="")
    where.set("activity")

    @tool
    def echo(timeout: int, is_cancelled: str) -> str:  # names of ToolRuntime.call's own keywords
        return f"{timeout} {is_cancelled} {where.get()}"

    registry = ToolRegistry([echo, quits_sync])
    context = ToolContext(workspace=tmp_path, runtime=runtime, timeout_seconds=5)
    assert registry.execute(ToolCall(id="c1", name="echo", arguments={"timeout": 3, "is_cancelled": "no"}), context).text == "3 no activity"
    with pytest.raises(ToolCrashedError, match="SystemExit: 3"):
        registry.execute(ToolCall(id="c2", name="quits_sync", arguments={}), context)


def test_past_the_most_stuck_threads_a_sync_call_is_refused(runtime: ToolRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_runtime, "MAX_STUCK_THREADS", 2)
    release = threading.Event()

    @tool
    def hangs() -> str:
        release.wait()
        return "late"

    registry = ToolRegistry([hangs])
    try:
        for _ in range(2):
            with pytest.raises(ToolError, match="stopped after"):
                registry.execute(ToolCall(id="c", name="hangs", arguments={}), ToolContext(workspace=tmp_path, runtime=runtime, timeout_seconds=0.1))
        with pytest.raises(ToolError, match="2 earlier tool calls of this worker never returned"):
            registry.execute(ToolCall(id="c", name="hangs", arguments={}), ToolContext(workspace=tmp_path, runtime=runtime, timeout_seconds=0.1))
    finally:
        release.set()
