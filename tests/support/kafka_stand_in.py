"""A stand-in Kafka distribution: Kafka's layout and scripts, running the own broker with the rendered KRaft settings."""

from __future__ import annotations

import io
import sys
import tarfile
from pathlib import Path

STORAGE_SH = """#!/bin/sh
# stand-in for Kafka's kafka-storage.sh: `format --ignore-formatted -t ID -c CONFIG`
[ "$1" = format ] || { echo "unexpected: $*" >&2; exit 2; }
id=""; config=""
while [ $# -gt 0 ]; do
  case "$1" in -t) id=$2; shift;; -c) config=$2; shift;; esac; shift
done
dir=$(sed -n 's/^log.dirs=//p' "$config")
node=$(sed -n 's/^node.id=//p' "$config")
mkdir -p "$dir"
[ -f "$dir/meta.properties" ] && { echo "already formatted"; exit 0; }
printf 'cluster.id=%s\\nnode.id=%s\\nversion=1\\n' "$id" "$node" > "$dir/meta.properties"
echo "Formatting $dir with metadata.version stand-in"
"""


START_SH = """#!/bin/sh
# stand-in for Kafka's kafka-server-start.sh CONFIG: run the own broker with the same settings
[ -n "$LOG_DIR" ] && [ -n "$KAFKA_HEAP_OPTS" ] || { echo "LOG_DIR/KAFKA_HEAP_OPTS not passed" >&2; exit 2; }
exec {python} "$(dirname "$0")/translate.py" "$1" {zookeeper}
"""


TRANSLATE_PY = """
import os, sys
config, zookeeper = sys.argv[1], sys.argv[2]
kraft = dict(line.split("=", 1) for line in open(config).read().splitlines() if "=" in line and not line.startswith("#"))
assert kraft["process.roles"] == "broker,controller", kraft
keep = ("log.dirs", "num.partitions", "default.replication.factor", "min.insync.replicas",
        "unclean.leader.election.enable", "replica.lag.time.max.ms",
        "replica.high.watermark.checkpoint.interval.ms", "auto.create.topics.enable")
own = {"broker.id": kraft["node.id"], "listeners": kraft["advertised.listeners"],
       "advertised.listeners": kraft["advertised.listeners"], "zookeeper.connect": zookeeper}
own.update({k: kraft[k] for k in keep if k in kraft})
path = os.path.join(os.environ["LOG_DIR"], "own-broker.properties")
with open(path, "w") as f:
    f.write("".join(f"{k}={v}\\n" for k, v in own.items()))
os.execv(sys.executable, [sys.executable, "-m", "broker", "--config", path])
"""


def stand_in_tarball(path: Path, zookeeper_connect: str) -> None:
    """A .tgz laid out like Kafka's (one top-level folder, bin/ inside)."""
    files = {
        "bin/kafka-storage.sh": STORAGE_SH,
        "bin/kafka-server-start.sh": START_SH.replace("{python}", sys.executable).replace(
            "{zookeeper}", zookeeper_connect
        ),
        "bin/translate.py": TRANSLATE_PY,
        "LICENSE": "stand-in distribution for strandline's tests\n",
    }
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"kafka_stand-in/{name}")
            info.size, info.mode = len(data), 0o755
            tar.addfile(info, io.BytesIO(data))
