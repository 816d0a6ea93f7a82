"""The repros of the losses Kafka fixed after KIP-101, both ways, on a real netns cluster of own
brokers: the unsafe twin must lose acknowledged writes (invalid) within the scenario's budget and
the safe twin (the fix turned on) must lose nothing (valid).

All are marked slow (`make test-all`): CI runs the demo's scenario kip-101-truncation through
systems/own.toml instead (tests/integration/test_clusters_system_own.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.repros import both_ways

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def reproduced(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    both_ways(name, tmp_path, monkeypatch)


@pytest.mark.slow
def test_kip_966_last_replica_standing_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reproduced("kip-966-last-replica-standing", tmp_path, monkeypatch)


@pytest.mark.slow
def test_kip_903_empty_disk_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reproduced("kip-903-empty-disk", tmp_path, monkeypatch)


@pytest.mark.slow
def test_kip_279_fast_leader_change_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reproduced("kip-279-fast-leader-change", tmp_path, monkeypatch)


@pytest.mark.slow
def test_kip_101_divergence_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reproduced("kip-101-divergence", tmp_path, monkeypatch)


@pytest.mark.slow
def test_kafka_16541_epoch_checkpoint_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reproduced("kafka-16541-epoch-checkpoint", tmp_path, monkeypatch)


@pytest.mark.slow
def test_no_fsync_power_loss_both_ways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reproduced("no-fsync-power-loss", tmp_path, monkeypatch)
