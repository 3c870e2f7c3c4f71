"""Small builders for model objects (ebb.core.model) used by the simulator property and checker tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ebb.core.model import (
    CAPACITY_ON_DEMAND,
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_ZONE,
    InstanceType,
    LabelSelector,
    Node,
    Offering,
    Pod,
    PodAffinityTerm,
    SchedulingSpec,
    Taint,
    TopologySpread,
)

Mi = 2**20
Gi = 2**30
OVERHEAD = {"cpu": 100, "memory": 256 * Mi}


def make_type(name: str, cpu: int, mem: int, pods: int, offerings: Sequence[tuple[str, str, float]],
              labels: Mapping[str, str] | None = None) -> InstanceType:
    """`offerings`: (zone, capacity type, price)."""
    return InstanceType(name, {"cpu": cpu, "memory": mem, "pods": pods}, dict(OVERHEAD),
                        tuple(Offering(z, ct, price) for z, ct, price in offerings),
                        dict(labels or {LABEL_ARCH: "amd64"}))


def make_node(name: str, it: InstanceType, zone: str, *, capacity_type: str = CAPACITY_ON_DEMAND,
              pool: str | None = "default", labels: Mapping[str, str] | None = None,
              taints: tuple[Taint, ...] = (), unschedulable: bool = False) -> Node:
    node_labels = {**it.labels, LABEL_HOSTNAME: name, LABEL_INSTANCE_TYPE: it.name, LABEL_ZONE: zone,
                   LABEL_CAPACITY_TYPE: capacity_type, **(labels or {})}
    if pool is not None:
        node_labels[LABEL_NODEPOOL] = pool
    allocatable = {k: v - it.overhead.get(k, 0) for k, v in it.capacity.items()}
    return Node(name, node_labels, {}, taints, allocatable, dict(it.capacity), unschedulable=unschedulable)


def make_pod(name: str, cpu: int = 100, mem: int = 128 * Mi, *, labels: Mapping[str, str] | None = None,
             node: str | None = None, namespace: str = "default", owner_kind: str | None = "ReplicaSet",
             **spec: Any) -> Pod:
    requests = {"cpu": cpu, "memory": mem, "pods": 1}
    return Pod(name, namespace, dict(labels or {}), {}, SchedulingSpec(requests=requests, **spec),
               node_name=node, owner_kind=owner_kind, owner_name=None if owner_kind is None else "owner")


def app_selector(app: str) -> LabelSelector:
    return LabelSelector(match_labels=(("app", app),))


def term(app: str, key: str = LABEL_HOSTNAME) -> PodAffinityTerm:
    return PodAffinityTerm(app_selector(app), key)


def spread(app: str, key: str = LABEL_ZONE, max_skew: int = 1) -> TopologySpread:
    return TopologySpread(max_skew, key, "DoNotSchedule", app_selector(app))
