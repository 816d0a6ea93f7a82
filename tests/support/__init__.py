"""Helpers shared by several test modules: fakes, run-directory builders, test hosts."""
