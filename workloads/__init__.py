"""Client workloads, operation generators and the final drain (the history itself is `history/`).

The public API: `workload_of` (the test's `Workload`), `client_setup`, `setup_topics`,
`run_workload`, `final_drain`, `WorkloadStats`, `DrainResult`, `LiveProgress`. They are imported
lazily, so a command that needs one of them (`strandline cluster up` needs only `setup_topics`)
does not pay for importing every Kafka client library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workloads.clients import client_setup
    from workloads.drain import DrainResult, final_drain
    from workloads.kinds import workload_of
    from workloads.progress import LiveProgress
    from workloads.runner import run_workload
    from workloads.stats import WorkloadStats
    from workloads.topics import setup_topics
    from workloads.workload import Workload

_EXPORTS = {
    "setup_topics": "workloads.topics",
    "client_setup": "workloads.clients",
    "run_workload": "workloads.runner",
    "workload_of": "workloads.kinds",
    "Workload": "workloads.workload",
    "final_drain": "workloads.drain",
    "DrainResult": "workloads.drain",
    "WorkloadStats": "workloads.stats",
    "LiveProgress": "workloads.progress",
}

__all__ = [
    "DrainResult",
    "Workload",
    "workload_of",
    "client_setup",
    "LiveProgress",
    "WorkloadStats",
    "final_drain",
    "run_workload",
    "setup_topics",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'workloads' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
