"""The bottom layer: what every other package may use (errors with exit codes, the test configuration)."""
