"""The provisioner's decisions (``ebb.core.provisioning``): what launches for a batch of Pending pods."""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.provisioning import batch_wait, launches
from tests.kit.builders import node, nodepool, pod, snapshot


def waiting(name: str, cpu: str, memory: str = "128Mi", **kw: Any) -> dict[str, Any]:
    return pod(name, None, cpu=cpu, memory=memory, phase="Pending", **kw)


def startup_tainted(pool: dict[str, Any], *taints: dict[str, str]) -> dict[str, Any]:
    """The NodePool with startup taints in its template."""
    pool["spec"]["template"]["spec"]["startupTaints"] = list(taints)
    return pool


def summary(docs: list[Any], in_flight: tuple[str, ...] = ()) -> list[tuple[str, str, int]]:
    snap = snapshot(*docs)
    plan = launches(snap, [p for p in snap.pods if p.node_name is None], in_flight=in_flight)
    return sorted((n.nodepool, n.instance_types[0], len(n.pods)) for n in plan.launches)


@pytest.mark.parametrize(("docs", "in_flight", "expected"), [
    # nothing pending: nothing launches
    ([nodepool(), node("a"), pod("p", "a")], (), []),
    # fits on the existing node (2 cpu, 100m used): nothing launches
    ([nodepool(), node("a"), pod("p", "a"), waiting("w", "1")], (), []),
    # fits nowhere: one node of the cheapest type that holds it (t3.medium: 2 cpu, 4Gi)
    ([nodepool(), waiting("w", "1500m")], (), [("default", "t3.medium", 1)]),
    # three 1.5-cpu pods: the simulator packs them onto one claim while one of its types holds them all
    # (Karpenter's bin packing, not the cheapest sum): an m5.2xlarge (8 cpu)
    ([nodepool(), waiting("w1", "1500m"), waiting("w2", "1500m"), waiting("w3", "1500m")], (),
     [("default", "m5.2xlarge", 3)]),
    # memory decides the type: 12Gi needs an r5.large (16Gi)
    ([nodepool(), waiting("w", "500m", memory="12Gi")], (), [("default", "r5.large", 1)]),
    # a node still launching counts as capacity: the pod waits for it, nothing more launches
    ([nodepool(), node("booting", ready=False, initialized=False), waiting("w", "1")], ("booting",), []),
    # ... tainted not-ready as a kubelet registers it (Karpenter ignores its ephemeral taints while it boots)
    ([nodepool(), node("booting", ready=False, initialized=False,
                       taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]),
      waiting("w", "1")], ("booting",), []),
    # ... and its NodePool's startup taints, which someone removes once it runs
    ([startup_tainted(nodepool(), {"key": "example.com/agent", "effect": "NoSchedule"}),
      node("booting", ready=False, initialized=False, taints=[{"key": "example.com/agent", "effect": "NoSchedule"}]),
      waiting("w", "1")], ("booting",), []),
    # but not a taint that stays: the pod cannot go there, a node launches
    ([nodepool(), node("booting", ready=False, initialized=False,
                       taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
      waiting("w", "1")], ("booting",), [("default", "t3.medium", 1)]),
    # ... unless it is not counted as in flight (a NotReady node is no capacity for kube-scheduler)
    ([nodepool(), node("booting", ready=False, initialized=False), waiting("w", "1")], (),
     [("default", "t3.medium", 1)]),
    # the heavier NodePool first, whatever the price
    ([nodepool("cheap"), nodepool("preferred", weight=50,
                                  requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                                 "values": ["m5.large"]}]), waiting("w", "1")], (),
     [("preferred", "m5.large", 1)]),
    # a DaemonSet pod or a finished pod never needs a node
    ([nodepool(), waiting("done", "1", owner=("Job", "j")) | {"status": {"phase": "Succeeded"}}], (), []),
])
def test_launches(docs: list[Any], in_flight: tuple[str, ...], expected: list[tuple[str, str, int]]) -> None:
    assert summary(docs, in_flight) == expected


def test_limits_stop_launches_and_say_why() -> None:
    pool = nodepool()
    pool["spec"]["limits"] = {"cpu": "2"}  # one 2-cpu node at most
    snap = snapshot(pool, waiting("w1", "1500m"), waiting("w2", "1500m"))
    plan = launches(snap, [p for p in snap.pods if p.node_name is None])
    assert len(plan.launches) == 1
    assert len(plan.unschedulable) == 1


def test_expected_names_the_in_flight_node() -> None:
    snap = snapshot(nodepool(), node("booting", ready=False, initialized=False), waiting("w", "1"))
    plan = launches(snap, [p for p in snap.pods if p.node_name is None], in_flight=["booting"])
    assert plan.expected == {"default/w": "booting"}
    assert plan.unschedulable == {}


@pytest.mark.parametrize(("opened", "last", "now", "left"), [
    (0.0, 0.0, 0.0, 1.0),     # just opened: wait 1 s for more
    (0.0, 0.0, 1.0, 0.0),     # idle for 1 s: closed
    (0.0, 0.5, 1.0, 0.5),     # a pod came at 0.5 s: 1 s idle from then
    (0.0, 9.5, 9.6, 0.4),     # pods keep coming: the 10 s maximum decides
    (0.0, 12.0, 12.0, 0.0),   # past the maximum: closed
])
def test_batch_wait(opened: float, last: float, now: float, left: float) -> None:
    assert batch_wait(opened, last, now) == pytest.approx(left)
