"""Clusters shaped like the examples of Karpenter's Balanced consolidation RFC (designs/balanced-consolidation.md of
sigs.k8s.io/karpenter v1.14.1): a pool of xlarge nodes (and two 2xlarge) of a three-type catalog, every node but
the one a case is about too full to take any other node's pods. Shared by the Balanced policy's unit tests and
the planner's service tests (the marginal move). Pure."""

from __future__ import annotations

from typing import Any

from tests.kit.builders import catalog, instance_type, node, nodepool, pod

#: the catalog's instance types: cpu, memory, pods, price per hour
SIZES = {"b.large": ("2", "8Gi", 29, 0.125), "b.xlarge": ("4", "16Gi", 58, 0.25), "b.2xlarge": ("8", "32Gi", 58, 0.5)}
CATALOG = catalog([instance_type(name, cpu, memory, pods, price) for name, (cpu, memory, pods, price) in SIZES.items()])


def sized_node(name: str, itype: str, pods: list[tuple[str, dict[str, str] | None]], pool: str = "default",
               kept: bool = False, own_pool: bool = False) -> list[Any]:
    """Node ``name`` of type ``itype`` and its pods, each (cpu, annotations); ``kept``: annotated do-not-disrupt (no
    candidate, still one of its NodePool's nodes and a destination); ``own_pool``: the pods select their NodePool."""
    cpu, memory, slots, _ = SIZES[itype]
    annotations = {"karpenter.sh/do-not-disrupt": "true"} if kept else None
    selector = {"karpenter.sh/nodepool": pool} if own_pool else None
    return [node(name, pool=pool, itype=itype, cpu=cpu, memory=memory, pods=slots, annotations=annotations),
            *(pod(f"{name}-p{i}", name, cpu=request, annotations=pod_annotations, node_selector=selector)
              for i, (request, pod_annotations) in enumerate(pods))]


def full_node(name: str, itype: str = "b.xlarge", pool: str = "default") -> list[Any]:
    """A node that is no candidate and has no room left: 8 pods of cost 1 using all its cpu."""
    return sized_node(name, itype, [("500m" if itype == "b.xlarge" else "1000m", None)] * 8, pool, kept=True)


def rfc_cluster(subject: list[Any], full_xlarge: int, full_2xlarge: int) -> list[list[Any]]:
    """The node a case is about (with its pods) and the full nodes around it, each a list of documents."""
    return [subject, *(full_node(f"x{i}") for i in range(full_xlarge)),
            *(full_node(f"big{i}", "b.2xlarge") for i in range(full_2xlarge))]


def marginal_cluster(policy: str) -> list[Any]:
    """The RFC's marginal move (below): NodePool default of ``policy``, the catalog, seven full xlarge and two full
    2xlarge, and xlarge ``subject`` whose 8 pods (1.8 cpu) fit a large. Balanced refuses the replace (score
    0.42)."""
    nested = rfc_cluster(sized_node("subject", "b.xlarge", [("225m", None)] * 8), 7, 2)
    return [nodepool(policy=policy), CATALOG, *(doc for docs in nested for doc in docs)]
