"""Kafka transactions (KIP-98, KIP-890): the coordinator, its replicated state, the markers."""
