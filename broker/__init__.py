"""The project's own Kafka-compatible broker: the system under test that runs everywhere."""
