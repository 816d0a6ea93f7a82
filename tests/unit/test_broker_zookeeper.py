"""clusters/zookeeper.py: the zoo.cfg, myid and java command line for one ZooKeeper server."""

from __future__ import annotations

from pathlib import Path

from clusters import zookeeper


def test_standalone_config() -> None:
    text = zookeeper.render_config(data_dir="/d", client_address="10.77.0.9", client_port=2181)
    lines = set(text.splitlines())
    assert {
        "dataDir=/d",
        "clientPort=2181",
        "clientPortAddress=10.77.0.9",
        "admin.enableServer=false",
    } <= lines
    assert not any(line.startswith("server.") for line in lines)


def test_ensemble_config_and_myid(tmp_path: Path) -> None:
    peers = [zookeeper.Peer(i, f"10.77.0.{i}", 2888, 3888) for i in (1, 2, 3)]
    cfg = zookeeper.write_server_files(tmp_path, client_port=2181, server_id=2, ensemble=peers)
    text = cfg.read_text()
    assert "server.2=10.77.0.2:2888:3888" in text and "server.3=10.77.0.3:2888:3888" in text
    assert (tmp_path / "data" / "myid").read_text() == "2\n"


def test_command_runs_quorum_peer_main_with_the_config() -> None:
    cmd = zookeeper.command("/x/zoo.cfg")
    assert cmd[0].endswith("java") and cmd[-2:] == [zookeeper.MAIN_CLASS, "/x/zoo.cfg"]
    classpath = cmd[cmd.index("-cp") + 1]
    assert "/usr/share/java/zookeeper.jar" in classpath.split(":")
    assert "'" not in zookeeper.command_line("/x/zoo.cfg")
