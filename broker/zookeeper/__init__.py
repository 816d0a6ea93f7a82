"""ZooKeeper mode (kazoo), in modules with one job each.

- `layout`: Kafka's ZooKeeper paths and the JSON written there;
- `session`: the kazoo client, its bridge to the asyncio loop, the broker's registration;
- `cache`: the watches that keep brokers, topics and partition states current, pushing states
  into the ReplicaManager;
- `controller`: who is controller, and writing what broker.controller.reconcile decides;
- `topics`: topic creation and producer id blocks;
- `cluster`: ZkCluster, the ClusterMetadata that wires them (and the fetchers) together.
"""

from broker.zookeeper.cluster import ZkCluster

__all__ = ["ZkCluster"]
