"""Errors that the CLI turns into one line and an exit code (the contract in docs/exit-codes.md)."""

from __future__ import annotations

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_BAD_INPUT = 2
EXIT_UNKNOWN = 3
EXIT_INFRASTRUCTURE = 4


class StrandlineError(Exception):
    """An error a person can act on; `exit_code` says which kind of failure it is."""

    exit_code = EXIT_INFRASTRUCTURE


class BadInput(StrandlineError):
    """Malformed config, unknown fault, bad flag value, missing file: the user's to fix."""

    exit_code = EXIT_BAD_INPUT


class InfrastructureError(StrandlineError):
    """The harness or the machine failed: a node unreachable, a process that would not start."""

    exit_code = EXIT_INFRASTRUCTURE
