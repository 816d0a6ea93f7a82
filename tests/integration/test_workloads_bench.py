"""`strandline bench workload` end to end (short): it starts its own 3-broker cluster and prints figures."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_bench_workload_prints_acked_ops_per_second(tmp_path: Path) -> None:
    env = {**os.environ, "STRANDLINE_BENCH_SECONDS": "3", "STRANDLINE_BENCH_CLIENT": "kafka-python"}
    keep = tmp_path / "history.jsonl"
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "bench", "workload", "--keep", str(keep)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    match = re.search(r"^acked ops/s \(kafka-python\): (\d+)$", out.stdout, re.M)
    assert match and int(match.group(1)) > 0, out.stdout
    assert "pairs complete" in out.stdout
    assert keep.stat().st_size > 0
