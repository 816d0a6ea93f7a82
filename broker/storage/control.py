"""Transaction markers: the control batches a transaction's commit or abort leaves in each partition.

A marker is a v2 batch with the transactional and control bits set, the producer's id and epoch, and
one record whose key is (version 0, type: 0 abort, 1 commit) and whose value is (version 0,
coordinator epoch), as Kafka writes them (KIP-98). Consumers reading committed skip these batches.
"""

from __future__ import annotations

import struct
import time

from kafka.record.default_records import DefaultRecordBatch
from kafka.record.util import calc_crc32c

from broker.storage.batches import CRC_COVERED_FROM, HEADER_SIZE, BatchHeader
from broker.storage.build import build_batch

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_ATTRIBUTES = struct.Struct(">h")
_CRC = struct.Struct(">I")
_CRC_POSITION = DefaultRecordBatch.CRC_OFFSET  # 17


def build_marker(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int) -> bytes:
    """One control batch (base offset 0; the leader assigns the real one on append)."""
    buf = bytearray(
        build_batch(
            [_VALUE.pack(0, coordinator_epoch)],
            keys=[_KEY.pack(0, COMMIT if commit else ABORT)],
            transactional=True,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            timestamp_ms=int(time.time() * 1000),
        )
    )
    attributes = _ATTRIBUTES.unpack_from(buf, CRC_COVERED_FROM)[0] | DefaultRecordBatch.CONTROL_MASK
    _ATTRIBUTES.pack_into(buf, CRC_COVERED_FROM, attributes)
    _CRC.pack_into(buf, _CRC_POSITION, calc_crc32c(bytes(buf[CRC_COVERED_FROM:])))
    return bytes(buf)


def marker_type(batch: bytes | bytearray | memoryview, header: BatchHeader) -> int | None:
    """ABORT or COMMIT for a control batch (its first record's key); None if it is not a marker."""
    if not header.is_control or len(batch) < HEADER_SIZE:
        return None
    for record in DefaultRecordBatch(bytes(batch)):
        key = record.key
        if key is None or len(key) < _KEY.size:
            return None
        return int(_KEY.unpack_from(key)[1])
    return None
