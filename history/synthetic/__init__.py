"""Synthetic histories, for the checkers' tests and the checker benchmark (`strandline bench checker`).

`generator` is the one simulator: a correct system with anomalies planted into it, one clean
occurrence each (`generate` streams millions of lines to a file, `generate_ops` gives a few hundred
in memory); `kinds` lists what it can plant. Nothing here runs in a real test. Histories written
by hand and the planted transactional histories are the tests' own (tests/support/history_builder.py,
tests/support/txn_histories.py): no command uses them.
"""
