"""`strandline cluster up|status|down` as a user runs it, in a private state directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters.netns import existing_links, existing_namespaces

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """Outside pytest's tmp rotation, which other sessions on this machine prune."""
    path = Path(tempfile.mkdtemp(prefix="sltest-cli-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def strandline(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", "cluster", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **env},
        timeout=120,
    )


def test_up_status_down(tmp_path: Path) -> None:
    env = {"STRANDLINE_STATE_DIR": str(tmp_path / "state")}
    handle = str(tmp_path / "cluster.json")
    flags = ["--nodes", "1", "--replication-factor", "1", "--min-insync", "1", "--state", handle]
    started = time.monotonic()
    up = strandline("up", *flags, env=env)
    up_s = time.monotonic() - started
    assert up.returncode == 0, up.stderr
    last = up.stdout.strip().splitlines()[-1]
    assert last.startswith("bootstrap: 10.77.") and last.endswith(":9092")
    name = json.loads(Path(handle).read_text())["cluster"]
    try:
        again = strandline("up", *flags, env=env)
        assert again.returncode == 2 and "already up" in again.stderr
        assert len(again.stderr.strip().splitlines()) == 1

        status = strandline("status", "--json", "--state", handle, env=env)
        assert status.returncode == 0, status.stderr
        info = json.loads(status.stdout)
        assert [n["name"] for n in info["nodes"]] == ["zk", "n1"]
        assert all(p["running"] for n in info["nodes"] for p in n["processes"])
        assert [(p["topic"], p["partition"], p["leader"], p["isr"]) for p in info["partitions"]] == [
            ("t0", 0, "n1", ["n1"]),
            ("t0", 1, "n1", ["n1"]),
        ]
        assert info["controller"] == "n1"
        assert strandline("status", "--state", handle, env=env).returncode == 0
    finally:
        started = time.monotonic()
        down = strandline("down", "--state", handle, env=env)
        down_s = time.monotonic() - started
    assert down.returncode == 0, down.stderr
    print(f"\ncluster up (1 broker + zk, CLI): {up_s:.2f}s; cluster down: {down_s:.2f}s")
    assert not [n for n in existing_namespaces() if n.startswith(f"sl-{name}-")]
    assert f"slbr-{name}" not in existing_links()
    assert not Path(handle).exists()
    gone = strandline("status", "--state", handle, env=env)
    assert gone.returncode == 2 and "no cluster is up" in gone.stderr


def test_down_all_removes_detached_clusters(tmp_path: Path) -> None:
    env = {"STRANDLINE_STATE_DIR": str(tmp_path / "state")}
    script = (
        "import sys; from pathlib import Path; from clusters.netns import NetnsNetwork;"
        "n = NetnsNetwork(sys.argv[1], ['n1'], Path(sys.argv[2]), Path(sys.argv[3])); n.create();"
        "n.nodes['n1'].start_daemon('sleeper', ['sleep', '600'], log_path=sys.argv[2] + '/s.log');"
        "n.state.detach()"
    )
    name = f"da{os.getpid() % 10000}"
    subprocess.run(
        [sys.executable, "-c", script, name, str(tmp_path), env["STRANDLINE_STATE_DIR"]], cwd=ROOT, check=True
    )
    assert f"sl-{name}-n1" in existing_namespaces()
    down = strandline("down", "--all", "--state", str(tmp_path / "none.json"), env=env)
    assert down.returncode == 0, down.stderr
    assert name in down.stderr
    assert f"sl-{name}-n1" not in existing_namespaces()
    assert f"slbr-{name}" not in existing_links()
