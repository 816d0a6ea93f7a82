"""Kafka's on-disk log format: segments of v2 record batches, recovery, checkpoints, epoch cache.

The same files a real Kafka broker writes, so one replica-log checker reads both.
"""

from __future__ import annotations

from broker.storage.batches import BatchHeader, parse_batches
from broker.storage.checkpoints import OffsetCheckpoint
from broker.storage.epochs import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache
from broker.storage.errors import (
    CheckpointError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from broker.storage.log import DEFAULT_SEGMENT_BYTES, PartitionLog, parse_partition_dir

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"

__all__ = [
    "DEFAULT_SEGMENT_BYTES",
    "RECOVERY_POINT_OFFSET_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "BatchHeader",
    "CheckpointError",
    "InvalidRecordError",
    "LeaderEpochCache",
    "OffsetCheckpoint",
    "OffsetOutOfRangeError",
    "PartitionLog",
    "StorageError",
    "UnexpectedAppendOffsetError",
    "parse_batches",
    "parse_partition_dir",
]
