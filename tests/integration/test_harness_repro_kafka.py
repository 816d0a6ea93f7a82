"""Kafka's own data-loss bugs on the releases that had them and the releases that fixed them
(`strandline repro NAME --system kafka`): each scenario's real-Kafka twin, fetched from Maven
Central by the scenario itself, must lose acknowledged writes on the affected release (invalid,
within its budget) and lose nothing on the fixed one (valid).

Every pair takes minutes (two real clusters, an attempt up to four minutes on 2 cores). CI runs
the fastest, kip-966-last-replica-standing on the default release (eligible leader replicas off
against on), both ways; the others are slow (`make test-all`), with their measured times in docs/development.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.repros import both_ways

pytestmark = [pytest.mark.integration, pytest.mark.kafka, pytest.mark.timeout(1800)]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "affected", "fixed"),
    [
        ("kip-101-truncation", "0.10.2.2", "0.11.0.0"),
        ("kip-279-fast-leader-change", "1.1.1", "2.0.0"),
        ("kafka-16541-epoch-checkpoint", "3.7.2", "3.8.0"),
    ],
)
def test_a_release_pair_has_the_bug_and_the_fix(
    name: str, affected: str, fixed: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = both_ways(name, tmp_path, monkeypatch, system="kafka")
    assert (summary["affected_release"], summary["fixed_release"]) == (affected, fixed)


def test_kip_966_last_replica_standing_on_the_default_release_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = both_ways("kip-966-last-replica-standing", tmp_path, monkeypatch, system="kafka")
    assert summary["affected_release"] == summary["fixed_release"] == "4.4.0"


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "acks-1-leader-crash",
        "unclean-election",
        "min-isr-1",
        "kip-966-power-loss",
        "no-fsync-power-loss",
    ],
)
def test_settings_on_the_default_release_both_ways(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    both_ways(name, tmp_path, monkeypatch, system="kafka")


@pytest.mark.slow
def test_kafka_17754_with_kafkas_java_client_on_transaction_version_1_and_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = both_ways("kafka-17754-delayed-end-txn", tmp_path, monkeypatch, system="kafka")
    assert summary["affected_release"] == summary["fixed_release"] == "4.0.0"
