"""The transaction coordinator's state as records of the internal topic `__transaction_state`.

One record per change: key the transactional id (UTF-8), value the metadata as JSON. The topic is
replicated like any other (acks=all), so the coordinator that takes over after its broker dies
(the partition's new leader) replays the log, last record per id wins, and resumes.
"""

from __future__ import annotations

import logging
import time

from kafka.record.default_records import DefaultRecordBatch

from broker.storage import PartitionLog, parse_batches
from broker.storage.build import build_batch
from broker.storage.errors import StorageError
from broker.transactions.coordinator import TxnMetadata

log = logging.getLogger(__name__)

TOPIC = "__transaction_state"
PARTITION = 0


def state_batch(meta: TxnMetadata) -> bytes:
    return build_batch(
        [meta.to_json()], keys=[meta.transactional_id.encode()], timestamp_ms=int(time.time() * 1000)
    )


def replay(plog: PartitionLog) -> dict[str, TxnMetadata]:
    """The last state of every transactional id in the log (what a new coordinator loads)."""
    txns: dict[str, TxnMetadata] = {}
    offset = plog.log_start_offset
    end = plog.log_end_offset
    while offset < end:
        try:
            data = plog.read(offset, 4 * 1024 * 1024)
        except StorageError:
            break
        headers = parse_batches(data, check_crc=False, allow_partial_tail=True) if data else []
        if not headers:
            break
        position = 0
        for h in headers:
            batch = DefaultRecordBatch(bytes(data[position : position + h.size]))
            position += h.size
            for record in batch:
                if record.key is None or record.value is None:
                    continue
                tid = bytes(record.key).decode()
                try:
                    txns[tid] = TxnMetadata.from_json(tid, bytes(record.value))
                except (ValueError, KeyError, TypeError) as exc:
                    log.warning("%s: unreadable state of %r at offset %d: %s", TOPIC, tid, h.base_offset, exc)
        offset = headers[-1].last_offset + 1
    return txns
