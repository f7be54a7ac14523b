"""Chaos tests: worker SIGKILLs and Temporal server restarts under a live workload."""
