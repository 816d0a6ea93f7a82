"""The PySpark checker, the reference checker, the replica-log checker, statistics, the verdict."""
