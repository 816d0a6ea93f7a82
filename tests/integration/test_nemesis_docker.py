"""The same faults, unchanged, on the docker backend: applied, seen from inside, and healed both by
`heal_all` and by `heal_leftovers` (a dead controller's ledger, reached through `docker exec`).
"""

from __future__ import annotations

import os
import random
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clusters.factory import Cluster, build_cluster
from foundation.config import TestConfig
from nemesis import build_nemesis, heal_leftovers, net

pytestmark = [
    pytest.mark.integration,
    pytest.mark.docker,
    pytest.mark.skipif(os.geteuid() != 0, reason="dockerd and iptables need root"),
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    from clusters import docker_image
    from clusters.docker_backend import ensure_dockerd

    docker_image.ensure_image(ensure_dockerd())
    scratch = Path(tempfile.mkdtemp(prefix="sltest-nemdock-"))
    # clock: the brokers start under libfaketime, so the clock fault has files to write
    config = TestConfig(
        backend="docker", nodes=3, partitions=1, replication_factor=3, seed=3, nemesis=("clock",)
    )
    c = build_cluster(config, scratch / "work", name=f"nd{secrets.token_hex(2)}", state_dir=scratch / "state")
    c.up()
    try:
        yield c
    finally:
        c.down()
        shutil.rmtree(scratch, ignore_errors=True)


def connects(src: Any, address: str) -> bool:
    code = f"import socket; socket.create_connection(({address!r}, 9092), timeout=1).close()"
    return bool(src.exec(["python3", "-c", code], timeout=20, check=False).ok)


def chain_rules(n: Any) -> int:
    return sum(
        1 for line in n.exec(["iptables", "-w", "5", "-S"]).stdout.splitlines() if line.startswith("-A SL-")
    )


def test_every_fault_applies_and_heals_in_containers(cluster: Cluster, tmp_path: Path) -> None:
    config = cluster.config.replace(nemesis=("kill", "pause", "partition", "clock", "loss", "bandwidth"))
    nem = build_nemesis(config, cluster, None, random.Random(1), state_dir=tmp_path)
    nem.validate()
    n1, n2, n3 = cluster.nodes
    clock_file = cluster.sut.clock_file(n2)
    nem.execute({"do": "partition", "grudge": {"n1": ["n2"], "n2": ["n1"]}, "pick": 1})
    assert not connects(n1, n2.address) and connects(n1, n3.address)
    nem.execute({"do": "loss", "target": "n3", "probability": 0.2, "pick": 1})
    nem.execute({"do": "bandwidth", "target": "n3", "rate": "1mbit", "pick": 1})
    nem.execute({"do": "clock-bump", "target": "n2", "offset": "+30s", "pick": 1})
    assert n2.exec(["cat", clock_file]).stdout.strip() == "+30s"
    nem.execute({"do": "pause", "target": "n3", "pick": 1})
    nem.execute({"do": "kill", "target": "n1", "pick": 1})
    assert n1.daemon_pid("broker") is None
    assert nem.heal_all() == []
    assert connects(n1, n2.address)
    assert n2.exec(["cat", clock_file]).stdout.strip() == "+0"
    assert n1.daemon_pid("broker") is not None
    assert all(chain_rules(n) == 0 for n in cluster.nodes)
    assert "tbf" not in n3.exec(["tc", "qdisc", "show", "dev", net.interface_of(n3)]).stdout


def test_leftovers_of_a_dead_controller_are_healed_through_docker_exec(
    cluster: Cluster, tmp_path: Path
) -> None:
    nem = build_nemesis(cluster.config, cluster, None, random.Random(2), state_dir=tmp_path)
    n1, n2, _ = cluster.nodes
    nem.execute({"do": "partition", "grudge": "one", "pick": 1})
    nem.execute({"do": "loss", "target": "all", "probability": 0.1, "pick": 1})
    nem.execute({"do": "clock-bump", "target": "n2", "offset": "-5s", "pick": 1})
    ledger = nem.ledger.load()
    assert all(step["access"]["backend"] == "docker" for entry in ledger for step in entry["heal"])
    nem.ledger.release()  # its controller is gone, as far as the ledger is concerned
    del nem
    healed = heal_leftovers(tmp_path)
    assert len(healed) == 3, healed
    assert all(chain_rules(n) == 0 for n in cluster.nodes)
    assert n2.exec(["cat", cluster.sut.clock_file(n2)]).stdout.strip() == "+0"
    assert connects(n1, n2.address)
