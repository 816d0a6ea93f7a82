"""Storage errors, so the broker can map each to the Kafka error code a client expects."""

from __future__ import annotations


class StorageError(Exception):
    """Base class of everything the log store raises on purpose."""


class InvalidRecordError(StorageError):
    """A batch handed to an append is malformed or fails its CRC (Kafka: CORRUPT_MESSAGE)."""


class OffsetOutOfRangeError(StorageError):
    """A read below the log start or beyond the log end (Kafka: OFFSET_OUT_OF_RANGE)."""


class UnexpectedAppendOffsetError(StorageError):
    """A follower append whose offsets do not continue the log end offset."""


class CheckpointError(StorageError):
    """A checkpoint file that is not in Kafka's text format."""
