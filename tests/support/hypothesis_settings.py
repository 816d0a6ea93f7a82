"""Hypothesis settings shared by the Spark agreement tests: each example costs Spark jobs, so few
examples, derandomized (CI sees the same ones every time), no deadline, and a function-scoped
Spark fixture allowed."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

FEW = settings(
    max_examples=5,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
