"""Processes and faults in the simulation: start, kill, restart, pause, power loss, network cuts,
clock jumps, and the schedule's steps that apply them (targets resolved as the nemesis does)."""

from __future__ import annotations

import random

from broker.replication import PartitionReplica
from explore.schedule import Step, describe
from explore.state import FiredStep, SimBroker
from explore.world import CONNECT_REFUSED, ZK, World


class Processes(World):
    # --- processes: start, kill, restart, pause -----------------------------------------------
    def boot(self) -> None:
        """The cluster before the test: every broker up and registered, the partition created."""
        for b in self.brokers.values():
            self._started(b, booted=True)
        self.start_producers()

    def _started(self, b: SimBroker, booted: bool = False) -> None:
        b.up, b.paused = True, False
        b.incarnation += 1
        b.held.clear()
        b.log.recover()
        replica = b.replica = PartitionReplica(
            b.id, self.settings.lag_time_max_ms, elr_min_insync=self.settings.elr_min_insync
        )
        replica.log_end_offset = b.log.log_end_offset
        replica.high_watermark = min(b.hw_checkpoint, b.log.log_end_offset)
        b.state, b.follower, b.waiters, b.parked = None, None, [], []
        b.pending, b.watchdog_armed = None, False
        b.fetch_gen += 1
        if booted:
            b.watching_from = self.now
        else:
            low, high = self.settings.watch_setup_ms
            b.watching_from = self.now + self.rng.uniform(low, high)
        self.note(f"{b.name}: started, LEO {b.log.log_end_offset}, checkpointed HW {b.hw_checkpoint}")
        self.broker_after(b, self.settings.hw_checkpoint_interval_ms * self.rng.random(), self.checkpoint, b)
        if not self.cut(b.name, ZK):
            self.register(b)
        self.session_check(b)

    def startup_delay(self) -> float:
        """How long brokers started together take to serve: one draw per step (they start in
        parallel, as the nemesis starts them), plus up to 200 ms each."""
        low, high = self.settings.startup_ms
        return self.rng.uniform(low, high)

    def start(self, b: SimBroker, base_ms: float | None = None) -> None:
        if b.up:
            return
        delay = (self.startup_delay() if base_ms is None else base_ms) + self.rng.uniform(0.0, 200.0)
        inc = b.incarnation

        def come_up() -> None:
            if not b.up and b.incarnation == inc:
                self._started(b)

        self.after(delay, come_up)

    def kill(self, b: SimBroker, power_loss: bool = False) -> None:
        if not b.up:
            return
        b.up, b.paused = False, False  # SIGKILL ends a frozen process too
        b.incarnation += 1
        for waiter in b.waiters:  # the process is gone: its connections close at once
            waiter.reply(CONNECT_REFUSED, -1)
        b.waiters, b.parked, b.held = [], [], []
        self.stop_following(b)
        if power_loss:
            lost = b.log.power_loss()
            self.note(f"{b.name}: power loss dropped {lost} unsynced records")
        self.session_check(b)

    def restart(self, b: SimBroker, base_ms: float | None = None) -> None:
        """SIGTERM: the final HW checkpoint, logs flushed, the session closed; then start."""
        if not b.up:
            return
        if b.paused:
            self.resume(b)
        b.hw_checkpoint = b.replica.high_watermark
        b.log.flush()
        self.kill(b)
        self.deregister(b)
        self.start(b, base_ms)

    def pause(self, b: SimBroker) -> None:
        if b.up and not b.paused:
            b.paused = True
            self.session_check(b)

    def resume(self, b: SimBroker) -> None:
        if not b.up or not b.paused:
            return
        b.paused = False
        self.session_check(b)
        held, b.held = b.held, []
        for fn, args in held:
            self.after(0.0, self.on_broker, b, b.incarnation, fn, *args)
        if b.id not in self.registered and not self.cut(b.name, ZK):
            self.register(b)  # kazoo: session expired, a new one registers again
        else:
            self.notify(b)

    def set_cut(self, a: str, other: str, on: bool) -> None:
        key = frozenset((a, other))
        if on:
            self.cuts.add(key)
        else:
            self.cuts.discard(key)

    def heal_network(self) -> None:
        self.cuts.clear()
        for b in self.brokers.values():
            self.session_check(b)
            if b.up and not b.paused:
                if b.id not in self.registered:
                    self.register(b)
                else:
                    self.notify(b)

    # --- faults -------------------------------------------------------------------------------
    def targets(self, step: Step) -> list[SimBroker]:
        pick = random.Random(step.pick)
        state = self.zk_state
        leader = state.leader if state is not None else -1
        up = [b for b in self.brokers.values() if b.up]
        if step.target == "leader" or step.target == "zk-leader":
            return [self.brokers[leader]] if leader >= 0 else []
        if step.target == "controller":
            return [self.brokers[self.controller]] if self.controller >= 0 else []
        if step.target in ("follower", "followers"):
            isr = state.isr if state is not None else self.replicas
            followers = [self.brokers[r] for r in sorted(isr) if r != leader]
            if step.target == "follower":
                return [pick.choice(followers)] if followers else []
            return followers
        if step.target in ("one", "zk-one"):
            return [pick.choice(list(self.brokers.values()))]
        if step.target == "all":
            return list(self.brokers.values()) if step.fault not in ("start", "resume") else up
        if step.target in self.by_name:
            return [self.by_name[step.target]]
        return []

    def fire(self, step: Step, at_ms: float) -> None:
        hit = self.targets(step)
        if step.fault == "kill":
            for b in hit:
                self.kill(b)
        elif step.fault == "power-loss":
            for b in hit:
                self.kill(b, power_loss=True)
        elif step.fault == "restart":
            base = self.startup_delay()
            for b in hit:
                self.restart(b, base)
        elif step.fault == "pause":
            for b in hit:
                self.pause(b)
        elif step.fault == "partition":
            for b in hit:
                if step.target.startswith("zk-"):
                    self.set_cut(b.name, ZK, True)
                else:
                    for other in self.brokers.values():
                        if other is not b:
                            self.set_cut(b.name, other.name, True)
                self.session_check(b)
        elif step.fault == "clock":
            for b in hit:
                b.clock_offset_ms += step.offset_s * 1000.0
        elif step.fault == "start":
            hit = [b for b in self.brokers.values() if not b.up]
            base = self.startup_delay()
            for b in hit:
                self.start(b, base)
        elif step.fault == "resume":
            hit = [b for b in self.brokers.values() if b.up and b.paused]
            for b in hit:
                self.resume(b)
        elif step.fault == "heal":
            if step.target == "partition":
                hit = sorted(
                    {self.by_name[n] for cut in self.cuts for n in cut if n in self.by_name},
                    key=lambda b: b.id,
                )
                self.heal_network()
            else:
                hit = [b for b in self.brokers.values() if b.clock_offset_ms]
                for b in hit:
                    b.clock_offset_ms = 0.0
        nodes = [b.name for b in hit]
        text = describe(step, nodes)
        self.note(f"fault: {text}")
        self.fired.append(FiredStep(step, at_ms, nodes, text))

    def heal_all(self) -> None:
        for b in self.brokers.values():
            b.clock_offset_ms = 0.0
        self.heal_network()
        base = self.startup_delay()
        for b in self.brokers.values():
            if b.paused:
                self.resume(b)
            elif not b.up:
                self.start(b, base)
