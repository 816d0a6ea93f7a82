"""Synthetic histories, for the checkers' tests and the checker benchmark (`strandline bench checker`).

`builder` writes histories by hand; `simulate` plays a small correct system in memory and plants
anomalies into it, one clean occurrence each; `stream` writes big histories (millions of lines) with
anomalies planted as it goes; `kinds` lists what can be planted. Nothing here runs in a real test.
"""
