"""The simulated ZooKeeper: sessions that expire, registrations, the controller and its
reconciliation (broker.controller.reconcile), partition state writes with compare-and-set."""

from __future__ import annotations

from dataclasses import replace

from broker.controller import ElectLeader, RemoveFromIsr, offline_partitions, reconcile
from broker.partition_state import LeaderAndIsr, PartitionState
from broker.replication import WriteIsr
from explore.schedule import PARTITION, TOPIC
from explore.state import SimBroker
from explore.world import World

KEY = (TOPIC, PARTITION)


class ZooKeeper(World):
    def session_check(self, b: SimBroker) -> None:
        """Whether b heartbeats changed: start or cancel the expiry of its session."""
        token = self._expiry_token.get(b.id, 0) + 1
        self._expiry_token[b.id] = token
        if b.id in self.registered and not self.zk_connected(b):
            t = self.settings.session_timeout_ms
            self.after(t * self.rng.uniform(2 / 3, 1.0) + 500 * self.rng.random(), self._expire, b, token)

    def _expire(self, b: SimBroker, token: int) -> None:
        if self._expiry_token.get(b.id) != token or self.zk_connected(b):
            return
        self.note(f"zk: session of {b.name} expired")
        self.deregister(b)

    def register(self, b: SimBroker) -> None:
        self.registered.add(b.id)
        b.registered_zxid = self.next_zxid()
        self.note(f"zk: {b.name} registered")
        if self.controller < 0:
            self._become_controller(b)
        self.reconcile_soon()
        if self.now < b.watching_from:
            self.broker_after(b, b.watching_from - self.now, self.notify, b)
        else:
            self.notify(b)

    def deregister(self, b: SimBroker) -> None:
        self.registered.discard(b.id)
        if self.controller == b.id:
            self.controller = -1
            contenders = sorted(i for i in self.registered if self.zk_connected(self.brokers[i]))
            if contenders:
                self._become_controller(self.brokers[self.rng.choice(contenders)])
        self.reconcile_soon()

    def _become_controller(self, b: SimBroker) -> None:
        self.controller = b.id
        self.controller_epoch += 1
        self.note(f"zk: {b.name} is controller (epoch {self.controller_epoch})")

    def reconcile_soon(self) -> None:
        if not self._reconcile_pending:
            self._reconcile_pending = True
            self.after(2.0 + self._delay(), self._reconcile)

    def _reconcile(self) -> None:
        """The controller's pass: broker.controller.reconcile on what ZooKeeper holds."""
        self._reconcile_pending = False
        if self.controller < 0:
            return
        controller = self.brokers[self.controller]
        if not self.zk_connected(controller):
            return
        live = set(self.registered)
        assignments = {TOPIC: {PARTITION: self.replicas}}
        st = self.zk_state
        states = {KEY: st} if st else {}
        log_ends = None
        if self.settings.election_policy == "longest-log":
            offline = offline_partitions(assignments, states, live)
            log_ends = {
                key: {r: self.brokers[r].log.log_end_offset for r in candidates if self.brokers[r].up}
                for key, candidates in offline.items()
            }
        for action in reconcile(
            assignments=assignments,
            states=states,
            live=live,
            settings=self.settings,
            log_ends=log_ends,
            registered={i: self.brokers[i].registered_zxid for i in live},
        ):
            if isinstance(action, RemoveFromIsr):
                self.note(
                    f"controller: {list(action.removed)} gone, "
                    f"isr {list(action.state.isr)}, elr {list(action.state.elr)}"
                )
            elif isinstance(action, ElectLeader):
                elected = action.state
                self.note(
                    f"controller: {'unclean' if action.unclean else 'clean'} election of "
                    f"{elected.leader} (epoch {elected.leader_epoch}, isr {list(elected.isr)}"
                    + (f", elr {list(elected.elr)})" if elected.elr else ")")
                )
            self.write_state(self._written(action.state))

    def _written(self, new: LeaderAndIsr) -> PartitionState:
        """The partition state once this controller wrote `new` (on the version it replaces; -1:
        it created it), as broker.zookeeper.controller writes it."""
        return PartitionState(
            new.leader,
            new.leader_epoch,
            new.isr,
            new.zk_version + 1,
            new.elr,
            replicas=self.replicas,
            controller_epoch=self.controller_epoch,
        )

    def write_state(self, state: PartitionState) -> None:
        state = replace(state, written=self.next_zxid())
        self.zk_state = state
        self.note(
            f"zk: state leader {state.leader} epoch {state.leader_epoch} isr {list(state.isr)} v{state.zk_version}"
        )
        for b in self.brokers.values():
            if self.zk_connected(b) and self.now >= b.watching_from:
                self.broker_after(b, self._delay(), self.apply_state, b, state)

    def notify(self, b: SimBroker) -> None:
        """b (re)connected or resumed: its watches deliver the current state."""
        if self.zk_state is not None and self.zk_connected(b):
            self.broker_after(b, self._delay(), self.apply_state, b, self.zk_state)

    def write_isr(self, b: SimBroker, action: WriteIsr) -> None:
        """The leader's compare-and-set of the ISR (broker.zookeeper.cluster.ZkCluster.write_isr)."""
        inc = b.incarnation

        def attempt() -> None:
            st = self.zk_state
            ok = (
                self.zk_connected(b)
                and b.incarnation == inc
                and st is not None
                and st.zk_version == action.state.zk_version
            )
            version = None
            if ok and st is not None:
                version = st.zk_version + 1
                self.note(f"zk: {b.name} writes isr {list(action.state.isr)} ({action.reason})")
                self.write_state(st.after_write(action.state, version))
            self.broker_after(b, self._delay(), self._isr_written, b, action, version)

        self.after(self._delay(), attempt)

    def _isr_written(self, b: SimBroker, action: WriteIsr, version: int | None) -> None:
        """The leader hears how its ISR write went (broker.replica_manager's _write_isr)."""
        b.state, actions = b.replica.on_isr_written(b.state, action.state, version)
        self.run_actions(b, actions)
