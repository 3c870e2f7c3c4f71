"""Invariants of the bundled instance-type catalog and of the benchmark / example cluster generators."""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import generators as g  # noqa: E402

from ebb.data import make_aws_catalog  # noqa: E402

CATALOG_PATH = REPO_ROOT / "libs" / "ebb" / "src" / "ebb" / "data" / "aws-us-east-1.yaml"
NOW = "2026-11-23T18:30:00Z"


# ------------------------------------------------------------------------------------------------
# bundled catalog


@pytest.fixture(scope="module")
def catalog_doc() -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(CATALOG_PATH.read_text(encoding="utf-8")) if d]
    assert len(docs) == 1
    return docs[0]


def test_catalog_is_one_instance_type_catalog(catalog_doc: dict[str, Any]) -> None:
    assert catalog_doc["apiVersion"] == "ebb.sh/v1"
    assert catalog_doc["kind"] == "InstanceTypeCatalog"
    types = catalog_doc["spec"]["instanceTypes"]
    names = [t["name"] for t in types]
    assert 100 <= len(names) <= 200
    assert len(set(names)) == len(names)
    assert catalog_doc["metadata"]["annotations"]["ebb.sh/prices-as-of"] == make_aws_catalog.PRICES_AS_OF


def test_catalog_file_is_what_the_generator_writes() -> None:
    assert CATALOG_PATH.read_text(encoding="utf-8") == make_aws_catalog.render()


def test_every_type_has_on_demand_in_three_zones_and_positive_prices(catalog_doc: dict[str, Any]) -> None:
    for it in catalog_doc["spec"]["instanceTypes"]:
        offerings = it["offerings"]
        on_demand = {o["zone"]: o["price"] for o in offerings if o["capacityType"] == "on-demand"}
        spot = {o["zone"]: o["price"] for o in offerings if o["capacityType"] == "spot"}
        assert set(on_demand) == {"us-east-1a", "us-east-1b", "us-east-1c"}, it["name"]
        assert set(spot) == set(on_demand), it["name"]
        assert all(o["available"] is True for o in offerings)
        assert all(isinstance(o["price"], float) and o["price"] > 0 for o in offerings), it["name"]
        assert len(set(on_demand.values())) == 1, it["name"]  # one list price per region
        for zone, price in spot.items():
            assert 0.28 <= price / on_demand[zone] <= 0.42, (it["name"], zone)


def test_capacity_and_overhead_follow_the_formulas(catalog_doc: dict[str, Any]) -> None:
    for it in catalog_doc["spec"]["instanceTypes"]:
        cpu = int(it["capacity"]["cpu"])
        pods = int(it["capacity"]["pods"])
        assert it["capacity"]["memory"].endswith("Gi")
        assert it["overhead"]["memory"] == f"{11 * pods + 255 + 100}Mi"
        assert it["overhead"]["cpu"] == f"{make_aws_catalog.kube_reserved_cpu_millicores(cpu)}m"
        assert it["labels"]["node.kubernetes.io/instance-type"] == it["name"]
        assert it["labels"]["kubernetes.io/arch"] in ("amd64", "arm64")
        assert ("nvidia.com/gpu" in it["capacity"]) == it["name"].startswith("g")


@pytest.mark.parametrize(
    ("name", "cpu", "memory", "pods", "overhead_cpu", "overhead_memory", "price"),
    [
        ("m5.large", "2", "8Gi", "29", "70m", "674Mi", 0.096),
        ("m5.xlarge", "4", "16Gi", "58", "80m", "993Mi", 0.192),
        ("m5.2xlarge", "8", "32Gi", "58", "90m", "993Mi", 0.384),
        ("m5.4xlarge", "16", "64Gi", "234", "110m", "2929Mi", 0.768),
        ("t3.medium", "2", "4Gi", "17", "70m", "542Mi", 0.0416),
        ("c5.large", "2", "4Gi", "29", "70m", "674Mi", 0.085),
        ("r6g.medium", "1", "8Gi", "8", "60m", "443Mi", 0.0504),
    ],
)
def test_known_instance_types(
    catalog_doc: dict[str, Any],
    name: str,
    cpu: str,
    memory: str,
    pods: str,
    overhead_cpu: str,
    overhead_memory: str,
    price: float,
) -> None:
    it = next(t for t in catalog_doc["spec"]["instanceTypes"] if t["name"] == name)
    assert it["capacity"] == {"cpu": cpu, "memory": memory, "pods": pods}
    assert it["overhead"] == {"cpu": overhead_cpu, "memory": overhead_memory}
    assert {o["price"] for o in it["offerings"] if o["capacityType"] == "on-demand"} == {price}


def test_gpu_types_carry_gpus(catalog_doc: dict[str, Any]) -> None:
    by_name = {t["name"]: t for t in catalog_doc["spec"]["instanceTypes"]}
    assert by_name["g4dn.xlarge"]["capacity"]["nvidia.com/gpu"] == "1"
    assert by_name["g5.12xlarge"]["capacity"]["nvidia.com/gpu"] == "4"


# Karpenter's scheduling benchmark: tests/benchmarks/test_karpenter_workload.py


# ------------------------------------------------------------------------------------------------
# the running cluster of the disruption benchmark


@pytest.fixture(scope="module")
def cluster() -> list[dict[str, Any]]:
    return g.disruption_cluster(n_nodes=300, n_pods=3000, seed=7, now=NOW)


def _by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def _usage(docs: list[dict[str, Any]]) -> dict[str, list[float]]:
    used: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for pod in _by_kind(docs, "Pod"):
        u = used[pod["spec"]["nodeName"]]
        for c in pod["spec"]["containers"]:
            requests = c["resources"]["requests"]
            u[0] += g.parse_cpu_millis(requests["cpu"])
            u[1] += g.parse_mem_mib(requests.get("memory", "0"))
        u[2] += 1
    return used


def test_cluster_sizes(cluster: list[dict[str, Any]]) -> None:
    kinds = Counter(d["kind"] for d in cluster)
    assert kinds["Node"] == 300
    assert kinds["Pod"] == 3000
    assert kinds["DaemonSet"] >= 1
    assert 3 <= kinds["NodePool"] <= 4
    assert kinds["PodDisruptionBudget"] > 0
    names = [(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in cluster]
    assert len(set(names)) == len(names)


def test_every_pod_fits_its_node(cluster: list[dict[str, Any]]) -> None:
    nodes = {n["metadata"]["name"]: n for n in _by_kind(cluster, "Node")}
    used = _usage(cluster)
    assert set(used) <= set(nodes)
    for name, node in nodes.items():
        alloc = node["status"]["allocatable"]
        cpu, mem, pods = used[name]
        assert cpu <= g.parse_cpu_millis(alloc["cpu"]), name
        assert mem <= g.parse_mem_mib(alloc["memory"]), name
        assert pods <= int(alloc["pods"]), name
    for pod in _by_kind(cluster, "Pod"):
        assert pod["status"]["phase"] == "Running"
        assert pod["status"]["startTime"] >= nodes[pod["spec"]["nodeName"]]["metadata"]["creationTimestamp"]


def test_nodes_agree_with_the_bundled_catalog(cluster: list[dict[str, Any]]) -> None:
    catalog = g.load_catalog()
    for node in _by_kind(cluster, "Node"):
        labels = node["metadata"]["labels"]
        it = catalog[labels["node.kubernetes.io/instance-type"]]
        assert g.parse_cpu_millis(node["status"]["capacity"]["cpu"]) == it.cpu_m
        assert g.parse_cpu_millis(node["status"]["allocatable"]["cpu"]) == it.cpu_m - it.overhead_cpu_m
        assert g.parse_mem_mib(node["status"]["allocatable"]["memory"]) == it.mem_mib - it.overhead_mem_mib
        assert node["status"]["allocatable"]["pods"] == str(it.pods)
        assert labels["topology.kubernetes.io/zone"] in g.ZONES
        assert labels["karpenter.sh/capacity-type"] in ("spot", "on-demand")
        assert labels["karpenter.sh/initialized"] == "true"
        assert labels["kubernetes.io/hostname"] == node["metadata"]["name"]
        assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"


def test_utilisation_mix(cluster: list[dict[str, Any]]) -> None:
    used = _usage(cluster)
    fractions = [
        used[n["metadata"]["name"]][0] / g.parse_cpu_millis(n["status"]["allocatable"]["cpu"])
        for n in _by_kind(cluster, "Node")
    ]
    under = [f for f in fractions if f < 0.30]
    assert 0.25 <= len(under) / len(fractions) <= 0.35
    packed = [f for f in fractions if f >= 0.30]
    assert all(0.55 <= f <= 0.90 for f in packed)


def test_disruption_controls_exist(cluster: list[dict[str, Any]]) -> None:
    pods = _by_kind(cluster, "Pod")
    workload = [p for p in pods if p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"]
    dnd = [p for p in workload if p["metadata"]["annotations"].get("karpenter.sh/do-not-disrupt") == "true"]
    assert 0.005 <= len(dnd) / len(workload) <= 0.03
    assert any("controller.kubernetes.io/pod-deletion-cost" in p["metadata"]["annotations"] for p in workload)
    assert any(p["spec"].get("priorityClassName") for p in workload)
    pdbs = _by_kind(cluster, "PodDisruptionBudget")
    apps = {(p["metadata"]["namespace"], p["metadata"]["labels"]["app"]) for p in workload}
    for pdb in pdbs:
        assert ("maxUnavailable" in pdb["spec"]) != ("minAvailable" in pdb["spec"])
        assert (pdb["metadata"]["namespace"], pdb["spec"]["selector"]["matchLabels"]["app"]) in apps


def test_daemonset_pods_on_every_node(cluster: list[dict[str, Any]]) -> None:
    nodes = {n["metadata"]["name"] for n in _by_kind(cluster, "Node")}
    for ds in _by_kind(cluster, "DaemonSet"):
        name = ds["metadata"]["name"]
        on = [
            p["spec"]["nodeName"]
            for p in _by_kind(cluster, "Pod")
            if (p["metadata"]["ownerReferences"][0]["kind"], p["metadata"]["ownerReferences"][0]["name"])
            == ("DaemonSet", name)
        ]
        assert sorted(on) == sorted(nodes)
        assert ds["status"]["desiredNumberScheduled"] == len(nodes)


def test_drifted_and_expired_nodes(cluster: list[dict[str, Any]]) -> None:
    pools = {p["metadata"]["name"]: p for p in _by_kind(cluster, "NodePool")}
    for pool in pools.values():
        assert pool["metadata"]["annotations"]["karpenter.sh/nodepool-hash-version"] == "v3"
        assert pool["spec"]["template"]["spec"]["expireAfter"] == "720h"
        assert pool["spec"]["disruption"]["budgets"]
    assert any("schedule" in b for p in pools.values() for b in p["spec"]["disruption"]["budgets"])
    assert any(p["spec"]["disruption"]["consolidateAfter"] == "5m" for p in pools.values())
    nodes = _by_kind(cluster, "Node")
    drifted = [
        n
        for n in nodes
        if n["metadata"]["annotations"]["karpenter.sh/nodepool-hash"]
        != pools[n["metadata"]["labels"]["karpenter.sh/nodepool"]]["metadata"]["annotations"][
            "karpenter.sh/nodepool-hash"
        ]
    ]
    assert 1 <= len(drifted) <= len(nodes) // 20
    now = g.parse_time(NOW)
    ages = [now - g.parse_time(n["metadata"]["creationTimestamp"]) for n in nodes]
    expired = [a for a in ages if a >= timedelta(hours=720)]
    assert 1 <= len(expired) <= len(nodes) // 20
    assert all(a >= timedelta(0) for a in ages)


def test_spread_and_anti_affinity_are_respected(cluster: list[dict[str, Any]]) -> None:
    zone_of = {
        n["metadata"]["name"]: n["metadata"]["labels"]["topology.kubernetes.io/zone"]
        for n in _by_kind(cluster, "Node")
    }
    spread: dict[str, Counter[str]] = defaultdict(Counter)
    anti: dict[str, list[str]] = defaultdict(list)
    for pod in _by_kind(cluster, "Pod"):
        app = pod["metadata"]["labels"].get("app")
        if pod["spec"].get("topologySpreadConstraints"):
            spread[app][zone_of[pod["spec"]["nodeName"]]] += 1
        if "podAntiAffinity" in pod["spec"].get("affinity", {}):
            anti[app].append(pod["spec"]["nodeName"])
    assert spread
    assert anti
    for counts in spread.values():
        assert len(counts) == 3
        assert max(counts.values()) - min(counts.values()) <= 1
    for on in anti.values():
        assert len(on) == len(set(on))


def test_cluster_is_deterministic() -> None:
    assert g.disruption_cluster(40, 400, seed=3) == g.disruption_cluster(40, 400, seed=3)
    assert g.disruption_cluster(40, 400, seed=3) != g.disruption_cluster(40, 400, seed=4)


def test_default_sizes() -> None:
    docs = g.disruption_cluster()
    kinds = Counter(d["kind"] for d in docs)
    assert kinds["Node"] == 2000
    assert kinds["Pod"] == 20000


def test_too_few_pods_is_an_error() -> None:
    with pytest.raises(ValueError, match="DaemonSet"):
        g.disruption_cluster(n_nodes=10, n_pods=5)


# ------------------------------------------------------------------------------------------------
# output


def test_write_yaml_and_kubectl_list_round_trip(tmp_path: Path) -> None:
    docs = g.disruption_cluster(20, 150, seed=1)
    path = tmp_path / "cluster.yaml"
    g.write_yaml([g.as_kubectl_list(docs)], path, sort_keys=True)
    text = path.read_text(encoding="utf-8")
    assert "&id" not in text
    assert "*id" not in text
    (loaded,) = list(yaml.safe_load_all(text))
    assert loaded["apiVersion"] == "v1"
    assert loaded["kind"] == "List"
    assert loaded["items"] == docs

    multi = tmp_path / "multi.yaml"
    g.write_yaml(docs, multi)
    assert list(yaml.safe_load_all(multi.read_text(encoding="utf-8"))) == docs


def test_example_snapshot_has_no_catalog() -> None:
    path = REPO_ROOT / "examples" / "cluster.yaml"
    assert path.exists(), "examples/cluster.yaml is committed; regenerate it with examples/generate.py"
    assert path.stat().st_size < 8_500_000
    (doc,) = list(
        yaml.load_all(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    )
    assert doc["kind"] == "List"
    kinds = Counter(item["kind"] for item in doc["items"])
    assert "InstanceTypeCatalog" not in kinds
    assert kinds["Node"] >= 200
