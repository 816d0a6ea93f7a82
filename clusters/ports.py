"""TCP ports on the controller's side: is a daemon listening yet, and a free port for a local one."""

from __future__ import annotations

import socket


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts a TCP connection at host:port now."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on at this moment."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
