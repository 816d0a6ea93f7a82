"""Client workloads, operation generators and the history journal."""
