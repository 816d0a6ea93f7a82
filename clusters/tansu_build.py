"""tansu (a third-party Kafka-compatible broker in Rust: stateless brokers over S3 or PostgreSQL),
built once from crates.io with `cargo install` into strandline's cache and kept there.

crates.io has its source only, so the first `strandline tansu fetch` (or a run of a definition with
`[software.tansu]`) builds it: long on a small machine (cargo builds a few hundred crates; with
`CARGO_BUILD_JOBS=1` on 2 cores, more than an hour). The binary is cached under
`<cache>/tansu/<version>/bin/tansu`, and `cargo install --root` there is a no-op once it is, so a
second set-up never rebuilds it. The features are the storage engines the shipped definitions use:
`dynostore` (S3) and `postgres`.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import urllib.request
from pathlib import Path

from clusters import maven
from clusters.installed import Installed
from clusters.node_software import cache_root
from clusters.system_def import SoftwareDef, SystemDefinition
from foundation.config import TestConfig
from foundation.errors import BadInput, InfrastructureError

log = logging.getLogger(__name__)

VERSION = "0.6.0"
FEATURES = ("dynostore", "postgres")


def folder(version: str = VERSION) -> Path:
    """The `cargo install --root` folder of a release (its binary in `bin/tansu`)."""
    return cache_root() / "tansu" / version


def binary(version: str = VERSION) -> Path | None:
    """The cached binary, or None when it was never built here."""
    path = folder(version) / "bin" / "tansu"
    return path if path.is_file() else None


SCHEMA_URL = "https://raw.githubusercontent.com/tansu-io/tansu/v{version}/etc/initdb.d/010-schema.sql"


def pg_schema(version: str = VERSION) -> Path:
    """Where the PostgreSQL schema of tansu's `postgres` engine is kept (`{tansu.pg_schema}`). The
    broker does not create its tables, and the crate does not ship the schema: it is the release's
    `etc/initdb.d/010-schema.sql` in tansu's repository, downloaded once (`fetch_pg_schema`)."""
    return folder(version) / "share" / "010-schema.sql"


def fetch_pg_schema(version: str = VERSION) -> str | None:
    """The schema into the cache (once); None when it is there, else why it cannot be had."""
    target = pg_schema(version)
    if target.is_file():
        return None
    url = SCHEMA_URL.format(version=version)
    try:
        with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 (a fixed https URL)
            text = response.read().decode()
    except (OSError, UnicodeDecodeError) as e:
        return (
            f"tansu's PostgreSQL schema is not in its crate and {url} cannot be read ({e}): "
            f"put that file (etc/initdb.d/010-schema.sql of tansu v{version}) at {target}"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return None


def install_argv(version: str = VERSION) -> list[str]:
    return ["cargo", "install", "tansu", "--locked", "--version", version, "--features", ",".join(FEATURES),
            "--root", str(folder(version))]  # fmt: skip


def fetch(version: str = VERSION, progress: maven.Progress | None = None) -> Path:
    """The binary, built first when it is not cached (BadInput without cargo)."""
    found = binary(version)
    if found is not None:
        return found
    if shutil.which("cargo") is None:
        raise BadInput(
            f"tansu {version} is built from crates.io with cargo, which is not on PATH "
            "(Debian: apt-get install cargo, or rustup); or put a tansu binary at "
            f"{folder(version) / 'bin' / 'tansu'}"
        )
    if progress is not None:
        progress(
            f"building tansu {version} with cargo (once; long on a small machine): {' '.join(install_argv(version))}"
        )
    log.info("building tansu %s: %s", version, " ".join(install_argv(version)))
    done = subprocess.run(install_argv(version), capture_output=True, text=True, check=False)
    found = binary(version)
    if done.returncode != 0 or found is None:
        tail = " ".join(done.stderr.strip().splitlines()[-3:])
        raise InfrastructureError(f"cargo install tansu {version} failed (exit {done.returncode}): {tail}")
    return found


class TansuSoftware:
    """`[software.tansu]`: `{tansu.bin}` (the broker binary on the node), `{tansu.pg_schema}` (the
    PostgreSQL schema of its `postgres` engine) and `{tansu.version}`."""

    name = "tansu"

    def version(self, config: TestConfig) -> str:
        return VERSION

    def refusal(self, config: TestConfig, spec: SoftwareDef, definition: SystemDefinition) -> str | None:
        if spec.versions:
            from packaging.specifiers import SpecifierSet

            if VERSION not in SpecifierSet(spec.versions):
                return f"tansu {VERSION} (what strandline builds) cannot run as {definition.path.name}: it runs {spec.versions}"
        from clusters.system_def import role_placeholders

        if any("tansu.pg_schema" in role_placeholders(role) for role in definition.roles):
            return fetch_pg_schema(VERSION)
        return None

    def fetch(self, config: TestConfig, progress: maven.Progress | None) -> Installed:
        fetch(VERSION, progress)
        return Installed(self.name, VERSION, folder(VERSION))

    def values(self, config: TestConfig, installed: Installed, path: str) -> dict[str, str]:
        return {
            "tansu.bin": f"{path}/bin/tansu",
            "tansu.pg_schema": f"{path}/share/010-schema.sql",
            "tansu.version": installed.version,
        }

    def unreadable_segments(self, installed: Installed) -> str | None:
        return "tansu keeps its records in its storage engine, not in Kafka segments"
