"""`strandline run`: one test from cluster to verdict (harness/run.py does the work)."""

from __future__ import annotations

import argparse
import sys

from foundation.config import resolve
from harness.compose import compose
from harness.run import run_test

# Flags that map to config keys of the same name (dashes become underscores).
RUN_KEYS = (
    "system", "backend", "nodes", "topics", "partitions", "replication_factor", "variant", "min_insync",
    "unclean_election", "acks", "nemesis", "nemesis_interval", "time_limit", "rate", "concurrency",
    "client", "workload", "consume", "crash_clients", "seed", "store", "checker", "name", "kafka_version", "spark_master",
    "java_client_version", "group_protocol",
)  # fmt: skip


def overrides(args: argparse.Namespace) -> dict[str, object]:
    return {k: getattr(args, k, None) for k in RUN_KEYS}


def main(args: argparse.Namespace) -> int:
    config = resolve(args.config, overrides(args))
    outcome = run_test(compose(config))  # bad input: exit 2 here, before anything exists
    if outcome.status == "refused":  # exit 2: the test cannot run here; the reason in one line
        sys.stderr.write(f"strandline run: refused: {outcome.reason}\n")
    print(outcome.verdict_line, flush=True)
    return outcome.exit_code
