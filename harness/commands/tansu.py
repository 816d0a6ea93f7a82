"""`strandline tansu fetch`: the tansu broker (systems/tansu-*.toml) built once with cargo into the
cache (clusters/tansu_build.py). Prints the binary's path as its last line; a binary built before
is found at once, without cargo. A first build is long: cargo's output goes to stderr as it comes.
"""

from __future__ import annotations

import argparse
import sys

from clusters import tansu_build


def main(args: argparse.Namespace) -> int:
    version = args.version or tansu_build.VERSION
    if version != tansu_build.VERSION:
        from foundation.errors import BadInput

        raise BadInput(
            f"strandline builds tansu {tansu_build.VERSION} (the release its definitions run), not {version}"
        )

    def progress(line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    print(tansu_build.fetch(version, progress=progress))
    return 0
