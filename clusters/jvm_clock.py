"""Does a JVM read its wall clock through libfaketime? Asked of a node before a JVM role starts,
so the clock fault against a Java system (Kafka) is proven to work, or refused with the reason.

The proof: the role's own `java`, started with the faketime preload and a clock file one hour
ahead, prints HotSpot's unified-logging timestamps (`-Xlog:os=info:stdout:utctime`), which come
from the same clock call as `System.currentTimeMillis`; they must be about an hour ahead of the
node's clock. A JVM that ignores the preload, or a preload that breaks the JVM, fails the proof.
"""

from __future__ import annotations

import datetime
import re
import shlex

from clusters.node import Node

AHEAD_S = 3600
TOLERANCE_S = 300  # a slow start on a loaded machine still lands well within this
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.\d+\+0000\]", re.MULTILINE)


def is_java(command: str) -> bool:
    """Is this (rendered) start command's program a JVM (`java`, `/usr/lib/jvm/.../bin/java`)?"""
    words = shlex.split(command)
    return bool(words) and words[0].rsplit("/", 1)[-1] == "java"


def refusal(node: Node, java: str, env: dict[str, str], clock_file: str) -> str | None:
    """Why the JVM `java` on `node` does not follow a libfaketime clock file (None: it does).
    `env` is the role's faketime environment; `clock_file` a scratch path for the proof."""
    script = (
        f'printf "+{AHEAD_S}s\\n" > {shlex.quote(clock_file)} && env -u LD_PRELOAD date -u +%s && '
        f"{shlex.quote(java)} -Xlog:os=info:stdout:utctime -version; rm -f {shlex.quote(clock_file)}"
    )
    proof_env = {**env, "FAKETIME_TIMESTAMP_FILE": clock_file}
    done = node.exec(["sh", "-c", script], timeout=120, check=False, env=proof_env)
    lines = done.stdout.strip().splitlines()
    stamp = STAMP.search(done.stdout)
    if not lines or not lines[0].strip().isdigit() or stamp is None:
        last = (done.stderr.strip() or done.stdout.strip() or f"exit {done.exit_code}").splitlines()[-1]
        return f"{java} printed no timestamp under the faketime preload on {node.name} ({last[:200]})"
    real = int(lines[0])
    seen = datetime.datetime.fromisoformat(stamp.group(1)).replace(tzinfo=datetime.UTC).timestamp()
    ahead = seen - real
    if abs(ahead - AHEAD_S) > TOLERANCE_S:
        return (
            f"{java} on {node.name} does not read its wall clock through libfaketime: with a clock "
            f"file {AHEAD_S}s ahead it was {ahead:+.0f}s off"
        )
    return None
