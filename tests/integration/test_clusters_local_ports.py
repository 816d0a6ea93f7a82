"""A local cluster whose broker's port is taken before the broker binds it starts on another one."""

from __future__ import annotations

import socket

from clusters.local import LocalCluster


def test_a_broker_whose_port_was_taken_starts_on_another() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cluster = LocalCluster(brokers=2)
        cluster.ports[2] = port  # as if another process had drawn it after the cluster chose it
        with cluster:
            assert cluster.ports[2] != port
            assert f"127.0.0.1:{cluster.ports[2]}" in cluster.bootstrap
            assert b"address already in use" in cluster.log_path(2).read_bytes().lower()
            assert cluster.zk().exists("/brokers/ids/2") is not None
