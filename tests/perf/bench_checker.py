"""The checker benchmark at scale (not collected by pytest): `python tests/perf/bench_checker.py [OPS]`.

Runs `strandline bench checker` with the Spark engine (DuckDB beside it) and then with the reference
checker on the same history (kept in a temporary directory), 10,000,000 operations by default.
The goal (issue 7): Spark on 2 cores, driver peak < 2 GiB, >= 100,000 ops/s end to end.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> int:
    ops = sys.argv[1] if len(sys.argv) > 1 else "10000000"
    engines = sys.argv[2:] or ["spark", "reference"]
    with tempfile.TemporaryDirectory(prefix="strandline-perf-") as tmp:
        keep = Path(tmp) / "history.jsonl"
        status = 0
        for engine in engines:
            cmd = [sys.executable, "-m", "harness.cli", "bench", "checker", "--ops", ops, "--checker", engine]
            cmd += ["--keep", str(keep)]
            print("$", " ".join(cmd), flush=True)
            status |= subprocess.run(cmd, check=False).returncode
    return status


if __name__ == "__main__":
    sys.exit(main())
