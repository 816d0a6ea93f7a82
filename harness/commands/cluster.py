"""`strandline cluster up|down|status`: a cluster to poke at with your own clients.

`up` builds the cluster from the same flags as `run`, creates the test's topics, detaches it (it
outlives this command) and prints, as its last line, `bootstrap: host:port,...`. A small handle
file (`--state`, default results/.cluster.json) names the cluster's state file, so `status` and
`down` find it. `down --all` removes every cluster strandline left behind on this machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console

from clusters.external_def import is_external
from clusters.factory import Cluster, attach_cluster, build_cluster
from clusters.node import InspectsDaemons, Node, Reattachable
from clusters.state import cleanup_leftovers, state_dir_default
from clusters.sut import HasLeaders, HasRoles
from foundation.config import TestConfig, resolve
from foundation.errors import BadInput, InfrastructureError
from harness.fetch_progress import fetch_progress

log = logging.getLogger(__name__)

DEFAULT_HANDLE = "results/.cluster.json"
CLUSTER_FLAGS = (
    "system",
    "backend",
    "nodes",
    "topics",
    "partitions",
    "replication_factor",
    "variant",
    "min_insync",
    "unclean_election",
    "kafka_version",
)


def main(args: argparse.Namespace) -> int:
    handle = Path(args.state or DEFAULT_HANDLE)
    if args.action == "up":
        return up(args, handle)
    if args.action == "status":
        return status(handle, as_json=args.json)
    return down(handle, everything=args.all)


# --- up ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM during bring-up cleans up like Ctrl-C does."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def up(args: argparse.Namespace, handle: Path) -> int:
    if handle.exists():
        existing = _read_handle(handle)
        if Path(existing["state"]).exists():
            raise BadInput(
                f"cluster {existing['cluster']} is already up (state {handle}); "
                "`strandline cluster down` first, or pass another --state FILE"
            )
    config = resolve(args.config, {k: getattr(args, k, None) for k in CLUSTER_FLAGS})
    if is_external(config.system):
        raise BadInput(
            f"{config.system} says managed = false: strandline neither brings that cluster up nor down "
            "(`strandline run --system` tests it as it runs)"
        )
    work_dir = handle.resolve().parent / ".clusters"
    cluster = build_cluster(config, work_dir)
    console = Console(stderr=True)
    cluster.progress = fetch_progress(console)  # a first fetch of Kafka takes a while
    with _sigterm_as_interrupt():
        with console.status(f"bringing up cluster {cluster.name} ({config.backend}, {config.nodes} nodes)"):
            cluster.up()
        try:
            with console.status("creating topics"):
                create_topics(config, cluster)
        except BaseException:
            cluster.down()
            raise
    cluster.detach()
    assert cluster.state is not None
    handle.parent.mkdir(parents=True, exist_ok=True)
    handle.write_text(json.dumps({"cluster": cluster.name, "state": str(cluster.state.path)}) + "\n")
    console.print(
        f"cluster [bold]{cluster.name}[/] up in {cluster.timings['up_s']:.1f}s: "
        + ", ".join(f"{n.name}={n.address}" for n in cluster.all_nodes)
    )
    console.print(f"state: {handle}; tear down with `strandline cluster down --state {handle}`")
    print(f"bootstrap: {','.join(cluster.bootstrap_servers())}")
    return 0


def create_topics(config: TestConfig, cluster: Cluster, timeout: float = 60.0) -> None:
    """The test's topics (t0, t1, ...), then wait until the SUT shows a leader for every partition."""
    from workloads import setup_topics

    setup_topics(config, cluster.bootstrap_servers(), timeout=timeout)
    if not isinstance(cluster.sut, HasLeaders):
        return
    deadline = time.monotonic() + timeout
    wanted = {(f"t{t}", p) for t in range(config.topics) for p in range(config.partitions)}
    while True:
        states = cluster.sut.partition_state()
        missing = sorted(f"{t}-{p}" for t, p in wanted if not states.get((t, p), {}).get("leader"))
        if not missing:
            return
        if time.monotonic() > deadline:
            raise InfrastructureError(f"partitions without a leader after {timeout:g}s: {', '.join(missing)}")
        time.sleep(0.2)


# --- status -----------------------------------------------------------------------------------


def _read_handle(handle: Path) -> dict[str, str]:
    try:
        data = json.loads(handle.read_text())
        return {"cluster": str(data["cluster"]), "state": str(data["state"])}
    except FileNotFoundError:
        raise BadInput(f"no cluster is up (no state file {handle}; pass --state FILE?)") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BadInput(f"unreadable cluster state file {handle}: {e}") from None


def _attach(handle: Path) -> Cluster:
    data = _read_handle(handle)
    if not Path(data["state"]).exists():
        raise BadInput(f"cluster {data['cluster']} is gone (no {data['state']}); remove {handle}")
    return attach_cluster(Path(data["state"]))


def describe(cluster: Cluster) -> dict[str, Any]:
    """Nodes, processes, addresses, controller and every partition's leader, epoch and ISR."""
    nodes = []
    for node in cluster.all_nodes:
        processes = []
        if isinstance(node, InspectsDaemons):
            for daemon in node.daemon_names():
                pids = node.daemon_pids(daemon)
                processes.append(
                    {
                        "name": daemon,
                        "pid": node.daemon_pid(daemon),
                        "pids": pids,
                        "running": bool(pids),
                        "paused": node.daemon_paused(daemon),
                    }
                )
        role = _role(cluster, node)
        nodes.append(
            {
                "name": node.name,
                "role": role,
                "address": node.address,
                "hostname": node.hostname,
                "namespace": node.handle().get("netns") if isinstance(node, Reattachable) else None,
                "processes": processes,
            }
        )
    out: dict[str, Any] = {
        "cluster": cluster.name,
        "backend": cluster.config.backend,
        "system": cluster.config.system,
        "state_file": str(cluster.state.path) if cluster.state else None,
        "bootstrap": cluster.bootstrap_servers(),
        "nodes": nodes,
        "controller": None,
        "partitions": [],
    }
    try:
        out["controller"] = cluster.sut.controller()
        out["partitions"] = [
            {
                "topic": t,
                "partition": p,
                "leader": s["leader"],
                "leader_epoch": s["leader_epoch"],
                "isr": s["isr"],
            }
            for (t, p), s in sorted(cluster.sut.partition_state().items())
        ]
    except InfrastructureError as e:
        out["error"] = str(e)
    finally:
        cluster.sut.close()
    return out


def status(handle: Path, *, as_json: bool) -> int:
    info = describe(_attach(handle))
    if as_json:
        print(json.dumps(info, sort_keys=True))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console()
    nodes = Table(title=f"cluster {info['cluster']} ({info['backend']}, {info['system']})")
    for column in ("node", "role", "address", "processes"):
        nodes.add_column(column)
    for n in info["nodes"]:
        procs = ", ".join(
            f"{p['name']} pid {p['pid']}" + (" (paused)" if p["paused"] else "")
            if p["running"]
            else f"{p['name']} down"
            for p in n["processes"]
        )
        nodes.add_row(n["name"], n["role"], n["address"], procs or "-")
    console.print(nodes)
    parts = Table(title=f"partitions (controller: {info['controller']})")
    for column in ("topic", "partition", "leader", "epoch", "isr"):
        parts.add_column(column)
    for p in info["partitions"]:
        parts.add_row(
            p["topic"],
            str(p["partition"]),
            str(p["leader"]),
            str(p["leader_epoch"]),
            ",".join(map(str, p["isr"])),
        )
    console.print(parts)
    if "error" in info:
        console.print(f"[red]{info['error']}[/]")
    print(f"bootstrap: {','.join(info['bootstrap'])}")
    return 0


# --- down -------------------------------------------------------------------------------------


def down(handle: Path, *, everything: bool) -> int:
    if everything:
        cleaned = cleanup_leftovers(state_dir_default(), include_detached=True)
        handle.unlink(missing_ok=True)
        sys.stderr.write(f"removed {len(cleaned)} cluster(s): {', '.join(cleaned) or '-'}\n")
        return 0
    data = _read_handle(handle)
    if not Path(data["state"]).exists():
        handle.unlink()
        sys.stderr.write(f"cluster {data['cluster']} was already gone\n")
        return 0
    cluster = attach_cluster(Path(data["state"]))
    cluster.down()
    handle.unlink(missing_ok=True)
    sys.stderr.write(f"cluster {cluster.name} removed in {cluster.timings['down_s']:.1f}s\n")
    return 0


def _role(cluster: Cluster, node: Node) -> str:
    """What the node runs: a defined system's role, else zookeeper or broker."""
    if isinstance(cluster.sut, HasRoles):
        for role in cluster.sut.roles():
            if node.name in cluster.sut.nodes_of_role(role):
                return role
    if cluster.zookeeper_node is not None and node.name == cluster.zookeeper_node.name:
        return "zookeeper"
    return "broker"
