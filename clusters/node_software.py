"""What a remote node (docker container, ssh host) needs to run the own broker: the project
source and the broker's Python dependencies, as files the controller can ship.

Both are content-addressed so the docker image cache and the ssh install step can skip work that
is already done: `source_digest()` covers every project file a node imports, `requirement_pins()`
are the exact versions the controller runs (they satisfy pyproject.toml). The wheels are built once
on the controller (which reaches PyPI) and installed on nodes with `pip --no-index`, so nodes
need no network access of their own.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from foundation.errors import InfrastructureError

log = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# The packages a node imports (the broker, and the lazyfs filesystem of clusters, plus their imports).
PROJECT_PACKAGES = (
    "foundation",
    "history",
    "broker",
    "clusters",
    "harness",
    "nemesis",
    "workloads",
    "checkers",
)
# The broker's third-party imports (pyproject.toml names).
BROKER_DISTRIBUTIONS = ("kio", "kafka-python", "kazoo", "libfaketime")
SOURCE_SUFFIXES = (".py", ".properties", ".cfg", ".toml", ".j2", ".css", ".js", ".html")


def cache_root() -> Path:
    """Where the controller keeps built wheels and downloads (`$STRANDLINE_CACHE`)."""
    return Path(os.environ.get("STRANDLINE_CACHE") or Path.home() / ".cache" / "strandline")


def source_files(root: Path = PROJECT_ROOT) -> list[Path]:
    """Project files nodes need, relative to root, sorted (no caches, no tests)."""
    files = []
    for package in PROJECT_PACKAGES:
        for path in (root / package).rglob("*"):
            if "__pycache__" in path.parts or not path.is_file():
                continue
            if path.suffix in SOURCE_SUFFIXES:
                files.append(path.relative_to(root))
    return sorted(files)


def source_digest(root: Path = PROJECT_ROOT) -> str:
    digest = hashlib.sha256()
    for rel in source_files(root):
        digest.update(str(rel).encode() + b"\0")
        digest.update((root / rel).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def source_tarball(root: Path = PROJECT_ROOT, prefix: str = "") -> bytes:
    """A gzip'd tar of the project source (paths under `prefix`), reproducible for equal trees."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in source_files(root):
            data = (root / rel).read_bytes()
            info = tarfile.TarInfo(str(Path(prefix) / rel) if prefix else str(rel))
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def requirement_pins() -> list[str]:
    """`name==version` for the broker's dependencies, as installed on the controller."""
    pins = []
    for dist in BROKER_DISTRIBUTIONS:
        try:
            pins.append(f"{dist}=={importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            raise InfrastructureError(
                f"{dist} is not installed on the controller (run scripts/setup.sh)"
            ) from None
    return pins


def pins_digest(pins: list[str] | None = None) -> str:
    return hashlib.sha256("\n".join(pins or requirement_pins()).encode()).hexdigest()[:16]


def wheelhouse(pins: list[str] | None = None) -> Path:
    """A directory of wheels for the pins and their dependencies, built once and cached."""
    pins = pins or requirement_pins()
    target = cache_root() / "wheels" / pins_digest(pins)
    if (target / ".complete").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".build-"))
    log.info("building wheels for the nodes: %s", " ".join(pins))
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--quiet",
                "--disable-pip-version-check",
                "-w",
                str(tmp),
                *pins,
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if result.returncode != 0:
            last = (result.stderr.strip() or result.stdout.strip() or "failed").splitlines()[-1]
            raise InfrastructureError(f"cannot build the broker's wheels ({' '.join(pins)}): {last}")
        (tmp / ".complete").write_text("\n".join(pins) + "\n")
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def wheel_files(pins: list[str] | None = None) -> list[Path]:
    return sorted(wheelhouse(pins).glob("*.whl"))
