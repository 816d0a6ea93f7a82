"""The membership fault on a real netns cluster, end to end through `strandline run`.

A scripted schedule adds a broker on the spare node n4, moves a replica of t0-0 onto it and
decommissions n1 while load flows. Each change shows in the history and settles (the added broker
registers, the reassignment finishes, the decommissioned broker's replicas move away and it is
stopped); the final checks follow the final assignment (n4's data dir is read, n1's is not a
replica any more) and the run is valid on the safe settings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CONFIG = """
name = "membership"
time_limit = 30
rate = 80
concurrency = 4
partitions = 2
checker = "reference"
schedule = [
  { wait = 3 },
  { do = "member", action = "add" },
  { do = "member", action = "move", topic = "t0", partition = 0, to = "n4" },
  { heal = "member" },
  { do = "member", action = "decommission", target = "n1" },
  { wait = 2 },
  { heal = "all" },
]
"""


@pytest.mark.slow
def test_add_move_decommission_show_in_the_history_settle_and_stay_valid(tmp_path: Path) -> None:
    config = tmp_path / "membership.toml"
    config.write_text(CONFIG)
    env = {**os.environ, "STRANDLINE_STATE_DIR": str(tmp_path / "state")}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--config",
            str(config),
            "--store",
            str(tmp_path / "store"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=280,
        check=False,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run = Path(out.stdout.strip().splitlines()[-1].split()[-1])
    ops = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    member = [
        (o["type"], o["value"].get("action")) for o in ops if o["f"] == "member" and o["type"] != "invoke"
    ]
    assert member == [("ok", "add"), ("ok", "move"), ("ok", "decommission")]
    settled = [o["value"] for o in ops if o["f"] == "member-settled" and o["type"] == "ok"]
    assert len(settled) == 2 and settled[1]["removed"] == "n1"
    state = json.loads((run / "cluster-state.json").read_text())
    replicas = {
        f"{p['topic']}-{p['partition']}": p["replicas"] for p in state["partitions"] if p["topic"] == "t0"
    }
    assert all("n1" not in r and len(set(r)) == 3 for r in replicas.values()), replicas
    assert "n4" in replicas["t0-0"]
    results = json.loads((run / "results.json").read_text())
    assert results["valid"] is True
    judged = {r["node"] for p in results["stats"]["replicas"].values() for r in p["replicas"]}
    assert "n4" in judged and "n1" not in judged
