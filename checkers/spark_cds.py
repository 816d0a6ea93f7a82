"""A class-data-sharing archive of the local Spark JVM's classes, so a check's JVM starts and warms
up faster (a check loads some 15,000 classes; measured on 2 cores at 1,000,000 operations: Spark's
start 3.7 s instead of 11.3 s, 28 CPU s instead of 35, load 5.6-6.5).

The first local session of a machine (per Java, pyspark and JVM options: the archive's name is a
hash of them) runs with `-XX:ArchiveClassesAtExit` into a file of its own; when that process ends,
`publish_at_exit` stops the JVM, waits for it to write the archive and moves it into place only if
the JVM exited cleanly (a cut archive would crash the next JVM). Later sessions map it with
`-XX:SharedArchiveFile`; a session that does not start with it discards it and starts without
(`spark_session.get_session`). STRANDLINE_SPARK_CDS=0 turns this off. Local mode only: executors on
a cluster have their own classpath.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

# Unified JVM logging off: writing an archive warns about every class it skips (signed jars, generated
# classes), on the user's terminal otherwise. Unknown options (an older JVM) are ignored, not fatal.
QUIET = "-Xlog:disable -XX:+IgnoreUnrecognizedVMOptions"
# How long a process's end waits for its JVM to write the archive (about 180 MiB).
DUMP_TIMEOUT_S = 120.0
# What the process that writes the archive says while its end waits for it (the bench looks for it).
SAVING = "strandline: saving Spark's classes for faster later checks (once) ..."
# The most archives kept (one per Java, pyspark install and options: each clone's venv has its
# own); older ones are removed when a new one is kept.
KEEP = 8


def cache_dir() -> Path:
    """Where the archives are kept ($XDG_CACHE_HOME/strandline, else ~/.cache/strandline)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "strandline"


def archive_path(jvm_options: str) -> Path:
    """The archive for this Java, this pyspark and these JVM options."""
    import pyspark

    java_home = os.environ.get("JAVA_HOME") or ""
    java = os.path.realpath(
        os.path.join(java_home, "bin", "java") if java_home else shutil.which("java") or ""
    )
    key = "\n".join([java, os.path.dirname(pyspark.__file__), pyspark.__version__, jvm_options, sys.prefix])
    return cache_dir() / f"spark-cds-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def enabled() -> bool:
    return os.environ.get("STRANDLINE_SPARK_CDS", "1") != "0"


def java_options(archive: Path) -> tuple[str, Path | None]:
    """The driver's extra JVM options for `archive` and, when this session writes it, the file it
    writes into (None: the archive is used, or CDS is off)."""
    if not enabled():
        return "", None
    try:
        if archive.is_file() and archive.stat().st_size > 0:
            return f"-XX:SharedArchiveFile={archive} -Xshare:auto {QUIET}", None
        archive.parent.mkdir(parents=True, exist_ok=True)
        if not os.access(archive.parent, os.W_OK):
            return "", None
    except OSError:
        return "", None
    _forget_dead_writers(archive)
    writing = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
    return f"-XX:ArchiveClassesAtExit={writing} {QUIET}", writing


def _forget_dead_writers(archive: Path) -> None:
    """Remove archives left half written by processes that no longer run."""
    for tmp in archive.parent.glob(f"{archive.name}.*.tmp"):
        try:
            pid = int(tmp.name.rsplit(".", 2)[1])
            os.kill(pid, 0)
        except (ValueError, ProcessLookupError):
            tmp.unlink(missing_ok=True)
        except OSError:
            pass


def discard(archive: Path) -> None:
    """An archive the JVM would not start with: removed (the next session writes a new one)."""
    log.warning("Spark's class archive %s did not work; starting without it", archive)
    archive.unlink(missing_ok=True)


def publish_at_exit(session: SparkSession, writing: Path, archive: Path) -> None:
    """When this process ends: stop Spark, let its JVM write the archive, and move it into place
    if the JVM exited cleanly."""
    atexit.register(_publish, session, writing, archive)


def _publish(session: SparkSession, writing: Path, archive: Path) -> None:
    proc = getattr(getattr(session.sparkContext, "_gateway", None), "proc", None)
    try:
        session.stop()
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()  # the gateway exits when its Python goes away
        # The first check on a machine pays this once; say why the command has not ended yet.
        sys.stderr.write(SAVING + "\n")
        sys.stderr.flush()
        code = proc.wait(timeout=DUMP_TIMEOUT_S)
        if code == 0 and writing.is_file() and writing.stat().st_size > 0:
            os.replace(writing, archive)
            _prune(archive.parent)
    except KeyboardInterrupt:  # Ctrl-C while it writes: no archive, no traceback, no JVM left
        if proc is not None and proc.poll() is None:
            proc.kill()
    except Exception as e:  # noqa: BLE001 - never the check's problem: the next one writes it
        log.info("Spark's class archive not kept: %s", e)
    finally:
        writing.unlink(missing_ok=True)


def _prune(directory: Path) -> None:
    """Keep the KEEP newest archives (a JVM that maps a removed one keeps its mapping)."""
    archives = sorted(directory.glob("spark-cds-*.jsa"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[KEEP:]:
        old.unlink(missing_ok=True)
