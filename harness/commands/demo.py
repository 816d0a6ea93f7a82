"""`strandline demo` (`make demo`): the seed scenario, once per truncation protocol, same faults and seed.

Pre-KIP-101 high-watermark truncation must lose acknowledged writes (invalid); leader epochs must
not (valid). Prints both report paths and a one-line comparison; exit 0 only when both verdicts are
the expected ones.
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console

from checkers.api import checked_with
from foundation.errors import EXIT_INFRASTRUCTURE, EXIT_INVALID, EXIT_VALID
from harness.repro import attempt, lost_text
from harness.scenarios import DEMO_SEED, SEED_SCENARIO, scenario


def main(args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    s = scenario(SEED_SCENARIO)
    seed = DEMO_SEED if getattr(args, "seed", None) is None else args.seed  # 0: drawn at random
    store = getattr(args, "store", None)
    console.print(f"[bold]strandline demo[/]: {s.name} — {s.summary}", highlight=False)
    started = time.monotonic()
    runs = []
    for safe in (False, True):
        variant = (s.safe if safe else s.unsafe)["variant"]
        console.rule(f"{variant} (expected: {s.expected(safe)})")
        a = attempt(s, safe, seed, store, console, getattr(args, "checker", None))
        runs.append((variant, s.expected(safe), a))
        if a.outcome.status == "failed" and a.outcome.exit_code == EXIT_INFRASTRUCTURE and not safe:
            break  # the harness itself failed: a second run would fail the same way
    took = time.monotonic() - started
    print()
    for variant, _expected, a in runs:
        checked = f" ({checked_with(a.outcome.results)})" if a.outcome.results else ""
        print(f"{variant:>15}: {a.verdict:<8} {a.outcome.run_dir / 'report.html'}{checked}")
    parts = [
        f"{variant} {a.verdict} ({lost_text(a.outcome)}, expected {expected})"
        for variant, expected, a in runs
    ]
    ok = len(runs) == 2 and all(a.verdict == expected for _v, expected, a in runs)
    failed = [a for _v, _e, a in runs if a.outcome.status == "failed"]
    print(f"demo: {' vs '.join(parts)}: {'as expected' if ok else 'NOT as expected'} in {took:.0f} s")
    if ok:
        return EXIT_VALID
    return EXIT_INFRASTRUCTURE if failed else EXIT_INVALID
