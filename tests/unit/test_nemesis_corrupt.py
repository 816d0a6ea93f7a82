"""Damaged disks: the node-side damage lands where the broker's recovery must notice it, and a
corrupt fault is refused before the run for a system without data dirs."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kafka.record.memory_records import MemoryRecords

from broker.storage import PartitionLog
from broker.storage.build import build_batch
from foundation.config import resolve
from nemesis.packages.corrupt import SCRIPT, Corrupt, split_qualifier
from nemesis.packages.damage_script import damage
from nemesis.preflight import system_refusal


def make_log(data_dir: Path, batches: int = 20, segment_bytes: int = 400) -> list[tuple[int, bytes | None]]:
    log = PartitionLog(data_dir / "t0-0", segment_bytes=segment_bytes)
    for i in range(batches):
        log.append_as_leader(build_batch([str(i * 2).encode(), str(i * 2 + 1).encode()]), 1)
    records = served(log)
    log.close()
    return records


def served(log: PartitionLog) -> list[tuple[int, bytes | None]]:
    out: list[tuple[int, bytes | None]] = []
    offset = log.log_start_offset
    while data := log.read(offset, 10_000):
        for batch in MemoryRecords(data):
            assert batch.validate_crc(), "a corrupt batch was served"
            out.extend((r.offset, r.value) for r in batch)
        offset = out[-1][0] + 1
    return out


@pytest.mark.parametrize("seed", range(12))
def test_a_flipped_bit_is_found_by_recovery_and_nothing_from_it_on_is_served(
    tmp_path: Path, seed: int
) -> None:
    original = make_log(tmp_path)
    report = damage({"kind": "bitflip", "data_dirs": [str(tmp_path)], "seed": seed})
    assert report["damaged"] and (report["topic"], report["partition"]) == ("t0", 0)
    first = report["first_damaged_offset"]
    recovered = PartitionLog(tmp_path / "t0-0", segment_bytes=400)
    assert recovered.recovered_problem is not None and "CRC" in recovered.recovered_problem
    assert recovered.log_end_offset == first
    assert served(recovered) == [r for r in original if r[0] < first]
    recovered.close()


@pytest.mark.parametrize("seed", range(6))
def test_a_cut_tail_is_truncated_at_the_torn_batch(tmp_path: Path, seed: int) -> None:
    original = make_log(tmp_path)
    report = damage({"kind": "truncate", "data_dirs": [str(tmp_path)], "seed": seed})
    assert report["size_after"] < report["size_before"]
    recovered = PartitionLog(tmp_path / "t0-0", segment_bytes=400)
    assert recovered.log_end_offset == report["first_damaged_offset"]
    assert served(recovered) == [r for r in original if r[0] < report["first_damaged_offset"]]
    recovered.close()


def test_a_wipe_empties_the_data_dir_and_the_broker_starts_from_nothing(tmp_path: Path) -> None:
    make_log(tmp_path)
    (tmp_path / "replication-offset-checkpoint").write_text("0\n1\nt0 0 40\n")
    report = damage({"kind": "wipe", "data_dirs": [str(tmp_path)]})
    assert report == {"kind": "wipe", "damaged": True, "entries_removed": 2, "partitions": ["t0-0"]}
    assert list(tmp_path.iterdir()) == []
    assert PartitionLog(tmp_path / "t0-0").log_end_offset == 0


def test_an_index_flip_without_index_files_damages_nothing(tmp_path: Path) -> None:
    make_log(tmp_path)
    report = damage({"kind": "bitflip", "where": "index", "data_dirs": [str(tmp_path)]})
    assert report == {"kind": "bitflip", "damaged": False, "reason": "no segment data to damage"}
    index = tmp_path / "t0-0" / "00000000000000000000.index"
    index.write_bytes(b"\x00\x00\x00\x05\x00\x00\x01\x00" + b"\x00" * 64)
    report = damage({"kind": "bitflip", "where": "index", "data_dirs": [str(tmp_path)], "seed": 3})
    assert report["damaged"] and report["file"] == index.name and report["position"] < 8


def test_the_script_runs_alone_as_the_nodes_run_it(tmp_path: Path) -> None:
    """The package sends this module's source to `python -c`: it must need nothing of the project."""
    make_log(tmp_path)
    request = json.dumps({"kind": "truncate", "data_dirs": [str(tmp_path)], "seed": 1})
    out = subprocess.run(
        [sys.executable, "-I", "-c", SCRIPT, request], cwd="/", capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout)["first_damaged_offset"] >= 0


def test_qualifiers_name_the_kind_and_may_name_the_target() -> None:
    assert split_qualifier("bitflip-minority") == ("bitflip", "minority")
    assert split_qualifier("wipe") == ("wipe", None)
    from nemesis.packages.base import PlanEnv

    env = PlanEnv(names=("n1", "n2", "n3"), topics=1, partitions=2, has_leaders=True, has_zookeeper=True)
    step = Corrupt().plan(random.Random(1), env, "truncate-leader")
    assert step["kind"] == "truncate" and step["target"] == "leader" and "partition" in step
    drawn = {Corrupt().plan(random.Random(s), env, "wipe")["target"] for s in range(40)}
    assert drawn == {"one", "minority"}


class KillOnly:
    """A system that can kill and start brokers but names no data dirs."""

    def kill(self, node: Any) -> None: ...
    def start(self, node: Any) -> None: ...
    def restart(self, node: Any) -> None: ...


def test_a_corrupt_fault_is_refused_before_the_run_for_a_system_without_data_dirs() -> None:
    why = system_refusal(resolve(None, {"nemesis": "corrupt:bitflip-minority"}), KillOnly())
    assert why == "fault 'corrupt': corrupt needs a system with data dirs; KillOnly names none"


def test_nodes_without_the_python_that_damages_are_refused_when_the_cluster_is_up() -> None:
    from clusters.node import ExecResult
    from nemesis.packages.base import Context

    class NoPython:
        name = "n1"

        def exec(self, argv: list[str], **kw: Any) -> ExecResult:
            return ExecResult(127, "", "not found")

    ctx = Context(resolve(None, {}), [NoPython()], KillOnly(), None, list, None, "/opt/py")  # type: ignore[arg-type, list-item]
    assert Corrupt().probe(ctx) == "node n1 cannot run /opt/py, which damages its data dir"
