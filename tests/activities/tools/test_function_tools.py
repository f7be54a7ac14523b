"""`@tool`: the JSON Schema a function's signature and docstring give, argument validation against
hostile input, sync and async calls, results, crashes, and `Agent` definitions."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from agentrt.activities.tools import (
    Agent,
    CrashToRetry,
    FunctionTool,
    ToolContext,
    ToolOutput,
    ToolRegistry,
    ToolRuntime,
    docstring_parts,
    tool,
)
from agentrt.schemas import ConfigurationError, InvalidOutputSchema, ToolArgumentsError, ToolCall, ToolCrashedError, ToolError


class Address(BaseModel):
    city: str
    zip: str = Field(pattern=r"^\d{5}$")


@tool(risk="read_only")
def find(
    query: Annotated[str, "What to look for."],
    limit: Annotated[int, Field(ge=1, le=50, description="Rows at most.")] = 10,
    kind: Literal["order", "customer"] = "order",
    ship_to: Address | None = None,
) -> list[str]:
    """Find orders or customers.

    Searches the shop's records.

    Args:
        query: ignored: Annotated says it.
        limit: ignored too.
        kind: Which records to search.
        ship_to: Only those shipped
            to this address.

    Returns:
        The ids found.
    """
    return [query] * min(limit, 2)


def ctx(tmp_path: Path, **fields: Any) -> ToolContext:
    return ToolContext(workspace=tmp_path, **fields)


def run(t: FunctionTool, arguments: Any, context: ToolContext) -> ToolOutput:
    return ToolRegistry([t]).execute(ToolCall(id="c1", name=t.name, arguments=arguments), context)


def test_the_schema_comes_from_types_defaults_annotated_texts_and_the_docstring() -> None:
    spec = find.spec()

    assert spec.name == "find" and spec.risk == "read_only"
    assert spec.description == "Find orders or customers.\n\nSearches the shop's records."
    assert spec.parameters["required"] == ["query"]
    assert spec.parameters["additionalProperties"] is False
    props = spec.parameters["properties"]
    assert props["query"] == {"description": "What to look for.", "type": "string"}
    assert props["limit"] == {"default": 10, "description": "Rows at most.", "maximum": 50, "minimum": 1, "type": "integer"}
    assert props["kind"] == {"default": "order", "description": "Which records to search.", "enum": ["order", "customer"], "type": "string"}
    assert props["ship_to"]["description"] == "Only those shipped to this address."
    assert spec.parameters["$defs"]["Address"]["properties"]["zip"]["pattern"] == r"^\d{5}$"


def test_a_parameter_may_shadow_pydantic_s_own_names() -> None:
    @tool
    def odd(model_config: str, schema: int = 1, json: bool = False) -> str:
        return f"{model_config} {schema} {json}"

    assert set(odd.spec().parameters["properties"]) == {"model_config", "schema", "json"}
    assert run(odd, {"model_config": "x", "schema": 2}, ToolContext(workspace=Path("/"))).text == "x 2 False"


def test_reST_params_and_a_docstring_without_sections_are_read() -> None:
    assert docstring_parts("Do it.\n\n:param a: the first\n:returns: nothing") == ("Do it.", {"a": "the first"})
    assert docstring_parts(None) == ("", {})


def test_the_context_parameter_is_not_in_the_schema_and_must_come_first() -> None:
    @tool
    def uses(ctx: ToolContext, n: int) -> int:
        return n

    assert list(uses.spec().parameters["properties"]) == ["n"] and uses.takes_context
    def late(n: int, ctx: ToolContext) -> int:
        return n

    with pytest.raises(ConfigurationError, match="must come first"):
        tool(late)


@pytest.mark.parametrize(
    ("function", "problem"),
    [
        (lambda *args: None, r"\*args and \*\*kwargs"),
        (lambda **kw: None, r"\*args and \*\*kwargs"),
    ],
)
def test_a_signature_with_no_json_schema_is_a_configuration_error(function: Any, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        tool(name="variadic")(function)


class Socket:
    """A type pydantic has no schema for."""


def test_an_argument_type_with_no_json_schema_is_a_configuration_error() -> None:
    def send(to: Socket) -> str:
        return ""

    with pytest.raises(ConfigurationError, match="no JSON Schema") as raised:
        tool(send)

    assert str(raised.value).startswith("tool 'send': parameter 'to' (Socket) has no JSON Schema")
    assert "comes from the worker's deps (ctx.deps)" in str(raised.value)


def test_an_unannotated_context_parameter_is_refused_instead_of_asked_of_the_model() -> None:
    def lookup(ctx, order_id: str) -> str:  # type: ignore[no-untyped-def]
        return order_id

    def refund(context, order_id: str) -> str:  # type: ignore[no-untyped-def]
        return order_id

    with pytest.raises(ConfigurationError, match="parameter 'ctx' has no annotation; write `ctx: ToolContext`"):
        tool(lookup)
    with pytest.raises(ConfigurationError, match="parameter 'context' has no annotation; write `context: ToolContext`"):
        tool(refund)


@pytest.mark.parametrize("name", ["", "has space", "semi;colon", "x" * 65, "../etc", "lookup\n"])
def test_a_tool_name_providers_refuse_is_a_configuration_error(name: str) -> None:
    with pytest.raises(ConfigurationError, match="must match"):
        tool(name=name)(lambda: "")


def test_only_a_read_only_tool_may_run_as_a_local_activity() -> None:
    with pytest.raises(ConfigurationError, match="only a read_only tool"):
        tool(name="t", risk="effectful", local_activity=True)(lambda: "")
    assert find.spec().local_activity is False
    assert tool(name="t", risk="read_only", local_activity=True)(lambda: "").spec().local_activity is True


@pytest.mark.parametrize(
    ("arguments", "problems"),
    [
        ({}, ["query: field required"]),
        ({"query": 5}, ["query: Input should be a valid string"]),
        ({"query": "a", "limit": 0}, ["limit: Input should be greater than or equal to 1"]),
        ({"query": "a", "limit": 10**40}, ["limit: Input should be less than or equal to 50"]),
        ({"query": "a", "kind": "admin"}, ["kind: Input should be 'order' or 'customer'"]),
        ({"query": "a", "__class__": "x"}, ["extra field '__class__' not allowed"]),
        ({"query": "a", "ship_to": {"city": "x", "zip": "1; DROP"}}, ["ship_to.zip: String should match pattern '^\\d{5}$'"]),
        ({"query": ["a"] * 3}, ["query: Input should be a valid string"]),
    ],
)
def test_hostile_arguments_are_a_tool_error_the_model_sees_and_the_function_never_runs(
    tmp_path: Path, arguments: dict[str, Any], problems: list[str]
) -> None:
    ran: list[object] = []

    @tool(name="find")
    def spy(
        query: str, limit: Annotated[int, Field(ge=1, le=50)] = 10, kind: Literal["order", "customer"] = "order",
        ship_to: Address | None = None,
    ) -> str:
        ran.append(query)
        return "ran"

    with pytest.raises(ToolArgumentsError) as raised:
        run(spy, arguments, ctx(tmp_path))

    assert raised.value.problems == problems and ran == []


def test_arguments_that_are_not_a_json_object_are_refused(tmp_path: Path) -> None:
    call = ToolCall(id="c1", name="find", arguments=None, arguments_error="Expecting value")
    with pytest.raises(ToolArgumentsError, match="not valid JSON"):
        ToolRegistry([find]).execute(call, ctx(tmp_path))


def test_results_are_text_as_it_is_and_anything_else_as_json(tmp_path: Path) -> None:
    assert run(find, {"query": "q", "limit": 3}, ctx(tmp_path)).text == '["q","q"]'

    @tool
    def model() -> Address:
        return Address(city="Lyon", zip="69001")

    @tool
    def nothing() -> None:
        return None

    @tool
    def own() -> ToolOutput:
        return ToolOutput("exactly this", state_keys=["k"])

    @tool
    def opaque() -> object:
        return threading.Lock()

    assert run(model, {}, ctx(tmp_path)).text == '{"city":"Lyon","zip":"69001"}'
    assert run(nothing, {}, ctx(tmp_path)).text == "null"
    assert run(own, {}, ctx(tmp_path)) == ToolOutput("exactly this", state_keys=["k"])
    with pytest.raises(ToolError, match="has no JSON form"):
        run(opaque, {}, ctx(tmp_path))


def test_an_async_tool_runs_on_the_runtime_s_loop_not_the_caller_s_and_sees_its_deps(tmp_path: Path) -> None:
    made: list[int] = []

    async def make_deps() -> dict[str, Any]:
        made.append(1)
        return {"loop": asyncio.get_running_loop()}

    @tool
    async def where(ctx: ToolContext) -> bool:
        return asyncio.get_running_loop() is ctx.deps["loop"]

    runtime = ToolRuntime(make_deps)
    try:
        context = ctx(tmp_path, runtime=runtime)
        assert run(where, {}, context).text == "true"
        assert run(where, {}, context).text == "true"
        assert made == [1]  # one factory call for the worker's life
    finally:
        runtime.close()


def test_an_async_tool_outside_a_worker_runs_on_a_loop_of_its_own(tmp_path: Path) -> None:
    @tool
    async def double(n: int) -> int:
        await asyncio.sleep(0)
        return 2 * n

    assert run(double, {"n": 21}, ctx(tmp_path)).text == "42"


def test_an_async_tool_past_its_time_bound_is_stopped_with_a_tool_error(tmp_path: Path) -> None:
    cancelled: list[bool] = []

    @tool
    async def slow() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "late"

    runtime = ToolRuntime()
    try:
        # The call's bound, not what was left of it when the coroutine started (0.29999...).
        with pytest.raises(ToolError, match=r"^stopped after 0\.3 s: the call's time bound$"):
            run(slow, {}, ctx(tmp_path, runtime=runtime, timeout_seconds=0.3))
        for _ in range(50):
            if cancelled:
                break
            threading.Event().wait(0.05)
        assert cancelled == [True]
    finally:
        runtime.close()


def test_a_crash_is_retried_until_the_last_attempt_then_is_a_typed_tool_error(tmp_path: Path) -> None:
    @tool
    def broken() -> str:
        raise KeyError("stock")

    with pytest.raises(CrashToRetry) as retried:
        run(broken, {}, ctx(tmp_path, final_attempt=False))
    assert isinstance(retried.value.error, KeyError)
    with pytest.raises(ToolCrashedError, match="broken failed unexpectedly: KeyError: 'stock'"):
        run(broken, {}, ctx(tmp_path, final_attempt=True))


def test_a_tool_error_is_the_model_s_at_once(tmp_path: Path) -> None:
    @tool
    def picky() -> str:
        raise ToolError("no such order")

    with pytest.raises(ToolError, match="no such order"):
        run(picky, {}, ctx(tmp_path, final_attempt=False))


def test_the_decorated_function_can_still_be_called() -> None:
    assert find("x", limit=1) == ["x"]


def test_an_agent_lists_its_tools_settings_and_output_schema() -> None:
    def plain(note: str) -> str:
        """Take a note."""
        return note

    agent = Agent(
        name="desk", instructions="Help.", tools=[find, plain, "fs.read"], output_type=Address,
        approval={"effectful": "deny"}, sandbox="read_only", budget={"max_tool_calls": 3},
    )
    spec = agent.spec()

    assert spec.tools == ["find", "plain", "fs.read"]
    assert [t.name for t in agent.function_tools] == ["find", "plain"] and agent.function_tools[1].risk == "effectful"
    assert spec.approval is not None and spec.approval.effectful == "deny"
    assert spec.budget is not None and spec.budget.max_tool_calls == 3
    assert spec.output is not None and spec.output.json_schema["required"] == ["city", "zip"]
    assert agent.output_type is Address and agent.output == spec.output
    raw = Agent(name="raw", output_type={"type": "object"}).spec().output
    assert raw is not None and raw.json_schema == {"type": "object"}
    assert Agent(name="text", output_type=str).spec().output is None


def test_an_agent_s_output_type_may_be_a_dataclass_or_a_typed_dict() -> None:
    @dataclasses.dataclass
    class Refund:
        order_id: str
        cents: int

    class Ticket(TypedDict):
        title: str

    refund = Agent(name="refund", output_type=Refund).spec().output
    ticket = Agent(name="ticket", output_type=Ticket).spec().output

    assert refund is not None and refund.name == "Refund" and refund.json_schema["required"] == ["order_id", "cents"]
    assert ticket is not None and ticket.name == "Ticket" and list(ticket.json_schema["properties"]) == ["title"]


def test_an_agent_whose_output_type_cannot_be_an_output_spec_is_refused_where_it_is_defined() -> None:
    with pytest.raises(InvalidOutputSchema, match="root must be"):
        Agent(name="listy", output_type={"type": "array"})
    with pytest.raises(ConfigurationError, match="output_type must be") as raised:
        Agent(name="numbers", output_type=int)
    assert "not <class 'int'>: an answer is a JSON object, so wrap another type in a model with one field" in str(raised.value)
    with pytest.raises(ConfigurationError, match="must match"):
        Agent(name="support\n")


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"name": "has space"}, "must match"),
        ({"name": "a", "tools": [find, find]}, "two tools are called 'find'"),
        ({"name": "a", "tools": [42]}, "is no tool"),
        ({"name": "a", "output_type": int}, "output_type must be"),
        ({"name": "a", "approval": {"effectful": "maybe"}}, "invalid approval"),
        ({"name": "a", "sandbox": "none"}, "sandbox must be"),
        ({"name": "a", "tools": [tool(name="final_result")(lambda answer: answer)], "output_type": Address},
         "a tool is called 'final_result', the name of the tool the model gives its final answer with"),
    ],
)
def test_a_bad_agent_is_a_configuration_error(fields: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        Agent(**fields)


def test_a_registry_takes_an_agent_once_and_refuses_another_of_its_name() -> None:
    registry = ToolRegistry()
    agent = Agent(name="desk", tools=[find])
    registry.register_agent(agent.spec(), agent.function_tools)
    registry.register_agent(agent.spec(), agent.function_tools)  # the same again: a no-op

    assert registry.agent_names() == ["desk"] and registry.names() == ["find"]
    with pytest.raises(ConfigurationError, match="agent 'desk' is already registered"):
        registry.register_agent(Agent(name="desk", instructions="other").spec(), [])
    with pytest.raises(ConfigurationError, match="tool 'find' is already registered"):
        registry.register(tool(name="find")(lambda: ""))
