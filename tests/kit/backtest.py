"""The back-test's smallest inputs: a two-node cluster with nothing to consolidate, a trace of two bursts of Job
pods, and a churn-control policy for every NodePool. Shared by the back-test's tests (and the subprocess one of
them starts) and the tests of the planner's pass reuse. Pure."""

from __future__ import annotations

from typing import Any

from tests.kit.builders import catalog, node, nodepool, pod

#: a DisruptionPolicy for every NodePool (``*``) that waits 30 minutes before it consolidates
CHURN_CONTROL = {"apiVersion": "ebb.sh/v1", "kind": "DisruptionPolicy", "metadata": {"name": "*"},
                 "spec": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30m",
                          "stabilizationWindow": "30m", "budgets": [{"nodes": "100%"}]}}


def cluster() -> list[dict[str, Any]]:
    """Two t3.medium nodes (the cheapest type, 2 CPU) busy with a web ReplicaSet: nothing to consolidate, no
    room for anything big."""
    docs: list[dict[str, Any]] = [nodepool(), catalog(), node("n0", itype="t3.medium"), node("n1", itype="t3.medium")]
    docs += [pod(f"web-{i}", f"n{i % 2}", cpu="900m", owner=("ReplicaSet", "web-1")) for i in range(4)]
    return docs


def bursts() -> dict[str, Any]:
    """Two bursts of eight 1.5-CPU Job pods, 15 minutes apart, each over after 5 minutes."""
    events: list[dict[str, Any]] = []
    for name, at in (("a", 60), ("b", 960)):
        job = {"kind": "Job", "name": name, "namespace": "batch"}
        events.append({"at": at, "scale": {"workload": job, "replicas": 8,
                                           "template": {"cpu": "1500m", "memory": "1Gi"}}})
        events.append({"at": at + 300, "delete": {"workload": job}})
    return {"apiVersion": "ebb.sh/v1", "kind": "Trace", "name": "two-bursts", "events": events}
