"""The transaction coordinator's rules, the partition's transaction index and the markers (sans-IO)."""

from __future__ import annotations

from broker.kafka_errors import (
    CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_TXN_STATE,
    NONE,
    PRODUCER_FENCED,
)
from broker.storage import parse_batches
from broker.storage.build import build_batch
from broker.storage.control import ABORT, COMMIT, build_marker, marker_type
from broker.transactions.coordinator import TxnCoordinator, TxnMetadata, TxnState
from broker.txn_index import AbortedTxn, TxnIndex

P0 = ("t", 0)


def started(version: int = 2) -> tuple[TxnCoordinator, TxnMetadata]:
    c = TxnCoordinator(transaction_version=version)
    d = c.init_producer_id("tx", 60000, -1, -1, 7, 0.0)
    assert d.error == NONE and d.new is not None
    c.apply(d.new)
    return c, d.new


def run(c: TxnCoordinator, d: object) -> TxnMetadata:
    new = d.new  # type: ignore[attr-defined]
    assert new is not None
    c.apply(new)
    return new


def test_init_then_commit_then_complete() -> None:
    c, meta = started()
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (7, 0, TxnState.EMPTY)
    run(c, c.add_partitions("tx", 7, 0, frozenset([P0]), 1.0))
    d = c.end_txn("tx", 7, 0, True, version=3)
    assert d.error == NONE and d.markers
    prepared = run(c, d)
    assert prepared.state is TxnState.PREPARE_COMMIT and prepared.producer_epoch == 0
    assert c.end_txn("tx", 7, 0, True, version=3).error == CONCURRENT_TRANSACTIONS
    done = run(c, c.markers_written("tx", 0))
    assert done.state is TxnState.COMPLETE_COMMIT and not done.partitions
    assert c.end_txn("tx", 7, 0, True, version=3).error == NONE  # a retry
    assert c.end_txn("tx", 7, 0, False, version=3).error == INVALID_TXN_STATE


def test_a_new_instance_fences_the_old_and_aborts_its_transaction() -> None:
    c, _ = started()
    run(c, c.add_partitions("tx", 7, 0, frozenset([P0]), 1.0))
    d = c.init_producer_id("tx", 60000, -1, -1, None, 2.0)
    assert d.error == CONCURRENT_TRANSACTIONS and d.markers
    aborting = run(c, d)
    assert aborting.state is TxnState.PREPARE_ABORT and aborting.producer_epoch == 1
    assert c.add_partitions("tx", 7, 0, frozenset([P0]), 3.0).error == PRODUCER_FENCED
    assert c.end_txn("tx", 7, 0, True, version=3).error == PRODUCER_FENCED
    run(c, c.markers_written("tx", 1))
    again = run(c, c.init_producer_id("tx", 60000, -1, -1, None, 4.0))
    assert again.producer_epoch == 2 and again.state is TxnState.EMPTY
    assert c.end_txn("tx", 8, 2, True, version=3).error == INVALID_PRODUCER_ID_MAPPING


def test_version_1_lets_a_late_end_txn_end_the_next_transaction() -> None:
    """KAFKA-17754: one epoch spans transactions, so a late EndTxn commits the next one."""
    c, _ = started(version=1)
    run(c, c.add_partitions("tx", 7, 0, frozenset([P0]), 1.0))
    run(c, c.end_txn("tx", 7, 0, False, version=5))
    run(c, c.markers_written("tx", 0))
    run(c, c.add_partitions("tx", 7, 0, frozenset([("t", 1)]), 2.0))  # the next transaction
    late = c.end_txn("tx", 7, 0, True, version=5)  # sent for the first one, arrives now
    assert late.error == NONE and late.new is not None and late.new.state is TxnState.PREPARE_COMMIT


def test_version_2_bumps_the_epoch_and_fences_the_late_end_txn() -> None:
    c, _ = started(version=2)
    run(c, c.add_partitions("tx", 7, 0, frozenset([P0]), 1.0))
    prepared = run(c, c.end_txn("tx", 7, 0, False, version=5))
    assert prepared.producer_epoch == 1 and prepared.last_epoch == 0
    run(c, c.markers_written("tx", 1))
    assert c.end_txn("tx", 7, 0, False, version=5).error == NONE  # the retry is answered
    run(c, c.add_partitions("tx", 7, 1, frozenset([("t", 1)]), 2.0))
    late = c.end_txn("tx", 7, 0, True, version=5)
    assert late.error == PRODUCER_FENCED and late.new is None


def test_timeout_aborts_with_a_bumped_epoch() -> None:
    c, _ = started()
    run(c, c.add_partitions("tx", 7, 0, frozenset([P0]), 1000.0))
    assert c.expired(1000.0 + 60000) == []
    (expired,) = c.expired(1000.0 + 60001)
    assert expired.state is TxnState.PREPARE_ABORT and expired.producer_epoch == 1


def test_metadata_round_trips_through_json() -> None:
    meta = TxnMetadata("tx", 3, 4, 5000, TxnState.ONGOING, frozenset([P0]), frozenset(["g"]), 12.5, 3)
    assert TxnMetadata.from_json("tx", meta.to_json()) == meta


def test_markers_are_control_batches_of_their_type() -> None:
    for commit, kind in ((True, COMMIT), (False, ABORT)):
        batch = build_marker(9, 2, commit, coordinator_epoch=4)
        (header,) = parse_batches(batch, check_crc=True)
        assert header.is_control and header.is_transactional
        assert (header.producer_id, header.producer_epoch) == (9, 2)
        assert marker_type(batch, header) == kind
    plain = build_batch([b"1"])
    assert marker_type(plain, parse_batches(plain)[0]) is None


def test_index_last_stable_offset_and_aborted_list() -> None:
    index = TxnIndex()
    index.on_batch(5, 10, True, None)
    index.on_batch(6, 11, True, None)
    index.on_batch(-1, 12, False, None)
    assert index.last_stable_offset(20) == 10
    index.on_batch(5, 13, True, ABORT)
    assert index.last_stable_offset(20) == 11
    index.on_batch(6, 14, True, COMMIT)
    assert index.last_stable_offset(20) == 20
    assert index.aborted == [AbortedTxn(5, 10, 13)]
    assert index.aborted_between(0, 20) == [AbortedTxn(5, 10, 13)]
    assert index.aborted_between(14, 20) == []
    assert index.aborted_between(0, 10) == []


def _txn_batch(producer_id: int, epoch: int, sequence: int, values: list[bytes]) -> bytes:
    return build_batch(
        values, transactional=True, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
    )


def test_a_partition_tracks_transactions_across_a_restart(tmp_path: object) -> None:
    """Leader appends open and close transactions; the LSO, the aborted list and the fencing of
    an older epoch come back when the broker rescans its log."""
    import asyncio
    from pathlib import Path

    from broker.config import BrokerConfig
    from broker.kafka_errors import INVALID_PRODUCER_EPOCH
    from broker.partition_state import PartitionState
    from broker.replica_manager import ReplicaManager

    config = BrokerConfig(broker_id=1, log_dirs=(Path(str(tmp_path)),))
    state = PartitionState(leader=1, leader_epoch=0, isr=(1,), replicas=(1,), zk_version=0)

    async def scenario() -> None:
        rm = ReplicaManager(config)
        rm.apply_state("t", 0, state)
        partition = rm.partitions[("t", 0)]
        assert (await rm.produce("t", 0, _txn_batch(5, 0, 0, [b"1", b"2"]), 1, 1000)).error == NONE
        assert (await rm.produce("t", 0, build_batch([b"3"]), 1, 1000)).error == NONE
        assert partition.replica.high_watermark == 3 and partition.last_stable_offset() == 0
        error, data = rm.read(partition, -1, 0, 1 << 20, read_committed=True)
        assert error == NONE and data == b""
        assert await rm.write_marker("t", 0, 5, 1, False, 0, 1000) == NONE  # aborted, epoch bumped
        assert partition.last_stable_offset() == 4
        assert partition.txns.aborted == [AbortedTxn(5, 0, 3)]
        rm.close()

    asyncio.run(scenario())

    async def after_restart() -> None:
        rm = ReplicaManager(config)
        rm.load_logs()
        rm.apply_state("t", 0, state)
        partition = rm.partitions[("t", 0)]
        assert partition.txns.aborted == [AbortedTxn(5, 0, 3)] and not partition.txns.open
        zombie = await rm.produce("t", 0, _txn_batch(5, 0, 2, [b"9"]), 1, 1000)
        assert zombie.error == INVALID_PRODUCER_EPOCH
        rm.close()

    asyncio.run(after_restart())
