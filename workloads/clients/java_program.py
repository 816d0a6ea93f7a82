"""The Java client program: Apache Kafka's own client (`org.apache.kafka:kafka-clients`) from Maven
Central, and strandline's small program around it (`java_src/*.java`), compiled with the JDK on
this machine.

    program = prepare("4.4.0", progress=print)   # fetched and compiled on first use, then cached
    subprocess.Popen(program.command(), ...)     # java -cp <classes>:<libs>/* StrandlineClients

kafka-clients is resolved by `clusters.maven` into the same cache as Apache Kafka's releases
(`<cache>/maven/kafka-clients/<version>/libs/`), its version chosen independently of the broker's
(`java_client_version`). The program is compiled once per (client version, source, JDK) into
`<cache>/java-client/<version>-<digest>/classes`, in a temporary folder renamed into place when
javac is done, so a failed or interrupted compilation never looks complete.

Errors: a malformed or too old version, or one Maven Central does not have, is BadInput (exit 2,
naming the nearest releases); no JDK (javac) is InfrastructureError (exit 4) saying what is missing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from clusters import maven
from clusters.node_software import cache_root
from foundation.errors import BadInput, InfrastructureError

log = logging.getLogger(__name__)

Progress = maven.Progress

GROUP = "org.apache.kafka"
ARTIFACT = "kafka-clients"
# The newest release of the client, which runs on this machine's Java 17 (kafka-clients 4.x needs
# Java 11 or later).
DEFAULT_VERSION = "4.4.0"
# The program uses the client's Duration-based calls, producer.close(Duration) the last of them (2.2).
OLDEST = (2, 2)
FOLDER = "kafka-clients"  # the Maven cache folder (clusters/maven.py: one per name and version)
# kafka-clients logs through the SLF4J 1.7 API; this binding writes its warnings to stderr, which
# the controller forwards to its log.
SLF4J_BINDING = "org.slf4j:slf4j-simple:1.7.36"
SOURCES = Path(__file__).resolve().parent / "java_src"
MAIN_CLASS = "StrandlineClients"
MARKER = ".complete"
COMPILE_TIMEOUT_S = 300.0
VERSION = re.compile(r"^\d+(\.\d+){2,3}$")
# The JVM of a client host: a small heap that grows as a hundred consumers need it, the serial
# collector (no GC threads competing for two cores with the brokers), and a log level for the
# client's own logging.
JVM_OPTIONS = (
    "-Xms32m",
    "-Xmx1g",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xss512k",
    "-XX:-UsePerfData",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dorg.slf4j.simpleLogger.showThreadName=false",
)


@dataclass(frozen=True)
class JavaProgram:
    """A compiled program and what runs it."""

    version: str  # the kafka-clients release
    java: Path
    classes: Path
    libs: Path

    def command(self) -> list[str]:
        classpath = os.pathsep.join((str(self.classes), str(self.libs / "*")))
        return [str(self.java), *JVM_OPTIONS, "-cp", classpath, MAIN_CLASS]


def check_version(version: str) -> str:
    """The version as given, or BadInput when it is no release number the program can use."""
    if not VERSION.match(version):
        raise BadInput(
            f"config key 'java_client_version': {version!r} is not a kafka-clients release number"
            f" such as {DEFAULT_VERSION}"
        )
    if tuple(int(p) for p in version.split(".")[:2]) < OLDEST:
        oldest = ".".join(map(str, OLDEST))
        raise BadInput(
            f"config key 'java_client_version': kafka-clients {version} is older than {oldest},"
            " the oldest release the Java client program runs with"
        )
    return version


def jdk() -> tuple[Path, Path]:
    """(javac, java) of the JDK: $JAVA_HOME's when set, else the javac on PATH and the java beside it."""
    home = os.environ.get("JAVA_HOME", "")
    if home:
        javac = Path(home) / "bin" / "javac"
        if not os.access(javac, os.X_OK):
            raise InfrastructureError(
                f"--client java needs a JDK: JAVA_HOME={home} has no bin/javac (a JRE alone cannot"
                " compile the Java client program; install a JDK, e.g. default-jdk-headless)"
            )
    else:
        found = shutil.which("javac")
        if found is None:
            raise InfrastructureError(
                "--client java needs a JDK: no javac on PATH (install one, e.g. default-jdk-headless,"
                " or set JAVA_HOME)"
            )
        javac = Path(found).resolve()
    java = javac.parent / "java"
    if not os.access(java, os.X_OK):
        raise InfrastructureError(f"--client java needs a JDK: no java beside {javac}")
    return javac, java


def fetch(version: str, *, progress: Progress | None = None) -> Path:
    """The folder holding kafka-clients `version` and its runtime dependencies (`libs/*.jar`)."""
    check_version(version)
    coordinates = [f"{GROUP}:{ARTIFACT}:{version}", SLF4J_BINDING]
    done = maven.resolved(FOLDER, version, coordinates)
    if done is not None:
        return done
    try:
        return maven.resolve(coordinates, FOLDER, version, progress=progress)
    except maven.MavenUnreachable:
        raise
    except Exception:
        known = maven.released_versions(GROUP, ARTIFACT)
        if version not in known:
            near = ", ".join(maven.nearest(version, known)) or "none listed"
            raise BadInput(
                f"kafka-clients {version} is not on Maven Central (nearest releases: {near})"
            ) from None
        raise


def compiled(version: str, libs: Path, javac: Path) -> Path:
    """The program's classes, compiled against `libs` with `javac` unless already cached."""
    sources = sorted(SOURCES.glob("*.java"))
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    digest.update(str(javac).encode() + str(javac.stat().st_mtime_ns).encode())
    target = cache_root() / "java-client" / f"{version}-{digest.hexdigest()[:16]}"
    if (target / MARKER).exists():
        return target / "classes"
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".compile-{os.getpid()}-"))
    try:
        argv = [str(javac), "-nowarn", "-encoding", "UTF-8", "-d", str(work / "classes")]
        argv += ["-cp", str(libs / "*"), *map(str, sources)]
        log.info("compiling the Java client program against kafka-clients %s", version)
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise InfrastructureError(f"javac failed on the Java client program: {e}") from None
        if done.returncode != 0:
            first = next((line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip())
            raise InfrastructureError(
                f"javac could not compile the Java client program against kafka-clients {version}: {first}"
            )
        (work / MARKER).write_text(f"{version}\n")
        try:
            work.rename(target)
        except OSError:  # another process compiled it meanwhile
            if not (target / MARKER).exists():
                shutil.rmtree(target, ignore_errors=True)
                work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target / "classes"


def prepare(version: str, *, progress: Progress | None = None) -> JavaProgram:
    """The program for kafka-clients `version` ("": the default), fetched and compiled on first use.
    The JDK is looked for first, so a machine without one fails before any download."""
    version = check_version(version or DEFAULT_VERSION)
    javac, java = jdk()
    folder = fetch(version, progress=progress)
    return JavaProgram(version, java, compiled(version, folder / maven.LIBS, javac), folder / maven.LIBS)
