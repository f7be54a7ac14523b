"""Graph types against hostile input: node ids, graph ids, cycles, decomposition."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentrt.schemas import (
    GraphConfig,
    GraphNode,
    GraphSpec,
    InvalidGraph,
    NodeCannotDecompose,
    argument_problems,
    validate_graph,
)


@pytest.mark.parametrize("node_id", ["a\n", "a/b", "../etc", "-a", "a b", "\u202ea", "ａ"])
def test_a_node_id_of_other_characters_is_refused(node_id: str) -> None:
    with pytest.raises(ValidationError, match="node id"):
        GraphNode(id=node_id, prompt="x")


@pytest.mark.parametrize("graph_id", ["g\x00", "g\n", "\u202eg", " g", "g ", "   "])
def test_a_graph_id_with_control_bidirectional_or_edge_spaces_is_refused(graph_id: str) -> None:
    with pytest.raises(ValidationError, match="graph_id may not"):
        GraphConfig(graph_id=graph_id, owner="alice", workspace="/ws", goal="g")


def test_a_cycle_is_named_by_its_nodes_and_decomposition_is_a_typed_error() -> None:
    spec = GraphSpec.model_validate({"nodes": [
        {"id": "x", "prompt": "x", "depends_on": ["y"]}, {"id": "y", "prompt": "y", "depends_on": ["x"]},
    ]})
    with pytest.raises(InvalidGraph, match="cycle through x, y"):
        validate_graph(spec)
    with pytest.raises(NodeCannotDecompose, match="'w' may not decompose further"):
        validate_graph(GraphSpec(nodes=[GraphNode(id="w", prompt="x", tools=["delegate"])]))


def test_an_argument_problem_keeps_a_readable_head_of_a_huge_value() -> None:
    schema = {"type": "object", "properties": {"wait": {"type": "boolean"}}}
    [problem] = argument_problems_for(schema, {"wait": "x" * 3_000_000})
    assert len(problem) < 700 and "more characters]" in problem


def argument_problems_for(schema: dict, arguments: dict) -> list[str]:
    from agentrt.schemas import ToolSpec

    return argument_problems(ToolSpec(name="t", description="d", parameters=schema), arguments)
