"""The scheduling benchmark's workload is Karpenter's ``BenchmarkScheduling`` workload.

What each test expects is read from Karpenter v1.14.1's code, not from a run of it:
``pkg/controllers/provisioning/scheduling/scheduling_benchmark_test.go`` (``makeDiversePods`` and the ``make*Pods``
helpers, ``randomLabels``, ``randomAffinityLabels``, ``randomCPU``, ``randomMemory``, ``setupScheduler``) and
``pkg/cloudprovider/fake/instancetype.go`` (``InstanceTypes``, ``NewInstanceType``, ``PriceFromResources``).
Karpenter draws from Go's ``math/rand`` and ebb from Python's, so the tests compare distributions and structure
(which keys, which groups, what is drawn independently of what), never individual pods.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import generators as g  # noqa: E402

#: ``randomLabelValue``, ``randomCPU``, ``randomMemory``
LABEL_VALUES = ("a", "b", "c", "d", "e", "f", "g")
CPU = ("100m", "250m", "500m", "1000m", "1500m")
MEMORY = ("100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi")
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
N = 7_003  # 1,400 a group, 3 generic pods left over


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return g.karpenter_scheduling_workload(N)


@pytest.fixture(scope="module")
def pods(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == "Pod"]


def _group(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["name"]).rsplit("-", 1)[0]


def _spread(pod: dict[str, Any]) -> dict[str, Any]:
    (tsc,) = pod["spec"]["topologySpreadConstraints"]
    return dict(tsc)


def _uniform(counts: Counter[str], values: tuple[str, ...]) -> bool:
    """Every value drawn, none far from its share: Pearson's chi-square under the p = 0.001 critical value for up
    to 6 degrees of freedom (22.46), so a uniform draw passes and a constant or skewed one does not."""
    total = sum(counts.values())
    if set(counts) != set(values):
        return False
    expected = total / len(values)
    return sum((counts[v] - expected) ** 2 / expected for v in values) < 22.46


def test_groups_in_makediversepods_order_with_the_remainder_generic_at_the_end(pods: list[dict[str, Any]]) -> None:
    per_group = N // 5
    expected = [grp for grp in g.BENCH_GROUPS for _ in range(per_group)] + ["generic"] * (N - 5 * per_group)
    assert [_group(p) for p in pods] == expected
    assert len({p["metadata"]["name"] for p in pods}) == N  # the remainder's names continue the generic group's


def test_generic_pods_carry_a_random_my_label_and_no_constraint(pods: list[dict[str, Any]]) -> None:
    generic = [p for p in pods if _group(p) == "generic"]
    for pod in generic:
        assert set(pod["metadata"]["labels"]) == {"my-label"}
        assert "affinity" not in pod["spec"] and "topologySpreadConstraints" not in pod["spec"]
    assert _uniform(Counter(p["metadata"]["labels"]["my-label"] for p in generic), LABEL_VALUES)


@pytest.mark.parametrize(("group", "key"), [("zonal-spread", ZONE), ("hostname-spread", HOSTNAME)])
def test_spread_selector_is_drawn_independently_of_the_pods_label(
    pods: list[dict[str, Any]], group: str, key: str
) -> None:
    """``makeTopologySpreadPods``: ``Labels: randomLabels()`` and ``MatchLabels: randomLabels()``, two draws."""
    members = [p for p in pods if _group(p) == group]
    for pod in members:
        tsc = _spread(pod)
        assert (tsc["maxSkew"], tsc["topologyKey"], tsc["whenUnsatisfiable"]) == (1, key, "DoNotSchedule")
        assert set(tsc["labelSelector"]["matchLabels"]) == {"my-label"}
        assert set(pod["metadata"]["labels"]) == {"my-label"}
    own = Counter(p["metadata"]["labels"]["my-label"] for p in members)
    selected = Counter(_spread(p)["labelSelector"]["matchLabels"]["my-label"] for p in members)
    assert _uniform(own, LABEL_VALUES) and _uniform(selected, LABEL_VALUES)
    # independent draws: a pod selects its own label value with probability 1/7 (binomial, sd about 13 here)
    matching = sum(p["metadata"]["labels"] == _spread(p)["labelSelector"]["matchLabels"] for p in members)
    assert abs(matching - len(members) / 7) < 5 * math.sqrt(len(members) * (1 / 7) * (6 / 7))
    # and the pair of values is spread over the 49 combinations, not tied
    assert len(Counter((p["metadata"]["labels"]["my-label"], _spread(p)["labelSelector"]["matchLabels"]["my-label"])
                       for p in members)) == 49


def test_zonal_affinity_is_self_affinity_on_karpenters_own_key(pods: list[dict[str, Any]]) -> None:
    """``makePodAffinityPods``: ``randomAffinityLabels()`` is ``{"my-affininity": value}`` (Karpenter's spelling),
    the pod's labels and its required affinity's selector both."""
    members = [p for p in pods if _group(p) == "zonal-affinity"]
    for pod in members:
        assert set(pod["metadata"]["labels"]) == {"my-affininity"}
        (term,) = pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term == {"labelSelector": {"matchLabels": pod["metadata"]["labels"]}, "topologyKey": ZONE}
        assert "topologySpreadConstraints" not in pod["spec"]
    assert _uniform(Counter(p["metadata"]["labels"]["my-affininity"] for p in members), LABEL_VALUES)


def test_anti_affinity_pods_share_app_nginx(pods: list[dict[str, Any]]) -> None:
    for pod in (p for p in pods if _group(p) == "hostname-anti-affinity"):
        assert pod["metadata"]["labels"] == {"app": "nginx"}
        (term,) = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term == {"labelSelector": {"matchLabels": {"app": "nginx"}}, "topologyKey": HOSTNAME}


def test_requests_are_uniform_over_karpenters_values_in_every_group(pods: list[dict[str, Any]]) -> None:
    for group in g.BENCH_GROUPS:
        requests = [p["spec"]["containers"][0]["resources"]["requests"] for p in pods if _group(p) == group]
        assert all(set(r) == {"cpu", "memory"} for r in requests)
        assert _uniform(Counter(r["cpu"] for r in requests), CPU)
        assert _uniform(Counter(r["memory"] for r in requests), MEMORY)


def test_pods_are_test_pods_pending_without_owner_tolerations_or_node(pods: list[dict[str, Any]]) -> None:
    for pod in pods:
        assert "ownerReferences" not in pod["metadata"]
        assert "tolerations" not in pod["spec"] and "nodeName" not in pod["spec"]
        assert pod["status"]["phase"] == "Pending"
        assert len(pod["spec"]["containers"]) == 1
    assert len({p["metadata"]["uid"] for p in pods}) == len(pods)


def test_one_nodepool_without_requirements_and_no_nodes(docs: list[dict[str, Any]]) -> None:
    kinds = Counter(d["kind"] for d in docs)
    assert kinds == {"NodePool": 1, "InstanceTypeCatalog": 1, "Pod": N}
    (pool,) = (d for d in docs if d["kind"] == "NodePool")
    assert pool["spec"]["template"]["spec"]["requirements"] == []
    assert "taints" not in pool["spec"]["template"]["spec"]


def test_instance_types_are_fake_instance_types_400_priced_per_1e9_bytes(docs: list[dict[str, Any]]) -> None:
    """``fake.InstanceTypes(400)`` and ``PriceFromResources``: 0.1 * vCPU + 0.1 * memory bytes / 1e9."""
    (catalog,) = (d for d in docs if d["kind"] == "InstanceTypeCatalog")
    types = catalog["spec"]["instanceTypes"]
    assert len(types) == 400
    for i, it in enumerate(types):
        n = i + 1
        assert it["name"] == f"fake-it-{i}"
        assert it["capacity"] == {"cpu": str(n), "memory": f"{2 * n}Gi", "pods": str(10 * n)}
        assert it["overhead"] == {"cpu": "100m", "memory": "10Mi"}
        assert sorted((o["capacityType"], o["zone"]) for o in it["offerings"]) == [
            ("on-demand", "test-zone-1"), ("on-demand", "test-zone-2"), ("on-demand", "test-zone-3"),
            ("spot", "test-zone-1"), ("spot", "test-zone-2"),
        ]
        memory_bytes = 2 * n * 2**30
        price = 0.1 * n + 0.1 * memory_bytes / 1e9
        assert all(o["available"] and math.isclose(o["price"], price, rel_tol=1e-9) for o in it["offerings"])
    # per 1e9 bytes, not per GiB: the smallest type costs 0.1 + 0.2 * 1.073741824
    assert math.isclose(types[0]["offerings"][0]["price"], 0.3147483648, rel_tol=1e-9)


def test_deterministic_for_a_seed() -> None:
    assert g.karpenter_scheduling_workload(53, seed=1) == g.karpenter_scheduling_workload(53, seed=1)
    assert g.karpenter_scheduling_workload(53, seed=1) != g.karpenter_scheduling_workload(53, seed=2)


def test_the_simulator_reads_the_workload_as_karpenter_builds_it() -> None:
    """Parsed by ebb, the workload keeps what the scheduler acts on: the spreads' selectors, the affinity key,
    the prices, every offering of the NodePool."""
    from ebb.core.snapshot import parse_documents

    snapshot = parse_documents(g.karpenter_scheduling_workload(50))
    assert len(snapshot.pods) == 50 and not snapshot.nodes
    by_name = {p.name: p for p in snapshot.pods}
    spread = by_name["zonal-spread-0"]
    raw = next(d for d in g.karpenter_scheduling_workload(50) if d.get("metadata", {}).get("name") == "zonal-spread-0")
    assert dict(spread.labels) == raw["metadata"]["labels"]
    types = {it.name: it for it in snapshot.instance_types}
    assert math.isclose(min(o.price for o in types["fake-it-3"].offerings), 0.4 + 0.8 * 1.073741824, rel_tol=1e-9)
    assert {(o.capacity_type, o.zone) for o in types["fake-it-3"].offerings} >= {("spot", "test-zone-1")}
