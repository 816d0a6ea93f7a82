"""Real sshd servers, each in a network namespace of its own, as the hosts of the ssh backend."""

from __future__ import annotations

import dataclasses
import os
import secrets
import signal
import subprocess
import time
from pathlib import Path

from clusters.netns import used_slots
from clusters.ports import port_open
from foundation.config import SshHost, TestConfig


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False)


class SshdHosts:
    """N namespaces on one bridge, each with sshd listening on its address, port 22."""

    def __init__(self, count: int, work: Path) -> None:
        self.tag = secrets.token_hex(2)
        self.count = count
        self.work = work
        self.bridge = f"slbr-ssh{self.tag}"
        self.slot = next(s for s in range(240, 254) if s not in used_slots())
        self.namespaces = [f"sl-ssh{self.tag}-{i}" for i in range(1, count + 1)]
        self.addresses = [f"10.77.{self.slot}.{10 + i}" for i in range(1, count + 1)]
        self.rule = ["FORWARD", "-i", self.bridge, "-o", self.bridge, "-m", "comment", "--comment", f"strandline:ssh{self.tag}", "-j", "ACCEPT"]  # fmt: skip
        self.procs: list[subprocess.Popen[bytes]] = []
        self.client_key = work / "client_key"
        self.known_hosts = work / "known_hosts"

    def start(self) -> None:
        assert run("ip", "link", "add", self.bridge, "type", "bridge").returncode == 0
        run("ip", "addr", "add", f"10.77.{self.slot}.1/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        run("iptables", "-w", "-I", *self.rule[:1], "1", *self.rule[1:])
        for i, (ns, address) in enumerate(zip(self.namespaces, self.addresses, strict=True), start=1):
            veth = f"slsv{self.tag}{i}"
            assert run("ip", "netns", "add", ns).returncode == 0
            run("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
            run("ip", "link", "set", veth, "master", self.bridge, "up")
            run("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
            run("ip", "-n", ns, "link", "set", "eth0", "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")
        host_key = self.work / "host_key"
        for key in (host_key, self.client_key):
            assert run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)).returncode == 0
        (self.work / "authorized_keys").write_text(self.client_key.with_suffix(".pub").read_text())
        public = " ".join(host_key.with_suffix(".pub").read_text().split()[:2])
        self.known_hosts.write_text("".join(f"{a} {public}\n" for a in self.addresses))
        empty = self.work / "empty_bashrc"
        empty.write_text("")
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
        for i, (ns, address) in enumerate(zip(self.namespaces, self.addresses, strict=True), start=1):
            config = self.work / f"sshd_config{i}"
            config.write_text(
                f"ListenAddress {address}:22\nHostKey {host_key}\n"
                f"AuthorizedKeysFile {self.work}/authorized_keys\nPermitRootLogin prohibit-password\n"
                "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                f"PidFile {self.work}/sshd{i}.pid\nSubsystem sftp internal-sftp\nLogLevel ERROR\n"
                "MaxSessions 100\nMaxStartups 100\n"
            )
            log = open(self.work / f"sshd{i}.log", "wb")  # noqa: SIM115
            self.procs.append(
                subprocess.Popen(
                    # A host of its own has its own root's ~/.bashrc: hide this machine's (bash
                    # sources it for every ssh command, and a pyenv init there costs a second).
                    [
                        "nsenter",
                        f"--net=/run/netns/{ns}",
                        "unshare",
                        "--mount",
                        "--propagation",
                        "slave",
                        "sh",
                        "-c",
                        '[ -f /root/.bashrc ] && mount --bind "$0" /root/.bashrc; exec "$@"',
                        str(empty),
                        "/usr/sbin/sshd",
                        "-D",
                        "-e",
                        "-f",
                        str(config),
                    ],  # fmt: skip
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        deadline = time.monotonic() + 20
        for address in self.addresses:
            while not port_open(address, 22):
                assert time.monotonic() < deadline, f"sshd on {address} did not start"
                time.sleep(0.1)

    def host(self, i: int, **changes: object) -> SshHost:
        base = SshHost(
            host=self.addresses[i],
            user="root",
            key_file=str(self.client_key),
            known_hosts=str(self.known_hosts),
        )
        return dataclasses.replace(base, **changes)  # type: ignore[arg-type]

    def sshd_pids(self) -> list[int]:
        """Every sshd process in our namespaces (listeners and per-connection children)."""
        pids = []
        for ns in self.namespaces:
            result = run("ip", "netns", "pids", ns)
            pids += [int(p) for p in result.stdout.split() if p.isdigit()]
        return pids

    def stop(self) -> None:
        for proc in self.procs:
            with_suppress_kill(proc.pid)
            proc.wait(timeout=10)
        for pid in self.sshd_pids():  # connection children left over
            with_suppress_kill(pid)
        for i in range(1, self.count + 1):  # deleting a namespace frees its veth pair only lazily
            run("ip", "link", "delete", f"slsv{self.tag}{i}")
        for ns in self.namespaces:
            run("ip", "netns", "delete", ns)
        run("ip", "link", "delete", self.bridge)
        while run("iptables", "-w", "-C", *self.rule).returncode == 0:
            run("iptables", "-w", "-D", *self.rule)

    def leftovers(self) -> list[str]:
        found = [f"netns {n}" for n in self.namespaces if Path(f"/run/netns/{n}").exists()]
        found += [f"link {self.bridge}"] if Path(f"/sys/class/net/{self.bridge}").exists() else []
        found += [f"sshd {p.pid}" for p in self.procs if p.poll() is None]
        found += [f"veth slsv{self.tag}{i}" for i in range(1, self.count + 1) if Path(f"/sys/class/net/slsv{self.tag}{i}").exists()]  # fmt: skip
        if run("iptables", "-w", "-C", *self.rule).returncode == 0:
            found.append("iptables rule")
        return found


def with_suppress_kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def ssh_config(hosts: SshdHosts, **changes: object) -> TestConfig:
    return TestConfig(
        backend="ssh",
        nodes=3,
        partitions=2,
        replication_factor=3,
        min_insync=2,
        ssh_hosts=tuple(hosts.host(i) for i in range(4)),
        **changes,  # type: ignore[arg-type]
    )
