"""Kafka error codes, by name, as plain ints (Kafka's numbers, as on the wire): the one place.

The numbers come from kio's `ErrorCode` (the protocol library the broker speaks with), read once at
import: the request path compares and returns plain module-level ints, as fast as literals.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

NONE = int(ErrorCode.none)
OFFSET_OUT_OF_RANGE = int(ErrorCode.offset_out_of_range)
CORRUPT_MESSAGE = int(ErrorCode.corrupt_message)
UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.unknown_topic_or_partition)
LEADER_NOT_AVAILABLE = int(ErrorCode.leader_not_available)
NOT_LEADER_OR_FOLLOWER = int(ErrorCode.not_leader_or_follower)
REQUEST_TIMED_OUT = int(ErrorCode.request_timed_out)
MESSAGE_TOO_LARGE = int(ErrorCode.message_too_large)
OFFSET_METADATA_TOO_LARGE = int(ErrorCode.offset_metadata_too_large)
COORDINATOR_NOT_AVAILABLE = int(ErrorCode.coordinator_not_available)
NOT_COORDINATOR = int(ErrorCode.not_coordinator)
INVALID_TOPIC_EXCEPTION = int(ErrorCode.invalid_topic_exception)
NOT_ENOUGH_REPLICAS = int(ErrorCode.not_enough_replicas)
NOT_ENOUGH_REPLICAS_AFTER_APPEND = int(ErrorCode.not_enough_replicas_after_append)
INVALID_REQUIRED_ACKS = int(ErrorCode.invalid_required_acks)
ILLEGAL_GENERATION = int(ErrorCode.illegal_generation)
INCONSISTENT_GROUP_PROTOCOL = int(ErrorCode.inconsistent_group_protocol)
INVALID_GROUP_ID = int(ErrorCode.invalid_group_id)
UNKNOWN_MEMBER_ID = int(ErrorCode.unknown_member_id)
INVALID_SESSION_TIMEOUT = int(ErrorCode.invalid_session_timeout)
REBALANCE_IN_PROGRESS = int(ErrorCode.rebalance_in_progress)
TOPIC_ALREADY_EXISTS = int(ErrorCode.topic_already_exists)
INVALID_PARTITIONS = int(ErrorCode.invalid_partitions)
INVALID_REPLICATION_FACTOR = int(ErrorCode.invalid_replication_factor)
INVALID_REPLICA_ASSIGNMENT = int(ErrorCode.invalid_replica_assignment)
OUT_OF_ORDER_SEQUENCE_NUMBER = int(ErrorCode.out_of_order_sequence_number)
INVALID_PRODUCER_EPOCH = int(ErrorCode.invalid_producer_epoch)
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = int(ErrorCode.transactional_id_authorization_failed)
CLUSTER_AUTHORIZATION_FAILED = int(ErrorCode.cluster_authorization_failed)
KAFKA_STORAGE_ERROR = int(ErrorCode.kafka_storage_error)
FENCED_LEADER_EPOCH = int(ErrorCode.fenced_leader_epoch)
UNKNOWN_LEADER_EPOCH = int(ErrorCode.unknown_leader_epoch)
UNKNOWN_TOPIC_ID = int(ErrorCode.unknown_topic_id)
COORDINATOR_LOAD_IN_PROGRESS = int(ErrorCode.coordinator_load_in_progress)
UNSUPPORTED_VERSION = int(ErrorCode.unsupported_version)
INVALID_TXN_STATE = int(ErrorCode.invalid_txn_state)
INVALID_PRODUCER_ID_MAPPING = int(ErrorCode.invalid_producer_id_mapping)
INVALID_TRANSACTION_TIMEOUT = int(ErrorCode.invalid_transaction_timeout)
CONCURRENT_TRANSACTIONS = int(ErrorCode.concurrent_transactions)
PRODUCER_FENCED = int(ErrorCode.producer_fenced)
TRANSACTIONAL_ID_NOT_FOUND = int(ErrorCode.transactional_id_not_found)
OPERATION_NOT_ATTEMPTED = int(ErrorCode.operation_not_attempted)
