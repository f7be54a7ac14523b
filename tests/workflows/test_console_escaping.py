"""Text a model or a caller chose is shown in the Temporal UI's summaries and details inside code
spans: rendered as markdown (CommonMark with HTML allowed, as a permissive renderer would), it
makes no link, image, HTML element, emphasis, heading or table, and stays on its own line."""

from __future__ import annotations

from markdown_it import MarkdownIt

from agentrt.schemas import GraphConfig, GraphSpec, GraphState, NodeState, code_span
from agentrt.workflows import _console as console
from agentrt.workflows import _graph_parts as graph_parts

HOSTILE = (
    "[click](javascript:alert(1)) <img src=x onerror=alert(2)> <script>alert(3)</script>\n"
    "| a | b |\n|---|---|\n| `x` | **y** |\n\n# heading\n```\nfenced\n```"
)


def rendered(markdown: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).render(markdown)


def assert_inert(markdown: str) -> None:
    """``markdown``, rendered, holds ``HOSTILE`` only as text: none of the elements it asks for."""
    html = rendered(markdown)
    for element in ("<a ", "<img", "<script", "<table", "<h1", "<strong>y", "<pre"):
        assert element not in html, (element, html)
    assert "javascript:alert(1)" in html and "&lt;img src=x onerror=alert(2)&gt;" in html


def test_a_code_span_holds_hostile_text_inert_on_one_line() -> None:
    span = code_span(HOSTILE, 1000)
    assert "\n" not in span and span.startswith("`") and span.endswith("`") and span.count("`") == 2
    assert_inert(f"prompt: {span}")


def test_the_console_s_code_is_the_shared_code_span() -> None:
    assert console.code(HOSTILE, 50) == code_span(HOSTILE, 50)


def test_a_graph_s_current_details_hold_its_risk_reasons_and_failure_inert() -> None:
    spec = GraphSpec.model_validate({"nodes": [{"id": "a", "prompt": "p"}]})
    config = GraphConfig(graph_id="g1", owner="alice", workspace="/w", graph=spec)
    state = GraphState(
        status="failed", plan=spec, order=["a"], nodes={"a": NodeState(id="a")}, risk_level="high", risk_reasons=[HOSTILE],
        failure=HOSTILE,
    )
    assert_inert(graph_parts.current_details(config, state))
