"""`strandline bench checker` end to end on a small history: it finds what it planted, exit 0."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.spark]


@pytest.mark.timeout(600)
def test_bench_checker_small(tmp_path: Path) -> None:
    keep = tmp_path / "history.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "harness.cli", "bench", "checker", "--ops", "20000", "--keep", str(keep)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ops/s end to end" in proc.stdout
    assert keep.exists() and (tmp_path / "history.parquet" / "meta.json").exists()
