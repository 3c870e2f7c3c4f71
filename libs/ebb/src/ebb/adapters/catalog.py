"""The bundled instance-type catalog for the services (``ebb plan`` reads the same file, docs/catalog.md).

The cluster-watcher does not publish an ``InstanceTypeCatalog`` (there is no such object in a Karpenter
cluster), so every service that rebuilds the snapshot from ``ebb.cluster.objects`` prices nodes and
replacements with the catalog ebb ships, exactly as ``ebb plan`` does for a dump without one. A catalog
object on the topic (an ``ebb.sh/v1 InstanceTypeCatalog``) takes precedence. Parsed once per process,
with the same YAML reader as ``ebb plan`` input (yaml-rs, about 5x faster than PyYAML on this file).
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

from ebb.core.yaml_documents import parse_yaml

BUNDLED_CATALOG = "aws-us-east-1.yaml"


@functools.cache
def _documents() -> tuple[Any, ...]:
    text = resources.files("ebb.data").joinpath(BUNDLED_CATALOG).read_text(encoding="utf-8")
    return tuple(d for d in parse_yaml(text, BUNDLED_CATALOG) if d)


def bundled_catalog() -> list[Any]:
    """The bundled catalog's documents (parsed once; the caller must not mutate them)."""
    return list(_documents())
