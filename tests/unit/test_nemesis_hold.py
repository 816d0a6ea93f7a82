"""The hold fault's script, run by a real shell with `ss` and `iptables` stand-ins on PATH: a JVM's
dual-stack listener lists IPv4 peers as `[::ffff:a.b.c.d]:port`, which must reach iptables as
a.b.c.d (real Kafka's brokers), as a plain `a.b.c.d:port` does (the own broker's); the cluster's
own nodes are spared."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from nemesis.net import hold_script

SS = """#!/bin/sh
echo '0 0 [::ffff:10.9.0.10]:9092 [::ffff:10.9.0.1]:40001'
echo '0 0 [::ffff:10.9.0.10]:9092 [::ffff:10.9.0.11]:40002'
echo '0 0 10.9.0.10:9092 10.9.0.2:40003'
"""


def test_held_peers_reach_iptables_as_ipv4_addresses_and_the_cluster_is_spared(tmp_path: Path) -> None:
    calls = tmp_path / "iptables.calls"
    (tmp_path / "ss").write_text(SS)
    (tmp_path / "iptables").write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    for tool in ("ss", "iptables"):
        (tmp_path / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    out = subprocess.run(
        hold_script(9092, ["10.9.0.11"]), capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.split() == ["10.9.0.1:40001", "10.9.0.2:40003"]
    drops = [line for line in calls.read_text().splitlines() if line.startswith("-w 5 -A SL-HOLD")]
    assert drops == [
        "-w 5 -A SL-HOLD -p tcp -s 10.9.0.1 --sport 40001 --dport 9092 -j DROP",
        "-w 5 -A SL-HOLD -p tcp -s 10.9.0.2 --sport 40003 --dport 9092 -j DROP",
    ]
