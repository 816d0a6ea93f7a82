"""The docker backend's node image, built without a registry and cached by a hash of its inputs.

Two layers, each tagged by a content hash so a second build is instant:

- `strandline-node-base:<hash>`: a Debian root filesystem from `debootstrap` (Python, Java for
  ZooKeeper, iptables, iproute2, procps), ZooKeeper's jars and log4j configuration copied from the
  controller's Debian `zookeeper` package, and a venv `/opt/strandline/venv` holding the broker's
  dependencies (wheels built on the controller, installed with `pip --no-index`), then
  `docker import`. The hash covers the debootstrap arguments, the pins and the jars.
- `strandline-node:<hash>`: the base plus the project source in `/opt/strandline/src` (on the
  venv's path through a .pth file), committed from a container. The hash adds the source digest,
  so editing the project costs a second or two, not a debootstrap.

A user with an image of their own passes it as `docker_image` (it must offer the same paths).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import fcntl
import hashlib
import io
import logging
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clusters import node_software, zookeeper
from clusters.state import mount_points_under, unmount
from foundation.errors import InfrastructureError

log = logging.getLogger(__name__)

BASE_REPOSITORY = "strandline-node-base"
REPOSITORY = "strandline-node"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("python3", "python3-venv", "iptables", "iproute2", "procps", "openjdk-17-jre-headless")
VENV = "/opt/strandline/venv"
SOURCE_DIR = "/opt/strandline/src"
PYTHON = f"{VENV}/bin/python"
SITE_PACKAGES = f"{VENV}/lib/python3.11/site-packages"  # bookworm's Python is 3.11
FAKETIME_LIBRARY = f"{SITE_PACKAGES}/libfaketime/vendor/libfaketime/src/libfaketime.so.1"
LOCK_FILE = "/var/tmp/strandline-node-image.lock"
BUILD_VERSION = "1"  # bump when the build steps below change
# What a minimal node never reads: documentation, translations, apt's downloads and lists.
TRIM = (
    "usr/share/doc",
    "usr/share/man",
    "usr/share/locale",
    "usr/share/info",
    "var/cache/apt",
    "var/lib/apt/lists",
)


def zookeeper_files() -> list[tuple[Path, str]]:
    """(file on the controller, path in the image) for ZooKeeper's classpath and configuration."""
    files = [(Path("/usr/share/java") / jar, f"usr/share/java/{jar}") for jar in zookeeper.JARS]
    conf = Path(zookeeper.CONF_DIR)
    if conf.is_dir():
        files += [(p, f"etc/zookeeper/conf/{p.name}") for p in sorted(conf.iterdir()) if p.is_file()]
    missing = [str(src) for src, _ in files if not src.exists()]
    if missing:
        raise InfrastructureError(
            f"ZooKeeper is not installed on the controller ({missing[0]} missing; run scripts/setup.sh)"
        )
    return files


def base_digest() -> str:
    digest = hashlib.sha256()
    digest.update(f"{BUILD_VERSION}\n{SUITE}\n{MIRROR}\n{','.join(PACKAGES)}\n{VENV}\n".encode())
    digest.update("\n".join(node_software.requirement_pins()).encode())
    for src, dest in zookeeper_files():
        digest.update(dest.encode() + b"\0" + hashlib.sha256(src.read_bytes()).digest())
    return digest.hexdigest()[:16]


def image_tag(base: str | None = None, source: str | None = None) -> str:
    base = base or base_digest()
    source = source or node_software.source_digest()
    return f"{REPOSITORY}:{hashlib.sha256(f'{base}:{source}'.encode()).hexdigest()[:16]}"


def _has_image(client: Any, tag: str) -> bool:
    import docker.errors

    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _run(argv: list[str], what: str, timeout: float = 900) -> None:
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        raise InfrastructureError(f"{argv[0]} is not installed (scripts/setup.sh installs it)") from None
    except subprocess.TimeoutExpired:
        raise InfrastructureError(f"{what} timed out after {timeout:g}s") from None
    if result.returncode != 0:
        tail = (result.stderr.strip() or result.stdout.strip() or "failed").splitlines()[-1]
        raise InfrastructureError(f"{what} failed: {tail}")


def build_base(client: Any, tag: str) -> None:
    """debootstrap + ZooKeeper files + venv with the broker's wheels, imported as `tag`."""
    started = time.monotonic()
    # The wheels build (pip, PyPI) while debootstrap downloads and unpacks: both wait on the network.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        wheels_future = pool.submit(node_software.wheel_files)
        _build_base(client, tag, started, wheels_future)


def _build_base(
    client: Any, tag: str, started: float, wheels_future: concurrent.futures.Future[list[Path]]
) -> None:
    work = Path(tempfile.mkdtemp(prefix="strandline-rootfs-", dir="/var/tmp"))
    rootfs = work / "rootfs"
    try:
        log.info("building %s: debootstrap %s (about a minute)", tag, SUITE)
        _run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(PACKAGES)}",
                SUITE,
                str(rootfs),
                MIRROR,
            ],
            "debootstrap",
        )
        log.info("debootstrap done after %.1fs", time.monotonic() - started)
        for src, dest in zookeeper_files():
            target = rootfs / dest
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)  # follows Debian's version symlinks
        wheel_dir = rootfs / "tmp" / "wheels"
        wheel_dir.mkdir(parents=True)
        for wheel in wheels_future.result():
            shutil.copyfile(wheel, wheel_dir / wheel.name)
        pins = node_software.requirement_pins()
        _run(["chroot", str(rootfs), "/usr/bin/python3", "-m", "venv", VENV], "creating the image's venv")
        _run(
            ["chroot", str(rootfs), PYTHON, "-m", "pip", "install", "--quiet", "--no-index",
             "--disable-pip-version-check", "--find-links", "/tmp/wheels", *pins],
            "installing the broker's wheels into the image",
        )  # fmt: skip
        (rootfs / SITE_PACKAGES.lstrip("/") / "strandline.pth").write_text(SOURCE_DIR + "\n")
        shutil.rmtree(wheel_dir)
        for rel in TRIM:
            shutil.rmtree(rootfs / rel, ignore_errors=True)
        log.info("venv done after %.1fs; importing %s into docker", time.monotonic() - started, tag)
        repository, _, version = tag.partition(":")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        assert tar.stdout is not None
        try:
            client.api.import_image_from_stream(
                tar.stdout,
                repository=repository,
                tag=version,
                changes=[
                    f"ENV PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    'CMD ["sleep", "infinity"]',
                ],
            )
        finally:
            tar.stdout.close()
            tar.wait()
        if not _has_image(client, tag):
            raise InfrastructureError(f"docker import of {tag} did not produce the image")
    finally:
        # debootstrap mounts /proc (and more) in the chroot; never delete through a mount point
        for point in mount_points_under(work):
            unmount(point)
        shutil.rmtree(work, ignore_errors=True)
    log.info("built %s in %.1fs", tag, time.monotonic() - started)


def build_node_image(client: Any, base_tag: str, tag: str) -> None:
    """The base plus the project source, committed from a throw-away container."""
    repository, _, version = tag.partition(":")
    container = client.containers.create(base_tag, ["sleep", "infinity"], labels={"strandline.build": "1"})
    try:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            source = node_software.source_tarball()
            with tarfile.open(fileobj=io.BytesIO(source), mode="r:gz") as src:
                for member in src.getmembers():
                    member.name = f"opt/strandline/src/{member.name}"
                    tar.addfile(member, src.extractfile(member))
        container.put_archive("/", buffer.getvalue())
        container.commit(repository=repository, tag=version)
    finally:
        container.remove(force=True)


def ensure_image(client: Any) -> str:
    """The tag of an up-to-date node image, building what is missing."""
    base = base_digest()
    tag = image_tag(base)
    if _has_image(client, tag):
        return tag
    with _build_lock():  # concurrent runs: one builds, the others wait and find the image
        if _has_image(client, tag):
            return tag
        base_tag = f"{BASE_REPOSITORY}:{base}"
        if not _has_image(client, base_tag):
            build_base(client, base_tag)
        build_node_image(client, base_tag, tag)
        _prune_old(client, REPOSITORY, keep=tag)
        _prune_old(client, BASE_REPOSITORY, keep=base_tag)
    return tag


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    with open(LOCK_FILE, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _prune_old(client: Any, repository: str, keep: str, min_age: float = 3600.0) -> None:
    """Drop images of earlier inputs (a source layer is cheap to rebuild, a base is outdated).

    Only images older than `min_age` seconds: a concurrent run (the tree changed under it) may be
    about to start containers from the image it has just built.
    """
    import docker.errors

    now = time.time()
    for image in client.images.list(name=repository):
        if keep in image.tags or now - _created(image) < min_age:
            continue
        for tag in image.tags:
            try:
                client.images.remove(tag, noprune=False)
            except docker.errors.APIError as e:  # in use by a running cluster: keep it
                log.debug("keeping %s: %s", tag, e)


def _created(image: Any) -> float:
    """The image's creation time (seconds since the epoch); now when it cannot be read."""
    import datetime

    text = str(image.attrs.get("Created", ""))[:19]  # 2026-11-22T07:22:56.123456789Z
    try:
        return datetime.datetime.fromisoformat(text).replace(tzinfo=datetime.UTC).timestamp()
    except ValueError:
        return time.time()
