"""Java software from Maven Central: artifacts with their runtime dependencies, resolved once
into a folder of jars that nodes run from.

Resolution goes through `mvn`, the registry's own client, so the user's `~/.m2/settings.xml`
(mirrors, proxies, credentials) and local repository are honoured, and Maven verifies every
download against its published checksum (`--strict-checksums`: a mismatch fails the fetch).

    folder = resolve(["org.apache.kafka:kafka_2.13:4.4.0"], "kafka", "4.4.0", progress=print)
    # <cache>/maven/kafka/4.4.0/libs/*.jar, reused (offline) from then on
    released_versions("org.apache.kafka", "kafka_2.13")  # ['2.4.0', ..., '4.4.0']

One folder per (name, version) under `clusters.node_software.cache_root()`; its `.complete`
marker, written last, lists the coordinates it holds. A folder without a marker, or whose marker
names other coordinates, is resolved again. A fetch works in a temporary folder beside the
target and renames it into place only once every jar is there, so a failure, a Ctrl-C or a
killed controller never leaves a folder that looks complete; two fetches of the same folder at
once both succeed (the second keeps the first one's).

Errors: a version the registry does not list is BadInput naming the nearest releases (the caller
lists them with `released_versions` and `nearest`); a registry that cannot be reached is
`MavenUnreachable` (an InfrastructureError) with Maven's reason.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from clusters.node_software import cache_root
from foundation.errors import BadInput, InfrastructureError

log = logging.getLogger(__name__)

MVN = "mvn"
# Pinned so that resolving needs no plugin look-up (and works offline once the plugin is cached).
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"
MARKER = ".complete"
LIBS = "libs"
FETCH_TIMEOUT_S = 1200.0
LIST_TIMEOUT_S = 300.0
COORDINATE = re.compile(r"^([\w.\-]+):([\w.\-]+):([\w.\-]+)(?::([\w.\-]+))?$")
# Maven's words for "the registry could not be reached" (its transfer errors)
UNREACHABLE = re.compile(
    r"Could not transfer|Connect to .* failed|Unknown host|UnknownHost|Network is unreachable|"
    r"Connection refused|Connection timed out|No route to host|Temporary failure in name resolution",
)
DOWNLOADED = re.compile(r"Downloaded from [^:]+: (\S+) \(([\d.]+) ([kMG]?B)")
UNITS = {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}

Progress = Callable[[str], None]


class MavenUnreachable(InfrastructureError):
    """The Maven repository could not be reached (network, proxy, DNS): exit 4, with Maven's reason."""


@dataclass(frozen=True)
class Artifact:
    """Maven coordinates `group:artifact:version[:classifier]` (a jar)."""

    group: str
    artifact: str
    version: str
    classifier: str = ""

    @classmethod
    def parse(cls, text: str) -> Artifact:
        m = COORDINATE.match(text.strip())
        if not m:
            raise BadInput(f"not Maven coordinates (group:artifact:version[:classifier]): {text!r}")
        return cls(m.group(1), m.group(2), m.group(3), m.group(4) or "")

    def __str__(self) -> str:
        tail = f":{self.classifier}" if self.classifier else ""
        return f"{self.group}:{self.artifact}:{self.version}{tail}"


def cache_dir() -> Path:
    return cache_root() / "maven"


def folder_of(name: str, version: str) -> Path:
    """Where `resolve(..., name, version)` puts its jars (whether or not they are there yet)."""
    return cache_dir() / name / version


def resolved(name: str, version: str, artifacts: Iterable[str] | None = None) -> Path | None:
    """The complete folder of (name, version), or None; with `artifacts`, only if it holds them."""
    folder = folder_of(name, version)
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if artifacts is not None and sorted(marker.get("artifacts", [])) != sorted(str(a) for a in artifacts):
        return None
    return folder


def resolve(
    artifacts: Sequence[str],
    name: str,
    version: str,
    *,
    exclusions: Sequence[str] = (),
    progress: Progress | None = None,
    timeout: float = FETCH_TIMEOUT_S,
) -> Path:
    """The folder holding `artifacts` and their runtime dependencies as `<folder>/libs/*.jar`,
    resolved through `mvn` on first use and reused from then on (offline).

    `name` and `version` name the folder (one per artifact set and version): `kafka`, `4.4.0`.
    `exclusions` (`group:artifact`) are left out of every artifact's dependencies (a logging
    binding the caller replaces, say).
    Raises MavenUnreachable when the repository cannot be reached, InfrastructureError with Maven's
    last error otherwise (a missing version: ask `released_versions` which ones exist)."""
    coordinates = [str(Artifact.parse(a)) for a in artifacts]
    done = resolved(name, version, coordinates)
    if done is not None:
        return done
    target = folder_of(name, version)
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(target.parent)
    work = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".fetch-{os.getpid()}-{version}-"))
    try:
        (work / "pom.xml").write_text(_pom([Artifact.parse(a) for a in coordinates], exclusions=exclusions))
        goal = f"{DEPENDENCY_PLUGIN}:copy-dependencies"
        options = [
            f"-DoutputDirectory={work / LIBS}",
            "-DincludeScope=runtime",
            "-Dmdep.useRepositoryLayout=false",
        ]
        lines = _mvn([goal, *options], work, timeout, progress, what=f"{name} {version}")
        jars = sorted(p.name for p in (work / LIBS).glob("*.jar"))
        if not jars:
            raise InfrastructureError(
                f"Maven resolved no jars for {', '.join(coordinates)}: {_last_error(lines)}"
            )
        (work / "pom.xml").unlink()
        marker = {"artifacts": coordinates, "jars": jars}
        (work / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
        try:
            work.rename(target)
        except OSError:  # a complete folder of another fetch, or a stale incomplete one
            if resolved(name, version, coordinates) is None:
                shutil.rmtree(target, ignore_errors=True)
                work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    log.info("%s %s resolved into %s (%d jars)", name, version, target, len(jars))
    return target


def released_versions(group: str, artifact: str) -> list[str]:
    """Every release of group:artifact the repository lists (its maven-metadata.xml), oldest
    first; empty when it lists none. Raises MavenUnreachable when it cannot be asked."""
    with tempfile.TemporaryDirectory(prefix="strandline-versions-") as tmp:
        # A range no version satisfies: Maven fetches the artifact's metadata to find out, and
        # nothing else (a satisfiable range would fetch the POM of every version).
        probe = Artifact(group, artifact, "[999999999,)")
        Path(tmp, "pom.xml").write_text(_pom([probe], packaging="pom", extension="pom"))
        lines = _mvn(
            ["-U", "-X", f"{DEPENDENCY_PLUGIN}:list", "-DexcludeTransitive=true"],
            Path(tmp),
            LIST_TIMEOUT_S,
            None,
            what=f"the releases of {group}:{artifact}",
            expect_failure=True,
        )
    versions: set[str] = set()
    local = _local_repository(lines)
    folder = local / Path(*group.split(".")) / artifact
    for metadata in folder.glob("maven-metadata-*.xml"):
        with contextlib.suppress(ET.ParseError, OSError):
            versions |= {v.text.strip() for v in ET.parse(metadata).iter("version") if v.text}
    transfer = [line for line in lines if UNREACHABLE.search(line)]
    if transfer and not versions:
        raise MavenUnreachable(f"Maven repository unreachable: {_clean(transfer[-1])}")
    return sorted((v for v in versions if not _is_snapshot(v)), key=version_key)


def nearest(version: str, versions: Sequence[str], count: int = 4) -> list[str]:
    """The releases closest to `version` (same line first), in release order."""
    wanted = version_key(version)

    def distance(v: str) -> tuple[int, ...]:
        """Parts shared with the wanted number first, then how far each later part is off."""
        key = version_key(v)
        shared = 0
        for a, b in zip(wanted, key, strict=False):
            if a != b:
                break
            shared += 1
        width = max(len(wanted), len(key))
        gaps = tuple(abs(_number(key, i) - _number(wanted, i)) for i in range(shared, width))
        return (-shared, *gaps)

    picked = sorted(versions, key=distance)[:count]
    return sorted(picked, key=version_key)


def version_key(version: str) -> tuple[int | str, ...]:
    """Sortable parts of a release number ("0.10.2.2" < "0.11.0.0" < "3.9.0" < "4.0.0")."""
    parts: list[int | str] = []
    for part in re.split(r"[.\-]", version):
        parts.append(int(part) if part.isdigit() else -1)
    return tuple(parts)


def _number(key: tuple[int | str, ...], at: int) -> int:
    value = key[at] if at < len(key) else 0
    return value if isinstance(value, int) else 0


def _is_snapshot(version: str) -> bool:
    return version.endswith("-SNAPSHOT")


def _pom(
    artifacts: Sequence[Artifact],
    packaging: str = "pom",
    extension: str = "jar",
    exclusions: Sequence[str] = (),
) -> str:
    excluded = "".join(
        f"<exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>"
        for g, _, a in (e.partition(":") for e in exclusions)
    )
    excluded = f"<exclusions>{excluded}</exclusions>" if excluded else ""
    deps = []
    for a in artifacts:
        classifier = f"<classifier>{a.classifier}</classifier>" if a.classifier else ""
        kind = f"<type>{extension}</type>" if extension != "jar" else ""
        deps.append(
            f"<dependency><groupId>{a.group}</groupId><artifactId>{a.artifact}</artifactId>"
            f"<version>{a.version}</version>{classifier}{kind}{excluded}</dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "<modelVersion>4.0.0</modelVersion>\n"
        "<groupId>strandline</groupId><artifactId>fetch</artifactId><version>1</version>\n"
        f"<packaging>{packaging}</packaging>\n"
        f"<dependencies>\n{chr(10).join(deps)}\n</dependencies>\n"
        "</project>\n"
    )


def _mvn(
    goals: list[str],
    project: Path,
    timeout: float,
    progress: Progress | None,
    *,
    what: str,
    expect_failure: bool = False,
) -> list[str]:
    """Run mvn in `project`; its output lines. Downloads are reported to `progress` as they happen.
    A failure (unless expected) raises MavenUnreachable or InfrastructureError with Maven's reason."""
    if shutil.which(MVN) is None:
        raise InfrastructureError("mvn is not installed (scripts/setup.sh installs Maven)")
    argv = [MVN, "-B", "--strict-checksums", "-f", str(project / "pom.xml"), *goals]
    log.debug("running %s", " ".join(argv))
    proc = subprocess.Popen(
        argv,
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a Ctrl-C here is ours to handle: mvn is stopped below
    )
    lines: list[str] = []
    files, size = 0, 0.0
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = _clean(line)
            lines.append(line)
            m = DOWNLOADED.search(line)
            if m and progress is not None:
                files += 1
                size += float(m.group(2)) * UNITS.get(m.group(3), 1)
                progress(
                    f"{what}: {files} files ({size / 1e6:.1f} MB) downloaded, last {m.group(1).rsplit('/', 1)[-1]}"
                )
        code = proc.wait(timeout=timeout)
    except BaseException:
        _stop(proc)
        raise
    if code != 0 and not expect_failure:
        transfer = [line for line in lines if UNREACHABLE.search(line)]
        if transfer:
            raise MavenUnreachable(
                f"Maven repository unreachable while resolving {what}: {_clean(transfer[-1])}"
            )
        raise InfrastructureError(f"Maven could not resolve {what}: {_last_error(lines)}")
    return lines


def _stop(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def _local_repository(lines: Sequence[str]) -> Path:
    """Maven's local repository as its debug output (-X) names it (settings.xml's, else ~/.m2)."""
    for line in lines:
        m = re.search(r"Using local repository at (/\S+)", line)
        if m:
            return Path(m.group(1))
    return Path.home() / ".m2" / "repository"


def _last_error(lines: Sequence[str]) -> str:
    errors = [line for line in lines if line.startswith("[ERROR]") and len(line) > 8]
    text = errors[0] if errors else (lines[-1] if lines else "no output")
    return _clean(text)


def _clean(line: str) -> str:
    """One line of Maven's output without colours, its level tag and its help pointer."""
    line = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
    line = re.sub(r"^\[(ERROR|WARNING|INFO)\]\s*", "", line)
    return re.sub(r"\s*->\s*\[Help \d+\]$", "", line)


def _remove_abandoned(parent: Path) -> None:
    """Temporary folders of fetches whose process is gone (killed mid-fetch)."""
    for work in parent.glob(".fetch-*"):
        pid = work.name.split("-")[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(work, ignore_errors=True)
