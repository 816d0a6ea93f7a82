"""`python -m broker --config FILE` / `strandline-broker --config FILE`."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

from broker.errors import BrokerError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="strandline-broker", description="The strandline Kafka-compatible broker"
    )
    parser.add_argument(
        "--config", required=True, type=Path, help="Java-style properties file (Kafka key names)"
    )
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    from broker.app import Broker
    from broker.config import BrokerConfig

    try:
        config = BrokerConfig.load(args.config)
        asyncio.run(Broker(config).run_until_stopped())
    except BrokerError as exc:
        print(f"strandline-broker: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
