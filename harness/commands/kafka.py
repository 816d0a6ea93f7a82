"""`strandline kafka fetch VERSION`: an Apache Kafka release from Maven Central into the cache.

Prints the folder (its `libs/` holds the release's jars and their dependencies) as its last line;
a release fetched before is found at once, with no network. Progress goes to stderr, since a
first fetch downloads some 50 MB.
"""

from __future__ import annotations

import argparse
import sys
import time

from clusters import kafka_release


def main(args: argparse.Namespace) -> int:
    version = kafka_release.check_version(args.version)
    started = time.monotonic()

    def progress(line: str) -> None:
        sys.stderr.write(f"\r{line[:150]:<150}")
        sys.stderr.flush()

    already = kafka_release.fetched(version) is not None
    folder = kafka_release.fetch(version, progress=progress)
    if not already:
        sys.stderr.write(f"\rKafka {version} fetched in {time.monotonic() - started:.1f}s{' ' * 120}\n")
    print(folder)
    return 0
