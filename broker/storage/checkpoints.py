"""Kafka's text checkpoint files: a version line, a count line, then one entry per line.

Used for `replication-offset-checkpoint` and `recovery-point-offset-checkpoint` (entries
`topic partition offset`) and for `leader-epoch-checkpoint` (entries `epoch startOffset`).
Writes are atomic (tmp file, fsync, rename, fsync of the directory) so a crash leaves either the
old or the new file, never a torn one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from broker.storage.errors import CheckpointError

CHECKPOINT_VERSION = 0


def fsync_dir(path: Path) -> None:
    """Make a create, rename or unlink inside `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, text: str, *, fsync: bool = True) -> None:
    """Write a temporary file and rename it over `path`. Without `fsync` the rename may reach the
    disk before the contents do: after an OS crash the file can be empty (KAFKA-16541)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = text.encode()
        while data:
            written = os.write(fd, data)
            data = data[written:]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync:
        fsync_dir(path.parent)


def write_entries(path: Path, entries: Iterable[Sequence[object]], *, fsync: bool = True) -> None:
    lines = [" ".join(str(field) for field in entry) for entry in entries]
    text = f"{CHECKPOINT_VERSION}\n{len(lines)}\n" + "".join(line + "\n" for line in lines)
    write_atomically(path, text, fsync=fsync)


def read_entries(path: Path, fields: int) -> list[list[str]]:
    """The entries of a checkpoint as lists of strings; [] when the file does not exist."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    lines = text.splitlines()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: missing version or count line")
    if lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CheckpointError(f"{path}: unsupported version {lines[0].strip()!r}")
    try:
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: bad count line {lines[1]!r}") from None
    body = [line for line in lines[2:] if line.strip()]
    if len(body) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(body)}")
    entries = []
    for line in body:
        parts = line.split()
        if len(parts) != fields:
            raise CheckpointError(f"{path}: malformed entry {line!r}")
        entries.append(parts)
    return entries


class OffsetCheckpoint:
    """`replication-offset-checkpoint` / `recovery-point-offset-checkpoint`: (topic, partition) -> offset."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def read(self) -> dict[tuple[str, int], int]:
        """The stored offsets; {} if the file is missing. Raises CheckpointError if malformed."""
        result: dict[tuple[str, int], int] = {}
        for topic, partition, offset in read_entries(self.path, 3):
            try:
                result[(topic, int(partition))] = int(offset)
            except ValueError:
                raise CheckpointError(f"{self.path}: malformed entry {topic} {partition} {offset}") from None
        return result

    def write(self, offsets: dict[tuple[str, int], int]) -> None:
        entries = [(topic, partition, offset) for (topic, partition), offset in sorted(offsets.items())]
        write_entries(self.path, entries)

    def __repr__(self) -> str:
        return f"OffsetCheckpoint({str(self.path)!r})"
