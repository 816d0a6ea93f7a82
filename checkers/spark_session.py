"""The Spark session the checker runs in: quiet, no UI, bound to 127.0.0.1, sized to the machine.

One session per Python process (Spark allows no more); `get_session` reuses an active one, so the
tests share one session and `strandline check` pays Spark's start-up once.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

LOG4J_CONFIG = Path(__file__).with_name("spark-log4j2.properties")
DEFAULT_MASTER = "local[*]"


def local_cores(master: str) -> int:
    """How many cores a local master uses (local, local[N], local[*]); the machine's for others."""
    cpus = os.cpu_count() or 1
    if master == "local":
        return 1
    if master.startswith("local[") and master.endswith("]"):
        inner = master[len("local[") : -1].split(",")[0]
        return cpus if inner == "*" else max(1, int(inner))
    return cpus


def shuffle_partitions(master: str) -> int:
    """Few shuffle partitions on a small machine (adaptive execution coalesces them further)."""
    return max(2, 4 * local_cores(master))


def get_session(master: str | None = None, driver_memory: str | None = None) -> SparkSession:
    """The active SparkSession, or a new one configured for the checker."""
    from pyspark.sql import SparkSession

    # The active session is per thread; the instantiated one is the process's (checks may run in a
    # thread of their own).
    active = SparkSession.getActiveSession() or getattr(SparkSession, "_instantiatedSession", None)
    if active is not None:
        return active
    master = master or os.environ.get("STRANDLINE_SPARK_MASTER") or DEFAULT_MASTER
    # Workers (if any Python ever runs there) use this interpreter, not whatever `python3` is.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = master.startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    java_opts = f"-Dlog4j.configurationFile=file:{LOG4J_CONFIG} -XX:+UseParallelGC"
    # Extra JVM options, e.g. -XX:TieredStopAtLevel=1 (less JIT work: faster on small histories).
    java_opts += " " + os.environ.get("STRANDLINE_SPARK_JAVA_OPTS", "")
    builder = (
        SparkSession.builder.master(master)
        .appName("strandline-checker")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .config(
            "spark.sql.shuffle.partitions",
            os.environ.get("STRANDLINE_SPARK_SHUFFLE_PARTITIONS") or str(shuffle_partitions(master)),
        )
        .config("spark.sql.adaptive.enabled", os.environ.get("STRANDLINE_SPARK_AQE", "true"))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.compression.codec", "zstd")
        .config("spark.sql.files.maxPartitionBytes", str(64 << 20))
        .config("spark.driver.memory", driver_memory or os.environ.get("STRANDLINE_SPARK_MEMORY", "2g"))
    )
    if local:
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    log.info("starting Spark (%s)", master)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


def jvm_pid(session: SparkSession) -> int | None:
    """The pid of the local Spark JVM this Python process launched (None when not known)."""
    gateway = getattr(session.sparkContext, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    pid = getattr(proc, "pid", None)
    return pid if isinstance(pid, int) else None


def peak_rss_bytes(pid: int) -> int | None:
    """A process's peak resident memory (VmHWM) from /proc; None where /proc has no answer."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None
