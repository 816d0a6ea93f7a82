"""`strandline cluster`: not built yet (see the issue that builds it)."""

from __future__ import annotations

import argparse

from harness.errors import NotImplementedYet


def main(args: argparse.Namespace) -> int:
    raise NotImplementedYet("not implemented yet")
