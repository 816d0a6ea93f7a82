"""The Spark session the checker runs in: quiet, no UI, bound to 127.0.0.1, sized to the machine.

One session per Python process (Spark allows no more); `get_session` reuses an active one, so the
tests share one session and `strandline check` pays Spark's start-up once.
"""

from __future__ import annotations

import importlib
import logging
import os
import re
import shutil
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from checkers import spark_cds
from foundation.errors import BadInput, InfrastructureError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

LOG4J_CONFIG = Path(__file__).with_name("spark-log4j2.properties")
DEFAULT_MASTER = "local[*]"
# A check is one short-lived JVM: the C1 compiler alone (TieredStopAtLevel=1) spends far less CPU
# compiling than C2 would win back (a check of 1,000,000 operations: 37 CPU seconds instead of 62;
# of 10,000,000: 84 instead of 100, measured on 2 cores), and a larger first metaspace spares the
# full collections that loading Spark's classes otherwise triggers.
# The compiled code of a long-lived session (a campaign's, the tests') outgrows C1's default 48 MiB
# code cache, after which the JVM stops compiling and every later check runs interpreted.
JVM_OPTIONS = (
    "-XX:+UseParallelGC -XX:TieredStopAtLevel=1 -XX:MetaspaceSize=256m -XX:ReservedCodeCacheSize=256m"
)


# The master URLs Spark takes (spark.apache.org/docs/latest/submitting-applications.html).
_MASTER = re.compile(
    r"^(local(\[(\*|[1-9][0-9]*)(,[0-9]+)?\])?|local-cluster\[[0-9]+, *[0-9]+, *[0-9]+\]"
    r"|spark://[^/\s:]+:[0-9]+(,[^/\s:]+:[0-9]+)*|yarn|(k8s|mesos)://\S+)$"
)
PROBE_TIMEOUT_S = 5.0


def check_master(master: str) -> None:
    """A master URL Spark understands (BadInput otherwise) and, for a standalone cluster, one whose
    master answers on its port (InfrastructureError otherwise: Spark itself would retry for a minute
    and then fail every job)."""
    if not _MASTER.match(master):
        raise BadInput(
            f"bad Spark master URL {master!r} (local, local[N], local[*], spark://host:port, yarn, k8s://...)"
        )
    if master.startswith("spark://"):
        problems = []
        for address in master[len("spark://") :].split(","):
            host, _, port = address.rpartition(":")
            try:
                with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S):
                    return
            except OSError as e:
                problems.append(f"{address}: {e.strerror or e}")
        raise InfrastructureError(f"the Spark master {master} does not answer ({'; '.join(problems)})")


def check_java() -> None:
    """The JVM Spark's launcher will start ($JAVA_HOME/bin/java, else java on PATH), or a one-line
    InfrastructureError (the launcher itself would only print shell errors)."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        where = f"JAVA_HOME={home} has no bin/java" if home else "no java on PATH"
        raise InfrastructureError(f"Spark needs Java 17 or later: {where} (or use --checker reference)")


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


# Operations per shuffle partition a check aims at: a small history's jobs then run few tasks (on
# two cores each task's scheduling, not its rows, is what costs), a big one's as many as above,
# and a huge one's more (BIG_OPS_PER_PARTITION each): the by-value aggregate's hash map of a
# partition then stays the same size, whatever the history's, rather than outgrowing the memory
# and falling back to sorting and spilling (which made 100,000,000 operations 14 times slower
# than 10,000,000 with 8 partitions).
OPS_PER_PARTITION = 500_000
BIG_OPS_PER_PARTITION = 1_500_000


def partitions_for(ops: int, master: str) -> int:
    """The shuffle partitions for one check of `ops` operations: at least 2, up to the session's,
    and beyond it one per BIG_OPS_PER_PARTITION operations."""
    return max(
        2,
        min(shuffle_partitions(master), -(-ops // OPS_PER_PARTITION)),
        -(-ops // BIG_OPS_PER_PARTITION),
    )


# Below this many operations a check's jobs are all fixed costs (planning, code generation, task
# scheduling; a check of 2,000 operations spent 12 CPU s of the JVM's in 65 jobs): `size_for`
# runs them in one shuffle partition, without adaptive execution (which splits every query into
# jobs per stage) and with interpreted expressions instead of generated, compiled code.
SMALL_OPS = 200_000
_SMALL = {
    "spark.sql.adaptive.enabled": "false",
    # No broadcast joins (each broadcast is a job of its own): one partition joins in its task.
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}


def size_for(session: SparkSession, ops: int) -> None:
    """Settle the next jobs' settings by the history's size (runtime settings, so one session
    serves small and big checks alike): the shuffle partitions (unless
    STRANDLINE_SPARK_SHUFFLE_PARTITIONS fixes them) and, for a small history, `_SMALL`."""
    small = ops < SMALL_OPS
    settings = {key: value if small else _DEFAULTS[key] for key, value in _SMALL.items()}
    if not os.environ.get("STRANDLINE_SPARK_SHUFFLE_PARTITIONS"):
        master = session.conf.get("spark.master", None) or DEFAULT_MASTER
        settings["spark.sql.shuffle.partitions"] = str(1 if small else partitions_for(ops, master))
    for key, value in settings.items():
        try:
            session.conf.set(key, value)
        except Exception as e:  # a server that refuses a setting: its own, same results
            log.info("%s left as it is: %s", key, e)


_DEFAULTS = {
    "spark.sql.adaptive.enabled": os.environ.get("STRANDLINE_SPARK_AQE", "true"),
    "spark.sql.autoBroadcastJoinThreshold": "10485760",
    "spark.sql.codegen.wholeStage": "true",
    "spark.sql.codegen.factoryMode": "FALLBACK",
}


_REMOTE = re.compile(r"^sc://(?P<host>[^/:;\s]+|\[[0-9a-fA-F:]+\])(:(?P<port>[0-9]+))?/?(;\S*)?$")
CONNECT_PORT = 15002
# What pyspark's Connect client imports beyond pyspark itself (its `connect` extra).
CONNECT_CLIENT = ("pandas", "pyarrow", "grpc", "grpc_status", "google.rpc", "zstandard")


def check_remote(remote: str) -> None:
    """A Spark Connect URL (BadInput otherwise) whose server answers (InfrastructureError otherwise)."""
    m = _REMOTE.match(remote)
    if not m:
        raise BadInput(f"bad Spark Connect URL {remote!r} (sc://host:port)")
    host, port = m["host"].strip("[]"), int(m["port"] or CONNECT_PORT)
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            return
    except OSError as e:
        raise InfrastructureError(
            f"the Spark Connect server {remote} does not answer ({e.strerror or e})"
        ) from None


def remote_session(remote: str) -> SparkSession:
    """A Spark Connect session: the checker's jobs run on the server; no JVM in this process."""
    from pyspark.sql import SparkSession

    check_remote(remote)
    missing = []
    for module in CONNECT_CLIENT:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise InfrastructureError(
            f"the Spark Connect client needs {', '.join(missing)} (pip install 'pyspark[connect]')"
        )
    log.info("connecting to Spark (%s)", remote)
    session: SparkSession = SparkSession.builder.remote(remote).getOrCreate()
    for key, value in (
        ("spark.sql.session.timeZone", "UTC"),
        ("spark.sql.parquet.compression.codec", "zstd"),
    ):
        session.conf.set(key, value)
    return session


def get_session(
    master: str | None = None, driver_memory: str | None = None, remote: str | None = None
) -> SparkSession:
    """The active SparkSession, or a new one configured for the checker (on `remote`, a Spark
    Connect server, when given)."""
    from pyspark.sql import SparkSession

    remote = remote or os.environ.get("STRANDLINE_SPARK_REMOTE") or None
    if remote:
        return remote_session(remote)

    # The active session is per thread; the instantiated one is the process's (checks may run in a
    # thread of their own).
    active = SparkSession.getActiveSession() or getattr(SparkSession, "_instantiatedSession", None)
    if active is not None:
        return active
    master = master or os.environ.get("STRANDLINE_SPARK_MASTER") or DEFAULT_MASTER
    check_master(master)
    check_java()
    # Workers (if any Python ever runs there) use this interpreter, not whatever `python3` is.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    local = master.startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    java_opts = f"-Dlog4j.configurationFile=file:{LOG4J_CONFIG} {JVM_OPTIONS}"
    # Extra JVM options, after ours (so -XX:TieredStopAtLevel=4 brings back the C2 compiler).
    java_opts += " " + os.environ.get("STRANDLINE_SPARK_JAVA_OPTS", "")
    if local and spark_cds.enabled():
        archive = spark_cds.archive_path(java_opts)
        cds_opts, writing = spark_cds.java_options(archive)
        try:
            session = _start_session(master, driver_memory, local, f"{java_opts} {cds_opts}", java_opts)
        except Exception:
            if writing is not None or not cds_opts:
                raise
            spark_cds.discard(archive)
            session = _start_session(master, driver_memory, local, java_opts, java_opts)
        if writing is not None:
            spark_cds.publish_at_exit(session, writing, archive)
        return session
    return _start_session(master, driver_memory, local, java_opts, java_opts)


def _start_session(
    master: str, driver_memory: str | None, local: bool, driver_opts: str, executor_opts: str
) -> SparkSession:
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("strandline-checker")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", driver_opts)
        .config("spark.executor.extraJavaOptions", executor_opts)
        .config(
            "spark.sql.shuffle.partitions",
            os.environ.get("STRANDLINE_SPARK_SHUFFLE_PARTITIONS") or str(shuffle_partitions(master)),
        )
        .config("spark.sql.adaptive.enabled", os.environ.get("STRANDLINE_SPARK_AQE", "true"))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.compression.codec", "zstd")
        .config("spark.sql.files.maxPartitionBytes", str(64 << 20))
        # A check keeps a frame only to read it once or twice more: compressing its cached columns
        # cost more CPU than reading them back saved (at 2,000,000 operations the by-value
        # aggregate took twice as long kept compressed, half as much again kept plain).
        .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
        # A check's plans generate some hundred classes; the default cache (100) would compile
        # them again on every later check of the session.
        .config("spark.sql.codegen.cache.maxEntries", "2000")
        .config("spark.driver.memory", driver_memory or os.environ.get("STRANDLINE_SPARK_MEMORY", "2g"))
    )
    if not local:
        # Executors on a cluster: their memory (each worker must offer at least this much).
        builder = builder.config(
            "spark.executor.memory", os.environ.get("STRANDLINE_SPARK_EXECUTOR_MEMORY", "1g")
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


def read_form(spark: SparkSession, path: str) -> DataFrame:
    """One dataset of a history's Parquet form: the Arrow conversion's (`operations.parquet`,
    `reads.parquet`) with its known schema (inferring it would cost a job), others inferred."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from checkers.parquet_schema import OPERATIONS_SCHEMA, READS_SCHEMA

    name = path.rstrip("/").rsplit("/", 1)[-1]
    known = {"operations.parquet": OPERATIONS_SCHEMA, "reads.parquet": READS_SCHEMA}.get(name)
    if known is None:
        return spark.read.parquet(path)
    return spark.read.schema(from_arrow_schema(known)).parquet(path)


def broadcast(df: DataFrame) -> DataFrame:
    """df as the small side of a join: broadcast, unless the check is small (`size_for`: one
    partition, where a broadcast would only add a job)."""
    from pyspark.sql import functions as F

    if df.sparkSession.conf.get("spark.sql.autoBroadcastJoinThreshold", None) == "-1":
        return df
    return F.broadcast(df)


class Persisted:
    """The frames a check reads more than once, kept in memory (spilling to disk) until `release`."""

    def __init__(self) -> None:
        self.frames: list[DataFrame] = []

    def keep(self, df: DataFrame) -> DataFrame:
        from pyspark import StorageLevel

        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self.frames.append(df)
        return df

    def release(self) -> None:
        for df in self.frames:
            df.unpersist()
