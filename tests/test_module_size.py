"""No product module over 500 lines: a module that grows past it wants a concept of its own."""

from __future__ import annotations

from tests._packages import REPO_ROOT, package_dirs

MAX_LINES = 500


def test_no_product_module_is_over_500_lines() -> None:
    sizes = {
        path.relative_to(REPO_ROOT).as_posix(): len(path.read_text().splitlines())
        for folder in package_dirs().values()
        for path in (REPO_ROOT / folder).rglob("*.py")
    }
    assert len(sizes) > 150
    assert {path: lines for path, lines in sizes.items() if lines > MAX_LINES} == {}
