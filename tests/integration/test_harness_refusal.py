"""A fault this machine cannot run is refused before any cluster starts (no broker, no ZooKeeper).

`--nemesis delay` needs tc netem. Where the kernel lacks it (the reference CI machine), the run
asks one bare probe node, refuses with exit 2 and one line, leaves no namespace or state file
behind, and its run directory still gets a report that says so. Where the kernel has netem, the
probe node lets `delay` through (and nothing else is started here).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusters.factory import build_cluster
from foundation.config import resolve
from harness.preflight import refusal

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def kernel_has_netem() -> bool:
    """Asked in a throwaway network namespace, so the host's own qdiscs are never touched."""
    script = "tc qdisc add dev lo root netem delay 1ms"
    return (
        subprocess.run(["unshare", "-n", "sh", "-c", script], capture_output=True, check=False).returncode
        == 0
    )


def probe_namespaces() -> set[str]:
    """Namespaces of probe nodes (other clusters on the machine come and go: not ours to judge)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.startswith("sl-probe")}


def test_delay_is_refused_before_any_cluster_where_the_kernel_has_no_netem(tmp_path: Path) -> None:
    store, state = tmp_path / "store", tmp_path / "state"
    before = probe_namespaces()
    if kernel_has_netem():
        config = resolve(None, {"nemesis": "delay", "store": str(store)})
        sut = build_cluster(config, tmp_path / "work", state_dir=state).sut  # built, never started
        assert refusal(config, sut, tmp_path / "work", state) is None
        assert probe_namespaces() <= before
        return
    env = {**os.environ, "STRANDLINE_STATE_DIR": str(state)}
    args = [
        "run",
        "--nemesis",
        "delay",
        "--time-limit",
        "10",
        "--checker",
        "reference",
        "--store",
        str(store),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, env=env, timeout=100
    )
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(
        "strandline run: refused: fault 'delay' cannot run here: tc netem is not available"
    )
    run = Path(done.stdout.strip().splitlines()[-1].split()[-1])
    outcome = json.loads((run / "outcome.json").read_text())
    assert (outcome["status"], outcome["phase"]) == ("refused", "preflight")
    assert "cluster_up" not in outcome["timings"] and not (run / "history.jsonl").exists()
    assert 'data-verdict="refused"' in (run / "report.html").read_text()
    assert probe_namespaces() <= before and not list(state.glob("*.json"))
