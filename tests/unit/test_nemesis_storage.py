"""The `storage` fault family's decisions, on fakes: `--nemesis all` deals it only to a system with
a role of kind = "s3"; a bare `storage` draws one of the four object-store faults with its
parameters; bad parameters are refused in one line naming the fault."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from clusters.sut import StoreProxy
from foundation.errors import BadInput
from nemesis import build_nemesis
from nemesis.packages import PACKAGES
from nemesis.packages.base import PlanEnv
from tests.support.nemesis_fakes import FakeSut, cluster, config


class StoreSut(FakeSut):
    def store_proxies(self) -> list[StoreProxy]:
        return [StoreProxy("st1", "storage", "/st1/s3-proxy/rules.json", "/st1/s3-proxy/stats.json")]


def groups(nem: Any) -> set[str]:
    return {"+".join(f"{n}:{q}" if q else n for n, q in g) for g, _ in nem.mix()}


def test_all_deals_storage_faults_only_where_a_role_is_an_object_store(tmp_path: Path) -> None:
    names = ["n1", "n2", "n3"]
    fronted = build_nemesis(
        config(nemesis=("all",)), cluster(3, StoreSut(names)), None, random.Random(1), tmp_path
    )
    fronted.validate(probe=False)
    assert "storage" in groups(fronted)
    plain = build_nemesis(config(nemesis=("all",)), cluster(3), None, random.Random(1), tmp_path / "plain")
    plain.validate(probe=False)
    assert "storage" not in groups(plain)
    named = build_nemesis(
        config(nemesis=("storage",)), cluster(3), None, random.Random(1), tmp_path / "named"
    )
    with pytest.raises(BadInput, match='storage needs a role of kind = "s3"'):
        named.validate(probe=False)


def test_a_bare_storage_fault_draws_each_kind_with_its_parameters() -> None:
    env = PlanEnv(names=("n1", "n2", "n3"), topics=1, partitions=2, has_leaders=False, has_zookeeper=False)
    rng = random.Random(3)
    steps = [PACKAGES["storage"].plan(rng, env, None) for _ in range(200)]
    assert {s["fault"] for s in steps} == {"slowdown", "latency", "drop-reply", "reset"}
    assert all(s["latency_ms"] in (200, 1000, 3000) for s in steps if s["fault"] == "latency")
    assert all(0 < s["probability"] < 1 for s in steps if s["fault"] != "latency")


@pytest.mark.parametrize(
    ("step", "what"),
    [
        ({"fault": "throttle"}, "fault must be one of"),
        ({"fault": "reset", "probability": 0}, "probability"),
        ({"fault": "latency", "latency_ms": -5}, "latency_ms"),
        ({"fault": "reset", "methods": ["PATCH"]}, "methods"),
        ({"fault": "reset", "role": "broker"}, "not of kind"),
    ],
)
def test_bad_storage_steps_are_refused(tmp_path: Path, step: dict[str, Any], what: str) -> None:
    schedule = ({"do": "storage", **step},)
    nem = build_nemesis(
        config(schedule=schedule), cluster(3, StoreSut(["n1", "n2", "n3"])), None, random.Random(1), tmp_path
    )
    with pytest.raises(BadInput, match=what):
        nem.validate(probe=False)
