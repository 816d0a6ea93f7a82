"""The cleanup ledger: written before creation, removed newest first, leftovers of the dead only."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from clusters import state as st
from clusters.state import ClusterState, cleanup_leftovers, register_remover

REMOVED: list[str] = []


def _fake_remover(resource: dict[str, Any]) -> None:
    if resource.get("stuck"):
        raise RuntimeError("device busy")
    REMOVED.append(resource["name"])


register_remover("fake", _fake_remover)


@pytest.fixture(autouse=True)
def _clear() -> None:
    REMOVED.clear()


def test_every_add_is_on_disk_at_once(tmp_path: Path) -> None:
    s = ClusterState.create(tmp_path, "c1", {"slot": 7})
    s.add("fake", "a")
    on_disk = json.loads((tmp_path / "c1.json").read_text())
    assert on_disk["resources"] == [{"kind": "fake", "name": "a"}]
    assert on_disk["info"] == {"slot": 7}
    assert on_disk["owner"]["pid"] == os.getpid()
    s.add("fake", "a")  # recorded once
    assert len(ClusterState.load(tmp_path / "c1.json").resources) == 1


def test_cleanup_removes_newest_first_and_deletes_the_file(tmp_path: Path) -> None:
    s = ClusterState.create(tmp_path, "c1")
    for name in ("bridge", "netns", "cgroup"):
        s.add("fake", name)
    assert s.cleanup() == []
    assert REMOVED == ["cgroup", "netns", "bridge"]
    assert not (tmp_path / "c1.json").exists()


def test_a_stuck_resource_keeps_the_file_and_the_rest_still_goes(tmp_path: Path) -> None:
    s = ClusterState.create(tmp_path, "c1")
    s.add("fake", "a")
    s.add("fake", "b", stuck=True)
    s.add("fake", "c")
    failures = s.cleanup()
    assert REMOVED == ["c", "a"]
    assert len(failures) == 1 and "device busy" in failures[0]
    left = ClusterState.load(tmp_path / "c1.json")
    assert [r["name"] for r in left.resources] == ["b"]


def test_leftovers_only_of_dead_owners_and_detached_only_when_asked(tmp_path: Path) -> None:
    live = ClusterState.create(tmp_path, "live")
    live.add("fake", "live-ns")
    dead = ClusterState.create(tmp_path, "dead")
    dead.add("fake", "dead-ns")
    dead.data["owner"] = {"pid": os.getpid(), "start": -1}  # same pid, other start time: a reused pid
    dead.save()
    detached = ClusterState.create(tmp_path, "det")
    detached.add("fake", "det-ns")
    detached.detach()

    assert cleanup_leftovers(tmp_path) == ["dead"]
    assert REMOVED == ["dead-ns"]
    assert cleanup_leftovers(tmp_path, include_detached=True) == ["det"]
    assert REMOVED == ["dead-ns", "det-ns"]
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["live.json"]


def test_unknown_kind_is_reported_not_crashing(tmp_path: Path) -> None:
    s = ClusterState.create(tmp_path, "c1")
    s.add("martian", "x")
    assert "no remover" in s.cleanup()[0]


def test_process_identity() -> None:
    me = st.process_start_time(os.getpid())
    assert me is not None
    assert st.process_alive(os.getpid(), me)
    assert not st.process_alive(os.getpid(), me + 1)
    assert st.process_start_time(2**22 + 12345) is None


def test_dir_remover_is_idempotent(tmp_path: Path) -> None:
    d = tmp_path / "home"
    (d / "sub").mkdir(parents=True)
    st.remove_resource({"kind": "dir", "name": str(d)})
    st.remove_resource({"kind": "dir", "name": str(d)})
    assert not d.exists()


def test_threads_record_concurrently_without_losing_a_record(tmp_path: Path) -> None:
    import threading

    s = ClusterState.create(tmp_path, "c1")

    def work(t: int) -> None:
        for i in range(10):
            s.add("fake", f"{t}-{i}")
            s.replace("pid", {"node": f"n{t}", "daemon": "broker"}, str(i))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    on_disk = ClusterState.load(tmp_path / "c1.json")
    assert len(on_disk.of_kind("fake")) == 40
    assert sorted(r["node"] for r in on_disk.of_kind("pid")) == [f"n{t}" for t in range(4)]
    assert all(r["name"] == "9" for r in on_disk.of_kind("pid"))
