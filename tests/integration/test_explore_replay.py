"""`strandline explore` end to end, as a user runs it: the simulation finds the high-watermark loss,
shrinks it, and replays the minimal schedule on a real netns cluster of own brokers, which must
lose acknowledged writes too (invalid).

A real replay takes one to two minutes, so it is marked slow (`make test-all`); CI checks the
replay path up to the real run in tests/unit/test_explore_simulation.py.

A real cluster's timing is none of the simulated ones (docs/explore.md, "From the simulation to
real nodes"): on a loaded machine a restarted broker can take longer than the simulation allows,
and the steps then land in another order. So the written schedule gets a second real run
(`strandline run --config test.toml`) when the first replay ends valid; one of the two must lose data.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(900)]


def strandline(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, env=env, timeout=600
    )


def test_the_minimal_high_watermark_schedule_loses_data_on_a_real_cluster(tmp_path: Path) -> None:
    env = {**os.environ, "STRANDLINE_STATE_DIR": str(tmp_path / "state")}
    store = str(tmp_path / "store")
    explored = strandline(
        "explore", "--variant", "high-watermark", "--seed", "1", "--budget", "60",
        "--checker", "reference", "--store", store, env=env,
    )  # fmt: skip
    lines = explored.stdout.splitlines()
    assert explored.returncode == 1, explored.stdout + explored.stderr
    steps = [line for line in lines if line[:1].isdigit() and ". " in line[:4]]
    assert 2 <= len(steps) <= 5, lines  # at most 4 fault steps, and the heal
    assert lines[-1].startswith("verdict: ") and "replaying on a real cluster ..." in lines, lines
    verdicts = [lines[-1].split()[1]]
    if verdicts[0] == "valid":
        (written,) = Path(store).glob("explore/*/test.toml")
        again = strandline(
            "run", "--config", str(written), "--checker", "reference", "--store", store, env=env
        )
        verdicts.append(again.stdout.splitlines()[-1].split()[1])
    assert "invalid" in verdicts, (verdicts, explored.stdout)
