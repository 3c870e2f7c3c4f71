"""Synthetic Kubernetes clusters for ebb's benchmarks and examples.

Every generator returns a list of plain dicts shaped exactly as ``kubectl get -o yaml`` prints the
objects (``metadata``/``spec``/``status``), is deterministic for a given seed, and never touches the
network. Nothing here imports ebb: the only shared input is the bundled instance-type catalog YAML
(``libs/ebb/src/ebb/data/aws-us-east-1.yaml``), read with PyYAML so prices and capacities agree with
what ``ebb plan`` uses when no catalog document is given.

* :func:`karpenter_scheduling_workload` reproduces Karpenter's scheduling benchmark (fake instance
  types, pending pods in five constraint groups).
* :func:`disruption_cluster` builds a running cluster (NodePools, nodes, DaemonSets, PDBs, pods)
  with the things the disruption methods look for: underutilized, empty, drifted and expired nodes,
  PDBs, ``do-not-disrupt`` pods, priorities, deletion costs, spread and anti-affinity.
* :func:`write_yaml` and :func:`as_kubectl_list` serialise them.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import math
import random
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

Doc = dict[str, Any]

REPO_ROOT = Path(__file__).resolve().parents[1]
BUNDLED_CATALOG = REPO_ROOT / "libs" / "ebb" / "src" / "ebb" / "data" / "aws-us-east-1.yaml"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
REGION = "us-east-1"

LABEL_NODEPOOL = "karpenter.sh/nodepool"
LABEL_CAPACITY_TYPE = "karpenter.sh/capacity-type"
LABEL_INITIALIZED = "karpenter.sh/initialized"
LABEL_REGISTERED = "karpenter.sh/registered"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_OS = "kubernetes.io/os"
ANN_HASH = "karpenter.sh/nodepool-hash"
ANN_HASH_VERSION = "karpenter.sh/nodepool-hash-version"
ANN_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
ANN_DO_NOT_EVICT = "karpenter.sh/do-not-evict"
ANN_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
HASH_VERSION = "v3"

# Default tolerations the admission controller adds to every pod.
_DEFAULT_TOLERATION_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # what Kubernetes uses for generated name suffixes


# --------------------------------------------------------------------------------------------------
# small helpers


def parse_time(text: str) -> datetime:
    """An RFC 3339 timestamp (``Z`` or offset) as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def fmt_time(moment: datetime) -> str:
    """A timestamp the way the API server prints it (UTC, seconds, ``Z``)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def fmt_cpu(millis: int) -> str:
    """Millicores as a Kubernetes quantity: whole cores without a suffix, else ``m``."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def fmt_mem_mib(mib: int) -> str:
    """MiB as a Kubernetes quantity, ``Gi`` when exact."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def parse_cpu_millis(value: object) -> int:
    """Millicores from a CPU quantity ("250m", "2", "1.5")."""
    text = str(value)
    if text.endswith("m"):
        return int(text[:-1])
    return round(float(text) * 1000)


_MEM_UNITS_MIB = {"Ki": 1 / 1024, "Mi": 1.0, "Gi": 1024.0, "Ti": 1024.0 * 1024}


def parse_mem_mib(value: object) -> float:
    """MiB from a memory quantity ("8Gi", "542Mi", "1024Ki", plain bytes)."""
    text = str(value)
    for suffix, factor in _MEM_UNITS_MIB.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text) / 2**20


def _uid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _suffix(rng: random.Random, k: int) -> str:
    return "".join(rng.choices(_NAME_ALPHABET, k=k))


def _stable_hash(text: str) -> str:
    """A NodePool hash the way Karpenter prints it: a decimal uint64."""
    return str(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))


def _default_tolerations() -> list[Doc]:
    return [
        {"effect": "NoExecute", "key": key, "operator": "Exists", "tolerationSeconds": 300}
        for key in _DEFAULT_TOLERATION_KEYS
    ]


def _node_class_ref() -> Doc:
    return {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


# --------------------------------------------------------------------------------------------------
# the bundled catalog


@dataclass(frozen=True, slots=True)
class CatalogType:
    """One instance type of the bundled catalog, in the units the generators compute with."""

    name: str
    cpu_m: int
    mem_mib: int
    pods: int
    overhead_cpu_m: int
    overhead_mem_mib: int
    labels: dict[str, str]
    prices: dict[tuple[str, str], float]  # (zone, capacityType) -> $/hour

    @property
    def alloc_cpu_m(self) -> int:
        return self.cpu_m - self.overhead_cpu_m

    @property
    def alloc_mem_mib(self) -> int:
        return self.mem_mib - self.overhead_mem_mib

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def size(self) -> str:
        return self.name.split(".", 1)[1]

    @property
    def arch(self) -> str:
        return self.labels.get(LABEL_ARCH, "amd64")


@functools.lru_cache(maxsize=4)
def load_catalog(path: str | None = None) -> dict[str, CatalogType]:
    """The bundled ``InstanceTypeCatalog`` (or the one at ``path``) by instance-type name."""
    text = Path(path).read_text(encoding="utf-8") if path else _bundled_catalog_text()
    out: dict[str, CatalogType] = {}
    for doc in yaml.safe_load_all(text):
        if not doc or doc.get("kind") != "InstanceTypeCatalog":
            continue
        for it in doc["spec"]["instanceTypes"]:
            capacity, overhead = it["capacity"], it.get("overhead") or {}
            out[it["name"]] = CatalogType(
                name=it["name"],
                cpu_m=parse_cpu_millis(capacity["cpu"]),
                mem_mib=round(parse_mem_mib(capacity["memory"])),
                pods=int(capacity["pods"]),
                overhead_cpu_m=parse_cpu_millis(overhead.get("cpu", "0")),
                overhead_mem_mib=round(parse_mem_mib(overhead.get("memory", "0"))),
                labels=dict(it.get("labels") or {}),
                prices={
                    (o["zone"], o["capacityType"]): float(o["price"])
                    for o in it["offerings"]
                    if o.get("available", True)
                },
            )
    return out


def _bundled_catalog_text() -> str:
    if BUNDLED_CATALOG.exists():
        return BUNDLED_CATALOG.read_text(encoding="utf-8")
    from importlib import resources  # installed ebb without a source checkout

    return resources.files("ebb.data").joinpath("aws-us-east-1.yaml").read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------------
# a) Karpenter's scheduling benchmark

_BENCH_CPU = ("100m", "250m", "500m", "1000m", "1500m")
_BENCH_MEMORY = ("100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi")
_BENCH_LABEL_VALUES = ("a", "b", "c", "d", "e", "f", "g")
BENCH_GROUPS = ("generic", "zonal-spread", "hostname-spread", "zonal-affinity", "hostname-anti-affinity")
#: the label of the generic and spread pods (``randomLabels()``) and the one the spreads select on
BENCH_LABEL = "my-label"
#: the zonal self-affinity pods' label and selector key (``randomAffinityLabels()``), spelled as Karpenter spells it
BENCH_AFFINITY_LABEL = "my-affininity"
#: ``fake.PriceFromResources``: 0.1 per vCPU plus 0.1 per 1e9 bytes of memory (not per GiB)
BENCH_PRICE_PER_CPU = 0.1
BENCH_PRICE_PER_1E9_BYTES = 0.1


def fake_instance_type_price(vcpus: int, memory_gib: int) -> float:
    """``fake.PriceFromResources`` of an instance type of ``vcpus`` and ``memory_gib`` GiB: memory is priced per
    1e9 bytes, so a GiB costs 0.1 * 2**30 / 1e9 (about 0.107)."""
    return BENCH_PRICE_PER_CPU * vcpus + BENCH_PRICE_PER_1E9_BYTES * memory_gib * 2**30 / 1e9


def fake_instance_type_catalog(count: int = 400) -> Doc:
    """Karpenter's ``fake.InstanceTypes(count)``: ``fake-it-{i}`` with i+1 vCPU, 2(i+1) GiB, 10(i+1) pods,
    kube-reserved 100m CPU and 10Mi memory, every offering available at ``fake_instance_type_price``.

    Karpenter's types also carry requirements no benchmark pod selects on (``kubernetes.io/os`` In linux, windows,
    darwin; ``size``, ``special``, ``integer``); only the labels a pod of the benchmark could see are written."""
    types: list[Doc] = []
    for i in range(count):
        n = i + 1
        price = round(fake_instance_type_price(n, 2 * n), 9)
        offerings = [
            {"zone": zone, "capacityType": ct, "price": price, "available": True}
            for ct, zones in (
                ("spot", ("test-zone-1", "test-zone-2")),
                ("on-demand", ("test-zone-1", "test-zone-2", "test-zone-3")),
            )
            for zone in zones
        ]
        types.append(
            {
                "name": f"fake-it-{i}",
                "labels": {LABEL_INSTANCE_TYPE: f"fake-it-{i}", LABEL_ARCH: "amd64", LABEL_OS: "linux"},
                "capacity": {"cpu": str(n), "memory": f"{2 * n}Gi", "pods": str(10 * n)},
                "overhead": {"cpu": "100m", "memory": "10Mi"},
                "offerings": offerings,
            }
        )
    return {
        "apiVersion": "ebb.sh/v1",
        "kind": "InstanceTypeCatalog",
        "metadata": {"name": "fake-instance-types"},
        "spec": {"instanceTypes": types},
    }


def karpenter_scheduling_workload(
    n_pods: int, seed: int = 42, now: str = "2026-11-23T18:30:00Z"
) -> list[Doc]:
    """Karpenter's ``BenchmarkScheduling``: one NodePool, 400 fake instance types, ``n_pods`` pending pods, no nodes.

    As Karpenter's ``makeDiversePods`` (scheduling_benchmark_test.go) makes them: ``n_pods // 5`` pods of each group
    in this order, then the ``n_pods % 5`` left over as generic pods at the end:

    - generic: label ``my-label`` = a random value of a..g;
    - zonal spread and hostname spread: label ``my-label`` = a random value, and a topology spread (maxSkew 1,
      DoNotSchedule) whose selector ``my-label`` = another random value, drawn on its own (a pod need not match
      its own spread; it is counted in the spreads of the other pods its label matches, generic ones included);
    - zonal self-affinity: label ``my-affininity`` = a random value, a required pod affinity on that label over
      zones;
    - hostname anti-affinity: every pod labelled ``app: nginx``, a required anti-affinity on it over hostnames.

    Every pod requests a random CPU of {100, 250, 500, 1000, 1500}m and memory of {100, 256, 512, 1024, 2048,
    4096}Mi, drawn after its labels, as Karpenter draws them; each pod's draws come from one seeded stream (Python's,
    not Go's ``math/rand``: the same distributions, not the same pods). Like ``test.Pod``'s, the pods have no
    owner, no tolerations and no priority. The NodePool is ``test.NodePool``'s: no requirements (every offering may
    launch); the benchmark's limits (10,000,000 CPU, 10,000,000Gi memory) are never reached and are left out (ebb's
    quantities stop at 2**50 bytes), which launches the same.
    """
    if n_pods < 0:
        raise ValueError("n_pods must be >= 0")
    rng = random.Random(seed)
    created = fmt_time(parse_time(now) - timedelta(seconds=30))
    nodepool: Doc = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {
            "name": "default",
            "uid": _uid(rng),
            "creationTimestamp": fmt_time(parse_time(now) - timedelta(days=1)),
            "generation": 1,
            "annotations": {ANN_HASH: _stable_hash("bench/default"), ANN_HASH_VERSION: HASH_VERSION},
        },
        "spec": {
            "template": {
                "spec": {
                    "requirements": [],
                    "nodeClassRef": _node_class_ref(),
                    "expireAfter": "720h",
                }
            },
            "disruption": {
                "consolidationPolicy": "WhenEmptyOrUnderutilized",
                "consolidateAfter": "0s",
                "budgets": [{"nodes": "10%"}],
            },
        },
    }
    per_group = n_pods // 5
    plan = [(group, 0, per_group) for group in BENCH_GROUPS]
    plan.append(("generic", per_group, n_pods - 5 * per_group))  # the remainder, generic, at the end
    pods: list[Doc] = []
    for group, first, size in plan:
        for i in range(first, first + size):
            labels, extra = _bench_constraints(group, rng)
            pod: Doc = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{group}-{i}",
                    "namespace": "default",
                    "uid": _uid(rng),
                    "labels": labels,
                    "annotations": {},
                    "creationTimestamp": created,
                },
                "spec": {
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.example/pause:3.9",
                            "resources": {
                                "requests": {
                                    "cpu": rng.choice(_BENCH_CPU),
                                    "memory": rng.choice(_BENCH_MEMORY),
                                }
                            },
                        }
                    ],
                    "restartPolicy": "Always",
                    "schedulerName": "default-scheduler",
                    "terminationGracePeriodSeconds": 30,
                    **extra,
                },
                "status": {
                    "phase": "Pending",
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": "Unschedulable",
                            "message": "0/0 nodes are available.",
                            "lastTransitionTime": created,
                        }
                    ],
                    "qosClass": "Burstable",
                },
            }
            pods.append(pod)
    return [nodepool, fake_instance_type_catalog(400), *pods]


def _bench_constraints(group: str, rng: random.Random) -> tuple[dict[str, str], Doc]:
    """(labels, extra pod spec) of one pod of a benchmark group, the random draws in Karpenter's order (the pod's
    labels, then its spread's selector)."""
    if group == "generic":
        return {BENCH_LABEL: rng.choice(_BENCH_LABEL_VALUES)}, {}
    if group in ("zonal-spread", "hostname-spread"):
        labels = {BENCH_LABEL: rng.choice(_BENCH_LABEL_VALUES)}
        selector = {BENCH_LABEL: rng.choice(_BENCH_LABEL_VALUES)}
        key = LABEL_ZONE if group == "zonal-spread" else LABEL_HOSTNAME
        spread = {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": selector},
        }
        return labels, {"topologySpreadConstraints": [spread]}
    if group == "zonal-affinity":
        labels = {BENCH_AFFINITY_LABEL: rng.choice(_BENCH_LABEL_VALUES)}
        term = {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": LABEL_ZONE}
        return labels, {
            "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        }
    if group == "hostname-anti-affinity":
        labels = {"app": "nginx"}
        term = {"labelSelector": {"matchLabels": {"app": "nginx"}}, "topologyKey": LABEL_HOSTNAME}
        return labels, {
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        }
    raise ValueError(f"unknown group {group!r}")


# --------------------------------------------------------------------------------------------------
# b) a running cluster for the disruption benchmark


@dataclass(frozen=True)
class PoolSpec:
    """How one NodePool of the synthetic cluster looks and which nodes/pods it gets."""

    name: str
    share: float  # fraction of the nodes
    families: tuple[str, ...]
    spot_fraction: float  # fraction of its nodes that are spot
    requirements: tuple[Doc, ...]
    budgets: tuple[Doc, ...]
    consolidate_after: str
    size_weights: Mapping[str, float]
    pod_classes: tuple[str, ...]  # which deployment classes may run on its nodes
    taint: Doc | None = None
    weight: int | None = None
    limits_factor: float | None = None  # spec.limits = factor x what its nodes have now
    termination_grace_period: str | None = None


def _req(key: str, operator: str, *values: str) -> Doc:
    return {"key": key, "operator": operator, "values": list(values)}


_GENERAL_FAMILIES = ("m5", "m6i", "m6a", "m7i", "c5", "c6i", "c6a", "c7i", "r5", "r6i")
_SIZES_GENERAL: Mapping[str, float] = {
    "large": 10,
    "xlarge": 25,
    "2xlarge": 30,
    "4xlarge": 25,
    "8xlarge": 8,
    "12xlarge": 2,
}
_SIZES_SMALLER: Mapping[str, float] = {"large": 15, "xlarge": 30, "2xlarge": 30, "4xlarge": 20, "8xlarge": 5}

POOLS: tuple[PoolSpec, ...] = (
    PoolSpec(
        name="general",
        share=0.40,
        families=_GENERAL_FAMILIES,
        spot_fraction=0.0,
        requirements=(
            _req(LABEL_CAPACITY_TYPE, "In", "on-demand"),
            _req("karpenter.k8s.aws/instance-family", "In", *_GENERAL_FAMILIES),
            _req(LABEL_ARCH, "In", "amd64"),
            _req(LABEL_OS, "In", "linux"),
            _req(LABEL_ZONE, "In", *ZONES),
            _req("karpenter.k8s.aws/instance-size", "NotIn", "nano", "micro", "small", "metal"),
        ),
        budgets=({"nodes": "10%"},),
        consolidate_after="1m",
        size_weights=_SIZES_GENERAL,
        pod_classes=("shared", "ondemand"),
        limits_factor=1.5,
        termination_grace_period="48h",
    ),
    PoolSpec(
        name="spot",
        share=0.30,
        families=("m6i", "m6a", "m7i", "c6i", "c6a", "c7i"),
        spot_fraction=1.0,
        requirements=(
            _req(LABEL_CAPACITY_TYPE, "In", "spot"),
            _req("karpenter.k8s.aws/instance-category", "In", "c", "m"),
            _req("karpenter.k8s.aws/instance-generation", "Gt", "5"),
            _req(LABEL_ARCH, "In", "amd64"),
            _req(LABEL_ZONE, "In", *ZONES),
        ),
        budgets=({"nodes": "20%"},),
        consolidate_after="1m",
        size_weights=_SIZES_SMALLER,
        pod_classes=("shared",),
        weight=10,
    ),
    PoolSpec(
        name="memory",
        share=0.15,
        families=("r5", "r6i", "r6a", "r7i"),
        spot_fraction=0.0,
        requirements=(
            _req(LABEL_CAPACITY_TYPE, "In", "on-demand"),
            _req("karpenter.k8s.aws/instance-category", "In", "r"),
            _req("karpenter.k8s.aws/instance-generation", "Gt", "4"),
            _req(LABEL_ARCH, "In", "amd64"),
            _req(LABEL_ZONE, "In", *ZONES),
        ),
        budgets=(
            {"nodes": "10%"},
            # No consolidation during the weekday evening batch window (17:00-20:00 UTC).
            {"nodes": "0", "schedule": "0 17 * * 1-5", "duration": "3h", "reasons": ["Underutilized"]},
        ),
        consolidate_after="10m",
        size_weights=_SIZES_SMALLER,
        pod_classes=("memory",),
        taint={"key": "workload", "value": "memory", "effect": "NoSchedule"},
        limits_factor=2.0,
    ),
    PoolSpec(
        name="batch",
        share=0.15,
        families=("c6g", "c7g", "m6g", "m7g"),
        spot_fraction=0.7,
        requirements=(
            _req(LABEL_CAPACITY_TYPE, "In", "spot", "on-demand"),
            _req("karpenter.k8s.aws/instance-family", "In", "c6g", "c7g", "m6g", "m7g"),
            _req(LABEL_ARCH, "In", "arm64"),
            _req(LABEL_ZONE, "In", *ZONES),
        ),
        budgets=({"nodes": "20%"}, {"nodes": "5", "reasons": ["Drifted", "Expired"]}),
        consolidate_after="5m",
        size_weights=_SIZES_SMALLER,
        pod_classes=("batch",),
        taint={"key": "workload", "value": "batch", "effect": "NoSchedule"},
    ),
)

# Deployment classes: CPU request menu (millicores) and memory per core (MiB).
_CLASS_CPU: dict[str, tuple[int, ...]] = {
    "shared": (50, 100, 100, 150, 200, 250, 250, 300, 400, 500, 500, 750, 1000, 1000, 1500, 2000, 3000, 4000),
    "ondemand": (100, 250, 500, 500, 1000, 1000, 2000, 4000),
    "memory": (250, 500, 1000, 1000, 2000, 3000, 4000, 6000),
    "batch": (250, 500, 1000, 1000, 2000, 4000),
}
_CLASS_MEM_PER_CORE: dict[str, tuple[int, ...]] = {
    "shared": (1024, 1536, 2048, 2048, 3072, 4096),
    "ondemand": (1024, 2048, 2048, 4096),
    "memory": (5120, 6144, 7168),
    "batch": (1024, 1536, 2048),
}
_CLASS_SHARE = {"shared": 0.55, "ondemand": 0.15, "memory": 0.15, "batch": 0.15}
_NAMESPACES = {
    "shared": ("web", "checkout", "search", "catalog", "accounts", "notifications"),
    "ondemand": ("payments", "checkout", "accounts"),
    "memory": ("cache", "analytics"),
    "batch": ("batch", "ml"),
}
_DAEMONSETS = (  # name, namespace, cpu millicores, memory MiB (0 = no memory request), image
    ("aws-node", "kube-system", 25, 0, "registry.example/amazon-k8s-cni:v1.19.0"),
    ("kube-proxy", "kube-system", 100, 0, "registry.example/kube-proxy:v1.31.2"),
)
_PRIORITY = {"high-priority": 100000, "batch-low": -10}
_UNDER_FRACTION = 0.30


@dataclass(slots=True, eq=False)
class _Deployment:
    index: int
    name: str
    namespace: str
    cls: str
    cpu_m: int
    mem_mib: int
    rs_hash: str
    rs_uid: str
    priority_class: str | None = None
    deletion_cost: bool = False
    do_not_disrupt: bool = False
    do_not_evict: bool = False
    zone_spread: bool = False
    anti_affinity: bool = False
    created: datetime | None = None
    pods: int = 0

    @property
    def constrained(self) -> bool:
        return self.zone_spread or self.anti_affinity

    @property
    def labels(self) -> dict[str, str]:
        return {"app": self.name, "app.kubernetes.io/name": self.name, "pod-template-hash": self.rs_hash}


@dataclass(slots=True, eq=False)
class _Node:
    index: int
    name: str
    pool: PoolSpec
    it: CatalogType
    zone: str
    capacity_type: str
    created: datetime
    under: bool
    empty: bool
    ip: str
    instance_id: str
    hash: str
    target_cpu_m: int = 0
    band_cpu_m: int = 0  # never fill above this (30 % or 90 % of allocatable)
    quota: int = 0
    used_cpu_m: int = 0
    used_mem_mib: int = 0
    used_pods: int = 0
    deployments: list[_Deployment] = field(default_factory=list)
    do_not_disrupt: bool = False

    def fits(self, cpu_m: int, mem_mib: int, limit_cpu_m: int) -> bool:
        return (
            self.used_cpu_m + cpu_m <= limit_cpu_m
            and self.used_mem_mib + mem_mib <= self.it.alloc_mem_mib
            and self.used_pods < self.it.pods
        )

    def add(self, dep: _Deployment) -> None:
        self.used_cpu_m += dep.cpu_m
        self.used_mem_mib += dep.mem_mib
        self.used_pods += 1
        self.deployments.append(dep)
        dep.pods += 1


def disruption_cluster(
    n_nodes: int = 2000, n_pods: int = 20000, seed: int = 7, now: str = "2026-11-23T18:30:00Z"
) -> list[Doc]:
    """A running cluster for the decision-engine benchmark, as of ``now``.

    ``n_pods`` counts every pod, DaemonSet pods included (there are two DaemonSets, so each node
    carries two). Returned in kubectl's order: NodePools, Nodes, DaemonSets, PDBs, Pods.
    """
    ds_per_node = len(_DAEMONSETS)
    n_workload = n_pods - ds_per_node * n_nodes
    if n_nodes < 1:
        raise ValueError("n_nodes must be >= 1")
    if n_workload < 0:
        raise ValueError(f"n_pods must be at least {ds_per_node * n_nodes} (the DaemonSet pods)")
    rng = random.Random(seed)
    now_dt = parse_time(now)
    catalog = load_catalog()
    ds_cpu = sum(d[2] for d in _DAEMONSETS)
    ds_mem = sum(d[3] for d in _DAEMONSETS)

    pool_hash = {p.name: _stable_hash(f"{p.name}/{p.requirements}/{p.taint}") for p in POOLS}
    nodes = _make_nodes(n_nodes, rng, now_dt, catalog, pool_hash)
    for node in nodes:
        node.used_cpu_m, node.used_mem_mib, node.used_pods = ds_cpu, ds_mem, ds_per_node
    deployments = _make_deployments(n_workload, rng, now_dt)
    _set_quotas(nodes, n_workload, rng)
    _place_constrained(nodes, deployments, rng)
    leftover = _fill(nodes, deployments, rng)
    _place_leftovers(nodes, deployments, leftover, rng)
    _mark_pod_controls(deployments, n_workload, rng)

    docs: list[Doc] = [_nodepool_doc(p, pool_hash[p.name], nodes, now_dt, rng) for p in POOLS]
    docs.extend(_node_doc(n, now_dt, rng) for n in nodes)
    docs.extend(_daemonset_doc(d, n_nodes, now_dt, rng) for d in _DAEMONSETS)
    docs.extend(_pdb_docs(deployments, now_dt, rng))
    docs.extend(_pod_docs(nodes, now_dt, rng))
    return docs


def _make_nodes(
    n_nodes: int,
    rng: random.Random,
    now: datetime,
    catalog: dict[str, CatalogType],
    pool_hash: dict[str, str],
) -> list[_Node]:
    # How many nodes each pool gets (largest remainder so the total is exact).
    raw = [p.share * n_nodes for p in POOLS]
    counts = [int(x) for x in raw]
    by_remainder = sorted(range(len(POOLS)), key=lambda i: raw[i] - counts[i], reverse=True)
    for i in by_remainder[: n_nodes - sum(counts)]:
        counts[i] += 1
    pools = [p for p, c in zip(POOLS, counts, strict=True) for _ in range(c)]
    rng.shuffle(pools)

    n_under = round(_UNDER_FRACTION * n_nodes)
    under = set(rng.sample(range(n_nodes), n_under))
    empty = set(rng.sample(sorted(under), min(n_under, max(1, round(0.015 * n_nodes)))))
    special = [i for i in range(n_nodes) if i not in empty]
    rng.shuffle(special)
    n_few = max(1, n_nodes // 100)
    expired = set(special[:n_few])
    drifted = set(special[n_few : 2 * n_few])
    fresh = set(special[2 * n_few : 3 * n_few])  # launched in the last 15 minutes
    protected = set(special[3 * n_few : 3 * n_few + max(1, n_nodes // 500)])

    ips = _unique_ips(rng, n_nodes)
    nodes: list[_Node] = []
    for i, pool in enumerate(pools):
        family = rng.choice(pool.families)
        sizes = [s for s in pool.size_weights if f"{family}.{s}" in catalog]
        size = rng.choices(sizes, weights=[pool.size_weights[s] for s in sizes])[0]
        it = catalog[f"{family}.{size}"]
        if i in expired:
            age = timedelta(days=30, hours=rng.uniform(1, 96))
        elif i in fresh:
            age = timedelta(minutes=rng.uniform(2, 15))
        else:
            age = timedelta(minutes=rng.uniform(20, 25 * 24 * 60))
        ip = ips[i]
        nodes.append(
            _Node(
                index=i,
                name=f"ip-{ip.replace('.', '-')}.ec2.internal",
                pool=pool,
                it=it,
                zone=rng.choice(ZONES),
                capacity_type="spot" if rng.random() < pool.spot_fraction else "on-demand",
                created=now - age,
                under=i in under,
                empty=i in empty,
                ip=ip,
                instance_id=f"i-0{rng.getrandbits(64):016x}",
                hash=_stable_hash(f"{pool.name}/previous") if i in drifted else pool_hash[pool.name],
                do_not_disrupt=i in protected,
            )
        )
    # One node whose labels no longer satisfy its NodePool (a generation-5 type in the spot pool).
    spot_nodes = [n for n in nodes if n.pool.name == "spot" and not n.empty and n.index not in drifted]
    if n_nodes >= 50 and spot_nodes:
        victim = spot_nodes[0]
        victim.it = catalog["c5.xlarge"]
    return nodes


def _unique_ips(rng: random.Random, n: int) -> list[str]:
    values = rng.sample(range(1 << 8, (1 << 22) - 1), n + n // 50 + 16)
    out: list[str] = []
    for v in values:
        if v & 0xFF in (0, 255):
            continue
        out.append(f"10.{(v >> 16) & 0x3F}.{(v >> 8) & 0xFF}.{v & 0xFF}")
        if len(out) == n:
            break
    return out


def _make_deployments(n_workload: int, rng: random.Random, now: datetime) -> list[_Deployment]:
    total = max(12, n_workload // 30)
    deployments: list[_Deployment] = []
    for cls, share in _CLASS_SHARE.items():
        for _ in range(max(3, round(total * share))):
            index = len(deployments)
            cpu = rng.choice(_CLASS_CPU[cls])
            mem = max(64, round(cpu * rng.choice(_CLASS_MEM_PER_CORE[cls]) / 1000 / 64) * 64)
            dep = _Deployment(
                index=index,
                name=f"app-{index}",
                namespace=rng.choice(_NAMESPACES[cls]),
                cls=cls,
                cpu_m=cpu,
                mem_mib=mem,
                rs_hash=_suffix(rng, 10),
                rs_uid=_uid(rng),
                created=now - timedelta(days=rng.uniform(26, 120)),
            )
            if cls == "batch":
                dep.priority_class = "batch-low"
            elif rng.random() < (0.4 if cls == "ondemand" else 0.1):
                dep.priority_class = "high-priority"
            dep.deletion_cost = rng.random() < 0.1
            deployments.append(dep)
    # A few shared/ondemand deployments spread over zones or keep one pod per node.
    candidates = [d for d in deployments if d.cls in ("shared", "ondemand") and d.cpu_m <= 1000]
    rng.shuffle(candidates)
    n_constrained = max(2, len(deployments) // 50)
    for k, dep in enumerate(candidates[: 2 * n_constrained]):
        if k % 2 == 0:
            dep.zone_spread = True
        else:
            dep.anti_affinity = True
        if k == 0:
            dep.anti_affinity = True  # one has both
    return deployments


def _set_quotas(nodes: list[_Node], n_workload: int, rng: random.Random) -> None:
    """How many workload pods each node gets, and the CPU it should end up requesting.

    Underutilized nodes get a few pods each (so they are not empty); the packed nodes share the
    rest in proportion to sqrt(size) x target utilisation, capped by their pod and CPU room.
    """
    weights: list[float] = []
    caps: list[int] = []
    quotas: list[int] = []
    for node in nodes:
        alloc = node.it.alloc_cpu_m
        if node.under:
            frac = max(rng.uniform(0.08, 0.27), (node.used_cpu_m + 120) / alloc)
            node.band_cpu_m = int(0.29 * alloc)
        else:
            frac = rng.uniform(0.62, 0.88)
            node.band_cpu_m = int(0.90 * alloc)
        node.target_cpu_m = max(0, int(frac * alloc) - node.used_cpu_m)
        room = node.it.pods - node.used_pods
        if node.empty:
            cap = 0
        elif node.under:
            cap = max(0, min(room, node.target_cpu_m // 60, 1 + node.it.cpu_m // 4000))
        else:
            cap = max(0, min(room, node.target_cpu_m // 50))
        caps.append(cap)
        quotas.append(rng.randint(1, cap) if node.under and cap else 0)
        weights.append(0.0 if node.under or cap == 0 else math.sqrt(alloc / 1000) * frac)
    # Tiny clusters: fewer pods than the underutilized nodes would take.
    while sum(quotas) > n_workload:
        quotas[rng.choice([i for i, q in enumerate(quotas) if q > 0])] -= 1
    if sum(caps) < n_workload:
        raise ValueError(f"{len(nodes)} nodes cannot hold {n_workload} workload pods; use more nodes")
    remaining = n_workload - sum(quotas)
    active = [i for i, w in enumerate(weights) if w > 0]
    while remaining > 0 and active:  # water-filling: proportional shares, capped, repeated
        total_w = sum(weights[i] for i in active)
        shares = {i: remaining * weights[i] / total_w for i in active}
        given = 0
        for i in active:
            add = min(int(shares[i]), caps[i] - quotas[i])
            quotas[i] += add
            given += add
        remaining -= given
        if remaining and given == 0:  # shares all below one pod: hand them out by largest share
            for i in sorted(active, key=lambda i: shares[i], reverse=True)[:remaining]:
                quotas[i] += 1
                remaining -= 1
        active = [i for i in active if quotas[i] < caps[i]]
    if remaining > 0:  # packed nodes are full: the underutilized ones take the rest
        for i in sorted(range(len(nodes)), key=lambda i: caps[i] - quotas[i], reverse=True):
            add = min(remaining, caps[i] - quotas[i])
            quotas[i] += add
            remaining -= add
    for node, q in zip(nodes, quotas, strict=True):
        node.quota = q


def _place_constrained(nodes: list[_Node], deployments: list[_Deployment], rng: random.Random) -> None:
    """Place spread / anti-affinity deployments first: exactly balanced over zones, one pod per node."""
    by_zone: dict[tuple[str, str], list[_Node]] = {}
    for node in nodes:
        if node.quota > 0:
            for cls in node.pool.pod_classes:
                by_zone.setdefault((cls, node.zone), []).append(node)
    for dep in deployments:
        if not dep.constrained:
            continue
        replicas = 3 * rng.randint(1, 4) if dep.zone_spread else rng.randint(2, 6)
        placed: dict[str, list[_Node]] = {zone: [] for zone in ZONES}
        used: set[int] = set()
        for r in range(replicas):
            zone = ZONES[r % 3] if dep.zone_spread else rng.choice(ZONES)
            got = _try_place(dep, by_zone.get((dep.cls, zone), []), used, rng)
            if got is not None:
                placed[zone].append(got)
        if dep.zone_spread:  # the scheduler kept the skew at most 1; keep it at 0
            even = min(len(on) for on in placed.values())
            for on in placed.values():
                for node in on[even:]:
                    _remove(node, dep)


def _try_place(dep: _Deployment, candidates: list[_Node], used: set[int], rng: random.Random) -> _Node | None:
    for _ in range(60 if candidates else 0):
        node = rng.choice(candidates)
        if node.index in used or node.quota <= 0 or not node.fits(dep.cpu_m, dep.mem_mib, node.band_cpu_m):
            continue
        node.add(dep)
        node.quota -= 1
        node.target_cpu_m -= dep.cpu_m
        used.add(node.index)
        return node
    return None


def _remove(node: _Node, dep: _Deployment) -> None:
    node.deployments.remove(dep)
    node.used_cpu_m -= dep.cpu_m
    node.used_mem_mib -= dep.mem_mib
    node.used_pods -= 1
    node.quota += 1
    node.target_cpu_m += dep.cpu_m
    dep.pods -= 1


class _Menu:
    """Free (unconstrained) deployments a node may run, indexed by CPU request."""

    def __init__(self, deployments: Iterable[_Deployment]) -> None:
        groups: dict[int, list[_Deployment]] = {}
        for dep in deployments:
            groups.setdefault(dep.cpu_m, []).append(dep)
        self.cpus = sorted(groups)
        self.groups = [groups[c] for c in self.cpus]

    def pick(
        self, node: _Node, target_cpu: float, target_mem: float, rng: random.Random
    ) -> _Deployment | None:
        if not self.cpus:
            return None
        pos = bisect.bisect_left(self.cpus, target_cpu)
        best: _Deployment | None = None
        best_score = math.inf
        for gi in range(max(0, pos - 3), min(len(self.cpus), pos + 2)):
            group = self.groups[gi]
            for dep in rng.sample(group, min(3, len(group))):
                if not node.fits(dep.cpu_m, dep.mem_mib, node.band_cpu_m):
                    continue
                score = abs(dep.cpu_m - target_cpu) / max(target_cpu, 1.0)
                if dep.mem_mib > target_mem:
                    score += (dep.mem_mib - target_mem) / max(target_mem, 1.0)
                score += rng.random() * 0.05
                if score < best_score:
                    best, best_score = dep, score
        if best is None:  # nothing near the target fits: the largest smaller one that does
            for gi in range(min(pos, len(self.cpus) - 1), -1, -1):
                for dep in self.groups[gi]:
                    if node.fits(dep.cpu_m, dep.mem_mib, node.band_cpu_m):
                        return dep
        return best


def _menus(deployments: Sequence[_Deployment]) -> dict[str, _Menu]:
    menus: dict[str, _Menu] = {}
    for pool in POOLS:
        menus[pool.name] = _Menu(d for d in deployments if d.cls in pool.pod_classes and not d.constrained)
    return menus


def _fill(nodes: list[_Node], deployments: list[_Deployment], rng: random.Random) -> int:
    """Fill each node up to its quota, aiming at its CPU target. Returns the pods that did not fit."""
    menus = _menus(deployments)
    leftover = 0
    for node in nodes:
        menu = menus[node.pool.name]
        slots = node.quota
        mem_budget = 0.9 * node.it.alloc_mem_mib - node.used_mem_mib
        while slots > 0:
            target_cpu = max(node.target_cpu_m, 0) / slots
            target_mem = max(mem_budget, 0) / slots
            dep = menu.pick(node, target_cpu, target_mem, rng)
            if dep is None:
                break
            node.add(dep)
            node.target_cpu_m -= dep.cpu_m
            mem_budget -= dep.mem_mib
            slots -= 1
        leftover += slots
        node.quota = 0
        if not node.under:
            _top_up(node, menu, int(0.6 * node.it.alloc_cpu_m) + 1)
    return leftover


def _top_up(node: _Node, menu: _Menu, floor_cpu_m: int) -> None:
    """Swap small pods of a packed node for bigger ones until it requests at least ``floor_cpu_m``."""
    for k, dep in sorted(enumerate(node.deployments), key=lambda kd: kd[1].cpu_m):
        if node.used_cpu_m >= floor_cpu_m:
            return
        if dep.constrained:
            continue
        for group in reversed(menu.groups):
            bigger = next(
                (
                    d
                    for d in group
                    if d.cpu_m > dep.cpu_m
                    and node.used_cpu_m - dep.cpu_m + d.cpu_m <= node.band_cpu_m
                    and node.used_mem_mib - dep.mem_mib + d.mem_mib <= node.it.alloc_mem_mib
                ),
                None,
            )
            if bigger is not None:
                node.used_cpu_m += bigger.cpu_m - dep.cpu_m
                node.used_mem_mib += bigger.mem_mib - dep.mem_mib
                node.deployments[k] = bigger
                dep.pods -= 1
                bigger.pods += 1
                break


def _place_leftovers(
    nodes: list[_Node], deployments: list[_Deployment], leftover: int, rng: random.Random
) -> None:
    """Pods that missed their node go, smallest first, wherever there is room within the node's band."""
    if leftover <= 0:
        return
    menus = _menus(deployments)
    order = [n for n in nodes if not n.empty]
    rng.shuffle(order)
    while leftover > 0:
        placed = 0
        for node in order:
            if leftover == 0:
                break
            menu = menus[node.pool.name]
            dep = menu.pick(node, 0.0, 0.0, rng)
            if dep is None:
                continue
            node.add(dep)
            leftover -= 1
            placed += 1
        if placed == 0:
            raise ValueError("too many pods for these nodes; use more nodes or fewer pods")


def _mark_pod_controls(deployments: list[_Deployment], n_workload: int, rng: random.Random) -> None:
    """About 1 % of pods get ``do-not-disrupt`` (whole small Deployments), one Deployment ``do-not-evict``."""
    pool = [d for d in deployments if d.pods > 0 and not d.constrained]
    rng.shuffle(pool)
    need = max(1, round(0.01 * n_workload))
    for dep in pool:
        if need <= 0:
            break
        if dep.pods <= max(2, need * 2):
            dep.do_not_disrupt = True
            need -= dep.pods
    for dep in pool:
        if not dep.do_not_disrupt and 0 < dep.pods <= 3:
            dep.do_not_evict = True
            break


# --------------------------------------------------------------------------------------------------
# documents


def _nodepool_doc(pool: PoolSpec, hash_: str, nodes: list[_Node], now: datetime, rng: random.Random) -> Doc:
    mine = [n for n in nodes if n.pool is pool]
    cpu = sum(n.it.cpu_m for n in mine)
    mem = sum(n.it.mem_mib for n in mine)
    template_spec: Doc = {
        "requirements": [dict(r, values=list(r["values"])) for r in pool.requirements],
        "nodeClassRef": _node_class_ref(),
        "expireAfter": "720h",
    }
    if pool.taint:
        template_spec["taints"] = [dict(pool.taint)]
    if pool.termination_grace_period:
        template_spec["terminationGracePeriod"] = pool.termination_grace_period
    spec: Doc = {
        "template": {"metadata": {"labels": {"team": "platform"}}, "spec": template_spec},
        "disruption": {
            "consolidationPolicy": "WhenEmptyOrUnderutilized",
            "consolidateAfter": pool.consolidate_after,
            "budgets": [dict(b) for b in pool.budgets],
        },
    }
    if pool.limits_factor:
        spec["limits"] = {
            "cpu": str(max(100, math.ceil(cpu / 1000 * pool.limits_factor / 100) * 100)),
            "memory": f"{max(400, math.ceil(mem / 1024 * pool.limits_factor / 100) * 100)}Gi",
        }
    if pool.weight is not None:
        spec["weight"] = pool.weight
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {
            "name": pool.name,
            "uid": _uid(rng),
            "generation": 3,
            "resourceVersion": str(rng.randint(10**6, 10**8)),
            "creationTimestamp": fmt_time(now - timedelta(days=180)),
            "annotations": {ANN_HASH: hash_, ANN_HASH_VERSION: HASH_VERSION},
        },
        "spec": spec,
        "status": {
            "resources": {
                "cpu": fmt_cpu(cpu),
                "memory": f"{mem * 1024}Ki",
                "nodes": str(len(mine)),
                "pods": str(sum(n.it.pods for n in mine)),
            },
            "conditions": [
                {
                    "type": cond,
                    "status": "True",
                    "reason": cond,
                    "message": "",
                    "observedGeneration": 3,
                    "lastTransitionTime": fmt_time(now - timedelta(days=40)),
                }
                for cond in ("NodeClassReady", "ValidationSucceeded", "Ready")
            ],
        },
    }


def _node_doc(node: _Node, now: datetime, rng: random.Random) -> Doc:
    it = node.it
    labels = {
        **{k: v for k, v in it.labels.items() if k.startswith("karpenter.k8s.aws/")},
        "team": "platform",
        LABEL_NODEPOOL: node.pool.name,
        LABEL_INITIALIZED: "true",
        LABEL_REGISTERED: "true",
        LABEL_CAPACITY_TYPE: node.capacity_type,
        LABEL_INSTANCE_TYPE: it.name,
        LABEL_ZONE: node.zone,
        LABEL_REGION: REGION,
        LABEL_HOSTNAME: node.name,
        LABEL_OS: "linux",
        LABEL_ARCH: it.arch,
        "beta.kubernetes.io/instance-type": it.name,
        "beta.kubernetes.io/arch": it.arch,
        "beta.kubernetes.io/os": "linux",
        "failure-domain.beta.kubernetes.io/zone": node.zone,
        "failure-domain.beta.kubernetes.io/region": REGION,
        "topology.k8s.aws/zone-id": f"use1-az{ZONES.index(node.zone) + 1}",
    }
    annotations = {
        ANN_HASH: node.hash,
        ANN_HASH_VERSION: HASH_VERSION,
        "alpha.kubernetes.io/provided-node-ip": node.ip,
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    }
    if node.do_not_disrupt:
        annotations[ANN_DO_NOT_DISRUPT] = "true"
    created = fmt_time(node.created)
    ready_since = fmt_time(node.created + timedelta(seconds=38))
    heartbeat = fmt_time(now - timedelta(seconds=rng.randint(1, 40)))
    capacity = {
        "cpu": fmt_cpu(it.cpu_m),
        "ephemeral-storage": "20959212Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{it.mem_mib * 1024}Ki",
        "pods": str(it.pods),
    }
    allocatable = dict(
        capacity,
        cpu=fmt_cpu(it.alloc_cpu_m),
        memory=f"{it.alloc_mem_mib * 1024}Ki",
        **{"ephemeral-storage": "18242267924"},
    )
    spec: Doc = {"providerID": f"aws:///{node.zone}/{node.instance_id}"}
    if node.pool.taint:
        spec["taints"] = [dict(node.pool.taint)]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "uid": _uid(rng),
            "resourceVersion": str(rng.randint(10**6, 10**8)),
            "creationTimestamp": created,
            "labels": labels,
            "annotations": annotations,
            "finalizers": ["karpenter.sh/termination"],
        },
        "spec": spec,
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": node.ip},
                {"type": "InternalDNS", "address": node.name},
                {"type": "Hostname", "address": node.name},
            ],
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": [
                *(
                    {
                        "type": kind,
                        "status": "False",
                        "reason": f"KubeletHasSufficient{short}" if short else "KubeletHasNoDiskPressure",
                        "message": message,
                        "lastHeartbeatTime": heartbeat,
                        "lastTransitionTime": created,
                    }
                    for kind, short, message in (
                        ("MemoryPressure", "Memory", "kubelet has sufficient memory available"),
                        ("DiskPressure", "", "kubelet has no disk pressure"),
                        ("PIDPressure", "PID", "kubelet has sufficient PID available"),
                    )
                ),
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": heartbeat,
                    "lastTransitionTime": ready_since,
                },
            ],
            "nodeInfo": {
                "architecture": it.arch,
                "containerRuntimeVersion": "containerd://1.7.23",
                "kernelVersion": "6.1.115-126.197.amzn2023.x86_64"
                if it.arch == "amd64"
                else "6.1.115-126.197.amzn2023.aarch64",
                "kubeProxyVersion": "v1.31.2-eks-94953ac",
                "kubeletVersion": "v1.31.2-eks-94953ac",
                "operatingSystem": "linux",
                "osImage": "Amazon Linux 2023.6.20241111",
            },
        },
    }


def _daemonset_doc(
    ds: tuple[str, str, int, int, str], n_nodes: int, now: datetime, rng: random.Random
) -> Doc:
    name, namespace, cpu, mem, image = ds
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": _ds_uid(name),
            "generation": 2,
            "resourceVersion": str(rng.randint(10**6, 10**8)),
            "creationTimestamp": fmt_time(now - timedelta(days=200)),
            "labels": {"k8s-app": name},
        },
        "spec": {
            "selector": {"matchLabels": {"k8s-app": name}},
            "template": {
                "metadata": {"labels": {"k8s-app": name}},
                "spec": _daemon_pod_spec(name, cpu, mem, image, None),
            },
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": "10%", "maxSurge": 0},
            },
        },
        "status": {
            "currentNumberScheduled": n_nodes,
            "desiredNumberScheduled": n_nodes,
            "numberAvailable": n_nodes,
            "numberMisscheduled": 0,
            "numberReady": n_nodes,
            "observedGeneration": 2,
            "updatedNumberScheduled": n_nodes,
        },
    }


def _ds_uid(name: str) -> str:
    return str(uuid.UUID(bytes=hashlib.sha256(f"daemonset/{name}".encode()).digest()[:16], version=4))


def _daemon_pod_spec(name: str, cpu: int, mem: int, image: str, node_name: str | None) -> Doc:
    requests = {"cpu": fmt_cpu(cpu)}
    if mem:
        requests["memory"] = fmt_mem_mib(mem)
    spec: Doc = {
        "containers": [{"name": name, "image": image, "resources": {"requests": requests}}],
        "dnsPolicy": "ClusterFirst",
        "hostNetwork": True,
        "priorityClassName": "system-node-critical",
        "priority": 2000001000,
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "serviceAccountName": name,
        "terminationGracePeriodSeconds": 30,
        "tolerations": [{"operator": "Exists"}],
    }
    if node_name is not None:
        spec["nodeName"] = node_name
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                    ]
                }
            }
        }
    return spec


def _pdb_docs(deployments: list[_Deployment], now: datetime, rng: random.Random) -> list[Doc]:
    docs: list[Doc] = []
    blocking = 0
    max_blocking = max(1, len(deployments) // 100)
    for dep in deployments:
        n = dep.pods
        value: int | str
        if n == 0:
            continue
        if n == 1 and blocking < max_blocking and rng.random() < 0.3:
            # The classic mistake: a one-replica Deployment with minAvailable 1 can never be evicted.
            kind, value, desired = "minAvailable", 1, 1
            blocking += 1
        elif n >= 2 and (dep.constrained or rng.random() < 0.35):
            if rng.random() < 0.5:
                kind, value, desired = "maxUnavailable", 1, n - 1
            else:
                kind, value, desired = "minAvailable", "50%", math.ceil(n * 0.5)
        else:
            continue
        allowed = max(0, n - desired)
        docs.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {
                    "name": dep.name,
                    "namespace": dep.namespace,
                    "uid": _uid(rng),
                    "generation": 1,
                    "resourceVersion": str(rng.randint(10**6, 10**8)),
                    "creationTimestamp": fmt_time(dep.created or now),
                    "labels": {"app": dep.name},
                },
                "spec": {kind: value, "selector": {"matchLabels": {"app": dep.name}}},
                "status": {
                    "conditions": [
                        {
                            "type": "DisruptionAllowed",
                            "status": "True" if allowed else "False",
                            "reason": "SufficientPods" if allowed else "InsufficientPods",
                            "message": "",
                            "observedGeneration": 1,
                            "lastTransitionTime": fmt_time(now - timedelta(hours=rng.uniform(1, 200))),
                        }
                    ],
                    "currentHealthy": n,
                    "desiredHealthy": desired,
                    "disruptionsAllowed": allowed,
                    "expectedPods": n,
                    "observedGeneration": 1,
                },
            }
        )
    return docs


def _pod_docs(nodes: list[_Node], now: datetime, rng: random.Random) -> list[Doc]:
    docs: list[Doc] = []
    names: set[str] = set()
    pod_counter = 0
    for node in nodes:
        node_age = (now - node.created).total_seconds()
        ds_start = node.created + timedelta(seconds=20)
        for ds_name, namespace, cpu, mem, image in _DAEMONSETS:
            name = f"{ds_name}-{_suffix(rng, 5)}"
            while name in names:
                name = f"{ds_name}-{_suffix(rng, 5)}"
            names.add(name)
            docs.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": namespace,
                        "uid": _uid(rng),
                        "labels": {"k8s-app": ds_name, "controller-revision-hash": "6c9d8b7f4d"},
                        "annotations": {},
                        "creationTimestamp": fmt_time(node.created + timedelta(seconds=5)),
                        "ownerReferences": [
                            {
                                "apiVersion": "apps/v1",
                                "kind": "DaemonSet",
                                "name": ds_name,
                                "uid": _ds_uid(ds_name),
                                "controller": True,
                                "blockOwnerDeletion": True,
                            }
                        ],
                    },
                    "spec": _daemon_pod_spec(ds_name, cpu, mem, image, node.name),
                    "status": _pod_status(fmt_time(ds_start), node.ip, node.ip, "Burstable"),
                }
            )
        for dep in node.deployments:
            pod_counter += 1
            name = f"{dep.name}-{dep.rs_hash}-{_suffix(rng, 5)}"
            while name in names:
                name = f"{dep.name}-{dep.rs_hash}-{_suffix(rng, 5)}"
            names.add(name)
            # Most pods have been there a while; a few arrived in the last ten minutes.
            if rng.random() < 0.02:
                started = now - timedelta(seconds=rng.uniform(5, min(600, node_age)))
            else:
                started = node.created + timedelta(seconds=rng.uniform(40, max(41, node_age - 900)))
            docs.append(_workload_pod(dep, name, node, started, pod_counter, rng))
    return docs


def _pod_status(start: str, host_ip: str, pod_ip: str, qos: str) -> Doc:
    return {
        "phase": "Running",
        "startTime": start,
        "hostIP": host_ip,
        "podIP": pod_ip,
        "qosClass": qos,
        "conditions": [
            {"type": kind, "status": "True", "lastTransitionTime": start}
            for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
    }


def _workload_pod(
    dep: _Deployment, name: str, node: _Node, started: datetime, counter: int, rng: random.Random
) -> Doc:
    start = fmt_time(started)
    annotations: dict[str, str] = {}
    if dep.do_not_disrupt:
        annotations[ANN_DO_NOT_DISRUPT] = "true"
    if dep.do_not_evict:
        annotations[ANN_DO_NOT_EVICT] = "true"
    if dep.deletion_cost:
        annotations[ANN_DELETION_COST] = str(rng.randint(-100, 1000))
    labels = dep.labels
    spec: Doc = {
        "containers": [
            {
                "name": "app",
                "image": f"registry.example/{dep.namespace}/{dep.name}:1.{dep.index % 17}.0",
                "resources": {
                    "requests": {"cpu": fmt_cpu(dep.cpu_m), "memory": fmt_mem_mib(dep.mem_mib)},
                    "limits": {"memory": fmt_mem_mib(dep.mem_mib)},
                },
            }
        ],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "nodeName": node.name,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": _PRIORITY.get(dep.priority_class or "", 0),
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "serviceAccountName": "default",
        "terminationGracePeriodSeconds": 30,
        "tolerations": _default_tolerations(),
    }
    if dep.priority_class:
        spec["priorityClassName"] = dep.priority_class
    if dep.cls == "ondemand":
        spec["nodeSelector"] = {LABEL_CAPACITY_TYPE: "on-demand"}
    elif dep.cls in ("memory", "batch"):
        spec["nodeSelector"] = {LABEL_NODEPOOL: dep.cls}
        if dep.cls == "batch":
            spec["nodeSelector"][LABEL_ARCH] = "arm64"
        spec["tolerations"].append(
            {"key": "workload", "operator": "Equal", "value": dep.cls, "effect": "NoSchedule"}
        )
    if dep.zone_spread:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": LABEL_ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": dep.name}},
            }
        ]
    if dep.anti_affinity:
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": dep.name}}, "topologyKey": LABEL_HOSTNAME}
                ]
            }
        }
    pod_ip = f"10.{64 + ((counter >> 16) & 0x3F)}.{(counter >> 8) & 0xFF}.{counter & 0xFF}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": dep.namespace,
            "uid": _uid(rng),
            "labels": labels,
            "annotations": annotations,
            "creationTimestamp": start,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{dep.name}-{dep.rs_hash}",
                    "uid": dep.rs_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
        "status": _pod_status(start, node.ip, pod_ip, "Burstable"),
    }


# --------------------------------------------------------------------------------------------------
# c) output


class _NoAliasDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Safe dumper (libyaml when available) that never writes anchors/aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(docs: Iterable[Doc], *, sort_keys: bool = False) -> str:
    """Multi-document YAML text (``---`` between documents), without anchors or aliases.

    Keys keep insertion order unless ``sort_keys`` (kubectl prints them sorted).
    """
    return yaml.dump_all(
        docs, Dumper=_NoAliasDumper, sort_keys=sort_keys, default_flow_style=False, width=4096
    )


def write_yaml(docs: Iterable[Doc], path: str | Path, *, sort_keys: bool = False, header: str = "") -> None:
    """Write documents as multi-document YAML (a ``kind: List`` is one document).

    ``header`` (comment lines, each starting with ``#``) goes at the top of the file.
    """
    Path(path).write_text(header + dump_yaml(list(docs), sort_keys=sort_keys), encoding="utf-8")


def as_kubectl_list(docs: Iterable[Doc]) -> Doc:
    """The documents wrapped the way ``kubectl get ... -o yaml`` prints several objects."""
    return {"apiVersion": "v1", "kind": "List", "items": list(docs), "metadata": {"resourceVersion": ""}}
