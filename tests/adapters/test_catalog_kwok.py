"""The InstanceTypeCatalog built from Karpenter's KWOK provider instance types (ebb.adapters.catalog)."""

from __future__ import annotations

from typing import Any

import pytest

from ebb.adapters.catalog import KWOK_OVERHEAD, catalog_from_kwok_instance_types
from ebb.core.snapshot import parse_catalog


def offering(price: float, zone: str, capacity_type: str) -> dict[str, Any]:
    return {"Price": price, "Available": False, "Requirements": [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [capacity_type]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}


GENERIC = {"name": "c-4x-amd64-linux", "architecture": "amd64", "operatingSystems": ["linux"],
           "resources": {"cpu": "4", "memory": "8Gi", "pods": "32"},
           "offerings": [offering(0.1, "test-zone-a", "on-demand"), offering(0.07, "test-zone-a", "spot")]}
AWS_LIKE = {"name": "m5.2xlarge", "architecture": "arm64", "resources": {"cpu": "8", "memory": "32Gi"},
            "offerings": [offering(0.384, "us-west-2a", "on-demand")]}


@pytest.mark.parametrize(("raw", "size", "family", "pods", "arch"), [
    (GENERIC, "4", "c", "32", "amd64"),
    (AWS_LIKE, "2xlarge", "m5", "110", "arm64"),     # the size from the AWS name; the provider's default pods
])
def test_labels_capacity_and_overhead_match_the_provider(raw: dict[str, Any], size: str, family: str, pods: str,
                                                         arch: str) -> None:
    doc = catalog_from_kwok_instance_types([raw])
    (entry,) = doc["spec"]["instanceTypes"]
    assert entry["labels"]["karpenter.kwok.sh/instance-size"] == size
    assert entry["labels"]["karpenter.kwok.sh/instance-family"] == family
    assert entry["labels"]["kubernetes.io/arch"] == arch
    assert entry["capacity"]["pods"] == pods
    assert entry["overhead"] == dict(KWOK_OVERHEAD)


def test_every_offering_is_available_and_parses_as_a_catalog() -> None:
    doc = catalog_from_kwok_instance_types([GENERIC, AWS_LIKE])
    (parsed,) = parse_catalog([doc])
    by_name = {it.name: it for it in parsed.value}
    generic = by_name["c-4x-amd64-linux"]
    assert [(o.zone, o.capacity_type, o.price, o.available) for o in generic.offerings] == [
        ("test-zone-a", "on-demand", 0.1, True), ("test-zone-a", "spot", 0.07, True)]
    assert generic.capacity["cpu"] == 4000 and generic.overhead["cpu"] == 100


@pytest.mark.parametrize(("raw", "message"), [
    ({"resources": {"cpu": "1", "memory": "1Gi"}}, "#0: no name"),
    ({"name": "x", "resources": {"cpu": "1"}}, "x: resources need cpu and memory"),
    ({"name": "x", "resources": {"cpu": "1", "memory": "1Gi"}, "offerings": []}, "x: no offering"),
])
def test_a_malformed_entry_is_named(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        catalog_from_kwok_instance_types([raw])
