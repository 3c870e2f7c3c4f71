"""SnapshotStore prices nodes with the bundled catalog unless the topic carries an InstanceTypeCatalog."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from ebb.adapters.snapshot_store import SnapshotStore
from ebb.contracts import ClusterObject
from ebb.core.cluster import ClusterView

NOW = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)


def node(name: str, instance_type: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "creationTimestamp": "2026-11-01T00:00:00Z",
                         "labels": {"karpenter.sh/nodepool": "general", "karpenter.sh/initialized": "true",
                                    "karpenter.sh/capacity-type": "on-demand",
                                    "node.kubernetes.io/instance-type": instance_type,
                                    "topology.kubernetes.io/zone": "us-east-1a"}},
            "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                       "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"}}}


def catalog(price: float) -> dict[str, Any]:
    return {"apiVersion": "ebb.sh/v1", "kind": "InstanceTypeCatalog", "metadata": {"name": "mine"},
            "spec": {"instanceTypes": [{"name": "m5.large", "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                                        "offerings": [{"zone": "us-east-1a", "capacityType": "on-demand",
                                                       "price": price, "available": True}]}]}}


def put(store: SnapshotStore, doc: dict[str, Any]) -> None:
    store.apply(ClusterObject(kind=doc["kind"], namespace="", name=doc["metadata"]["name"], resource_version="1",
                              object=doc))


def test_the_bundled_catalog_prices_nodes_by_default() -> None:
    store = SnapshotStore()
    put(store, node("a", "m5.large"))
    view = ClusterView.build(store.snapshot(), NOW)
    assert view.price_known["a"]
    assert 0.05 < view.price["a"] < 0.5  # the m5.large on-demand list price, ~0.096/h


def test_a_catalog_object_takes_precedence_and_an_empty_catalog_means_none() -> None:
    store = SnapshotStore()
    put(store, node("a", "m5.large"))
    put(store, catalog(1.234))
    assert ClusterView.build(store.snapshot(), NOW).price["a"] == 1.234
    bare = SnapshotStore(bundled_catalog=[])
    put(bare, node("a", "m5.large"))
    assert not ClusterView.build(bare.snapshot(), NOW).price_known["a"]
