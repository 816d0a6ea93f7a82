"""v2 record batch headers: parse, validate (length, magic, CRC) and rewrite, without decoding records.

The header layout and the CRC function come from kafka.record; batches stay opaque bytes.
Only base offset, length and partition leader epoch precede the CRC-covered part, so the
leader may rewrite them freely.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from kafka.record.default_records import DefaultRecordBatch
from kafka.record.util import calc_crc32c

from broker.storage.errors import InvalidRecordError

HEADER = DefaultRecordBatch.HEADER_STRUCT
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base offset (int64) + length (int32): the bytes not counted by the length field
MIN_LENGTH = HEADER_SIZE - LOG_OVERHEAD
CRC_COVERED_FROM = DefaultRecordBatch.ATTRIBUTES_OFFSET  # 21
EPOCH_STRUCT = struct.Struct(">i")
OFFSET_STRUCT = struct.Struct(">q")
EPOCH_POSITION = 12
MAGIC_V2 = 2
_TRANSACTIONAL = DefaultRecordBatch.TRANSACTIONAL_MASK
_CONTROL = DefaultRecordBatch.CONTROL_MASK


class BatchHeader(NamedTuple):
    """The 61-byte header of a v2 record batch (Kafka's field order)."""

    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies in a log or a fetch response."""
        return self.length + LOG_OVERHEAD

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL)


class ScanResult(NamedTuple):
    """What a scan of a buffer found: the good batches (position, header), where they end, and why."""

    batches: list[tuple[int, BatchHeader]]
    valid_end: int
    problem: str | None  # None when the whole buffer was valid batches


def check_batch_at(
    buf: bytes | bytearray | memoryview, pos: int, check_crc: bool
) -> tuple[BatchHeader | None, str]:
    """The header of the batch at `pos` if it is whole and valid, else (None, why not)."""
    remaining = len(buf) - pos
    if remaining < HEADER_SIZE:
        return None, f"torn batch header at position {pos} ({remaining} bytes)"
    header = BatchHeader._make(HEADER.unpack_from(buf, pos))
    if header.length < MIN_LENGTH:
        return None, f"batch length {header.length} at position {pos} is below the header size"
    if header.size > remaining:
        return None, f"torn batch at position {pos}: length {header.length}, {remaining} bytes left"
    if header.magic != MAGIC_V2:
        return None, f"unsupported magic {header.magic} at position {pos}"
    if header.last_offset_delta < 0 or header.records_count < 0:
        return None, f"negative last offset delta or record count at position {pos}"
    if check_crc:
        view = memoryview(buf)[pos + CRC_COVERED_FROM : pos + header.size]
        if calc_crc32c(view) != header.crc:
            return None, f"CRC mismatch in batch at position {pos} (base offset {header.base_offset})"
    return header, ""


def scan(buf: bytes | bytearray | memoryview, *, check_crc: bool = True) -> ScanResult:
    """Walk consecutive batches from the start of `buf`, stopping at the first torn or corrupt one.

    This loop runs once per batch on recovery and on every append, so it is written flat: one
    struct unpack, one CRC over a memoryview, no per-batch function calls.
    """
    batches: list[tuple[int, BatchHeader]] = []
    append = batches.append
    unpack = HEADER.unpack_from
    make = tuple.__new__
    crc32c = calc_crc32c
    view = memoryview(buf)
    pos = 0
    end = len(buf)
    while end - pos >= HEADER_SIZE:
        fields = unpack(buf, pos)
        length = fields[1]
        after = pos + LOG_OVERHEAD + length
        if (
            length < MIN_LENGTH
            or after > end
            or fields[3] != MAGIC_V2
            or fields[6] < 0
            or fields[12] < 0
            or (check_crc and crc32c(view[pos + CRC_COVERED_FROM : after]) != fields[4])
        ):
            break
        append((pos, make(BatchHeader, fields)))
        pos = after
    if pos == end:
        return ScanResult(batches, pos, None)
    _, problem = check_batch_at(buf, pos, check_crc)  # says why, once
    return ScanResult(batches, pos, problem)


def parse_batches(
    records: bytes | bytearray | memoryview, *, check_crc: bool = True, allow_partial_tail: bool = False
) -> list[BatchHeader]:
    """Validate a producer's or leader's records and return their headers.

    Raises InvalidRecordError unless `records` is exactly a sequence of valid v2 batches. A follower
    may pass allow_partial_tail=True: a fetch response can end in a batch cut short by max_bytes,
    which Kafka's fetcher simply ignores; the cut-off batch is then left out.
    """
    result = scan(records, check_crc=check_crc)
    if result.problem is not None:
        torn = result.problem.startswith("torn")
        if not (allow_partial_tail and torn):
            raise InvalidRecordError(result.problem)
    return [header for _, header in result.batches]


def set_base_offset_and_epoch(buf: bytearray, position: int, base_offset: int, leader_epoch: int) -> None:
    """Rewrite the two leader-assigned header fields in place (both lie outside the CRC)."""
    OFFSET_STRUCT.pack_into(buf, position, base_offset)
    EPOCH_STRUCT.pack_into(buf, position + EPOCH_POSITION, leader_epoch)
