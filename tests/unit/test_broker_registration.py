"""broker/zookeeper/session.py: a restarted broker takes over its previous incarnation's registration.

The takeover must never leave the broker unregistered, not even for a moment: the controller
removes a broker it sees gone from every ISR, and docs/broker-variants.md promises that a quickly
restarted follower stays in the ISR (the pre-KIP-101 window of kip-101-truncation). A fake kazoo
client (a unit test of this one piece) records whether the broker's znode was ever absent between
two of ZooKeeper's state changes.
"""

from __future__ import annotations

import random
from typing import Any

from kazoo.exceptions import NodeExistsError, NoNodeError

from broker.config import BrokerConfig
from broker.zookeeper.session import ZkSession

OLD_SESSION, NEW_SESSION = 111, 222


class _Stat:
    def __init__(self, owner: int, czxid: int) -> None:
        self.ephemeralOwner, self.czxid, self.version = owner, czxid, 0


class _Transaction:
    def __init__(self, zk: _FakeZk) -> None:
        self.zk = zk
        self.ops: list[tuple[str, str]] = []

    def delete(self, path: str, version: int = -1) -> None:
        self.ops.append(("delete", path))

    def create(self, path: str, value: bytes = b"", ephemeral: bool = False) -> None:
        self.ops.append(("create", path))

    def commit(self) -> list[Any]:
        """All or nothing, as one state change of ZooKeeper's."""
        for op, path in self.ops:
            if op == "delete":
                self.zk.nodes.pop(path)
            else:
                self.zk.put(path)
        self.zk.changed()
        return [True] * len(self.ops)


class _FakeZk:
    """The znodes under /brokers/ids, and every state they passed through."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.zxid = 1
        self.nodes: dict[str, _Stat] = {path: _Stat(OLD_SESSION, 1)}
        self.states: list[bool] = []  # after each change: was the broker registered?
        self.client_id = (NEW_SESSION, b"")

    def put(self, path: str) -> None:
        self.zxid += 1
        self.nodes[path] = _Stat(NEW_SESSION, self.zxid)

    def changed(self) -> None:
        self.states.append(self.path in self.nodes)

    def create(self, path: str, value: bytes = b"", ephemeral: bool = False, makepath: bool = False) -> None:
        if path in self.nodes:
            raise NodeExistsError()
        self.put(path)
        self.changed()

    def delete(self, path: str, version: int = -1) -> None:
        if self.nodes.pop(path, None) is None:
            raise NoNodeError()
        self.changed()

    def get(self, path: str) -> tuple[bytes, _Stat]:
        if path not in self.nodes:
            raise NoNodeError()
        return b"{}", self.nodes[path]

    def exists(self, path: str) -> _Stat | None:
        return self.nodes.get(path)

    def transaction(self) -> _Transaction:
        return _Transaction(self)


def test_a_restarted_broker_takes_over_its_registration_without_ever_being_gone() -> None:
    config = BrokerConfig.from_properties({"broker.id": "3", "zookeeper.connect": "127.0.0.1:2181"})
    session = ZkSession(config, random.Random(0).randbytes)
    fake = _FakeZk("/brokers/ids/3")
    session.zk = fake  # type: ignore[assignment]
    session.register()
    assert fake.nodes["/brokers/ids/3"].ephemeralOwner == NEW_SESSION
    assert session.registered_zxid == fake.nodes["/brokers/ids/3"].czxid > 1  # the new broker epoch
    assert fake.states and all(fake.states), f"the broker was unregistered in between: {fake.states}"
