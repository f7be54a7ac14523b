"""bench.suite: every short form names a benchmark module, and the table reads each one's last line."""

from __future__ import annotations

import importlib

import pytest

from bench.suite import SHORT, Row, main, table


def test_every_short_form_names_a_benchmark_module() -> None:
    for name in SHORT:
        assert hasattr(importlib.import_module(f"bench.{name}"), "main"), name


def test_the_table_has_a_row_per_benchmark_with_its_figures_and_status() -> None:
    rows = [
        Row("overhead", 0, 61.2, "0.4-1.2", "overhead agentrt_vs_floor=1.01 pai_vs_floor=n/a oai_vs_floor=n/a"),
        Row("streams", 1, 20.0, "1.0-1.1", "Traceback (most recent call last):"),
    ]
    text = table(rows)
    assert "overhead      ok           61   0.4-1.2  agentrt_vs_floor=1.01 pai_vs_floor=n/a oai_vs_floor=n/a" in text
    assert "streams       exit 1" in text


def test_an_unknown_benchmark_is_refused() -> None:
    with pytest.raises(SystemExit) as exit:
        main(["--only", "nonesuch"])
    assert exit.value.code == 2
