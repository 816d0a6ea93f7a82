"""`strandline cluster up|status|down` as a user runs it, in a private state directory."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters.netns import existing_links, existing_namespaces
from clusters.state import ClusterState
from tests.support.netns import leftovers

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]

ROOT = Path(__file__).resolve().parents[2]
ONE_BROKER = ("--nodes", "1", "--replication-factor", "1", "--min-insync", "1")


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
    # The power-loss fault asks for data dirs on lazyfs: the cluster mounts them at bring-up.
    (tmp_path / "test.toml").write_text('nemesis = ["lose-unsynced"]\n')
    flags = ["--config", str(tmp_path / "test.toml"), *ONE_BROKER, "--state", handle]
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
        assert {p["name"] for p in info["nodes"][1]["processes"]} == {"broker", "lazyfs"}
        assert f"/{name}/n1/data lazyfs" in mounts() or f"/{name}/n1/data fuse" in mounts()
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
    assert f"/{name}/" not in mounts()
    gone = strandline("status", "--state", handle, env=env)
    assert gone.returncode == 2 and "no cluster is up" in gone.stderr


def mounts() -> str:
    return Path("/proc/self/mounts").read_text()


def _sigint_default() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_up_leaves_nothing(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "cluster",
            "up",
            *ONE_BROKER,
            "--state",
            str(tmp_path / "c.json"),
        ],
        cwd=ROOT,
        env={**os.environ, "STRANDLINE_STATE_DIR": str(state_dir)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as at a terminal: a runner started in the background (`cmd &`, nohup) passes
        # SIGINT down ignored, and then the interrupt would never reach the bring-up.
        preexec_fn=_sigint_default,
    )
    try:
        deadline = time.monotonic() + 120
        state: ClusterState | None = None
        while time.monotonic() < deadline:  # interrupt once ZooKeeper has been started
            if proc.poll() is not None:
                pytest.fail(
                    f"bring-up ended (exit {proc.returncode}) before ZooKeeper: {proc.communicate()[1]}"
                )
            files = list(state_dir.glob("*.json"))
            if files:
                with contextlib.suppress(OSError, ValueError):
                    state = ClusterState.load(files[0])
                    if state.of_kind("pid"):
                        break
            time.sleep(0.05)
        assert state is not None and state.of_kind("pid"), "bring-up never started ZooKeeper"
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        assert err.strip().splitlines()[-1] == "strandline cluster: interrupted"
        slot = int(state.info["slot"])
        pids = [(int(r["name"]), r.get("start")) for r in state.of_kind("pid")]
        assert leftovers(state.cluster, slot, pids, state_dir) == []
    except BaseException:  # failed: still leave nothing behind on a shared machine
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        strandline(
            "down", "--all", "--state", str(tmp_path / "c.json"), env={"STRANDLINE_STATE_DIR": str(state_dir)}
        )
        raise


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
