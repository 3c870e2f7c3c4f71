"""Small builders for kubectl-shaped objects (plain dicts), for the unit tests of the pure core and every other
test that needs a cluster.

Every builder returns exactly what `kubectl get -o yaml` would print for the object (trimmed to the
fields ebb reads), so the tests go through the real parser: `snapshot(*docs)` calls
`ebb.core.snapshot.parse_documents`. Each snapshot carries its own small InstanceTypeCatalog
(`catalog()`, the same types and prices as the shared scenarios) so no test depends on the bundled one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ebb.core.decision import Decision, DecisionNode, State
from ebb.core.methods.base import EngineOptions
from ebb.core.model import Snapshot
from ebb.core.plan import Plan, make_plan, plan_json
from ebb.core.snapshot import parse_documents

Doc = dict[str, Any]

NOW = datetime(2026, 11, 23, 18, 30, tzinfo=UTC)
OLD = "2026-11-20T00:00:00Z"  # three and a half days before NOW
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")

# name -> (cpu, memory, pods, on-demand price, spot price); the shared scenarios' catalog
TYPES: dict[str, tuple[str, str, int, float, float]] = {
    "t3.medium": ("2", "4Gi", 17, 0.0416, 0.0125),
    "c5.large": ("2", "4Gi", 29, 0.085, 0.032),
    "m5.large": ("2", "8Gi", 29, 0.096, 0.035),
    "r5.large": ("2", "16Gi", 29, 0.126, 0.045),
    "c5.xlarge": ("4", "8Gi", 58, 0.17, 0.062),
    "m5.xlarge": ("4", "16Gi", 58, 0.192, 0.07),
    "m5.2xlarge": ("8", "32Gi", 58, 0.384, 0.14),
}
_DEFAULT = object()


def ts(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def ago(**delta: float) -> str:
    """An RFC 3339 time this long before NOW, e.g. ago(minutes=5)."""
    return ts(NOW - timedelta(**delta))


def later(**delta: float) -> str:
    return ts(NOW + timedelta(**delta))


def nodepool(name: str = "default", *, requirements: Sequence[Mapping[str, Any]] | None = None,
             expire_after: str | None = None, consolidate_after: str | None = "0s",
             policy: str = "WhenEmptyOrUnderutilized", budgets: Any = _DEFAULT,
             node_hash: str | None = None, hash_version: str | None = "v3",
             stabilization_window: str | None = None, annotations: Mapping[str, str] | None = None,
             template_annotations: Mapping[str, str] | None = None, labels: Mapping[str, str] | None = None,
             taints: Sequence[Mapping[str, Any]] | None = None, disruption: Mapping[str, Any] | None = None,
             api_version: str = "karpenter.sh/v1", weight: int | None = None) -> Doc:
    """A karpenter.sh/v1 NodePool. `budgets` defaults to one `nodes: 100%` so budgets stay out of the
    way; pass `budgets=None` to leave them unset (ebb's default 10%)."""
    meta_ann = dict(annotations or {})
    if node_hash is not None:
        meta_ann["karpenter.sh/nodepool-hash"] = node_hash
        if hash_version is not None:
            meta_ann["karpenter.sh/nodepool-hash-version"] = hash_version
    tspec: Doc = {
        "requirements": list(requirements) if requirements is not None else [
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
    }
    if expire_after is not None:
        tspec["expireAfter"] = expire_after
    if taints:
        tspec["taints"] = list(taints)
    template: Doc = {"spec": tspec}
    if labels or template_annotations:
        template["metadata"] = {"labels": dict(labels or {}), "annotations": dict(template_annotations or {})}
    dis: Doc = {"consolidationPolicy": policy}
    if consolidate_after is not None:
        dis["consolidateAfter"] = consolidate_after
    if budgets is _DEFAULT:
        dis["budgets"] = [{"nodes": "100%"}]
    elif budgets is not None:
        dis["budgets"] = list(budgets)
    if stabilization_window is not None:
        dis["stabilizationWindow"] = stabilization_window
    dis.update(disruption or {})
    spec: Doc = {"template": template, "disruption": dis}
    if weight is not None:
        spec["weight"] = weight
    return {"apiVersion": api_version, "kind": "NodePool",
            "metadata": {"name": name, "annotations": meta_ann}, "spec": spec}


def node(name: str, *, pool: str | None = "default", itype: str = "m5.large", zone: str = "us-east-1a",
         capacity_type: str = "on-demand", created: str = OLD, initialized: bool = True,
         ready: bool = True, deleting: bool = False, node_hash: str | None = None, hash_version: str | None = "v3",
         labels: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None,
         taints: Sequence[Mapping[str, Any]] | None = None, cpu: str | None = None,
         memory: str | None = None, pods: int | None = None) -> Doc:
    """A v1 Node launched by a NodePool (capacity from TYPES unless given)."""
    t_cpu, t_mem, t_pods, _, _ = TYPES.get(itype, ("2", "8Gi", 29, 0.0, 0.0))
    all_labels = {
        "karpenter.sh/registered": "true",
        "karpenter.sh/capacity-type": capacity_type,
        "node.kubernetes.io/instance-type": itype,
        "topology.kubernetes.io/zone": zone,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    if pool is not None:
        all_labels["karpenter.sh/nodepool"] = pool
    if initialized:
        all_labels["karpenter.sh/initialized"] = "true"
    all_labels.update(labels or {})
    ann = dict(annotations or {})
    if node_hash is not None:
        ann["karpenter.sh/nodepool-hash"] = node_hash
        if hash_version is not None:
            ann["karpenter.sh/nodepool-hash-version"] = hash_version
    capacity = {"cpu": cpu or t_cpu, "memory": memory or t_mem, "pods": str(pods or t_pods)}
    meta: Doc = {"name": name, "creationTimestamp": created, "labels": all_labels, "annotations": ann}
    if deleting:
        meta["deletionTimestamp"] = ts(NOW - timedelta(minutes=1))
        meta["finalizers"] = ["karpenter.sh/termination"]
    spec: Doc = {"providerID": f"aws:///{zone}/i-{name}"}
    if taints:
        spec["taints"] = list(taints)
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec,
            "status": {"capacity": dict(capacity), "allocatable": dict(capacity),
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(name: str, node_name: str | None = None, *, cpu: str | None = "100m", memory: str | None = "128Mi",
        ns: str = "default", labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None, owner: tuple[str, str] | None = ("ReplicaSet", "rs"),
        phase: str = "Running", started: str = OLD, priority: int | None = None,
        node_selector: Mapping[str, str] | None = None, affinity: Mapping[str, Any] | None = None,
        tolerations: Sequence[Mapping[str, Any]] | None = None,
        spread: Sequence[Mapping[str, Any]] | None = None, host_port: int | None = None,
        limits: Mapping[str, str] | None = None, containers: Sequence[Mapping[str, Any]] | None = None,
        init_containers: Sequence[Mapping[str, Any]] | None = None,
        overhead: Mapping[str, str] | None = None, deleting: bool = False, ready: bool | None = None,
        claims: Sequence[str] = (), ephemeral: Sequence[str] = ()) -> Doc:
    """A v1 Pod bound to `node_name`, one container requesting cpu/memory (None leaves it out); `deleting` sets
    its deletionTimestamp (evicted, still terminating); `ready` its Ready condition (default: Running is ready);
    `claims` are PersistentVolumeClaims its volumes use, `ephemeral` the names of its ephemeral volumes."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    resources: Doc = {"requests": requests} if requests else {}
    if limits:
        resources["limits"] = dict(limits)
    container: Doc = {"name": "main", "image": "registry.example/app:1", "resources": resources}
    if host_port is not None:
        container["ports"] = [{"containerPort": host_port, "hostPort": host_port, "protocol": "TCP"}]
    meta: Doc = {"name": name, "namespace": ns, "labels": dict(labels or {"app": name}),
                 "annotations": dict(annotations or {}), "creationTimestamp": started}
    if owner is not None:
        api_version = {"Node": "v1", "Job": "batch/v1"}.get(owner[0], "apps/v1")
        meta["ownerReferences"] = [{"apiVersion": api_version, "kind": owner[0], "name": owner[1],
                                    "uid": f"uid-{owner[1]}", "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = ts(NOW - timedelta(seconds=10))
    spec: Doc = {"containers": list(containers) if containers is not None else [container]}
    if node_name is not None:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if affinity:
        spec["affinity"] = dict(affinity)
    if tolerations:
        spec["tolerations"] = list(tolerations)
    if spread:
        spec["topologySpreadConstraints"] = list(spread)
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if overhead:
        spec["overhead"] = dict(overhead)
    volumes: list[Doc] = [{"name": "cache", "emptyDir": {}}] if claims or ephemeral else []
    volumes += [{"name": f"data-{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    volumes += [{"name": v, "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}
                for v in ephemeral]
    if volumes:
        spec["volumes"] = volumes
    if ready is None:
        ready = phase == "Running"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": phase, "startTime": started,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pvc(name: str, volume: str | None = None, *, ns: str = "default", storage_class: str | None = "gp3",
        deleting: bool = False, phase: str | None = None) -> Doc:
    """A v1 PersistentVolumeClaim, bound to PersistentVolume `volume` (None: unbound, Pending)."""
    meta: Doc = {"name": name, "namespace": ns}
    spec: Doc = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    if volume is not None:
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
        spec["volumeName"] = volume
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if deleting:
        meta["deletionTimestamp"] = ts(NOW - timedelta(minutes=1))
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec,
            "status": {"phase": phase or ("Bound" if volume is not None else "Pending")}}


def pv(name: str, zones: Sequence[str] | None = None, *, key: str = "topology.kubernetes.io/zone",
       terms: Sequence[Sequence[Mapping[str, Any]]] | None = None, local_on: str | None = None,
       deleting: bool = False) -> Doc:
    """A v1 PersistentVolume: an EBS volume whose nodeAffinity asks `key In zones` (or the `terms` given, one
    nodeSelectorTerm each), or with `local_on` a local volume on that node's disk."""
    spec: Doc = {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "gp3"}
    if local_on is not None:
        spec["local"] = {"path": "/mnt/disks/ssd0"}
        terms = [[{"key": "kubernetes.io/hostname", "operator": "In", "values": [local_on]}]]
    else:
        spec["csi"] = {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{name}"}
    if terms is None and zones is not None:
        terms = [[{"key": key, "operator": "In", "values": list(zones)}]]
    if terms is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]}}
    meta: Doc = {"name": name}
    if deleting:
        meta["deletionTimestamp"] = ts(NOW - timedelta(minutes=1))
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": meta, "spec": spec,
            "status": {"phase": "Bound"}}


def storage_class(name: str = "gp3", *, mode: str | None = "WaitForFirstConsumer",
                  zones: Sequence[str] | None = None) -> Doc:
    """A storage.k8s.io/v1 StorageClass of the EBS CSI driver (its fields are top-level: it has no spec)."""
    doc: Doc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                "provisioner": "ebs.csi.aws.com"}
    if mode is not None:
        doc["volumeBindingMode"] = mode
    if zones is not None:
        doc["allowedTopologies"] = [{"matchLabelExpressions": [
            {"key": "topology.kubernetes.io/zone", "values": list(zones)}]}]
    return doc


def csi_node(name: str, limits: Mapping[str, int | None]) -> Doc:
    """A storage.k8s.io/v1 CSINode of node `name`: each driver's attach limit (None: a driver without allocatable)."""
    drivers = [{"name": d, "nodeID": f"i-{name}", **({} if count is None else {"allocatable": {"count": count}})}
               for d, count in limits.items()]
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": drivers}}


def container(name: str, cpu: str | None = None, memory: str | None = None) -> Doc:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"name": name, "image": "registry.example/app:1", "resources": {"requests": requests}}


def pdb(name: str, match_labels: Mapping[str, str], *, min_available: int | str | None = None,
        max_unavailable: int | str | None = None, ns: str = "default",
        unhealthy_pod_eviction_policy: str | None = None) -> Doc:
    spec: Doc = {"selector": {"matchLabels": dict(match_labels)}}
    if unhealthy_pod_eviction_policy is not None:
        spec["unhealthyPodEvictionPolicy"] = unhealthy_pod_eviction_policy
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def daemonset(name: str, *, cpu: str = "100m", memory: str = "128Mi", ns: str = "kube-system") -> Doc:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [container("agent", cpu, memory)]}}}}


def ds_pod(name: str, node_name: str, ds: str = "agent", cpu: str = "100m", memory: str = "128Mi") -> Doc:
    """A DaemonSet's pod on a node."""
    return pod(name, node_name, ns="kube-system", cpu=cpu, memory=memory, labels={"app": ds},
               owner=("DaemonSet", ds))


def instance_type(name: str, cpu: str, memory: str, pods: int, on_demand: float, spot: float | None = None,
                  zones: Iterable[str] = ZONES, available: bool = True) -> Doc:
    offerings: list[Doc] = []
    for zone in zones:
        offerings.append({"zone": zone, "capacityType": "on-demand", "price": on_demand, "available": available})
        if spot is not None:
            offerings.append({"zone": zone, "capacityType": "spot", "price": spot, "available": available})
    return {"name": name, "capacity": {"cpu": cpu, "memory": memory, "pods": str(pods)},
            "overhead": {"cpu": "0", "memory": "0"}, "offerings": offerings}


def catalog(types: Iterable[Doc] | None = None, name: str = "test") -> Doc:
    """An ebb.sh/v1 InstanceTypeCatalog; by default every type of TYPES in the three zones."""
    if types is None:
        types = [instance_type(n, c, m, p, od, sp) for n, (c, m, p, od, sp) in TYPES.items()]
    return {"apiVersion": "ebb.sh/v1", "kind": "InstanceTypeCatalog", "metadata": {"name": name},
            "spec": {"instanceTypes": list(types)}}


def hold(name: str, scope: str = "cluster", target: str | None = None, *, expires_at: str | None = None,
         reason: str = "") -> Doc:
    spec: Doc = {"scope": scope}
    if scope == "nodePool":
        spec["nodePool"] = target
    elif scope == "node":
        spec["node"] = target
    if expires_at is not None:
        spec["expiresAt"] = expires_at
    if reason:
        spec["reason"] = reason
    return {"apiVersion": "ebb.sh/v1", "kind": "Hold", "metadata": {"name": name}, "spec": spec}


def disruption_policy(name: str = "default", **spec: Any) -> Doc:
    """An ebb.sh/v1 DisruptionPolicy for the NodePool ``name``; ``spec`` as written (camelCase keys)."""
    return {"apiVersion": "ebb.sh/v1", "kind": "DisruptionPolicy", "metadata": {"name": name}, "spec": dict(spec)}


def nodeclaim(name: str, node_name: str, *, pool: str = "default", initialized: bool = True,
              deleting: bool = False, created: str | None = None,
              conditions: Sequence[Mapping[str, Any]] = (), expire_after: str | None = None,
              labels: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None,
              zone: str = "us-east-1a") -> Doc:
    """A karpenter.sh/v1 NodeClaim of `node_name`; `deleting` sets its deletionTimestamp, `conditions` are
    added to Initialized, `expire_after` is its spec.expireAfter (unset: none); `labels` are added to its
    karpenter.sh/nodepool label, `annotations` are its own (unset: none); its providerID is `node`'s of the same
    name in `zone` (a NodeClaim is paired with its Node by providerID, as Karpenter pairs them)."""
    meta: Doc = {"name": name, "labels": {"karpenter.sh/nodepool": pool, **(labels or {})}}
    if annotations:
        meta["annotations"] = dict(annotations)
    if created is not None:
        meta["creationTimestamp"] = created
    if deleting:
        meta["deletionTimestamp"] = ts(NOW - timedelta(minutes=1))
        meta["finalizers"] = ["karpenter.sh/termination"]
    claim: Doc = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": meta,
            "status": {"nodeName": node_name, "providerID": f"aws:///{zone}/i-{node_name}",
                       "conditions": [{"type": "Initialized", "status": "True" if initialized else "False",
                                       "lastTransitionTime": OLD}, *conditions]}}
    if expire_after is not None:
        claim["spec"] = {"expireAfter": expire_after}
    return claim


def _flat(docs: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for d in docs:
        if isinstance(d, list | tuple):
            out.extend(_flat(d))
        else:
            out.append(d)
    return out


def snapshot(*docs: Any) -> Snapshot:
    """Parse the documents (lists are flattened) with the real parser; adds `catalog()` if none given."""
    flat = _flat(docs)
    if not any(isinstance(d, Mapping) and d.get("kind") == "InstanceTypeCatalog" for d in flat):
        flat.append(catalog())
    return parse_documents(flat)


def plan(*docs: Any, now: datetime = NOW, until_stable: bool = False, spot_to_spot: bool = False,
         require_nodeclaim: bool = False, max_replacements: int = 1) -> Plan:
    return make_plan(snapshot(*docs), now, until_stable=until_stable,
                     options=EngineOptions(spot_to_spot=spot_to_spot, require_nodeclaim=require_nodeclaim,
                                           max_replacements=max_replacements))


def plan_dict(*docs: Any, now: datetime = NOW, until_stable: bool = False,
              spot_to_spot: bool = False, require_nodeclaim: bool = False, max_replacements: int = 1) -> dict[str, Any]:
    """`plan_json` of one pass (or of passes until stable) over the documents."""
    return plan_json(plan(*docs, now=now, until_stable=until_stable, spot_to_spot=spot_to_spot,
                          require_nodeclaim=require_nodeclaim, max_replacements=max_replacements))


def repack_cluster() -> list[Doc]:
    """Six $1.00 nodes of type "one" (2 cpu) with a 1300m pod each, where the only larger type, "two" (4 cpu,
    $1.50/h), holds three of the pods: a merge with one replacement takes three nodes, one that may launch two takes
    all six (``EngineOptions.max_replacements``)."""
    docs: list[Doc] = [catalog([instance_type("one", "2", "8Gi", 29, 1.0), instance_type("two", "4", "16Gi", 58, 1.5)]),
                       nodepool()]
    for i in range(6):
        docs += [node(f"n{i}", itype="one"), pod(f"p{i}", f"n{i}", cpu="1300m")]
    return docs


def budget_bound_cluster() -> list[Doc]:
    """A NodePool whose budget allows two nodes: "r" (8 cpu, $4.00/h) with three 1-cpu pods, two $1.00 nodes of type
    "one" ("a1", "a2") with a 500m pod each, first in disruption-cost order, and two $4.00 nodes ("b1", "b2") with two
    500m pods each. Every pod fits elsewhere: the greedy search takes the first two candidates ($2.00/h), the optimizer
    search two of the $4.00 nodes ($8.00/h)."""
    types = [instance_type("one", "2", "8Gi", 29, 1.0), instance_type("eight", "8", "32Gi", 110, 4.0)]
    docs: list[Doc] = [catalog(types), nodepool(budgets=[{"nodes": "2"}]), node("r", itype="eight")]
    docs += [pod(f"r{i}", "r", cpu="1") for i in range(3)]
    for name in ("a1", "a2"):
        docs += [node(name, itype="one"), pod(f"p-{name}", name, cpu="500m")]
    for name in ("b1", "b2"):
        docs += [node(name, itype="eight"), pod(f"p-{name}-1", name, cpu="500m"), pod(f"p-{name}-2", name, cpu="500m")]
    return docs


# -- reading a plan ------------------------------------------------------------------------------------


def disrupted(out: Mapping[str, Any]) -> set[str]:
    return {n for c in out["commands"] for n in c["nodes"]}


def blocked_of(out: Mapping[str, Any], node_name: str) -> dict[str, Any]:
    """The blocked[] entry of a node (fails the test when the node is not in blocked)."""
    entries = [b for b in out["blocked"] if b["node"] == node_name]
    assert len(entries) == 1, f"{node_name} is in blocked {len(entries)} times: {out['blocked']}"
    return entries[0]


def budget_of(out: Mapping[str, Any], pool: str, reason: str) -> int:
    rows = [b["allowed"] for b in out["budgets"] if b["nodePool"] == pool and b["reason"] == reason]
    assert len(rows) == 1, out["budgets"]
    return int(rows[0])


def proposed(decision_id: str, *nodes: str | tuple[str, str], now: datetime, method: str = "emptiness",
             reason: str = "Empty", text: str = "empty", pool: str = "default", savings: float = 0.1) -> Decision:
    """A proposed delete of ``nodes`` (names, or (name, NodePool)), as the planner's store takes it."""
    return Decision(
        id=decision_id, method=method, reason=reason, action="delete",
        nodes=tuple(DecisionNode(n, pool) if isinstance(n, str) else DecisionNode(*n) for n in nodes),
        replacements=(), savings=savings, state=State.PROPOSED, created_at=now, updated_at=now,
        explanation={"text": text})


def labelled_catalog() -> dict[str, Any]:
    """The builders' catalog, each type labelled with its cpu count as the AWS catalog does."""
    types = []
    for name, (cpu, memory, pods, on_demand, spot) in TYPES.items():
        it = instance_type(name, cpu, memory, pods, on_demand, spot)
        it["labels"] = {"karpenter.k8s.aws/instance-cpu": cpu}
        types.append(it)
    return catalog(types)
