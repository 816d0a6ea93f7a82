"""The stand-in third-party system (tests/support/standin.py: three own brokers, each answering as
node 111, alone, leader of every partition, replicating for real underneath) through `strandline
run --system`, on netns: a leader-targeted fault is refused before any cluster starts (exit 2, one
line); bring-up maps one broker id at three addresses to the three nodes and says so; kill and
partition runs with the safe settings end valid with load in every fault window."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.netns import nothing_left
from tests.support.standin import REPO, standin_definition

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SHORT = ["--checker", "reference", "--rate", "60", "--concurrency", "3", "--nemesis-interval", "6"]


def run(tmp_path: Path, name: str, *args: str, timeout: float = 200) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STRANDLINE_STATE_DIR": str(tmp_path / "state")}
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--system", str(standin_definition(tmp_path)),
         "--name", name, "--store", str(tmp_path / "store"), *SHORT, *args],
        capture_output=True, text=True, env=env, timeout=timeout, check=False, cwd=REPO,
    )  # fmt: skip


def test_a_leader_targeted_fault_is_refused_before_start(tmp_path: Path) -> None:
    out = run(tmp_path, "standin-leader", "--nemesis", "kill:leader", "--time-limit", "5", timeout=60)
    assert out.returncode == 2, out.stderr[-2000:]
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("strandline run: refused: fault 'kill': target 'leader'"), last
    assert "serves every partition" in last
    assert "Traceback" not in out.stderr
    nothing_left(tmp_path, "standin-leader")


def valid_with_load_in_every_window(tmp_path: Path, name: str, nemesis: str) -> None:
    out = run(tmp_path, name, "--nemesis", nemesis, "--time-limit", "20")
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1].startswith("verdict: valid "), out.stdout[-2000:]
    directory = Path(out.stdout.strip().splitlines()[-1].split(" ", 2)[2])
    state = json.loads((directory / "cluster-state.json").read_text())
    assert any("report the same broker id 111" in line for line in state["broker_identity"]), state
    assert "serves every partition" in state["leaderless"]
    windows = json.loads((directory / "results.json").read_text())["power"]["windows"]
    assert windows and all(w["loaded"] and w["fault"] == nemesis for w in windows), windows
    nothing_left(tmp_path, name)


# In CI (33-64 s at load 4-22: bring-up, 20 s of load with kills, the report): the stand-in's
# broker kills are what a shared id and forwarded requests must survive.
def test_kill_run_ends_valid(tmp_path: Path) -> None:
    valid_with_load_in_every_window(tmp_path, "standin-kill", "kill")


@pytest.mark.slow  # 33-50 s at load 4-22: bring-up, 20 s of load with partitions, the report
def test_partition_run_ends_valid(tmp_path: Path) -> None:
    valid_with_load_in_every_window(tmp_path, "standin-part", "partition")
