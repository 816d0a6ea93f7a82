"""One ZooKeeper server (Debian's package): its zoo.cfg, its myid and its java command line.

Used by clusters/local.py (local processes) and the docker node image (clusters/docker_image.py;
systems/own.toml and kafka-zk.toml write their own zoo.cfg). Nothing
here runs anything: callers write the files and start the command their own way.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

JAVA = "/usr/bin/java"
CONF_DIR = "/etc/zookeeper/conf"  # Debian's log4j.properties lives here
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# An explicit classpath: /usr/share/java/* holds several slf4j bindings and far more than needed.
JARS = (
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-log4j12.jar",
    "log4j-1.2.jar",
    "commons-cli.jar",
    "commons-io.jar",
    "metrics-core.jar",
    "snappy-java.jar",
    "netty-handler.jar",
    "netty-common.jar",
    "netty-buffer.jar",
    "netty-transport.jar",
    "netty-resolver.jar",
    "netty-codec.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
)
# Small heap, quick start: a test ZooKeeper holds a few hundred znodes.
JVM_OPTIONS = ("-Xmx192m", "-Xms32m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k")

# Sessions may last 2 ticks (1 s) .. maxSessionTimeout (60 s by default) with 500 ms ticks.
DEFAULT_TICK_MS = 500


@dataclass(frozen=True)
class Peer:
    """One member of an ensemble: server.<id>=<host>:<peer_port>:<election_port>."""

    server_id: int
    host: str
    peer_port: int
    election_port: int


def render_config(
    *,
    data_dir: str | Path,
    client_port: int,
    client_address: str = "127.0.0.1",
    tick_ms: int = DEFAULT_TICK_MS,
    ensemble: Sequence[Peer] = (),
    max_session_timeout_ms: int | None = None,
) -> str:
    """zoo.cfg text. With `ensemble` empty the server runs standalone (no myid needed)."""
    lines = [
        "# written by strandline (clusters/zookeeper.py)",
        f"tickTime={tick_ms}",
        "initLimit=10",
        "syncLimit=5",
        f"dataDir={data_dir}",
        f"clientPort={client_port}",
        f"clientPortAddress={client_address}",
        "maxClientCnxns=0",
        "admin.enableServer=false",
        "4lw.commands.whitelist=ruok,stat,srvr,mntr",
        "autopurge.purgeInterval=0",
        # fsync on every txn is ZooKeeper's default and slow on a busy disk; the tests need speed
        "forceSync=no",
        f"minSessionTimeout={2 * tick_ms}",
        f"maxSessionTimeout={max_session_timeout_ms or 60_000}",
    ]
    for peer in ensemble:
        lines.append(f"server.{peer.server_id}={peer.host}:{peer.peer_port}:{peer.election_port}")
    return "\n".join(lines) + "\n"


def render_myid(server_id: int) -> str:
    """Contents of `<dataDir>/myid` (ensemble members only)."""
    return f"{server_id}\n"


def classpath(share: str = "/usr/share/java", conf_dir: str = CONF_DIR) -> str:
    return ":".join([conf_dir, *(f"{share}/{jar}" for jar in JARS)])


def command(config_path: str | Path, *, java: str = JAVA, log_dir: str | Path | None = None) -> list[str]:
    """The java command line that runs one server with `config_path`, logging to stdout."""
    cmd = [
        java,
        *JVM_OPTIONS,
        "-Dzookeeper.root.logger=INFO,CONSOLE",
        "-Dzookeeper.console.threshold=INFO",
        f"-Dlog4j.configuration=file:{CONF_DIR}/log4j.properties",
        "-Dzookeeper.jmx.log4j.disable=true",
    ]
    if log_dir is not None:
        cmd.append(f"-Dzookeeper.log.dir={log_dir}")
    cmd += ["-cp", classpath(), MAIN_CLASS, str(config_path)]
    return cmd


def command_line(config_path: str | Path, **kwargs: object) -> str:
    """`command` as one shell-quoted string, for nodes that run shell lines."""
    return " ".join(shlex.quote(part) for part in command(config_path, **kwargs))  # type: ignore[arg-type]


def write_server_files(
    directory: Path,
    *,
    client_port: int,
    client_address: str = "127.0.0.1",
    server_id: int | None = None,
    ensemble: Sequence[Peer] = (),
    tick_ms: int = DEFAULT_TICK_MS,
) -> Path:
    """Write `directory/zoo.cfg` and (for an ensemble) `directory/data/myid`; return the cfg path."""
    data_dir = directory / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    if ensemble:
        if server_id is None:
            raise ValueError("an ensemble member needs its server_id")
        (data_dir / "myid").write_text(render_myid(server_id))
    cfg = directory / "zoo.cfg"
    cfg.write_text(
        render_config(
            data_dir=data_dir,
            client_port=client_port,
            client_address=client_address,
            tick_ms=tick_ms,
            ensemble=ensemble,
        )
    )
    return cfg
