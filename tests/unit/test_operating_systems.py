"""A new node's operating system: the first of its instance type's ``operatingSystems`` its NodePool's
``kubernetes.io/os`` requirement admits (Karpenter's NodeClaim narrows the label to what both allow), so a Windows
NodePool's nodes are replaced by Windows nodes of types that run Windows, and never by a type that runs only
Linux."""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.model import LABEL_OS, InstanceType, Offering, Requirement
from ebb.core.snapshot import SnapshotError, parse_documents
from tests.kit.builders import catalog, disrupted, instance_type, node, nodepool, plan_dict, pod

WINDOWS = [{"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]}]


def _type(*systems: str, label: str | None = None) -> InstanceType:
    return InstanceType("t", {"cpu": 2000}, {}, (Offering("a", "on-demand", 1.0),),
                        {LABEL_OS: label} if label else {}, systems)


@pytest.mark.parametrize(("itype", "requirements", "runs"), [
    (_type("linux", "windows"), (), "linux"),
    (_type("linux", "windows"), (Requirement(LABEL_OS, "In", ("windows",)),), "windows"),
    (_type("linux", "windows"), (Requirement(LABEL_OS, "NotIn", ("linux",)),), "windows"),
    (_type("linux", "windows"), (Requirement(LABEL_OS, "In", ("linux", "windows")),), "linux"),
    (_type("linux"), (Requirement(LABEL_OS, "In", ("windows",)),), "linux"),  # refused on the requirement
    (_type(label="windows"), (), "windows"),  # no operatingSystems: its label
    (_type(), (), "linux"),
])
def test_a_new_nodes_operating_system(itype: InstanceType, requirements: tuple[Requirement, ...], runs: str) -> None:
    assert itype.os_under(requirements) == runs


def _windows_cluster(*types: dict[str, Any]) -> list[Any]:
    """A drifted Windows node (the NodePool's hash moved on) whose pod selects Windows."""
    win = node("w", itype="m5.xlarge", node_hash="h1")
    win["metadata"]["labels"]["kubernetes.io/os"] = "windows"
    app = pod("app", "w", cpu="500m")
    app["spec"]["nodeSelector"] = {"kubernetes.io/os": "windows"}
    return [*([catalog(list(types))] if types else []), nodepool(requirements=WINDOWS, node_hash="h2"), win, app]


def test_a_windows_nodepools_drifted_node_is_replaced_by_a_windows_node_of_the_bundled_catalog() -> None:
    out = plan_dict(*_windows_cluster())
    [command] = out["commands"]
    assert command["nodes"] == ["w"] and command["method"] == "drift"
    [replacement] = command["replacements"]
    assert not any(t.split(".")[0].endswith("g") or t.startswith(("a1.", "t4g.")) for t in replacement["instanceTypes"])


def test_a_type_that_runs_only_linux_gives_a_windows_nodepool_nothing() -> None:
    """A type labelled linux only gives a Windows NodePool no replacement (and its Windows node is warned about: the
    catalog contradicts it); one that lists both systems gives one."""
    linux_only = {**instance_type("m5.xlarge", "4", "16Gi", 58, 0.192), "labels": {"kubernetes.io/os": "linux"}}
    out = plan_dict(*_windows_cluster(linux_only))
    assert "w" not in disrupted(out)
    both = {**instance_type("m5.xlarge", "4", "16Gi", 58, 0.192), "operatingSystems": ["linux", "windows"]}
    assert "w" in disrupted(plan_dict(*_windows_cluster(both)))


@pytest.mark.parametrize("systems", [[], "windows", [1], [""]])
def test_bad_operating_systems_are_an_input_error(systems: Any) -> None:
    bad = {**instance_type("m5.large", "2", "8Gi", 29, 0.096), "operatingSystems": systems}
    with pytest.raises(SnapshotError, match=r"operatingSystems"):
        parse_documents([catalog([bad]), nodepool(), node("a")])


def test_an_offerings_labels_are_a_new_nodes_and_pods_may_select_them() -> None:
    """AKS labels a spot node ``kubernetes.azure.com/scalesetpriority: spot`` and an on-demand one ``regular``: a
    catalog says so per offering. A pod that selects ``regular`` gets an on-demand replacement that carries it;
    without the offering labels no new node would carry it, and its node stays."""
    key = "kubernetes.azure.com/scalesetpriority"

    def azure(name: str, cpu: str, on_demand: float, spot: float, *, labelled: bool = True) -> dict[str, Any]:
        entry = instance_type(name, cpu, "8Gi", 30, on_demand, spot=spot)
        for offering in entry["offerings"] if labelled else []:
            offering["labels"] = {key: "spot" if offering["capacityType"] == "spot" else "regular"}
        return entry

    regular = node("r", itype="Standard_D8s_v5", cpu="8", memory="8Gi")
    regular["metadata"]["labels"][key] = "regular"
    app = pod("app", "r", cpu="500m")
    app["spec"]["nodeSelector"] = {key: "regular"}
    both = nodepool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In",
                                   "values": ["spot", "on-demand"]}])
    for labelled in (True, False):
        types = [azure("Standard_D8s_v5", "8", 0.384, 0.08, labelled=labelled),
                 azure("Standard_D2s_v5", "2", 0.096, 0.02, labelled=labelled)]
        out = plan_dict(catalog(types), both, regular, app)
        if not labelled:
            assert "r" not in disrupted(out), out["commands"]
            continue
        [command] = out["commands"]
        [replacement] = command["replacements"]
        assert command["nodes"] == ["r"] and replacement["capacityType"] == "on-demand", out
        assert replacement["instanceTypes"][0] == "Standard_D2s_v5"


def test_bad_offering_labels_are_an_input_error() -> None:
    bad = instance_type("m5.large", "2", "8Gi", 29, 0.096)
    bad["offerings"][0]["labels"] = {"a": 1}
    with pytest.raises(SnapshotError, match=r"offerings\[0\]\.labels"):
        parse_documents([catalog([bad]), nodepool(), node("a")])


def _typed(name: str, price: float, arch: str, systems: list[str] | None = None) -> dict[str, Any]:
    doc = {**instance_type(name, "2", "4Gi", 29, price), "labels": {"kubernetes.io/arch": arch}}
    if systems is not None:
        doc["operatingSystems"] = systems
    return doc


@pytest.mark.parametrize(("label", "pod_selector", "allowed"), [
    # the template labels arch: only arm64 types launch (the cheaper amd64 one was offered, relabelled arm64)
    ({"kubernetes.io/arch": "arm64"}, {"kubernetes.io/arch": "arm64"}, {"g.arm"}),
    # the template labels the OS: only a type that runs Windows launches (a Graviton one was offered, relabelled)
    ({"kubernetes.io/os": "windows"}, {"kubernetes.io/os": "windows"}, {"x.win"}),
])
def test_a_template_label_on_an_instance_type_key_is_a_requirement(label: dict[str, str], pod_selector: dict[str, str],
                                                                     allowed: set[str]) -> None:
    """Karpenter's NodeClaim template makes each of its labels a requirement (``NewLabelRequirements``): a NodePool
    whose template labels ``kubernetes.io/arch: arm64`` launches arm64 types only. ebb wrote the label over every
    type's own, so the pod that selects arm64 could be given an amd64 node."""
    types = catalog([_typed("a.cheap", 0.01, "amd64"), _typed("g.arm", 0.02, "arm64"),
                     _typed("x.win", 0.03, "amd64", ["linux", "windows"])])
    pool = nodepool(labels=label, node_hash="h2")
    out = plan_dict(types, pool, node("n", itype="x.win", labels=label, node_hash="h1"),
                    pod("app", "n", cpu="500m", node_selector=pod_selector))
    (command,) = out["commands"]
    (replacement,) = command["replacements"]
    assert set(replacement["instanceTypes"]) == allowed, replacement


@pytest.mark.parametrize(("requirements", "planned"), [
    ([{"key": "kubernetes.io/os", "operator": "In", "values": ["linux", "windows"]}], "linux"),
    ([{"key": "kubernetes.io/os", "operator": "Exists"}], "linux"),
    ([], "linux"),
])
def test_a_windows_pod_in_a_nodepool_planned_as_linux_is_told_so(requirements: list[dict[str, Any]],
                                                                planned: str) -> None:
    """A NodePool that admits both operating systems plans its new nodes as the first its types list (linux): a
    Windows pod fits none of them (a difference, docs/decisions.md), and the verdict says so, where it said only "no
    NodePool can launch a node it tolerates and matches" (and, for ``Exists``, that a made-up kubernetes.io/os=0 was
    why)."""
    both = {**instance_type("m5.xlarge", "4", "16Gi", 58, 0.192), "operatingSystems": ["linux", "windows"]}
    docs = _windows_cluster(both)
    docs[1] = nodepool(requirements=requirements, node_hash="h2")
    reason = plan_dict(*docs)["blocked"]
    (why,) = [b["reason"] for b in reason if b["node"] == "w"]
    assert f"NodePool default's new nodes are planned as {planned}, the first operating system of their types it " \
           "admits" in why
    assert "kubernetes.io/os=0" not in why
