"""Property tests: recovery keeps exactly the valid prefix; replication by fetch reproduces the log."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords

from broker.storage import PartitionLog
from broker.storage.build import GZIP, NO_COMPRESSION, build_batch

# fsync is free on tmpfs: property tests exercise the format, not the disk.
FAST_TMP = "/dev/shm" if os.path.isdir("/dev/shm") else None

EPOCH_FIELD = range(12, 16)  # the partition leader epoch: outside the CRC, as in Kafka

batch_spec = st.tuples(
    st.lists(st.binary(max_size=12), min_size=1, max_size=4),
    st.integers(0, 2),  # epoch increment
    st.sampled_from([NO_COMPRESSION, NO_COMPRESSION, GZIP]),
)

damage = st.one_of(
    st.tuples(st.just("tear"), st.floats(0, 1, exclude_max=True), st.just(0)),
    st.tuples(st.just("flip"), st.floats(0, 1, exclude_max=True), st.integers(1, 255)),
    st.tuples(st.just("garbage"), st.just(0.0), st.integers(1, 200)),
    st.tuples(st.just("zeros"), st.just(0.0), st.integers(1, 200)),
)


def records_of(log: PartitionLog) -> list[tuple[int, int, bytes | None]]:
    out: list[tuple[int, int, bytes | None]] = []
    offset = log.log_start_offset
    while data := log.read(offset, 300):
        for batch in MemoryRecords(data):
            assert batch.validate_crc(), "a corrupt batch was served"
            out.extend((r.offset, batch.leader_epoch, r.value) for r in batch)
        offset = out[-1][0] + 1
    return out


@settings(max_examples=120, deadline=None)
@given(st.lists(batch_spec, min_size=1, max_size=12), st.integers(150, 600), damage, st.randoms())
def test_recovery_keeps_exactly_the_valid_prefix(specs, segment_bytes, harm, rnd) -> None:  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as tmp:
        log_dir = Path(tmp) / "t0-0"
        log = PartitionLog(log_dir, segment_bytes=segment_bytes)
        epoch = 0
        layout = []  # (segment path, position, size, first offset) per batch
        for values, step, codec in specs:
            epoch += step
            before = log.log_end_offset
            log.append_as_leader(build_batch(values, compression=codec), epoch)
            segment = log.segment_paths[-1]
            size = len(build_batch(values, compression=codec))
            layout.append((segment, segment.stat().st_size - size, size, before))
        original = records_of(log)
        log.close()

        kind, where, amount = harm
        keep_below = log_end = original[-1][0] + 1  # the first offset recovery must drop
        if kind in ("tear", "flip"):
            index = int(where * len(layout))
            segment, position, size, first = layout[index]
            data = bytearray(segment.read_bytes())
            if kind == "tear":
                if segment != layout[-1][0]:
                    index, (segment, position, size, first) = len(layout) - 1, layout[-1]
                    data = bytearray(segment.read_bytes())
                cut = position + 1 + rnd.randrange(size - 1)  # mid-batch
                segment.write_bytes(bytes(data[:cut]))
                keep_below = first
            else:
                spot = rnd.choice([i for i in range(size) if i not in EPOCH_FIELD])
                data[position + spot] ^= amount
                segment.write_bytes(bytes(data))
                keep_below = first
        else:
            filler = (
                bytes(rnd.randrange(256) for _ in range(amount)) if kind == "garbage" else b"\x00" * amount
            )
            with open(layout[-1][0], "ab") as f:
                f.write(filler)

        recovered = PartitionLog(log_dir, segment_bytes=segment_bytes)
        assert recovered.log_end_offset == keep_below
        assert records_of(recovered) == [r for r in original if r[0] < keep_below]
        expected_epochs: list[tuple[int, int]] = []
        for offset, batch_epoch, _ in original:
            if offset < keep_below and (not expected_epochs or expected_epochs[-1][0] != batch_epoch):
                expected_epochs.append((batch_epoch, offset))
        assert recovered.epochs.entries() == expected_epochs
        assert (recovered.recovered_problem is None) == (
            keep_below == log_end and kind != "garbage" and kind != "zeros"
        )
        # The log stays appendable right after the kept prefix.
        assert recovered.append_as_leader(build_batch([b"x"]), epoch + 1)[0] == keep_below
        recovered.close()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(batch_spec, min_size=1, max_size=15),
    st.lists(st.integers(1, 400), min_size=1, max_size=10),
    st.integers(200, 800),
)
def test_fetching_replicates_the_log_byte_for_byte(specs, fetch_sizes, segment_bytes) -> None:  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory(dir=FAST_TMP) as tmp:
        leader = PartitionLog(Path(tmp) / "a" / "t0-0", segment_bytes=segment_bytes)
        follower = PartitionLog(Path(tmp) / "b" / "t0-0", segment_bytes=segment_bytes)
        epoch = 0
        for values, step, codec in specs:
            epoch += step
            leader.append_as_leader(build_batch(values, compression=codec), epoch)
        turn = 0
        while follower.log_end_offset < leader.log_end_offset:
            chunk = leader.read(follower.log_end_offset, fetch_sizes[turn % len(fetch_sizes)])
            turn += 1
            follower.append_as_follower(chunk)
        assert records_of(follower) == records_of(leader)
        assert follower.epochs.entries() == leader.epochs.entries()
        assert b"".join(p.read_bytes() for p in follower.segment_paths) == b"".join(
            p.read_bytes() for p in leader.segment_paths
        )
