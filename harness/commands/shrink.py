"""`strandline shrink RUN_DIR [--budget S]`: the smallest fault schedule that still fails, on real nodes.

Exit codes: 1 a minimal schedule was found that still gives `invalid` (its run is stored with
shrink.html beside report.html), 3 the run's schedule no longer fails when replayed (nothing to
shrink), 2 bad input (not a run, not invalid, no faults), 4 infrastructure.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from foundation import run_files
from foundation.config import TestConfig, load_file, validate
from foundation.errors import EXIT_INVALID, EXIT_UNKNOWN, BadInput
from harness import rundir
from harness.shrink import (
    FaultGroup,
    duration_s,
    fault_groups,
    minimize,
    schedule_of,
    side_by_side_html,
    tell,
)

TAIL_S = 20.0  # load after the last step, so the faults' consequences play out before the heal


def candidate_config(config: TestConfig, groups: list[FaultGroup], scale: float) -> TestConfig:
    schedule = schedule_of(groups, scale)
    return config.replace(
        nemesis=[],
        schedule=schedule,
        time_limit=duration_s(schedule) + TAIL_S,
        name=f"{config.name}-shrink",
    )


def main(args: argparse.Namespace) -> int:
    run = rundir.existing_run_dir(args.run_dir)
    results_path = run / run_files.RESULTS
    try:
        valid = json.loads(results_path.read_text()).get("valid")
    except (OSError, ValueError):
        raise BadInput(f"{run}: no readable {run_files.RESULTS} (check the run first)") from None
    if valid is not False:
        raise BadInput(f"{run}: the run is not invalid (valid: {valid}); nothing to shrink")
    config = validate(load_file(run / run_files.TEST_JSON))
    if getattr(args, "spark_master", None):  # the flag wins over the stored run's master, as in `run`
        config = config.replace(spark_master=args.spark_master)
    groups = fault_groups(run / run_files.HISTORY)
    if not groups:
        raise BadInput(f"{run}: the nemesis journaled no faults")
    if args.budget <= 0:
        raise BadInput("--budget must be positive")
    print(f"shrink: {len(groups)} faults from {run}, budget {args.budget:g} s", flush=True)
    from harness.compose import compose
    from harness.run import run_test

    def fails(candidate: list[FaultGroup], scale: float) -> tuple[bool, Path | None]:
        print(f"  replaying {len(candidate)} faults (waits × {scale:g}) ...", flush=True)
        outcome = run_test(compose(candidate_config(config, candidate, scale)))
        print(f"  {outcome.verdict_line}", flush=True)
        return outcome.verdict == "invalid", outcome.run_dir

    result = minimize(groups, fails, args.budget)
    if result.minimal_run is None:
        print("the run's schedule replayed as a scripted schedule did not give invalid: nothing to shrink")
        return EXIT_UNKNOWN
    page = result.minimal_run / "shrink.html"
    page.write_text(side_by_side_html(result, run))
    rundir.write_json(
        result.minimal_run / "shrink.json",
        {
            "source": str(run),
            "original": schedule_of(result.original),
            "minimal": schedule_of(result.minimal, result.scale),
            "runs": [{"faults": n, "verdict": v, "run": str(r)} for n, v, r in result.runs],
            "out_of_budget": result.out_of_budget,
        },
    )
    print(f"{len(groups)} faults shrunk to {len(result.minimal)} in {len(result.runs)} real runs:")
    for line in tell(schedule_of(result.minimal, result.scale)):
        print(line)
    print(f"original and minimal side by side: {page}")
    print(f"verdict: invalid {result.minimal_run}", flush=True)
    return EXIT_INVALID
