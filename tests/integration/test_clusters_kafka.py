"""Real Apache Kafka, fetched from Maven Central by the test itself and run from
systems/kafka-kraft.toml (`--system kafka`), on netns, through the CLI as a user runs it.

In CI: the default release on a 3-node KRaft cluster (every node a broker and a controller): a
fault-free run with kafka-python is valid and its report shows the brokers' real segments. Slow
(each a few minutes on a loaded 2-core machine): a run under kill and partition faults with
confluent-kafka is valid; unclean leader election with
min.insync.replicas=1 loses acknowledged writes under the pattern that exposes it (a follower
frozen out of the ISR, then the in-sync replicas crash together), and the same schedule with the
safe settings does not; both on the split definition, so the controller quorum outlives the
crash of two brokers (in combined mode it would go down with them and no election could happen).
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters import kafka_release

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.timeout(420)]

REPO = Path(__file__).resolve().parents[2]
SPLIT = str(REPO / "systems" / "kafka-kraft-split.toml")
LOAD = ["--checker", "reference", "--rate", "100", "--concurrency", "6"]


@pytest.fixture(scope="module")
def release() -> Iterator[str]:
    """The default release, fetched here on a fresh machine (a later test finds it in the cache)."""
    started = time.monotonic()
    folder = kafka_release.fetch(kafka_release.DEFAULT_VERSION)
    print(f"\nKafka {kafka_release.DEFAULT_VERSION} in {folder} after {time.monotonic() - started:.1f}s")
    yield kafka_release.DEFAULT_VERSION


def run(
    args: list[str], tmp_path: Path, timeout: float = 400
) -> tuple[subprocess.CompletedProcess[str], Path]:
    env = {**os.environ, "STRANDLINE_STATE_DIR": str(tmp_path / "state")}
    out = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "--store", str(tmp_path / "store"), *LOAD, *args],
        capture_output=True, text=True, env=env, timeout=timeout, check=False, cwd=REPO,
    )  # fmt: skip
    last = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    assert last.startswith("verdict: "), out.stderr[-3000:]
    assert list((tmp_path / "state").glob("*.json")) == [], "a cluster was left behind"
    return out, Path(last.split(" ", 2)[2])


def test_fault_free_run_is_valid_and_the_report_shows_real_segments(release: str, tmp_path: Path) -> None:
    out, run_dir = run(["--system", "kafka", "--time-limit", "15", "--client", "kafka-python"], tmp_path)
    assert out.returncode == 0, out.stdout[-2000:]
    test = json.loads((run_dir / "test.json").read_text())["config"]
    assert (test["system"], test["kafka_version"]) == ("kafka", "")
    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] is True and results["stats"]["sends"]["ok"] > 0
    for node in ("n1", "n2", "n3"):  # Kafka's own files, written by Kafka
        data = run_dir / "nodes" / node / "data"
        assert (data / "meta.properties").exists() and (data / "__cluster_metadata-0").is_dir()
        assert (data / "t0-0" / "00000000000000000000.log").stat().st_size > 0
        assert (data / "t0-0" / "leader-epoch-checkpoint").exists()
        assert (data / "replication-offset-checkpoint").exists()
    text = html.unescape(re.sub(r"<[^>]+>", " ", (run_dir / "report.html").read_text()))
    replicas = " ".join(text[text.index("Replica logs") :].split())
    assert "Replicas agree on every partition" in replicas and "epoch 0: offsets 0–" in replicas
    assert "n1 (leader)" in replicas or "n2 (leader)" in replicas or "n3 (leader)" in replicas


@pytest.mark.slow
def test_kill_and_partition_run_is_valid_with_confluent_kafka(release: str, tmp_path: Path) -> None:
    args = [
        "--system",
        "kafka",
        "--nemesis",
        "kill,partition",
        "--nemesis-interval",
        "8",
        "--time-limit",
        "30",
    ]
    out, run_dir = run([*args, "--client", "confluent-kafka", "--seed", "3"], tmp_path)
    assert out.returncode == 0, out.stdout[-2000:]
    history = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    faults = {op["f"] for op in history if op["process"] == "nemesis" and op["type"] == "ok"}
    assert faults & {"kill", "partition"}, faults
    assert json.loads((run_dir / "results.json").read_text())["valid"] is True


UNCLEAN_SCHEDULE = ["--nemesis", "kill:lagging-follower", "--nemesis-interval", "5", "--time-limit", "40"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("settings", "verdict"),
    [(["--unclean-election", "--min-insync", "1"], "invalid"), ([], "valid")],
    ids=["unclean-min-insync-1", "safe"],
)
def test_unclean_election_loses_acknowledged_writes_and_the_safe_settings_do_not(
    release: str, tmp_path: Path, settings: list[str], verdict: str
) -> None:
    args = ["--system", SPLIT, *UNCLEAN_SCHEDULE, *settings, "--seed", "7"]
    out, run_dir = run(args, tmp_path, timeout=600)
    assert out.stdout.strip().splitlines()[-1] == f"verdict: {verdict} {run_dir}", out.stdout[-3000:]
    if verdict == "invalid":
        results = json.loads((run_dir / "results.json").read_text())
        lost = sum(results["anomalies"].get(a, {}).get("count", 0) for a in ("lost-write", "unseen"))
        assert lost > 0, results["anomalies"]
