"""Durable orchestration: deterministic workflow code only (no I/O, clocks or randomness outside `workflow.*`)."""

__all__: list[str] = []
