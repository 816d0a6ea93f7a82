"""KAFKA-16541: the leader-epoch checkpoint without fsync, recovery past the recovery point only,
and the follower's fall-back to its high watermark when its log has no epochs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.follower import FollowerReplica, Truncate
from broker.storage import LeaderEpochCache, PartitionLog
from broker.storage.build import build_batch
from broker.storage.checkpoints import write_atomically


def test_the_setting_is_parsed_and_fsyncs_by_default() -> None:
    assert BrokerConfig.from_properties({"broker.id": "1"}).leader_epoch_checkpoint_fsync is True
    config = BrokerConfig.from_properties(
        {"broker.id": "1", "leader.epoch.checkpoint.fsync": "false", "log.segment.bytes": "4096"}
    )
    assert config.leader_epoch_checkpoint_fsync is False and config.segment_bytes == 4096


def test_a_checkpoint_written_without_fsync_never_calls_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real(fd)))
    write_atomically(tmp_path / "a", "x", fsync=False)
    assert calls == [] and (tmp_path / "a").read_text() == "x"
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint", lambda: 10, fsync=False)
    cache.assign(3, 0)
    assert calls == []
    write_atomically(tmp_path / "b", "y")
    assert len(calls) == 2  # the file, then its directory


def _log_with_epochs(log_dir: Path) -> tuple[PartitionLog, int]:
    size = len(build_batch([b"00", b"01"]))
    log = PartitionLog(log_dir, segment_bytes=2 * size)
    for i in range(6):  # two batches a segment: segments at 0, 4, 8 with epochs 0, 1, 2
        log.append_as_leader(build_batch([b"%02d" % (2 * i), b"%02d" % (2 * i + 1)]), i // 2)
    log.flush()
    return log, size


def test_recovery_rebuilds_lost_epochs_only_past_the_recovery_point(tmp_path: Path) -> None:
    log_dir = tmp_path / "t0-0"
    log, size = _log_with_epochs(log_dir)
    assert log.epochs.entries() == [(0, 0), (1, 4), (2, 8)]
    log.close()
    (log_dir / "leader-epoch-checkpoint").write_text("")  # an OS crash left it empty
    # Kafka recovers the segments from the one holding the recovery point on: epoch 2 only
    reopened = PartitionLog(log_dir, segment_bytes=2 * size, recovery_point=9)
    assert reopened.log_end_offset == 12 and reopened.epochs.entries() == [(2, 8)]
    reopened.close()
    (log_dir / "leader-epoch-checkpoint").write_text("")
    everything = PartitionLog(log_dir, segment_bytes=2 * size, recovery_point=0)
    assert everything.epochs.entries() == [(0, 0), (1, 4), (2, 8)]
    everything.close()
    # with the checkpoint intact, the recovery point changes nothing
    kept = PartitionLog(log_dir, segment_bytes=2 * size, recovery_point=12)
    assert kept.epochs.entries() == [(0, 0), (1, 4), (2, 8)]
    kept.close()
    (log_dir / "leader-epoch-checkpoint").write_text("")
    # recovery point at the log end: the active segment is still recovered
    last = PartitionLog(log_dir, segment_bytes=2 * size, recovery_point=12)
    assert last.epochs.entries() == [(2, 8)]


class _NoEpochs:
    def __init__(self, leo: int, hw: int) -> None:
        self.log_end_offset, self.high_watermark = leo, hw

    def latest_epoch(self) -> int:
        return -1

    def end_offset_for(self, epoch: int) -> tuple[int, int]:
        return -1, -1


def test_a_follower_whose_log_has_no_epochs_truncates_to_its_high_watermark() -> None:
    follower = FollowerReplica("leader-epoch", leader_id=1, leader_epoch=4)
    actions = follower.start(_NoEpochs(leo=100, hw=60))
    assert actions == [Truncate(60, "no leader epochs in this log: truncating to the high watermark")]
    assert not follower.asks_epoch
    # past the leader's end it cuts back to it (there is no epoch to ask about)
    assert follower.on_leader_offsets(0, 50, _NoEpochs(leo=60, hw=60)) == [
        Truncate(50, "fetch offset past the leader's log end")
    ]
    # an empty log has nothing to truncate: it asks as usual
    assert FollowerReplica("leader-epoch", 1, 4).start(_NoEpochs(leo=0, hw=0)) == []
