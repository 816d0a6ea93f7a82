"""The checker benchmark at scale (not collected by pytest): `python tests/perf/bench_checker.py [OPS]`.

Runs `strandline bench checker --ops OPS` (10,000,000 by default): Spark, DuckDB and the reference
checker end to end on the same generated run directory, in one run.
The goal (issue 13): Spark on 2 cores >= 150,000 ops/s end to end, driver < 1 GiB, process tree
< 3 GiB, results.json identical to the reference's.
"""

from __future__ import annotations

import subprocess
import sys


def main() -> int:
    ops = sys.argv[1] if len(sys.argv) > 1 else "10000000"
    cmd = [sys.executable, "-m", "harness.cli", "bench", "checker", "--ops", ops]
    print("$", " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
