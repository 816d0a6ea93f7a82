"""The delayed-fetch decision (sans-IO) and the parked-fetch wiring in the ReplicaManager."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.delayed import ByteMarks, DelayedFetch

K = ("t", 0)
K1 = ("t", 1)


def test_byte_marks_measure_between_batch_boundaries() -> None:
    marks = ByteMarks()
    marks.appended(3, 100)  # offsets 0..2
    marks.appended(5, 50)  # offsets 3..4
    marks.appended(9, 70)  # offsets 5..8
    assert marks.bytes_between(3, 9) == 120
    assert marks.bytes_between(5, 9) == 70
    assert marks.bytes_between(9, 9) == 0
    assert marks.bytes_between(0, 3) is None  # before the first mark: unknown
    marks.truncated(5)
    assert marks.total == 150
    marks.appended(6, 10)
    assert marks.bytes_between(5, 6) == 10


def test_min_bytes_one_completes_once_the_end_passes_the_offset() -> None:
    d = DelayedFetch(1, {K: 10})
    assert not d.on_progress(K, 10, None)  # HW still at the fetch offset: nothing to read
    assert not d.on_progress(K1, 99, None)  # another partition, not in this fetch
    assert d.on_progress(K, 11, None)


def test_min_bytes_accumulates_across_partitions_without_double_counting() -> None:
    d = DelayedFetch(100, {K: 10, K1: 0})
    d.on_found(K1, 20)
    assert not d.on_progress(K, 12, 30)  # 20 + 30
    assert not d.on_progress(K, 13, 60)  # replaces K's 30: 20 + 60
    assert d.on_progress(K1, 5, 40)  # replaces K1's 20: 40 + 60
    assert d.complete


def test_unknown_size_counts_as_enough() -> None:
    assert DelayedFetch(1 << 20, {K: 0}).on_progress(K, 1, None)


def test_state_change_completes() -> None:
    d = DelayedFetch(1 << 20, {K: 0})
    assert d.on_state_change()
    assert d.on_progress(K, 0, 0)


def test_parked_fetch_wakes_on_hw_past_offset_or_timeout(tmp_path: Path) -> None:
    from broker.config import BrokerConfig
    from broker.replica_manager import ReplicaManager

    async def scenario() -> None:
        config = BrokerConfig.from_properties({"broker.id": "1", "log.dirs": str(tmp_path)})
        rm = ReplicaManager(config)
        partition = rm.get_or_create("t", 0)
        consumer = rm.park_fetch([(partition, 0, 0)], False, 1, 5.0)
        follower = rm.park_fetch([(partition, 0, 0)], True, 1, 5.0)
        partition.log_end_advanced()  # LEO still 0
        assert not follower.future.done()
        partition.byte_marks.appended(1, 80)
        partition.replica.log_end_offset = 1
        partition.high_watermark_advanced()  # HW still 0: consumers wait
        assert not consumer.future.done()
        partition.replica.high_watermark = 1
        partition.high_watermark_advanced()
        assert consumer.future.done() and not follower.future.done()
        rm.unpark(consumer)
        assert consumer not in partition.consumer_fetches
        timed = rm.park_fetch([(partition, 1, 0)], True, 1, 0.01)
        await asyncio.wait_for(timed.future, 2)
        rm.unpark(timed)
        rm.unpark(follower)
        assert not partition.follower_fetches
        rm.close()

    asyncio.run(scenario())
