"""The broker's own errors: it is deployed alone to the nodes, so it imports nothing of the harness.

The exit codes match the harness contract (docs/exit-codes.md): 2 for a config the operator must
fix, 4 when the machine around the broker failed (ZooKeeper out of reach).
"""

from __future__ import annotations


class BrokerError(Exception):
    """An error the broker reports in one line before it exits with `exit_code`."""

    exit_code = 4


class BadBrokerConfig(BrokerError):
    """A properties file the broker cannot run with: the operator's to fix."""

    exit_code = 2


class BrokerUnavailable(BrokerError):
    """Something the broker needs (ZooKeeper) is out of reach."""

    exit_code = 4
