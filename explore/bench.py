"""`strandline bench explore`: how fast the simulator finds the high-watermark loss, how many safe
schedules it runs without a failure, and how many simulated seconds it runs per wall second."""

from __future__ import annotations

import argparse
import os
import statistics
import time

from explore.schedule import fault_steps
from explore.search import search
from explore.settings import SimSettings, safe_settings

HW_SEEDS = (1, 2, 3, 4, 5)


def main(args: argparse.Namespace) -> int:
    budget = float(getattr(args, "budget", 600.0))
    schedules = int(getattr(args, "schedules", 10_000))
    load = os.getloadavg()[0]
    print(f"bench explore: {os.cpu_count()} cores, load average {load:.1f} at the start", flush=True)
    hw = SimSettings(truncation="high-watermark", faults=("kill", "restart", "pause", "partition", "clock"))
    times, steps, found = [], [], 0
    for seed in HW_SEEDS:
        result = search(hw, seed, budget)
        if result.found is not None:
            found += 1
            times.append(result.wall_s)
            steps.append(fault_steps(result.found.minimal))
            print(
                f"  high-watermark seed {seed}: loss found in {result.wall_s:.2f} s wall "
                f"({result.schedules} schedules, shrunk {len(result.found.original)} -> "
                f"{fault_steps(result.found.minimal)} steps in {result.found.shrink_runs} runs)",
                flush=True,
            )
        else:
            print(f"  high-watermark seed {seed}: no loss within {budget:g} s", flush=True)
    if times:
        print(
            f"high-watermark loss: found for {found}/{len(HW_SEEDS)} seeds, median {statistics.median(times):.2f} s "
            f"(max {max(times):.2f} s) wall, shrunk to median {statistics.median(steps):g} (max {max(steps)}) steps"
        )
    started, cpu = time.monotonic(), time.process_time()
    safe = search(
        safe_settings(faults=("kill", "restart", "pause", "partition", "power-loss", "clock")),
        1,
        budget,
        schedules,
    )
    wall, cpu = time.monotonic() - started, time.process_time() - cpu
    verdict = "a FAILURE" if safe.found is not None else "no failure"
    print(
        f"leader-epoch + safe settings: {safe.schedules} schedules simulated, {verdict} "
        f"({safe.unknown} ended without a leader to read), {safe.sim_ms / 1000:.0f} simulated s in {wall:.1f} s wall"
    )
    print(
        f"simulated seconds per wall second: {safe.sim_ms / 1000 / wall:.0f} "
        f"(per CPU second of this process: {safe.sim_ms / 1000 / max(cpu, 1e-9):.0f}; they differ when the machine is loaded)"
    )
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0 if safe.found is None and found == len(HW_SEEDS) else 1
