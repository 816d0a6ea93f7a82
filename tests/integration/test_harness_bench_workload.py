"""`strandline bench workload` end to end, and the guard against stalls in a fault-free run.

A short bench runs the real `strandline run` command (100 confluent-kafka clients at an unlimited
rate, own broker, 3 nodes, netns) in a fresh process. Its run has no fault, so a stretch of a second
or more without an acknowledged send (results.json's `unavailable`) is a harness or broker bug
whatever the machine's speed: brokers preloaded with libfaketime for no clock fault stalled so
(docs/workloads.md, "Rate").
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_a_fault_free_bench_run_is_valid_and_never_stalls(tmp_path: Path) -> None:
    env = {**os.environ, "STRANDLINE_BENCH_SECONDS": "10"}
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "bench", "workload", "--runs", "1", "--keep", str(tmp_path)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=230,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "--concurrency 100 --rate 100000 --time-limit 10 --checker reference" in out.stdout
    run = re.search(r"^run 1/1: ([\d,]+) acked sends/s .* verdict valid", out.stdout, re.M)
    assert run and int(run.group(1).replace(",", "")) > 0, out.stdout
    stalls = re.search(r"stall windows \(results.json `unavailable`.*?\): (.*)$", out.stdout, re.M)
    assert stalls and stalls.group(1) == "none", out.stdout
    assert re.search(r"^acked sends/s: [\d,]+; stall windows: 0$", out.stdout, re.M), out.stdout
    assert len(list(tmp_path.glob("bench-workload-1/*/history.jsonl"))) == 1  # --keep kept the run
    print(out.stdout)
