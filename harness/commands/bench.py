"""`strandline bench TARGET`: a thin dispatcher; each target's benchmark lives with its area.

`workload` (the `strandline run` command, end to end) is `harness/bench_workload.py`, `broker` is in
`workloads/bench.py`, `checker` (the `strandline check` command, end to end) is
`harness/bench_checker.py` with its checker parts in `checkers/bench.py`, `explore` in
`explore/bench.py`. Imports are
lazy so that one area's dependencies (Spark, Kafka clients) load only for its own benchmark.
"""

from __future__ import annotations

import argparse
import importlib

from foundation.errors import BadInput

_TARGETS = {
    "workload": "harness.bench_workload",
    "broker": "workloads.bench",
    "checker": "harness.bench_checker",
    "explore": "explore.bench",
}


def main(args: argparse.Namespace) -> int:
    module_name = _TARGETS.get(args.target)
    if module_name is None:
        raise BadInput(f"unknown bench target {args.target!r} (known: {', '.join(sorted(_TARGETS))})")
    module = importlib.import_module(module_name)
    return int(module.main(args))
