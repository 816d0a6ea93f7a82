"""The history: its format, writer, reader, operation pairing and process numbers.

A leaf package: workloads and the nemesis write histories with it, checkers and the report read
them with it, and it imports nothing else of the project.
"""
