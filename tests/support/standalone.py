"""A standalone own broker process (no ZooKeeper) on a free local port, for wire-level tests."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from clusters.local import REPO_ROOT
from clusters.ports import free_port, port_open


@contextmanager
def standalone_broker(base: Path, extra_properties: str = "") -> Iterator[int]:
    """Start `python -m broker` with its data and log under `base`; yields its port; killed after."""
    port = free_port()
    config = base / "server.properties"
    config.write_text(
        f"broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={base / 'data'}\n{extra_properties}"
    )
    with open(base / "broker.log", "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "broker", "--config", str(config)], cwd=REPO_ROOT, stdout=out, stderr=out
        )
    try:
        deadline = time.monotonic() + 30
        while not port_open("127.0.0.1", port):
            assert proc.poll() is None, (base / "broker.log").read_text()
            assert time.monotonic() < deadline, "broker did not start"
            time.sleep(0.05)
        yield port
        assert proc.poll() is None, "the broker died"
    finally:
        proc.kill()
        proc.wait(10)
