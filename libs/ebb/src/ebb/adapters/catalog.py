"""The bundled instance-type catalog for the services (``ebb plan`` reads the same file, docs/catalog.md).

The cluster-watcher does not publish an ``InstanceTypeCatalog`` (there is no such object in a Karpenter
cluster), so every service that rebuilds the snapshot from ``ebb.cluster.objects`` prices nodes and
replacements with the catalog ebb ships, exactly as ``ebb plan`` does for a dump without one. A catalog
object on the topic (an ``ebb.sh/v1 InstanceTypeCatalog``) takes precedence. Parsed once per process,
with the same YAML reader as ``ebb plan`` input (yaml-rs, about 5x faster than PyYAML on this file).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any, Final

from ebb.core.yaml_documents import parse_yaml

BUNDLED_CATALOG = "aws-us-east-1.yaml"


@functools.cache
def _documents() -> tuple[Any, ...]:
    text = resources.files("ebb.data").joinpath(BUNDLED_CATALOG).read_text(encoding="utf-8")
    return tuple(d for d in parse_yaml(text, BUNDLED_CATALOG) if d)


def bundled_catalog() -> list[Any]:
    """The bundled catalog's documents (parsed once; the caller must not mutate them)."""
    return list(_documents())


#: what Karpenter's KWOK provider reserves on every node it creates (kwok/cloudprovider/helpers.go)
KWOK_OVERHEAD: Final[Mapping[str, str]] = {"cpu": "100m", "memory": "10Mi"}
#: Karpenter's KWOK provider's default pod capacity when a type gives none
KWOK_DEFAULT_PODS: Final = "110"
_AWS_SIZE = re.compile(r"^\w+\.(nano|micro|small|medium|large|\d*xlarge|metal)$")
_FAMILY_DELIMITER = re.compile(r"[.-]")


def _kwok_requirement(requirements: Iterable[Mapping[str, Any]], key: str) -> list[str]:
    return [str(v) for r in requirements if r.get("key") == key and r.get("operator", "In") == "In"
            for v in r.get("values") or []]


def catalog_from_kwok_instance_types(instance_types: Iterable[Mapping[str, Any]],
                                     name: str = "karpenter-kwok") -> dict[str, Any]:
    """An ``ebb.sh/v1 InstanceTypeCatalog`` of the instance types Karpenter's KWOK provider offers (its
    ``instance_types.json`` or the file given by ``INSTANCE_TYPES_FILE_PATH``), with the same capacity,
    overhead, labels and prices that Karpenter plans with, so that ebb prices nodes and chooses
    replacements among exactly the types Karpenter can launch (docs/karpenter.md).

    ValueError naming the entry when one is not an instance type of that format."""
    types: list[dict[str, Any]] = []
    for index, raw in enumerate(instance_types):
        type_name = raw.get("name") if isinstance(raw, Mapping) else None
        if not isinstance(type_name, str) or not type_name:
            raise ValueError(f"instance type #{index}: no name")
        resources = raw.get("resources")
        if not isinstance(resources, Mapping) or "cpu" not in resources or "memory" not in resources:
            raise ValueError(f"instance type {type_name}: resources need cpu and memory")
        cpu, memory = str(resources["cpu"]), str(resources["memory"])
        size = _AWS_SIZE.match(type_name)
        family = _FAMILY_DELIMITER.split(type_name, maxsplit=1)
        systems = [str(s) for s in raw.get("operatingSystems") or ["linux"]]
        offerings: list[dict[str, Any]] = []
        for offering in raw.get("offerings") or []:
            requirements = offering.get("Requirements") or []
            for zone in _kwok_requirement(requirements, "topology.kubernetes.io/zone"):
                for capacity_type in _kwok_requirement(requirements, "karpenter.sh/capacity-type"):
                    # the provider makes every offering available (setDefaultOptions)
                    offerings.append({"zone": zone, "capacityType": capacity_type,
                                      "price": float(offering.get("Price", 0.0)), "available": True})
        if not offerings:
            raise ValueError(f"instance type {type_name}: no offering with a zone and a capacity type")
        types.append({
            "name": type_name,
            "labels": {
                "node.kubernetes.io/instance-type": type_name,
                "kubernetes.io/arch": str(raw.get("architecture", "amd64")),
                "kubernetes.io/os": systems[0],
                "karpenter.kwok.sh/instance-size": size.group(1) if size else cpu,
                "karpenter.kwok.sh/instance-family": family[0] if len(family) == 2 else type_name[:1],
                "karpenter.kwok.sh/instance-cpu": cpu,
                "karpenter.kwok.sh/instance-memory": memory,
            },
            **({"operatingSystems": systems} if len(systems) > 1 else {}),
            "capacity": {"pods": KWOK_DEFAULT_PODS, **{str(k): str(v) for k, v in resources.items()}},
            "overhead": dict(KWOK_OVERHEAD),
            "offerings": offerings,
        })
    return {"apiVersion": "ebb.sh/v1", "kind": "InstanceTypeCatalog",
            "metadata": {"name": name, "annotations": {
                "ebb.sh/price-source": "Karpenter's KWOK provider instance types (synthetic prices)"}},
            "spec": {"instanceTypes": types}}
