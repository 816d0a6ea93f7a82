"""Network faults on one node, through `Node.exec` only: iptables chains and tc qdiscs.

Every rule lives in a chain of our own (`SL-PART` for partitions, `SL-LOSS` for packet loss,
`SL-HOLD` for held connections),
jumped to from INPUT/OUTPUT, so healing is a flush that cannot touch anyone else's rules. Each
function builds one small shell script per node, so a fault costs one `exec` per node (which matters
on ssh hosts), and returns the argv of its heal so the ledger can heal it after a crash.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Iterable

from clusters.node import Node
from foundation.errors import InfrastructureError

log = logging.getLogger(__name__)

PARTITION_CHAIN = "SL-PART"
LOSS_CHAIN = "SL-LOSS"
HOLD_CHAIN = "SL-HOLD"
CHAINS = (PARTITION_CHAIN, LOSS_CHAIN, HOLD_CHAIN)
IPT = "iptables -w 5"


def _sh(script: str) -> list[str]:
    return ["sh", "-c", script]


def _ensure_chain(chain: str, hooks: Iterable[str]) -> str:
    lines = [f"{IPT} -N {chain} 2>/dev/null || true"]
    for hook in hooks:
        lines.append(f"{IPT} -C {hook} -j {chain} 2>/dev/null || {IPT} -I {hook} 1 -j {chain}")
    return "\n".join(lines)


def flush_argv(chain: str) -> list[str]:
    """Heal: empty our chain (a missing chain is already healed)."""
    return _sh(f"{IPT} -F {chain} 2>/dev/null || true")


def remove_argv() -> list[str]:
    """Take our chains out entirely (end of test): unhook, flush, delete."""
    lines = []
    for chain in CHAINS:
        for hook in ("INPUT", "OUTPUT"):
            lines.append(f"while {IPT} -D {hook} -j {chain} 2>/dev/null; do :; done")
        lines.append(f"{IPT} -F {chain} 2>/dev/null || true")
        lines.append(f"{IPT} -X {chain} 2>/dev/null || true")
    return _sh("\n".join(lines))


def drop_script(
    drop_from: Iterable[str], zookeeper: str | None = None, zk_port: int | None = None
) -> list[str]:
    """Partition one node: drop packets from the `drop_from` addresses (and to/from ZooKeeper).

    INPUT by source is the grudge proper (the node stops hearing a peer, which then times out, as a
    real partition does). A cut from ZooKeeper is made on the broker's side in both directions (and
    only on ZooKeeper's client port when known), so ZooKeeper's own host is never touched.
    """
    lines = ["set -e", _ensure_chain(PARTITION_CHAIN, ("INPUT", "OUTPUT")), f"{IPT} -F {PARTITION_CHAIN}"]
    for address in sorted(set(drop_from)):
        lines.append(f"{IPT} -A {PARTITION_CHAIN} -s {shlex.quote(address)} -j DROP")
    if zookeeper:
        zk = shlex.quote(zookeeper)
        sport = f" -p tcp --sport {int(zk_port)}" if zk_port else ""
        dport = f" -p tcp --dport {int(zk_port)}" if zk_port else ""
        lines.append(f"{IPT} -A {PARTITION_CHAIN} -s {zk}{sport} -j DROP")
        lines.append(f"{IPT} -A {PARTITION_CHAIN} -d {zk}{dport} -j DROP")
    return _sh("\n".join(lines))


def loss_script(probability: float) -> list[str]:
    """Drop incoming packets at random with `probability` (loopback and ssh spared)."""
    p = f"{probability:.4f}"
    lines = [
        "set -e",
        _ensure_chain(LOSS_CHAIN, ("INPUT",)),
        f"{IPT} -F {LOSS_CHAIN}",
        f"{IPT} -A {LOSS_CHAIN} -i lo -j RETURN",
        f"{IPT} -A {LOSS_CHAIN} -p tcp --dport 22 -j RETURN",
        f"{IPT} -A {LOSS_CHAIN} -m statistic --mode random --probability {p} -j DROP",
    ]
    return _sh("\n".join(lines))


def hold_script(port: int, spare: Iterable[str]) -> list[str]:
    """Hold the connections established to `port` now, from any peer but `spare` (the cluster's own
    nodes): drop their incoming packets, so what their senders have sent waits in the senders'
    retransmission queues until the heal (a flush) lets it through, late; new connections pass.
    Prints each held peer as `address:port`. A JVM's listener (real Kafka) is a dual-stack socket:
    `ss` shows its IPv4 peers as `[::ffff:10.0.0.1]:port`, which iptables takes as 10.0.0.1."""
    spared = " ".join(sorted(set(spare)))
    lines = [
        "set -e",
        _ensure_chain(HOLD_CHAIN, ("INPUT",)),
        f"{IPT} -F {HOLD_CHAIN}",
        f'ss -tnH state established "( sport = :{int(port)} )" | while read -r _rq _sq _local peer _rest; do',
        '  address="${peer%:*}"; peer_port="${peer##*:}"',
        '  address="${address#[}"; address="${address%]}"; address="${address#::ffff:}"',
        f'  case " {spared} " in *" $address "*) continue ;; esac',
        f'  {IPT} -A {HOLD_CHAIN} -p tcp -s "$address" --sport "$peer_port" --dport {int(port)} -j DROP',
        '  echo "$address:$peer_port"',
        "done",
    ]
    return _sh("\n".join(lines))


def has_ss(node: Node) -> str | None:
    """None when `ss` (iproute2) lists the node's sockets, else why not."""
    result = node.exec(_sh("ss -tnH state established >/dev/null"), timeout=15, check=False)
    return None if result.ok else f"ss (iproute2) is not available on {node.name} ({result.stderr.strip()})"


def interface_of(node: Node) -> str:
    """The network device that carries the node's address (for tc)."""
    result = node.exec(["ip", "-o", "-4", "addr", "show"], timeout=10)
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "inet" and parts[3].split("/")[0] == node.address:
            return parts[1].split("@")[0]
    raise InfrastructureError(f"node {node.name}: no interface carries its address {node.address}")


def root_qdisc_argv(device: str, *qdisc: str) -> list[str]:
    """Replace the device's root queueing discipline with `qdisc` (its name and parameters)."""
    return ["tc", "qdisc", "replace", "dev", device, "root", *qdisc]


def tbf_argv(device: str, rate: str) -> list[str]:
    """A token bucket on the device's egress: bandwidth limited to `rate` (tc units, e.g. 1mbit)."""
    return root_qdisc_argv(device, "tbf", "rate", rate, "burst", "32kbit", "latency", "400ms")


def netem_argv(device: str, delay_ms: float, jitter_ms: float) -> list[str]:
    return root_qdisc_argv(
        device, "netem", "delay", f"{delay_ms:g}ms", f"{jitter_ms:g}ms", "distribution", "normal"
    )


def qdisc_heal_argv(device: str) -> list[str]:
    """Heal bandwidth/delay: back to the default qdisc (absent root qdisc: already healed)."""
    return _sh(f"tc qdisc del dev {shlex.quote(device)} root 2>/dev/null || true")


def has_iptables(node: Node) -> str | None:
    """None when iptables works on the node, else why not."""
    result = node.exec(_sh(f"{IPT} -S INPUT >/dev/null"), timeout=15, check=False)
    return None if result.ok else (result.stderr.strip() or "iptables failed")


def has_statistic(node: Node) -> str | None:
    """None when the iptables `statistic` match works on the node (probe in a throwaway chain)."""
    chain = "SL-PROBE"
    script = "\n".join(
        [
            f"{IPT} -N {chain} 2>/dev/null || true",
            f"{IPT} -A {chain} -m statistic --mode random --probability 0.5 -j RETURN; rc=$?",
            f"{IPT} -F {chain}; {IPT} -X {chain}",
            "exit $rc",
        ]
    )
    result = node.exec(_sh(script), timeout=15, check=False)
    return None if result.ok else f"{node.name}: {result.stderr.strip() or 'iptables statistic match failed'}"


def has_netem(node: Node) -> str | None:
    """None when `tc ... netem` works on the node; else the reason (sch_netem missing, no tc)."""
    script = "tc qdisc add dev lo root netem delay 1ms 2>&1 || exit 1\ntc qdisc del dev lo root 2>/dev/null; exit 0"
    result = node.exec(_sh(script), timeout=15, check=False)
    if result.ok:
        return None
    why = (result.stdout + result.stderr).strip() or "tc netem failed"
    return f"tc netem is not available on {node.name} ({why})"


def has_tbf(node: Node) -> str | None:
    script = (
        "tc qdisc add dev lo root tbf rate 100mbit burst 32kbit latency 400ms 2>&1 || exit 1\n"
        "tc qdisc del dev lo root 2>/dev/null; exit 0"
    )
    result = node.exec(_sh(script), timeout=15, check=False)
    return None if result.ok else f"tc tbf is not available on {node.name} ({result.stdout.strip()})"
