"""The kinds the cluster-watcher lists and watches, and how to reach each one through kubernetes-asyncio.

Besides the scheduling and disruption kinds, the volume kinds Karpenter's volume topology reads
(PersistentVolumeClaim, PersistentVolume, StorageClass): a pod whose claim is bound to a zonal volume moves only to
nodes its volume's node affinity allows, an unbound claim's StorageClass ``allowedTopologies`` limit it likewise;
and the CSINodes (``storage.k8s.io/v1``, one per node, named after it), whose drivers' ``allocatable.count`` is how
many volumes of each CSI driver the node can attach, as Karpenter reads them (``populateVolumeLimits``). And the
Namespaces, whose labels a pod affinity term's ``namespaceSelector`` matches (Karpenter's ``buildNamespaceList``).

The custom kinds are Karpenter's NodePool and NodeClaim and ebb's own DisruptionPolicy (``ebb.sh/v1``: the
disruption settings ebb reads instead of a NodePool's own, docs/architecture.md#decision-semantics). A
custom kind whose CRD is not installed is retried by the watcher without affecting the others.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True)
class KindSpec:
    """One watched kind. ``group`` empty is the core group; ``custom`` kinds (CRDs) go through the
    CustomObjectsApi and may be missing from a cluster."""

    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool
    custom: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def list_function(self, api_client: Any) -> Callable[..., Awaitable[Any]]:
        """The kubernetes-asyncio function that lists (or, with ``watch=True``, watches) this kind
        across all namespaces."""
        from kubernetes_asyncio import client

        if self.custom:
            api = client.CustomObjectsApi(api_client)
            group, version, plural = self.group, self.version, self.plural

            def list_custom(**kwargs: Any) -> Awaitable[Any]:
                return api.list_cluster_custom_object(group, version, plural, **kwargs)  # type: ignore[no-any-return]

            return list_custom
        methods: dict[str, Callable[..., Awaitable[Any]]] = {
            "Node": client.CoreV1Api(api_client).list_node,
            "Pod": client.CoreV1Api(api_client).list_pod_for_all_namespaces,
            "PodDisruptionBudget": client.PolicyV1Api(api_client).list_pod_disruption_budget_for_all_namespaces,
            "DaemonSet": client.AppsV1Api(api_client).list_daemon_set_for_all_namespaces,
            "PersistentVolumeClaim": client.CoreV1Api(api_client).list_persistent_volume_claim_for_all_namespaces,
            "PersistentVolume": client.CoreV1Api(api_client).list_persistent_volume,
            "StorageClass": client.StorageV1Api(api_client).list_storage_class,
            "CSINode": client.StorageV1Api(api_client).list_csi_node,
            "Namespace": client.CoreV1Api(api_client).list_namespace,
        }
        return methods[self.kind]


NODE: Final = KindSpec("Node", "", "v1", "nodes", namespaced=False)
POD: Final = KindSpec("Pod", "", "v1", "pods", namespaced=True)
PDB: Final = KindSpec("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", namespaced=True)
DAEMONSET: Final = KindSpec("DaemonSet", "apps", "v1", "daemonsets", namespaced=True)
#: a pod's claims, their volumes and the classes of unbound claims (the volume topology a pod's moves must satisfy)
PVC: Final = KindSpec("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", namespaced=True)
PV: Final = KindSpec("PersistentVolume", "", "v1", "persistentvolumes", namespaced=False)
STORAGE_CLASS: Final = KindSpec("StorageClass", "storage.k8s.io", "v1", "storageclasses", namespaced=False)
#: a node's CSI drivers and how many volumes of each it can attach (named after its node)
CSI_NODE: Final = KindSpec("CSINode", "storage.k8s.io", "v1", "csinodes", namespaced=False)
#: the namespaces and their labels: which namespaces a pod affinity term's ``namespaceSelector`` selects
NAMESPACE: Final = KindSpec("Namespace", "", "v1", "namespaces", namespaced=False)
NODEPOOL: Final = KindSpec("NodePool", "karpenter.sh", "v1", "nodepools", namespaced=False, custom=True)
NODECLAIM: Final = KindSpec("NodeClaim", "karpenter.sh", "v1", "nodeclaims", namespaced=False, custom=True)
DISRUPTION_POLICY: Final = KindSpec("DisruptionPolicy", "ebb.sh", "v1", "disruptionpolicies", namespaced=False,
                                    custom=True)
#: the instance types and prices to plan with (e.g. the catalog of Karpenter's KWOK provider's types); without
#: one on the topic the services plan with the bundled catalog (ebb.adapters.catalog)
INSTANCE_TYPE_CATALOG: Final = KindSpec("InstanceTypeCatalog", "ebb.sh", "v1", "instancetypecatalogs",
                                        namespaced=False, custom=True)

#: ebb's Hold: pauses Empty and Underutilized disruptions in its scope (docs/decisions.md); watched by the
#: cluster-watcher like every kind here, so the planner honours a Hold object as ``ebb plan`` does, beside the holds
#: the services keep in their store (POST /v1/holds)
HOLD: Final = KindSpec("Hold", "ebb.sh", "v1", "holds", namespaced=False, custom=True)
#: every kind ebb reads, by kind name
KINDS: Final[dict[str, KindSpec]] = {k.kind: k for k in (NODE, POD, PDB, DAEMONSET, PVC, PV, STORAGE_CLASS, CSI_NODE,
                                                         NAMESPACE, NODEPOOL, NODECLAIM, DISRUPTION_POLICY,
                                                         INSTANCE_TYPE_CATALOG, HOLD)}
#: what ``ebb plan --live`` lists (`ebb.adapters.kube.read`): what a dump for ``ebb plan`` holds, every kind the
#: services read
PLAN_KINDS: Final[tuple[KindSpec, ...]] = tuple(KINDS.values())


def kinds_named(names: Iterable[str]) -> tuple[KindSpec, ...]:
    """The specs of ``names`` (kind names, case-insensitive); ValueError naming an unknown one."""
    by_lower = {k.lower(): spec for k, spec in KINDS.items()}
    out: list[KindSpec] = []
    for name in names:
        spec = by_lower.get(name.strip().lower())
        if spec is None:
            raise ValueError(f"unknown kind {name!r} (known: {', '.join(KINDS)})")
        if spec not in out:
            out.append(spec)
    return tuple(out)
