"""Committed offsets of consumer groups, kept in ZooKeeper as well, so that a new coordinator
resumes where the old one was.

Kafka keeps committed offsets in the replicated `__consumer_offsets` topic; the own broker's
coordinator (the live broker with the lowest id, `broker.groups`) keeps them in a file of its own
data dir, which the next coordinator cannot see: after a coordinator died, a group would resume
from an older offset, or from the beginning (a committed offset going back). So each accepted
commit is also written to ZooKeeper, in Kafka 0.8's layout for `offsets.storage=zookeeper`
(`/consumers/<group>/offsets/<topic>/<partition>`, here as JSON with the leader epoch and the
metadata), before the commit is acknowledged, and OffsetFetch answers from ZooKeeper. A
coordinator cut off from ZooKeeper cannot acknowledge a commit, nor answer a fetch.

The kazoo calls block, so they run in one thread of their own: in the order the coordinator
accepted the commits (a later commit of a partition is never overwritten by an earlier one).
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError

from broker.storage.group_offsets import CommittedOffset

ROOT = "/consumers"


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def offset_path(group: str, topic: str, partition: int) -> str:
    return f"{ROOT}/{_quote(group)}/offsets/{_quote(topic)}/{partition}"


class ZkOffsets:
    """Writes and reads committed offsets in ZooKeeper, off the event loop, in order."""

    def __init__(self, zk: Any) -> None:
        self.zk = zk
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zk-offsets")

    async def write(self, group: str, offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        """Store every offset (raises when ZooKeeper cannot be written)."""
        await asyncio.get_running_loop().run_in_executor(self._executor, self._write, group, offsets)

    async def read(
        self, group: str, partitions: Iterable[tuple[str, int]] | None
    ) -> dict[tuple[str, int], CommittedOffset]:
        """The stored offsets of these partitions (every stored one when None); absent ones are left out."""
        wanted = None if partitions is None else list(partitions)
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._read, group, wanted)

    def _write(self, group: str, offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        for (topic, partition), committed in offsets.items():
            path = offset_path(group, topic, partition)
            data = json.dumps(
                {
                    "offset": committed.offset,
                    "leader_epoch": committed.leader_epoch,
                    "metadata": committed.metadata,
                },
                separators=(",", ":"),
            ).encode()
            try:
                self.zk.set(path, data)
            except NoNodeError:
                try:
                    self.zk.create(path, data, makepath=True)
                except NodeExistsError:
                    self.zk.set(path, data)

    def _read(
        self, group: str, wanted: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], CommittedOffset]:
        if wanted is None:
            wanted = []
            base = f"{ROOT}/{_quote(group)}/offsets"
            try:
                topics = self.zk.get_children(base)
            except NoNodeError:
                return {}
            for quoted in topics:
                try:
                    children = self.zk.get_children(f"{base}/{quoted}")
                except NoNodeError:
                    continue
                topic = urllib.parse.unquote(quoted)
                wanted += [(topic, int(p)) for p in children if p.isdigit()]
        result = {}
        for topic, partition in wanted:
            try:
                data, _ = self.zk.get(offset_path(group, topic, partition))
            except NoNodeError:
                continue
            entry = json.loads(data)
            result[(topic, partition)] = CommittedOffset(
                int(entry["offset"]), int(entry.get("leader_epoch", -1)), entry.get("metadata", "")
            )
        return result

    def close(self) -> None:
        self._executor.shutdown(wait=False)
