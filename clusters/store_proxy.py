"""strandline's S3 proxy on the node of a role of `kind = "s3"`: started beside the store before the
roles after it (they reach the store through it: `{ROLE.servers}`), never killed by a fault of the
role (a killed store leaves the proxy answering with reset connections, as a load balancer in front
of a dead store does), removed with the cluster.

The proxy is a daemon of its own (`s3-proxy`) running `python -m clusters.s3_proxy`, with its rules
and injection counts under `<home>/s3-proxy/`, its log in `<home>/logs/s3-proxy.out`.
"""

from __future__ import annotations

import logging
import signal
import time

from clusters.node import Node, node_home
from clusters.node_files import log_tail, put_text
from clusters.ports import port_open
from clusters.sut import StoreProxy
from clusters.system_def import RoleDef
from foundation.errors import InfrastructureError

log = logging.getLogger(__name__)

DAEMON = "s3-proxy"
NO_FAULT = "{}"


def proxy_of(node: Node, role: RoleDef) -> StoreProxy:
    folder = f"{node_home(node)}/{DAEMON}"
    return StoreProxy(node.name, role.name, f"{folder}/rules.json", f"{folder}/stats.json")


def log_path(node: Node) -> str:
    return f"{node_home(node)}/logs/{DAEMON}.out"


def start(node: Node, role: RoleDef, python: str, timeout: float = 30.0) -> StoreProxy:
    """Start the proxy in front of the role's store on this node (with no fault in place) and wait
    until it accepts connections."""
    proxy = proxy_of(node, role)
    node.exec(["mkdir", "-p", f"{node_home(node)}/{DAEMON}", f"{node_home(node)}/logs"])
    put_text(node, NO_FAULT, proxy.rules)
    argv = [python, "-m", "clusters.s3_proxy", "--listen", f"{node.address}:{role.proxy_port}",
            "--upstream", f"{node.address}:{role.port}", "--rules", proxy.rules, "--stats", proxy.stats]  # fmt: skip
    log.info("%s: starting the S3 proxy of role %s on port %d", node.name, role.name, role.proxy_port)
    node.start_daemon(DAEMON, argv, env={"PYTHONUNBUFFERED": "1"}, log_path=log_path(node))
    deadline = time.monotonic() + timeout
    while not port_open(node.address, role.proxy_port):
        if node.daemon_pid(DAEMON) is None or time.monotonic() > deadline:
            raise InfrastructureError(
                f"the S3 proxy of role {role.name} on {node.name} did not start; last lines of its log: "
                f"{log_tail(node, log_path(node), 12)}"
            )
        time.sleep(0.1)
    return proxy


def stop(node: Node) -> None:
    node.signal_daemon(DAEMON, signal.SIGKILL)
