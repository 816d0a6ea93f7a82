"""Software a system definition runs that strandline gets for it (`[software.NAME]` in the file):
fetched once on the controller, put on the nodes, and shown to the templates as `{NAME.VALUE}`.

Two kinds: `tansu` (clusters/tansu_build.py: built once with cargo into the cache, `{tansu.bin}`),
and `kafka`: an Apache Kafka release, from the test's `kafka_version` (Maven Central,
clusters/kafka_release.py; the default release when empty), or `kafka_tarball` (a distribution,
path or URL, unpacked once into the cache), or on docker `kafka_image` (an image with Kafka in
/opt/kafka: nothing is fetched). Its values: `{kafka.home}` (the folder holding `libs/` on the
node), `{kafka.classpath}` (`{kafka.home}/libs/*`), `{kafka.version}`, `{kafka.format_features}`
(the storage tool's `--feature` arguments for the test's settings; empty for releases without
them).

A kind is a `Software` (below); another (the Java client as a driver, say) adds a class and an
entry in `KINDS` and `system_def.SOFTWARE_VALUES`.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import tarfile
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Protocol

from clusters import kafka_release, maven, tansu_build
from clusters.installed import Installed
from clusters.node_software import cache_root
from clusters.system_def import SoftwareDef, SystemDefinition
from foundation.config import TestConfig
from foundation.errors import BadInput, InfrastructureError

log = logging.getLogger(__name__)

Progress = maven.Progress
IMAGE_INSTALL_DIR = "/opt/kafka"  # where the apache/kafka images keep the distribution
MARKER = ".complete"


class Software(Protocol):
    name: str

    def version(self, config: TestConfig) -> str:
        """Which release the test runs (no network)."""
        ...

    def refusal(self, config: TestConfig, spec: SoftwareDef, definition: SystemDefinition) -> str | None:
        """Why this test cannot run this release with this definition, or None."""
        ...

    def fetch(self, config: TestConfig, progress: maven.Progress | None) -> Installed: ...

    def values(self, config: TestConfig, installed: Installed, path: str) -> dict[str, str]:
        """The template values (`{NAME.VALUE}`) with the software at `path` on the node."""
        ...

    def unreadable_segments(self, installed: Installed) -> str | None:
        """Why the replica-log checker cannot read the segments this release writes (None: it can)."""
        ...


# --- Apache Kafka ------------------------------------------------------------------------------


def is_url(source: str) -> bool:
    return urllib.parse.urlparse(source).scheme in ("http", "https")


class KafkaSoftware:
    name = "kafka"

    def version(self, config: TestConfig) -> str:
        if config.kafka_tarball:
            m = re.search(r"kafka_2\.\d+-(\d+(?:\.\d+){2,3})\.(?:tgz|tar\.gz)$", config.kafka_tarball)
            return m.group(1) if m else config.kafka_version or ""
        if config.backend == "docker" and config.kafka_image:
            tag = config.kafka_image.rpartition(":")[2]
            return tag if kafka_release.VERSION.match(tag) else config.kafka_version
        return kafka_release.check_version(config.kafka_version or kafka_release.DEFAULT_VERSION)

    def refusal(self, config: TestConfig, spec: SoftwareDef, definition: SystemDefinition) -> str | None:
        from foundation.config import wants_membership

        version = self.version(config)
        if not version:  # a tarball or image whose name does not say: it is what it is
            return None
        where = definition.path.name
        if spec.versions:
            from packaging.specifiers import SpecifierSet

            if version not in SpecifierSet(spec.versions):
                return f"Kafka {version} cannot run as {where}: it runs releases {spec.versions}" + (
                    " (ZooKeeper mode: --system systems/kafka-zk.toml)"
                    if kafka_release.features(version).zookeeper
                    else ""
                )
        has = kafka_release.features(version)
        if config.eligible_leader_replicas and not has.eligible_leader_replicas:
            return f"eligible_leader_replicas = true: Kafka {version} has no eligible leader replicas (KIP-966, 4.0+)"
        if config.workload == "txn" and config.transaction_version == 2 and not has.transaction_version:
            return (
                f"transaction_version = 2: Kafka {version} has no transaction.version 2 (KIP-890 part 2, 4.0+); "
                "set transaction_version = 1"
            )
        if definition.membership != "none" and wants_membership(config) and not has.reassignment_api:
            return f"member: Kafka {version} cannot reassign partitions through the Admin API (KIP-455, 2.4+)"
        if definition.controller.kind == "describe-quorum" and not has.describe_quorum:
            return f"Kafka {version} answers no DescribeQuorum (3.3+): {where} cannot find its controller"
        return None

    def fetch(self, config: TestConfig, progress: maven.Progress | None) -> Installed:
        if config.backend == "docker" and config.kafka_image:
            return Installed(self.name, self.version(config), None, IMAGE_INSTALL_DIR)
        if config.kafka_tarball:
            folder = unpacked_tarball(config.kafka_tarball, progress)
            version = kafka_release.version_in_folder(folder) or self.version(config)
            return Installed(self.name, version, folder)
        version = self.version(config)
        return Installed(self.name, version, kafka_release.fetch(version, progress=progress))

    def values(self, config: TestConfig, installed: Installed, path: str) -> dict[str, str]:
        return {
            "kafka.home": path,
            "kafka.classpath": f"{path}/libs/*",
            "kafka.version": installed.version,
            "kafka.format_features": format_features(config, installed.version),
        }

    def unreadable_segments(self, installed: Installed) -> str | None:
        if installed.version and kafka_release.key(installed.version) < (0, 11):
            return (
                f"Kafka {installed.version} writes message format v1 (before 0.11), which the "
                "replica-log checker does not read"
            )
        return None


def format_features(config: TestConfig, version: str) -> str:
    """`--feature` arguments of the storage tool for the test's settings (KIP-890, KIP-966)."""
    if not version or not kafka_release.features(version).storage_features:
        return ""
    has = kafka_release.features(version)
    args = []
    if has.transaction_version:
        args.append(f"--feature transaction.version={config.transaction_version}")
    if has.eligible_leader_replicas:
        args.append(f"--feature eligible.leader.replicas.version={int(config.eligible_leader_replicas)}")
    return " ".join(args)


def unpacked_tarball(source: str, progress: maven.Progress | None = None) -> Path:
    """A Kafka distribution (path or URL) unpacked once into the cache, without its top folder."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    target = cache_root() / "kafka-tarball" / digest
    if (target / MARKER).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".unpack-{digest}-"))
    try:
        tarball = _download(source, work, progress) if is_url(source) else Path(os.path.expanduser(source))
        if not tarball.is_file():
            raise BadInput(f"config key 'kafka_tarball': no file {source}")
        try:
            with tarfile.open(tarball) as tar:
                tar.extractall(work / "unpacked", filter="data")
        except (tarfile.TarError, OSError) as e:
            raise BadInput(f"config key 'kafka_tarball': cannot unpack {source}: {e}") from None
        tops = list((work / "unpacked").iterdir())
        root = tops[0] if len(tops) == 1 and tops[0].is_dir() else work / "unpacked"
        if not (root / "libs").is_dir():
            raise BadInput(
                f"config key 'kafka_tarball': {source} holds no libs/ folder (not a Kafka distribution)"
            )
        (root / MARKER).write_text(source + "\n")
        with contextlib.suppress(OSError):
            root.rename(target)
        if not (target / MARKER).exists():
            raise InfrastructureError(f"cannot unpack {source} into {target}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _download(url: str, work: Path, progress: maven.Progress | None) -> Path:
    target = work / (os.path.basename(urllib.parse.urlparse(url).path) or "kafka.tgz")
    if progress is not None:
        progress(f"downloading {url}")
    try:
        with open(target, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:  # noqa: S310
            shutil.copyfileobj(response, out)
    except OSError as e:
        raise BadInput(f"config key 'kafka_tarball': cannot download {url}: {e}") from None
    return target


KINDS: dict[str, Software] = {"kafka": KafkaSoftware(), "tansu": tansu_build.TansuSoftware()}
# Test settings a kind turns into its own configuration (beyond the `{config.KEY}` templates).
SETTINGS_READ: dict[str, tuple[str, ...]] = {"kafka": ("eligible_leader_replicas", "transaction_version")}


def kind(name: str) -> Software:
    return KINDS[name]
