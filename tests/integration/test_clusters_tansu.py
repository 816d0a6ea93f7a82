"""tansu 0.6.0, a third-party Kafka-compatible broker, through the shipped definitions (netns): every
broker answers as broker 111, alone, and serves every partition from a shared store.

- tansu over moto's in-memory S3 (systems/tansu-s3.toml): a fault-free run is valid; a leader-
  targeted fault is refused before any cluster starts; an object-store fault (replies dropped
  after the store applied the PUT) is journaled and healed; a kill of the storage role loses what
  the store held, and the run says so (invalid); a group's run is read back whole by the final
  drain, whose first fetch of the whole log tansu answers in more than the run's request timeout;
- tansu over PostgreSQL (systems/tansu-postgres.toml): the same kill of the storage role loses
  nothing (valid).

The binary is built once with cargo (`make tansu`, docs/systems.md): where it is absent (CI), these
tests are skipped, saying so. Each is a run of some minutes on a loaded machine: marked slow.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from clusters import tansu_build

pytestmark = [
    pytest.mark.integration,
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        tansu_build.binary() is None,
        reason=f"tansu is not built here (make tansu: cargo install into {tansu_build.folder()})",
    ),
]

REPO = Path(__file__).resolve().parents[2]
S3 = REPO / "systems" / "tansu-s3.toml"
POSTGRES = REPO / "systems" / "tansu-postgres.toml"
QUICK = ["--checker", "reference", "--rate", "100", "--concurrency", "4", "--nemesis-interval", "10"]


def run(
    tmp_path: Path, system: Path, name: str, *args: str
) -> tuple[subprocess.CompletedProcess[str], Path | None]:
    env = {**os.environ, "STRANDLINE_STATE_DIR": str(tmp_path / "state")}
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--system", str(system), "--name", name,
         "--store", str(tmp_path / "store"), *QUICK, *args],
        capture_output=True, text=True, env=env, timeout=560, check=False, cwd=REPO,
    )  # fmt: skip
    last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    directory = Path(last.split(" ", 2)[2]) if last.startswith("verdict: ") else None
    assert list((tmp_path / "state").glob("*.json")) == [], "a cluster was left running"
    return out, directory


def nemesis_ops(directory: Path) -> list[dict[str, object]]:
    ops = [json.loads(line) for line in (directory / "history.jsonl").read_text().splitlines()]
    return [op for op in ops if op.get("process") == "nemesis"]


def test_tansu_over_s3_comes_up_as_it_is_and_refuses_leader_faults(tmp_path: Path) -> None:
    refused, _ = run(tmp_path, S3, "tansu-leader", "--nemesis", "kill:leader", "--time-limit", "5")
    assert refused.returncode == 2 and "serves every partition" in refused.stderr.strip().splitlines()[-1]
    out, directory = run(tmp_path, S3, "tansu-none", "--time-limit", "20")
    assert out.returncode == 0 and directory is not None, out.stderr[-2000:]
    state = json.loads((directory / "cluster-state.json").read_text())
    assert any("same broker id 111" in note for note in state["broker_identity"]), state


def test_a_dropped_reply_of_the_store_is_journaled_and_healed(tmp_path: Path) -> None:
    out, directory = run(tmp_path, S3, "tansu-drop", "--nemesis", "storage:drop-reply", "--time-limit", "30")
    assert directory is not None and out.returncode in (0, 1, 3), out.stderr[-2000:]
    ops = nemesis_ops(directory)
    applied = [op for op in ops if op["f"] == "storage" and op["type"] == "ok"]
    heals = [op for op in ops if op["f"] == "heal" and op["type"] == "ok"]
    assert applied and len(heals) == len(applied), ops
    assert (directory / "nodes" / "st1" / "logs" / "s3-proxy.out").exists()


def test_the_final_drain_reads_a_whole_log_that_tansu_serves_slowly(tmp_path: Path) -> None:
    out, directory = run(tmp_path, S3, "tansu-group", "--consume", "subscribe", "--time-limit", "20")
    assert out.returncode == 0 and directory is not None, out.stderr[-2000:]
    drain = json.loads((directory / "drain.json").read_text())
    assert drain["complete"] and drain["records"] > 0, drain


def test_killing_the_in_memory_store_is_caught_as_data_loss(tmp_path: Path) -> None:
    out, directory = run(
        tmp_path, S3, "tansu-kill-store", "--nemesis", "kill:role=storage", "--time-limit", "40"
    )
    assert out.returncode == 1 and directory is not None, out.stderr[-2000:]
    anomalies = json.loads((directory / "results.json").read_text())["anomalies"]
    assert any(anomalies[name]["count"] for name in ("lost-write", "inconsistent-offsets")), anomalies


@pytest.mark.skipif(shutil.which("runuser") is None or not Path("/usr/lib/postgresql/15/bin/postgres").exists(),
                    reason="Debian's PostgreSQL 15 is not installed (apt-get install postgresql)")  # fmt: skip
def test_killing_a_durable_store_loses_nothing(tmp_path: Path) -> None:
    # PostgreSQL runs as its own user, who must pass through the folders above its data dir: not
    # under pytest's base folder, which every pytest session on the machine makes 0700 again.
    outside = Path(tempfile.mkdtemp(prefix="strandline-tansu-pg-"))
    outside.chmod(0o755)
    try:
        check_durable_kill(outside)
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def check_durable_kill(tmp_path: Path) -> None:
    out, directory = run(
        tmp_path, POSTGRES, "tansu-pg-kill-store", "--nemesis", "kill:role=storage", "--time-limit", "40"
    )
    assert out.returncode == 0 and directory is not None, out.stderr[-2000:]
    assert any(op["f"] == "kill" and op["type"] == "ok" for op in nemesis_ops(directory))
