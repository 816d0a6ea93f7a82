"""Small files to and from a node through the Node protocol (any backend): a rendered config
written onto it, the last lines of a log read back for an error message."""

from __future__ import annotations

import tempfile
from pathlib import Path

from clusters.node import Node
from foundation.errors import InfrastructureError


def put_text(node: Node, text: str, remote_path: str) -> None:
    """Write `text` to `remote_path` on the node (through a local file and `upload`)."""
    with tempfile.NamedTemporaryFile("w", suffix=".tmp", delete=False) as f:
        f.write(text)
    try:
        node.upload(f.name, remote_path)
    finally:
        Path(f.name).unlink(missing_ok=True)


def log_tail(node: Node, remote_path: str, lines: int = 8) -> str:
    """The last non-empty lines of a log on the node, joined with ` | ` (for one-line errors)."""
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(tmp) / "log"
        try:
            node.download(remote_path, str(local))
            text = local.read_text(errors="replace")
        except (InfrastructureError, OSError):
            return "(no log)"
    tail = [line for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(tail) if tail else "(empty log)"
