"""`strandline bench checker` end to end on a small run: it finds what it planted and Spark's
results.json equals the reference's, exit 0.

The checks run in this process on the Spark session the other Spark tests share (no second JVM),
without the DuckDB comparison; the fresh-interpreter path is the same `_child` function.
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
from harness.cli import build_parser

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]


def test_bench_checker_small(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keep = tmp_path / "run"
    argv = ["bench", "checker", "--ops", "5000", "--keep", str(keep), "--no-duckdb", "--in-process"]
    args = build_parser().parse_args(argv)
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    assert "ops/s end to end" in out and "duckdb" not in out
    assert "spark results.json == reference results.json" in out
    assert (keep / "history.jsonl").exists() and (keep / "history.parquet" / "meta.json").exists()


def _tree_rss(pid: int) -> int:
    return sum(rss for rss, _ in bench._tree(pid).values())


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
