"""The workloads by the name a test gives (`config.workload`): the one place that name is read."""

from __future__ import annotations

from foundation.config import TestConfig
from foundation.errors import BadInput
from workloads.workload import Workload


def workload_of(config: TestConfig) -> Workload:
    """The test's workload; its modules are imported only when chosen."""
    if config.workload == "txn":
        from workloads import txn

        return txn.WORKLOAD
    if config.workload == "queue":
        from workloads import queue

        return queue.WORKLOAD
    raise BadInput(f"config key 'workload': unknown workload {config.workload!r}")
