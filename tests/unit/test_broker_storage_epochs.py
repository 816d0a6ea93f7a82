"""Leader epoch cache (Kafka's LeaderEpochFileCache semantics) and the offset checkpoints."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.storage import CheckpointError, LeaderEpochCache, OffsetCheckpoint

# fsync is free on tmpfs: property tests exercise the format, not the disk.
FAST_TMP = "/dev/shm" if os.path.isdir("/dev/shm") else None


class Leo:
    def __init__(self, value: int = 0) -> None:
        self.value = value

    def __call__(self) -> int:
        return self.value


def test_assign_and_end_offsets(tmp_path: Path) -> None:
    leo = Leo(20)
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint", leo)
    assert cache.latest_epoch() == -1
    assert cache.end_offset_for(0) == (-1, -1)
    cache.assign(2, 5)
    cache.assign(2, 7)  # same epoch later: ignored
    cache.assign(4, 10)
    cache.assign(7, 15)
    assert cache.entries() == [(2, 5), (4, 10), (7, 15)]
    assert cache.latest_epoch() == 7
    assert cache.end_offset_for(7) == (7, 20)  # latest epoch: the LEO
    assert cache.end_offset_for(4) == (4, 15)
    assert cache.end_offset_for(5) == (4, 15)  # unknown epoch in between: the one below
    assert cache.end_offset_for(3) == (2, 10)
    assert cache.end_offset_for(1) == (1, 5)  # below the earliest: Kafka (KIP-279) answers its start
    assert cache.end_offset_for(8) == (-1, -1)
    assert cache.end_offset_for(-1) == (-1, -1)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n3\n2 5\n4 10\n7 15\n"
    assert LeaderEpochCache(tmp_path / "leader-epoch-checkpoint", leo).entries() == cache.entries()


def test_assign_removes_non_monotonic_entries(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "c", Leo())
    for epoch, start in [(1, 0), (2, 10), (3, 20)]:
        cache.assign(epoch, start)
    cache.assign(3, 15)  # same epoch, earlier start: replaces it
    assert cache.entries() == [(1, 0), (2, 10), (3, 15)]
    cache.assign(5, 12)  # an earlier start than epoch 3: epoch 3 goes
    assert cache.entries() == [(1, 0), (2, 10), (5, 12)]
    cache.assign(2, 30)  # a lower epoch: everything >= 2 goes
    assert cache.entries() == [(1, 0), (2, 30)]
    with pytest.raises(ValueError):
        cache.assign(-1, 0)


def test_truncations(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path / "c", Leo())
    for epoch, start in [(1, 0), (2, 10), (3, 20), (4, 30)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(20)
    assert cache.entries() == [(1, 0), (2, 10)]
    cache.truncate_from_end(100)
    assert cache.entries() == [(1, 0), (2, 10)]
    cache.truncate_from_start(12)
    assert cache.entries() == [(2, 12)]
    cache.truncate_from_start(5)
    assert cache.entries() == [(2, 12)]
    assert LeaderEpochCache(tmp_path / "c", Leo()).entries() == [(2, 12)]


def test_bad_epoch_checkpoint_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "c").write_text("1\n1\n0 0\n")
    assert LeaderEpochCache(tmp_path / "c", Leo()).entries() == []


def brute_force_end_offset(entries: list[tuple[int, int]], epoch: int, leo: int) -> tuple[int, int]:
    """OffsetForLeaderEpoch from its definition, over the entries."""
    if epoch < 0 or not entries:
        return (-1, -1)
    if epoch == entries[-1][0]:
        return (epoch, leo)
    higher = [start for e, start in entries if e > epoch]
    if not higher:
        return (-1, -1)
    lower = [e for e, _ in entries if e <= epoch]
    return (max(lower) if lower else epoch, min(higher))


operation = st.one_of(
    st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 60)),
    st.tuples(st.just("end"), st.integers(0, 60), st.just(0)),
    st.tuples(st.just("start"), st.integers(0, 60), st.just(0)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(operation, max_size=25), st.integers(-1, 14))
def test_epoch_cache_properties(ops: list[tuple[str, int, int]], query: int) -> None:
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as tmp:
        path = Path(tmp) / "leader-epoch-checkpoint"
        leo = Leo(61)
        cache = LeaderEpochCache(path, leo)
        for kind, a, b in ops:
            before = cache.entries()
            if kind == "assign":
                cache.assign(a, b)
                after = cache.entries()
                if before and before[-1][0] == a and b >= before[-1][1]:
                    assert after == before
                else:
                    assert after[-1] == (a, b)
                    assert all(e < a and s < b for e, s in after[:-1])
                    assert after[:-1] == before[: len(after) - 1]
            elif kind == "end":
                cache.truncate_from_end(a)
                assert cache.entries() == [(e, s) for e, s in before if s < a]
            else:
                cache.truncate_from_start(a)
                kept = [(e, s) for e, s in before if s > a]
                dropped = [(e, s) for e, s in before if s <= a]
                assert cache.entries() == ([(dropped[-1][0], a)] if dropped else []) + kept
            entries = cache.entries()
            assert all(x[0] < y[0] and x[1] < y[1] for x, y in zip(entries, entries[1:], strict=False))
        entries = cache.entries()
        assert cache.end_offset_for(query) == brute_force_end_offset(entries, query, leo.value)
        assert LeaderEpochCache(path, leo).entries() == entries


def test_offset_checkpoint_round_trip(tmp_path: Path) -> None:
    checkpoint = OffsetCheckpoint(tmp_path / "replication-offset-checkpoint")
    assert checkpoint.read() == {}
    offsets = {("t1", 0): 5, ("t0", 2): 100, ("t0", 10): 0}
    checkpoint.write(offsets)
    assert checkpoint.read() == offsets
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n3\nt0 2 100\nt0 10 0\nt1 0 5\n"
    assert [p.name for p in tmp_path.iterdir()] == ["replication-offset-checkpoint"]
    checkpoint.write({})
    assert checkpoint.read() == {}


@pytest.mark.parametrize(
    "text",
    ["", "0\n", "1\n0\n", "0\n2\nt0 0 1\n", "0\n1\nt0 0\n", "0\nx\n", "0\n1\nt0 zero 1\n"],
)
def test_offset_checkpoint_rejects_malformed(tmp_path: Path, text: str) -> None:
    (tmp_path / "cp").write_text(text)
    with pytest.raises(CheckpointError):
        OffsetCheckpoint(tmp_path / "cp").read()
