"""`strandline bench checker` end to end on a small run: it times `strandline check` (the CLI's own
code, report included), finds what it planted, and Spark's results.json equals the reference's.

The checks run in this process on the Spark session the other Spark tests share (no second JVM),
without the DuckDB comparison; the fresh-interpreter path runs the same `child` function.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from checkers import bench
from harness import bench_checker
from harness.cli import build_parser

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]


def test_bench_checker_small(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keep = tmp_path / "run"
    argv = ["bench", "checker", "--ops", "5000", "--keep", str(keep), "--no-duckdb", "--in-process"]
    args = build_parser().parse_args([*argv, "--convert", "--small-ops", "1000"])
    assert bench_checker.main(args) == 0
    out = capsys.readouterr().out
    assert "duckdb" not in out
    assert "spark results.json == reference results.json" in out
    # The total and its breakdown: the conversion (the form was absent), the rules, the report.
    assert "spark, no Parquet: " in out and "conversion " in out and "report " in out
    assert "small run (" in out and "second check in the same process" in out
    assert (keep / "history.jsonl").exists() and (keep / "history.parquet" / "meta.json").exists()
    assert (keep / "report.html").exists() and (keep / "results.json").exists()


def test_small_run_has_replica_data(tmp_path: Path) -> None:
    """The small run's data dirs hold each partition's log on three nodes, and the reference checker
    judges them: no replica anomaly and nothing incomplete about the replicas."""
    from checkers.api import check_run
    from checkers.engines import REFERENCE

    run = tmp_path / "small"
    bench.write_run(run, 1000)
    bench_checker.write_replicas(run)
    results = check_run(run, REFERENCE)
    assert not [r for r in results["incomplete"] if r.startswith("replicas")]
    assert results["anomalies"]["log-divergence"]["count"] == 0
    assert len(results["stats"]["replicas"]) == 6  # 2 topics x 3 partitions


def _tree_rss(pid: int) -> int:
    return sum(rss for rss, _ in bench.tree(pid).values())


def test_tree_memory_counts_a_process_and_its_children() -> None:
    child = subprocess.Popen([sys.executable, "-c", "b = bytearray(200 << 20); import time; time.sleep(60)"])
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _tree_rss(child.pid) < 150 << 20:
            time.sleep(0.5)
        assert _tree_rss(os.getpid()) >= _tree_rss(child.pid) >= 150 << 20
    finally:
        child.kill()
        child.wait()
