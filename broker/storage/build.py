"""Building v2 batches with kafka.record, for tests and tools that need real batches on disk."""

from __future__ import annotations

from collections.abc import Sequence

from kafka.record.default_records import DefaultRecordBatchBuilder

from broker.storage.batches import set_base_offset_and_epoch

NO_COMPRESSION = 0
GZIP = 1


def build_batch(
    values: Sequence[bytes | None],
    *,
    base_offset: int = 0,
    leader_epoch: int = -1,
    compression: int = NO_COMPRESSION,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    timestamp_ms: int = 0,
    keys: Sequence[bytes | None] | None = None,
    transactional: bool = False,
) -> bytes:
    """One v2 batch holding `values` (with `keys`, or none), as a producer (or, with offsets, a
    leader) sends it; the broker's own writes (transaction state, markers) are built here too."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=1 << 30,
    )
    for delta, value in enumerate(values):
        key = keys[delta] if keys is not None else None
        builder.append(delta, timestamp=timestamp_ms, key=key, value=value, headers=[])
    buf = builder.build()
    set_base_offset_and_epoch(buf, 0, base_offset, leader_epoch)
    return bytes(buf)
