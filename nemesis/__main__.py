"""`python -m nemesis faults` lists the fault catalogue; `python -m nemesis heal [STATE_DIR]` heals
what a crashed controller left behind (the same as the next `strandline run` does at start)."""

from __future__ import annotations

import argparse
import logging
import sys

from nemesis.heal import heal_leftovers
from nemesis.packages import ALIASES, PACKAGES


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nemesis", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("faults", help="the fault names --nemesis accepts")
    heal = sub.add_parser("heal", help="heal faults left by dead controllers")
    heal.add_argument("state_dir", nargs="?", help="default: $STRANDLINE_STATE_DIR or /run/strandline")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.command == "faults":
        for name, package in sorted(PACKAGES.items()):
            qualifiers = ", ".join(package.qualifiers)
            sys.stdout.write(f"{name:14} {package.summary}\n{'':14} qualifiers: {qualifiers}\n")
        sys.stdout.write("aliases: " + ", ".join(f"{a}={b}" for a, b in sorted(ALIASES.items())) + "\n")
        return 0
    healed = heal_leftovers(args.state_dir)
    sys.stdout.write("".join(f"healed {h}\n" for h in healed) or "nothing to heal\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
