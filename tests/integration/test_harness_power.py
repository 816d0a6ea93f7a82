"""Verdict power and the disk the leader alone in the ISR loses, end to end on real brokers.

- A run whose load is held back on purpose (every broker paused from the first fault to the end
  of the load) finds no anomaly and still ends `unknown` with the reason, exit 3: its fault
  window saw no acknowledged write.
- `corrupt:lonely-leader` (the leader cut off until it is the ISR alone; once it acknowledges
  alone, its disk wiped and the broker started again) catches min.insync.replicas=1 with fsync on
  every append, and the same schedule with min.insync.replicas=2 is valid: the leader
  acknowledges nothing alone, so the pattern ends before the disk loss.

Short runs (replica.lag.time.max.ms of 5 s) to keep CI lean.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from foundation.config import validate
from harness.compose import compose
from harness.run import run_test
from history.reader import iter_ops

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

AT = {"topic": "t0", "partition": 0}


def test_load_held_back_ends_unknown_with_exit_3(tmp_path: Path) -> None:
    config = {
        "name": "held-back",
        "store": str(tmp_path / "store"),
        "checker": "reference",
        "time_limit": 14,
        "rate": 100,
        "concurrency": 4,
        "partitions": 1,
        "schedule": [{"wait": 2}, {"do": "pause", "target": "all"}],
    }
    path = tmp_path / "held-back.json"
    path.write_text(json.dumps(config))
    env = {**os.environ, "STRANDLINE_STATE_DIR": str(tmp_path / "state")}
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=280,
        check=False,
    )
    assert out.returncode == 3, out.stderr[-2000:]
    run = Path(out.stdout.strip().splitlines()[-1].split(" ", 2)[2])
    assert out.stdout.strip().splitlines()[-1] == f"verdict: unknown {run}"
    results = json.loads((run / "results.json").read_text())
    assert results["underpowered"] is True and not results["fatal"] and not results["incomplete"]
    power = results["power"]
    assert power["before_first_fault"]["acked_writes"] > 0
    assert [w["fault"] for w in power["windows"]] == ["pause"] and power["windows"][0]["acked_writes"] == 0
    assert power["reasons"][0].startswith("too little load: none in 1 of 1 fault windows (first: pause")
    assert "not enough to call it valid: too little load" in out.stderr  # said on the console
    assert "How much was tested" in (run / "report.html").read_text()


def lonely_leader_run(tmp_path: Path, min_insync: int) -> tuple[Any, list[dict[str, Any]]]:
    config = validate(
        {
            "name": f"lonely-leader-{min_insync}",
            "store": str(tmp_path / "store"),
            "checker": "reference",
            "time_limit": 30,
            "partitions": 2,
            "min_insync": min_insync,
            "log_flush_interval_messages": 1,
            "replica_lag_time_max_ms": 5000,
            "schedule": [{"wait": 1}, {"do": "corrupt", "target": "lonely-leader", **AT}, {"wait": 2}],
        }
    )
    outcome = run_test(
        compose(config, state_dir=tmp_path / "state"), console=Console(quiet=True), screenshot=False
    )
    ops = [op for op in iter_ops(outcome.run_dir / "history.jsonl") if op["process"] == "nemesis"]
    return outcome, ops


def test_min_insync_1_loses_the_disk_the_leader_acknowledged_alone_on(tmp_path: Path) -> None:
    outcome, nemesis = lonely_leader_run(tmp_path, 1)
    assert outcome.verdict == "invalid", outcome.reason
    wiped = [op for op in nemesis if op["f"] == "corrupt" and op["type"] == "invoke"]
    assert len(wiped) == 1 and wiped[0]["value"]["kind"] == "wipe"
    assert wiped[0]["value"]["after"]["condition"] == "acknowledged-alone"
    results = outcome.results
    assert max(results["anomalies"][k]["count"] for k in ("lost-write", "lost-committed-on-replicas")) > 0


def test_min_insync_2_refuses_to_acknowledge_alone_and_stays_valid(tmp_path: Path) -> None:
    outcome, nemesis = lonely_leader_run(tmp_path, 2)
    assert outcome.verdict == "valid", (
        outcome.reason,
        outcome.results and outcome.results.get("explanation"),
    )
    assert not [op for op in nemesis if op["f"] == "corrupt"]  # the disk was never lost
    # the cut and its heal, and the healed brokers served again (the nemesis's `ready`)
    assert [op["f"] for op in nemesis if op["type"] == "ok"] == ["partition", "heal", "ready"]
    assert outcome.unreached == ["pattern lonely-leader-1: acknowledged-alone not met"]
    assert outcome.results["power"]["enough"] is True
