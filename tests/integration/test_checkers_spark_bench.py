"""`strandline bench checker` end to end on a small history: it finds what it planted, exit 0.

The check runs in this process on the Spark session the other Spark tests share (no second JVM),
without the DuckDB comparison; the fresh-interpreter path is the same `_child` function.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checkers import bench
from harness.cli import build_parser

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_bench_checker_small(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keep = tmp_path / "history.jsonl"
    argv = ["bench", "checker", "--ops", "5000", "--keep", str(keep), "--no-duckdb", "--in-process"]
    args = build_parser().parse_args(argv)
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    assert "ops/s end to end" in out and "duckdb" not in out
    assert keep.exists() and (tmp_path / "history.parquet" / "meta.json").exists()
