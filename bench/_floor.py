"""The bare-Temporal floor of the benchmarks: the least an agent round can cost on Temporal.

One workflow runs R rounds; each round is two activities, a model call that returns one
tool call and the tool call that returns ``result_bytes`` bytes of text into history,
then a final model call that returns the answer. The model answers at once (no latency),
the tool makes its text in memory: what is left is what Temporal itself costs, two
activities and about two workflow tasks per round. Nothing is stored outside history.

With ``tool_task_queue`` and ``write_dir`` set (``bench.overhead``'s ``floor-tools``), each round is
an effectful one instead: the model call returns an ``fs.write`` call carrying ``result_bytes``
bytes of content, and the tool call, on a task queue of its own that another worker serves,
writes them to a file in ``write_dir`` and returns a short receipt. That is the least a round
with an effectful tool on a separate tools worker can cost: the tool call cannot be dispatched
eagerly (eager dispatch needs the workflow's own task queue) and the content crosses history twice.

Not part of agentrt: used by ``bench.overhead``, ``bench.concurrency`` and ``bench.recovery``;
its names are prefixed ``floor.`` and it runs on a task queue of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

FLOOR_WORKFLOW = "FloorAgentWorkflow"
FLOOR_MODEL = "floor.model_complete"
FLOOR_TOOL = "floor.tool_execute"

_RETRY = RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=5)


@dataclass
class FloorInput:
    """``rounds`` tool rounds, each tool result ``result_bytes`` bytes long."""

    rounds: int
    result_bytes: int = 5 * 1024
    prompt: str = "Read the workspace files one by one, then say done."
    tool_task_queue: str | None = None  # the tool call's task queue (None: the workflow's own)
    write_dir: str | None = None  # set: each round writes a file there (an effectful round)


@dataclass
class FloorModelInput:
    round: int
    rounds: int
    last_result_bytes: int = 0
    write_bytes: int = 0  # > 0: ask for an fs.write of this many bytes of content


@dataclass
class FloorToolCall:
    """What the model asked for; ``name`` is None for a final answer."""

    call_id: str
    name: str | None = None
    arguments: dict[str, str] = field(default_factory=dict)
    text: str = ""


@dataclass
class FloorResult:
    rounds: int
    answer: str


@activity.defn(name=FLOOR_MODEL)
async def floor_model(input: FloorModelInput) -> FloorToolCall:
    """Round ``input.round`` of ``input.rounds``: one tool call, or the answer after the last round."""
    if input.round > input.rounds:
        return FloorToolCall(call_id=f"call-{input.round}", text="done")
    if input.write_bytes:
        content = (f"line {input.round} " * input.write_bytes)[: input.write_bytes]
        return FloorToolCall(call_id=f"call-{input.round}", name="fs.write", arguments={"path": f"out-{input.round}.txt", "content": content})
    return FloorToolCall(call_id=f"call-{input.round}", name="fs.read", arguments={"path": f"file-{input.round:04d}.txt"})


@activity.defn(name=FLOOR_TOOL)
async def floor_tool(call: FloorToolCall, result_bytes: int, write_dir: str | None = None) -> str:
    """The tool's result: ``result_bytes`` bytes of text naming the call; with ``write_dir``, the
    call's ``content`` written to ``write_dir/<path>`` and a receipt naming its size."""
    if write_dir is not None:
        content = call.arguments["content"]
        with open(f"{write_dir}/{call.arguments['path']}", "w", encoding="utf-8") as f:
            f.write(content)
        return f"wrote {len(content)} bytes to {call.arguments['path']}"
    head = f"{call.arguments.get('path', '')}:"
    return (head + "x" * result_bytes)[:result_bytes]


FLOOR_ACTIVITIES = [floor_model, floor_tool]


@workflow.defn(name=FLOOR_WORKFLOW)
class FloorAgentWorkflow:
    @workflow.run
    async def run(self, input: FloorInput) -> FloorResult:
        last = 0
        for round_number in range(1, input.rounds + 2):
            call = await workflow.execute_activity(
                floor_model,
                FloorModelInput(
                    round=round_number, rounds=input.rounds, last_result_bytes=last,
                    write_bytes=input.result_bytes if input.write_dir is not None else 0,
                ),
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=_RETRY,
            )
            if call.name is None:
                return FloorResult(rounds=round_number - 1, answer=call.text)
            result = await workflow.execute_activity(
                floor_tool,
                args=[call, input.result_bytes, input.write_dir],
                task_queue=input.tool_task_queue,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=_RETRY,
            )
            last = len(result)
        raise AssertionError("unreachable: the model answers after the last round")
