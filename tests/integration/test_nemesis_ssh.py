"""The same faults, unchanged, on the ssh backend (sshd in network namespaces, as the clusters tests
run it): applied, seen from inside, healed by `heal_all`, and healed as leftovers of a dead
controller by reconnecting to the recorded hosts. The controller's own ssh traffic is never cut.
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
from nemesis import build_nemesis, heal_leftovers
from tests.support.sshd import SshdHosts, ssh_config

pytestmark = [
    pytest.mark.integration,
    pytest.mark.ssh,
    pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root"),
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    work = Path(tempfile.mkdtemp(prefix="sltest-nemssh-"))
    (work / "sshd").mkdir()
    hosts = SshdHosts(4, work / "sshd")
    try:
        hosts.start()
        config = ssh_config(
            hosts, seed=3, nemesis=("kill", "pause", "partition", "clock", "loss", "bandwidth")
        )
        c = build_cluster(config, work / "work", name=f"ns{secrets.token_hex(2)}", state_dir=work / "state")
        c.up()
        try:
            yield c
        finally:
            c.down()
    finally:
        hosts.stop()
        shutil.rmtree(work, ignore_errors=True)


def connects(src: Any, address: str) -> bool:
    code = f"import socket; socket.create_connection(({address!r}, 9092), timeout=1).close()"
    return bool(src.exec(["python3", "-c", code], timeout=20, check=False).ok)


def our_rules(n: Any) -> int:
    return sum(
        1 for line in n.exec(["iptables", "-w", "5", "-S"]).stdout.splitlines() if line.startswith("-A SL-")
    )


def test_faults_over_ssh_apply_heal_and_heal_as_leftovers(cluster: Cluster, tmp_path: Path) -> None:
    nem = build_nemesis(cluster.config, cluster, None, random.Random(1), state_dir=tmp_path / "a")
    nem.validate()
    n1, n2, n3 = cluster.nodes
    clock_file = cluster.sut.clock_file(n2)
    nem.execute({"do": "partition", "grudge": {"n1": ["n2"], "n2": ["n1"]}, "pick": 1})
    assert not connects(n1, n2.address) and connects(n1, n3.address)
    nem.execute({"do": "loss", "target": "all", "probability": 0.3, "pick": 1})
    nem.execute({"do": "bandwidth", "target": "n3", "rate": "1mbit", "pick": 1})
    nem.execute({"do": "clock-bump", "target": "n2", "offset": "+30s", "pick": 1})
    nem.execute({"do": "pause", "target": "n3", "pick": 1})
    nem.execute({"do": "kill", "target": "n1", "pick": 1})
    assert n2.exec(["cat", clock_file]).stdout.strip() == "+30s"  # ssh still works under loss
    assert nem.heal_all() == []
    assert connects(n1, n2.address) and n1.daemon_pid("broker") is not None
    assert n2.exec(["cat", clock_file]).stdout.strip() == "+0"
    assert all(our_rules(n) == 0 for n in cluster.nodes)

    crashed = build_nemesis(cluster.config, cluster, None, random.Random(2), state_dir=tmp_path / "b")
    crashed.execute({"do": "partition", "grudge": "one", "pick": 1})
    crashed.execute({"do": "clock-bump", "target": "n2", "offset": "-5s", "pick": 1})
    assert all("ssh" in step["access"] for entry in crashed.ledger.load() for step in entry["heal"])
    crashed.ledger.release()  # as if its controller had been SIGKILLed
    assert len(heal_leftovers(tmp_path / "b")) == 2
    assert all(our_rules(n) == 0 for n in cluster.nodes)
    assert n2.exec(["cat", clock_file]).stdout.strip() == "+0"
