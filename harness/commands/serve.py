"""`strandline serve`: browse stored runs and campaigns in a web browser."""

from __future__ import annotations

import argparse
import signal
from pathlib import Path

from rich.console import Console

from foundation.errors import BadInput
from harness.serve import make_server


def main(args: argparse.Namespace) -> int:
    store = Path(args.store)
    if not store.is_dir():
        raise BadInput(f"no results store at {store} (run a test first, or pass --store DIR)")
    if not 0 <= args.port <= 65535:
        raise BadInput(f"--port must be between 0 and 65535, got {args.port}")
    try:
        server = make_server(store, args.bind, args.port)
    except OSError as e:
        raise BadInput(f"cannot listen on {args.bind}:{args.port}: {e.strerror}") from None
    host, port = str(server.server_address[0]), int(server.server_address[1])
    # SIGTERM (a service manager's stop) ends it as Ctrl-C does: a clean stop, exit 0.
    previous = signal.signal(signal.SIGTERM, _stop)
    try:
        Console(stderr=True).print(
            f"serving {store} on http://{host}:{port}/ (Ctrl-C to stop)", highlight=False
        )
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.server_close()
    return 0


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
