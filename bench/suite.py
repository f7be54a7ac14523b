"""The short form of every performance benchmark, one after another, and one table of their results.

    python -m bench.suite [--only overhead,first_token,...] [--list]

``make bench`` runs it (about 10 minutes on a 2-core machine). Each benchmark runs in a process
of its own with its short-form arguments (``SHORT``); its output goes to
``build/bench/<name>.log`` and its last line (every benchmark ends with one ``name key=value ...``
line) becomes a row of the table: the benchmark, its figures, its wall time, the machine's load
average while it ran and whether it passed (exit status 0). The full forms, with the figures
documented in docs/benchmarks.md, are each benchmark's default arguments.

Exits 1 when any benchmark failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
LOGS = REPO_ROOT / "build" / "bench"

# name -> the short form's arguments (the module is bench.<name>)
SHORT: dict[str, list[str]] = {
    "overhead": ["--rounds", "20", "--repeats", "1", "--systems", "floor,agentrt"],
    "first_token": ["--delays-ms", "300,1000", "--repeats", "3"],
    "concurrency": ["--sessions", "100", "--repeats", "1", "--steady-seconds", "10", "--lone-runs", "3"],
    "idle": ["--sessions", "1000", "--checkpoints", "200,500,1000", "--wakes", "20"],
    "long_stream": ["--minutes", "1", "--clients", "5"],
    "streams": ["--chunks", "12", "--repeats", "1"],
    "gateway_load": ["--clients", "20", "--sends-per-s", "5", "--minutes", "1"],
}


@dataclass
class Row:
    name: str
    code: int
    seconds: float
    load: str
    last_line: str

    def figures(self) -> str:
        words = self.last_line.split()
        return " ".join(words[1:]) if words and words[0] == self.name else self.last_line


def interpreter() -> str:
    """This Python, as a command to paste: relative to the repository when it is its ``.venv``'s."""
    path = Path(sys.executable)
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def run_one(name: str, args: list[str]) -> Row:
    """Run ``bench.<name>`` with ``args``; its output to ``build/bench/<name>.log``."""
    LOGS.mkdir(parents=True, exist_ok=True)
    log = LOGS / f"{name}.log"
    before = os.getloadavg()[0]
    began = time.monotonic()
    with open(log, "wb") as out:
        code = subprocess.run([sys.executable, "-m", f"bench.{name}", *args], cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT).returncode
    seconds = time.monotonic() - began
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    last = next((line for line in reversed(lines) if line.split()[0] == name), lines[-1] if lines else "(no output)")
    return Row(name, code, seconds, f"{before:.1f}-{os.getloadavg()[0]:.1f}", last)


def table(rows: list[Row]) -> str:
    out = [f"{'benchmark':<13} {'status':<7} {'wall s':>7} {'load':>9}  figures (the benchmark's last line)"]
    for row in rows:
        status = "ok" if row.code == 0 else f"exit {row.code}"
        out.append(f"{row.name:<13} {status:<7} {row.seconds:>7.0f} {row.load:>9}  {row.figures()}")
    out.append(f"logs: {LOGS.relative_to(REPO_ROOT)}/<benchmark>.log; commands: {interpreter()} -m bench.<benchmark> " + "; ".join(
        f"{r.name} {' '.join(SHORT[r.name])}" for r in rows
    ))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.suite", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help=f"comma-separated, of: {', '.join(SHORT)}")
    parser.add_argument("--list", action="store_true", help="print each benchmark's short-form command and exit")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(SHORT)
    unknown = [n for n in names if n not in SHORT]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(SHORT)}")
    if args.list:
        for name in names:
            print(f"{interpreter()} -m bench.{name} {' '.join(SHORT[name])}")
        return
    rows = []
    for name in names:
        print(f"[suite] bench.{name} {' '.join(SHORT[name])}", flush=True)
        rows.append(run_one(name, SHORT[name]))
        print(f"[suite] bench.{name}: {'ok' if rows[-1].code == 0 else f'exit {rows[-1].code}'} in {rows[-1].seconds:.0f} s", flush=True)
    print(table(rows))
    sys.exit(0 if all(r.code == 0 for r in rows) else 1)


if __name__ == "__main__":
    main()
