"""Committed offsets and group metadata of consumer groups, kept in ZooKeeper and fenced by the
group-coordinator lease, so that a new coordinator resumes where the old one was and a deposed one
cannot write.

Kafka keeps both in the replicated `__consumer_offsets` topic, written by the leader of the group's
partition and fenced by that partition's leader epoch. The own broker's coordinator (the holder of
the lease `/group_coordinator`, broker.groups.lease) writes them to ZooKeeper before it answers:
- committed offsets in Kafka 0.8's layout for `offsets.storage=zookeeper`
  (`/consumers/<group>/offsets/<topic>/<partition>`, here as JSON with the leader epoch and the
  metadata), before the commit is acknowledged; OffsetFetch answers from there;
- the group's metadata (Kafka's GroupMetadataValue: generation, protocol, leader, members and
  their assignments) in `/consumers/<group>/metadata`, when a generation begins and when its
  assignment arrives, before any member hears of either; a new coordinator loads every group from
  there and carries on from its generation.
Every write is one ZooKeeper multi-op that first checks the lease's znode version the writer holds:
once another broker took the lease, the write fails whole (`Fenced`), and nothing is acknowledged.
A coordinator cut off from ZooKeeper cannot acknowledge a commit, nor answer a fetch.

The kazoo calls block, so they run in one thread of their own, in the order they were asked for
(each method submits its work when called, not when awaited): a later commit of a partition is
never overwritten by an earlier one, and a load reads after every write asked for before it.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import urllib.parse
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError, RolledBackError, RuntimeInconsistency

from broker.groups.coordinator import GroupRecord, GroupState, StoredMember
from broker.groups.lease import PATH as LEASE_PATH
from broker.storage.group_offsets import CommittedOffset

log = logging.getLogger(__name__)

ROOT = "/consumers"
WRITE_ATTEMPTS = 3


class Fenced(Exception):
    """The write checked a lease version that is no longer the lease's: this broker was deposed."""


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def offset_path(group: str, topic: str, partition: int) -> str:
    return f"{ROOT}/{_quote(group)}/offsets/{_quote(topic)}/{partition}"


def metadata_path(group: str) -> str:
    return f"{ROOT}/{_quote(group)}/metadata"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def encode_group(record: GroupRecord) -> bytes:
    return json.dumps(
        {
            "version": 1,
            "generation": record.generation_id,
            "state": record.state.value,
            "protocol_type": record.protocol_type,
            "protocol": record.protocol_name,
            "leader": record.leader_id,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "client_id": m.client_id,
                    "protocol_type": m.protocol_type,
                    "protocols": [[name, _b64(metadata)] for name, metadata in m.protocols],
                    "session_timeout_ms": m.session_timeout_ms,
                    "rebalance_timeout_ms": m.rebalance_timeout_ms,
                    "assignment": _b64(m.assignment),
                }
                for m in record.members
            ],
        },
        separators=(",", ":"),
    ).encode()


def decode_group(group: str, data: bytes) -> GroupRecord:
    """The stored record (raises ValueError, KeyError or TypeError when it is not one)."""
    info = json.loads(data)
    members = tuple(
        StoredMember(
            str(m["member_id"]),
            m.get("group_instance_id"),
            str(m.get("client_id", "")),
            str(m.get("protocol_type", "")),
            tuple((str(name), base64.b64decode(meta)) for name, meta in m["protocols"]),
            int(m["session_timeout_ms"]),
            int(m["rebalance_timeout_ms"]),
            base64.b64decode(m.get("assignment", "")),
        )
        for m in info["members"]
    )
    return GroupRecord(
        group,
        int(info["generation"]),
        GroupState(info["state"]),
        info.get("protocol_type"),
        info.get("protocol"),
        info.get("leader"),
        members,
    )


def _encode_offset(committed: CommittedOffset) -> bytes:
    return json.dumps(
        {"offset": committed.offset, "leader_epoch": committed.leader_epoch, "metadata": committed.metadata},
        separators=(",", ":"),
    ).encode()


class ZkOffsets:
    """Writes (fenced) and reads group state in ZooKeeper, off the event loop, in order.

    `fence`: the lease version this broker holds now (None: it holds none), for writes whose caller
    did not say which version it validated them under.
    """

    def __init__(self, zk: Any, fence: Callable[[], int | None] = lambda: None) -> None:
        self.zk = zk
        self.fence = fence
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zk-offsets")
        self._existing: set[str] = set()  # znodes known to exist (set, not create)

    def _submit(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        return asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def write(
        self,
        group: str,
        offsets: dict[tuple[str, int], CommittedOffset],
        lease_version: int | None = None,
    ) -> asyncio.Future[None]:
        """Store every offset, fenced by `lease_version` (default: the one held now); the future
        raises Fenced when the lease moved on, another error when ZooKeeper could not be written."""
        items = [(offset_path(group, t, p), _encode_offset(c)) for (t, p), c in offsets.items()]
        return self._submit(self._write_fenced, self._version(lease_version), items)

    def write_group(self, record: GroupRecord, lease_version: int | None = None) -> asyncio.Future[None]:
        """Store the group's metadata, fenced as `write`."""
        items = [(metadata_path(record.group_id), encode_group(record))]
        return self._submit(self._write_fenced, self._version(lease_version), items)

    def read(
        self, group: str, partitions: Iterable[tuple[str, int]] | None
    ) -> asyncio.Future[dict[tuple[str, int], CommittedOffset]]:
        """The stored offsets of these partitions (every stored one when None); absent ones are left out."""
        wanted = None if partitions is None else list(partitions)
        return self._submit(self._read, group, wanted)

    def read_groups(self) -> asyncio.Future[list[GroupRecord]]:
        """Every stored group record (a new coordinator's load)."""
        return self._submit(self._read_groups)

    def _version(self, lease_version: int | None) -> int | None:
        return lease_version if lease_version is not None else self.fence()

    # --- in the thread --------------------------------------------------------------------------
    def _write_fenced(self, lease_version: int | None, items: list[tuple[str, bytes]]) -> None:
        """One multi-op: check the lease's version, then create or set each znode."""
        if lease_version is None:
            raise Fenced("this broker does not hold the group-coordinator lease")
        for path, _ in items:
            if path not in self._existing:
                if self.zk.exists(path) is not None:
                    self._existing.add(path)
                else:
                    self.zk.ensure_path(path.rsplit("/", 1)[0])
        for _ in range(WRITE_ATTEMPTS):
            transaction = self.zk.transaction()
            transaction.check(LEASE_PATH, lease_version)
            for path, data in items:
                if path in self._existing:
                    transaction.set_data(path, data)
                else:
                    transaction.create(path, data)
            results = transaction.commit()
            if not any(isinstance(r, Exception) for r in results):
                self._existing.update(path for path, _ in items)
                return
            if _failed(results[0]):
                raise Fenced(f"lease version {lease_version} is no longer the lease's ({results[0]!r})")
            for (path, _), result in zip(items, results[1:], strict=True):
                if isinstance(result, NodeExistsError):
                    self._existing.add(path)
                elif isinstance(result, NoNodeError):
                    self._existing.discard(path)
        raise RuntimeError(f"could not write {[path for path, _ in items]} in {WRITE_ATTEMPTS} attempts")

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

    def _read_groups(self) -> list[GroupRecord]:
        try:
            quoted_groups = self.zk.get_children(ROOT)
        except NoNodeError:
            return []
        records = []
        for quoted in sorted(quoted_groups):
            group = urllib.parse.unquote(quoted)
            try:
                data, _ = self.zk.get(metadata_path(group))
            except NoNodeError:
                continue  # offsets only (a group that commits without group management)
            try:
                records.append(decode_group(group, data))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("group %s: unreadable metadata in ZooKeeper, not loaded: %r", group, exc)
        return records

    def close(self) -> None:
        self._executor.shutdown(wait=False)


def _failed(result: Any) -> bool:
    """The operation itself failed (not merely rolled back because another one did)."""
    return isinstance(result, Exception) and not isinstance(result, (RolledBackError, RuntimeInconsistency))
