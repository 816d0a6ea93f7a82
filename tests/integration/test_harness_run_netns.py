"""`strandline run` end to end on the embedded default (own broker, 3 nodes, netns).

One controller is killed with SIGKILL during its load: its run dir must still be checkable with
`strandline check`, and the next `strandline run` must remove what it left (namespaces, brokers,
state file) before a short fault-free run that ends valid with every run-dir file present, checked
with Spark (the default checker).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Not marked slow although it takes two minutes: it is CI's one end-to-end run of the real command.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]


def cli(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def test_killed_run_is_checkable_then_healed_and_a_short_run_is_valid(tmp_path: Path) -> None:
    store, state = tmp_path / "store", tmp_path / "state"
    env = {**os.environ, "STRANDLINE_STATE_DIR": str(state)}
    common = ["--store", str(store), "--rate", "60", "--concurrency", "4"]

    # 1. A controller killed with SIGKILL in the middle of its load.
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "--name", "killed", "--time-limit", "120", *common],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 150
        history = None
        while time.monotonic() < deadline:
            found = list((store / "killed").glob("*/history.jsonl"))
            if found and found[0].stat().st_size > 0 and len(found[0].read_text().splitlines()) > 100:
                history = found[0]
                break
            assert proc.poll() is None, "the run ended before it could be killed"
            time.sleep(0.5)
        assert history is not None, "the load never started"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    killed_run = history.parent
    leftovers = [json.loads(p.read_text())["cluster"] for p in state.glob("*.json")]
    assert len(leftovers) == 1, "the killed controller's cluster state should be left behind"
    cluster = leftovers[0]
    assert any(ns.startswith(f"sl-{cluster}-") for ns in namespaces())

    # 2. Its run dir is checkable as it is.
    out = cli(["check", str(killed_run), "--checker", "reference"], env, timeout=120)
    assert out.returncode in (0, 1, 3), out.stderr
    assert (
        out.stdout.strip().splitlines()[-1]
        == f"verdict: {('valid', 'invalid', '', 'unknown')[out.returncode]} {killed_run}"
    )
    assert (killed_run / "results.json").exists()

    # 3. The next run heals the leftovers first, then runs a short fault-free test that is valid.
    started = time.monotonic()
    out = cli(["run", "--name", "short", "--time-limit", "15", *common], env, timeout=300)
    took = time.monotonic() - started
    assert out.returncode == 0, out.stderr[-3000:]
    run = Path(out.stdout.strip().splitlines()[-1].split(" ", 2)[2])
    assert out.stdout.strip().splitlines()[-1] == f"verdict: valid {run}"
    assert f"removed leftover cluster {cluster}" in out.stderr
    assert not any(ns.startswith(f"sl-{cluster}-") for ns in namespaces())
    assert list(state.glob("*.json")) == []  # the short run's own cluster is gone too
    for name in ("test.json", "history.jsonl", "results.json", "report.html", "report.png", "harness.log",
                 "drain.json", "cluster-state.json", "outcome.json"):  # fmt: skip
        assert (run / name).is_file(), name
    for node in ("n1", "n2", "n3"):
        assert any((run / "nodes" / node / "data").glob("t0-*/*.log")), node
        assert any((run / "nodes" / node / "logs").iterdir()), node
    assert (store / "latest").resolve() == run
    results = json.loads((run / "results.json").read_text())
    assert results["valid"] is True and results["stats"]["sends"]["ok"] > 100
    assert results["checker"]["engine"] == "spark" and "checked with Spark (local[*])" in out.stderr
    # The history's Parquet form was written while the run journaled it, and the check reused it.
    assert "reusing " + str(run / "history.parquet") in (run / "harness.log").read_text()
    assert not list(run.glob(".journal-*"))
    print(f"short run: {took:.0f} s wall")
