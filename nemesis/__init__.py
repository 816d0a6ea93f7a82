"""Faults and fault schedules, written once against the node abstraction."""
