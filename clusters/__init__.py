"""Nodes (netns, docker, ssh) and systems under test (own broker + ZooKeeper, Apache Kafka)."""
