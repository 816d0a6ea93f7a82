"""Durable committed offsets of consumer groups: an append-only JSON-lines file, fsynced per commit.

One line per OffsetCommit request, so a commit is all-or-nothing: a torn last line (a crash during
the write, before the commit was acknowledged) is ignored on reload. The file is rewritten
compactly (atomically) when it has grown well past the live entries.
Kafka keeps these in the replicated `__consumer_offsets` topic; here they live on the coordinator.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.storage.checkpoints import fsync_dir, write_atomically

log = logging.getLogger(__name__)

FILE_NAME = "consumer-offsets.jsonl"
COMPACT_MIN_LINES = 10_000


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


class GroupOffsetStore:
    """group -> (topic, partition) -> CommittedOffset, reloaded from `<state_dir>/consumer-offsets.jsonl`."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / FILE_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        self._lines = 0
        self._load()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        fsync_dir(self.path.parent)

    def _load(self) -> None:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return
        lines = raw.split(b"\n")
        torn = lines.pop()  # b"" when the file ends in a newline
        for number, line in enumerate(lines, 1):
            try:
                entry = json.loads(line)
                self._apply(entry["group"], entry["offsets"])
                self._lines += 1
            except (ValueError, KeyError, TypeError):
                log.warning("%s: skipping unreadable line %d", self.path, number)
        if torn:
            log.warning("%s: ignoring a torn last line (%d bytes)", self.path, len(torn))
            with open(self.path, "r+b") as f:  # so the next append starts on a fresh line
                f.truncate(len(raw) - len(torn))
                os.fsync(f.fileno())

    def _apply(self, group: str, offsets: list[list[Any]]) -> None:
        table = self._offsets.setdefault(group, {})
        for topic, partition, offset, epoch, metadata in offsets:
            table[(str(topic), int(partition))] = CommittedOffset(int(offset), int(epoch), metadata)

    def commit(self, group: str, offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        """Write and fsync, then apply: once this returns, the commit survives a crash."""
        if not offsets:
            return
        rows = [[t, p, c.offset, c.leader_epoch, c.metadata] for (t, p), c in offsets.items()]
        line = json.dumps({"group": group, "offsets": rows}, separators=(",", ":")).encode() + b"\n"
        done = 0
        while done < len(line):
            done += os.write(self._fd, line[done:])
        os.fsync(self._fd)
        self._offsets.setdefault(group, {}).update(offsets)
        self._lines += 1
        if self._lines > COMPACT_MIN_LINES and self._lines > 4 * self.live_entries():
            self.compact()

    def fetch(self, group: str) -> dict[tuple[str, int], CommittedOffset]:
        return dict(self._offsets.get(group, {}))

    def groups(self) -> list[str]:
        return sorted(self._offsets)

    def live_entries(self) -> int:
        return sum(len(table) for table in self._offsets.values())

    def compact(self) -> None:
        lines = []
        for group, table in sorted(self._offsets.items()):
            rows = [[t, p, c.offset, c.leader_epoch, c.metadata] for (t, p), c in sorted(table.items())]
            lines.append(json.dumps({"group": group, "offsets": rows}, separators=(",", ":")))
        os.close(self._fd)
        write_atomically(self.path, "".join(line + "\n" for line in lines))
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._lines = len(lines)
        log.info("%s: compacted to %d lines", self.path, self._lines)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
