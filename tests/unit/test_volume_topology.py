"""ebb.core.volumes: what a pod's PersistentVolumes ask of its node, read as Karpenter's ``VolumeTopology`` and
kube-scheduler's ``VolumeBinding`` read it, with ebb's stricter cases (a local volume, a claim or volume the input
lacks or that is going) on the safe side."""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.model import PersistentVolume as Volume
from ebb.core.model import Pod, Requirement, SchedulingSpec, StorageClass, VolumeClaim
from ebb.core.snapshot import SnapshotError, input_warnings, parse_documents
from ebb.core.volumes import volume_requirements
from tests.kit.builders import (
    blocked_of,
    catalog,
    csi_node,
    disrupted,
    instance_type,
    node,
    nodepool,
    plan_dict,
    pod,
    pv,
    pvc,
    snapshot,
    storage_class,
)

ZONE = "topology.kubernetes.io/zone"
STAYS = {"karpenter.sh/do-not-disrupt": "true"}


def _cluster(*volume_docs: Any, claims: tuple[str, ...] = ("data",), ephemeral: tuple[str, ...] = ()) -> list[Any]:
    """Node a (us-east-1a) holds pod db, whose volumes are given; node b (us-east-1b, the same type) has room for it.
    Only a replacement in zone a or a move to b could take db: a new node in zone a costs as much as a, so a is
    deleted only when db may go to b, and kept otherwise."""
    return [catalog([instance_type("m5.large", "2", "8Gi", 29, 0.096)]), nodepool(),
            node("a"), pod("db", "a", cpu="300m", claims=claims, ephemeral=ephemeral),
            node("b", zone="us-east-1b"), pod("web", "b", cpu="500m"), *volume_docs]


def _labelled(doc: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    return {**doc, "metadata": {**doc["metadata"], "labels": {key: value}}}


def _unannotated(claim: dict[str, Any]) -> dict[str, Any]:
    """A claim naming its volume without the PersistentVolume controller's ``pv.kubernetes.io/bind-completed``."""
    return {**claim, "metadata": {k: v for k, v in claim["metadata"].items() if k != "annotations"}}


def _v(*docs: Any, claims: tuple[str, ...] = ("data",), ephemeral: tuple[str, ...] = ()) -> tuple[Any, ...]:
    return docs, claims, ephemeral


# (case, the volume documents and the pod's claims and ephemeral volumes, whether node a goes: db moved to b, in zone
# us-east-1b)
MOVES = [
    ("no volume: db moves to b", _v(claims=()), True),
    ("a claim bound to a volume in zone a keeps db in zone a", _v(pvc("data", "v1"), pv("v1", ["us-east-1a"])), False),
    ("a volume in zone b lets db go to b", _v(pvc("data", "v1"), pv("v1", ["us-east-1b"])), True),
    ("a running pod's claim without bind-completed is as its node has it: db goes to b",
     _v(_unannotated(pvc("data", "v1")), pv("v1", ["us-east-1b"])), True),
    ("a volume attachable in zone a or b (two terms) lets db go to b",
     _v(pvc("data", "v1"), pv("v1", terms=[[{"key": ZONE, "operator": "In", "values": ["us-east-1a"]}],
                                           [{"key": ZONE, "operator": "In", "values": ["us-east-1b"]}]])), True),
    ("a volume's older zone label (failure-domain.beta) is read as the zone",
     _v(pvc("data", "v1"), pv("v1", ["us-east-1a"], key="failure-domain.beta.kubernetes.io/zone")), False),
    ("a volume without nodeAffinity asks nothing", _v(pvc("data", "v1"), pv("v1")), True),
    ("a volume without nodeAffinity but a zone label (made before volumes had one) keeps db in its zone, as "
     "kube-scheduler's VolumeZone reads it", _v(pvc("data", "v1"), _labelled(pv("v1"), ZONE, "us-east-1a")), False),
    ("its older zone label too",
     _v(pvc("data", "v1"), _labelled(pv("v1"), "failure-domain.beta.kubernetes.io/zone", "us-east-1a")), False),
    ("a zone label listing both zones (a__b) lets db go to b",
     _v(pvc("data", "v1"), _labelled(pv("v1"), ZONE, "us-east-1a__us-east-1b")), True),
    ("a zone label in zone b lets db go to b", _v(pvc("data", "v1"), _labelled(pv("v1"), ZONE, "us-east-1b")), True),
    ("a local volume on node a keeps db there, and a with it", _v(pvc("data", "v1"), pv("v1", local_on="a")), False),
    ("a local volume pinned to node a by matchFields keeps db there too (kube-scheduler matches no node by name)",
     _v(pvc("data", "v1"), {**pv("v1", local_on="a"), "spec": {"local": {"path": "/mnt"}, "nodeAffinity": {"required": {
         "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]}]}]}}}}),
     False),
    ("a volume pinned to node b by matchFields keeps db off b too (kube-scheduler's CheckNodeAffinity matches a "
     "volume's affinity against labels only, not the node's name as a pod's)",
     _v(pvc("data", "v1"), {**pv("v1"), "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
         {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}}}}), False),
    ("an ephemeral volume's claim (<pod>-<volume>) is read",
     _v(pvc("db-scratch", "v1"), pv("v1", ["us-east-1a"]), claims=(), ephemeral=("scratch",)), False),
    ("two claims: each one's zone is asked (a and b: no node has both)",
     _v(pvc("data", "v1"), pv("v1", ["us-east-1a", "us-east-1b"]), pvc("logs", "v2"), pv("v2", ["us-east-1b"]),
        claims=("data", "logs")), True),
    ("an unbound claim asks its StorageClass's allowedTopologies",
     _v(pvc("data", None), storage_class(zones=["us-east-1a"])), False),
    ("an unbound claim of a StorageClass without allowedTopologies asks nothing",
     _v(pvc("data", None), storage_class()), True),
    ("a claim the input lacks (it holds others) keeps db where it is",
     _v(pvc("other", "v1"), pv("v1", ["us-east-1b"])), False),
    ("a volume the input lacks keeps db where it is", _v(pvc("data", "v1")), False),
    ("a claim being deleted keeps db where it is",
     _v(pvc("data", "v1", deleting=True), pv("v1", ["us-east-1b"])), False),
    ("a Lost claim keeps db where it is", _v(pvc("data", "v1", phase="Lost"), pv("v1", ["us-east-1b"])), False),
    ("a volume being deleted keeps db where it is",
     _v(pvc("data", "v1"), pv("v1", ["us-east-1b"], deleting=True)), False),
    ("an unbound claim of an Immediate StorageClass keeps db where it is",
     _v(pvc("data", None), storage_class(mode="Immediate")), False),
    ("an input without claims, volumes or classes checks nothing (and warns)", _v(), True),
]


@pytest.mark.parametrize(("volumes", "goes"), [c[1:] for c in MOVES], ids=[c[0] for c in MOVES])
def test_a_pod_moves_only_where_its_volumes_can_be_attached(volumes: tuple[Any, ...], goes: bool) -> None:
    docs, claims, ephemeral = volumes
    out = plan_dict(*_cluster(*docs, claims=claims, ephemeral=ephemeral))
    assert ("a" in disrupted(out)) is goes, out["blocked"]


def test_a_zonal_volume_s_pod_is_replaced_in_its_zone() -> None:
    """With a cheaper type in the catalog, a is replaced, by a node in the volume's zone only (Karpenter adds the
    volume's requirements to the new NodeClaim's)."""
    types = [instance_type("m5.large", "2", "8Gi", 29, 0.096), instance_type("t3.medium", "2", "4Gi", 17, 0.04)]
    docs = [catalog(types), nodepool(), node("a"), pod("db", "a", cpu="300m", claims=("data",)),
            node("b", zone="us-east-1b"), pod("web", "b", cpu="1900m"), pvc("data", "v1"), pv("v1", ["us-east-1a"])]
    out = plan_dict(*docs)
    [command] = [c for c in out["commands"] if c["nodes"] == ["a"]]
    assert [r["zones"] for r in command["replacements"]] == [["us-east-1a"]]


@pytest.mark.parametrize("ebs", ["topology.ebs.csi.aws.com/zone", "topology.disk.csi.azure.com/zone",
                                 "topology.gke.io/zone"])
def test_a_volume_on_a_csi_drivers_zone_key_is_replaced_in_its_zone(ebs: str) -> None:
    """A zonal CSI driver writes its own key (an older EBS driver ``topology.ebs.csi.aws.com/zone``; Azure disk's
    and GCE persistent disk's theirs) in its volumes' node affinity, and its node plugin labels every node it runs on
    with it: in a cluster whose nodes carry it, a new node carries it too (the plugin registers there), so db is
    replaced in zone a, as Karpenter's AWS provider reads the EBS key as the zone. A node without the label takes no
    such pod (kube-scheduler matches the volume's key as written)."""
    types = [instance_type("m5.large", "2", "8Gi", 29, 0.096), instance_type("t3.medium", "2", "4Gi", 17, 0.04)]

    def labelled(name: str, zone: str) -> dict[str, Any]:
        doc = node(name, zone=zone)
        return {**doc, "metadata": {**doc["metadata"], "labels": {**doc["metadata"]["labels"], ebs: zone}}}

    docs = [catalog(types), nodepool(), labelled("a", "us-east-1a"), pod("db", "a", cpu="300m", claims=("data",)),
            labelled("b", "us-east-1b"), pod("web", "b", cpu="1900m"), pvc("data", "v1"),
            pv("v1", ["us-east-1a"], key=ebs)]
    out = plan_dict(*docs)
    [command] = [c for c in out["commands"] if c["nodes"] == ["a"]]
    assert [r["zones"] for r in command["replacements"]] == [["us-east-1a"]]
    unlabelled = [catalog(types[:1]), nodepool(), labelled("a", "us-east-1a"),
                  pod("db", "a", cpu="300m", claims=("data",)), node("c"), pvc("data", "v1"),
                  pv("v1", ["us-east-1a"], key=ebs)]
    assert "a" not in disrupted(plan_dict(*unlabelled))


def test_a_csi_zone_label_that_is_not_the_zone_gives_new_nodes_nothing() -> None:
    """An Azure node outside availability zones has ``topology.disk.csi.azure.com/zone`` empty: that is no zone a new
    node would carry, so a volume asking zone a on that key gets no replacement."""
    key = "topology.disk.csi.azure.com/zone"
    types = [instance_type("m5.large", "2", "8Gi", 29, 0.096), instance_type("t3.medium", "2", "4Gi", 17, 0.04)]
    a = node("a")
    a["metadata"]["labels"][key] = ""
    docs = [catalog(types), nodepool(), a, pod("db", "a", cpu="300m", claims=("data",)), pvc("data", "v1"),
            pv("v1", ["us-east-1a"], key=key)]
    assert "a" not in disrupted(plan_dict(*docs))


def test_a_replacement_allows_only_the_type_and_zone_pairs_the_volumes_alternatives_allow() -> None:
    """A volume attachable as (zone a on c5.large) or (zone b on m5.large): a NodeClaim saying types and zones apart
    would let the provider launch c5.large in zone b, where the pod cannot attach it. The replacement takes one
    alternative, as Karpenter's NodeClaim does (``tryVolumeAlternative``)."""
    itype = "node.kubernetes.io/instance-type"
    types = [instance_type("m5.xlarge", "4", "16Gi", 58, 0.192), instance_type("c5.large", "2", "4Gi", 29, 0.085),
             instance_type("m5.large", "2", "8Gi", 29, 0.096)]
    terms = [[{"key": ZONE, "operator": "In", "values": ["us-east-1a"]},
              {"key": itype, "operator": "In", "values": ["c5.large"]}],
             [{"key": ZONE, "operator": "In", "values": ["us-east-1b"]},
              {"key": itype, "operator": "In", "values": ["m5.large"]}]]
    docs = [catalog(types), nodepool(), node("a", itype="m5.xlarge"), pod("db", "a", cpu="300m", claims=("data",)),
            pvc("data", "v1"), pv("v1", terms=terms)]
    out = plan_dict(*docs)
    [command] = [c for c in out["commands"] if c["nodes"] == ["a"]]
    [replacement] = command["replacements"]
    pairs = {(t, z) for t in replacement["instanceTypes"] for z in replacement["zones"]}
    assert pairs and pairs <= {("c5.large", "us-east-1a"), ("m5.large", "us-east-1b")}, replacement


def test_a_replacement_refused_for_its_zone_says_the_volume_keeps_it_there() -> None:
    """The cheaper type is offered in zone b only: db's volume keeps its replacement in zone a, where nothing is
    cheaper than a, and the reason says so."""
    types = [instance_type("m5.large", "2", "8Gi", 29, 0.096),
             instance_type("t3.medium", "2", "4Gi", 17, 0.04, zones=["us-east-1b"])]
    docs = [catalog(types), nodepool(), node("a"), pod("db", "a", cpu="300m", claims=("data",)),
            node("b", zone="us-east-1b"), pod("web", "b", cpu="1900m"), pvc("data", "v1"), pv("v1", ["us-east-1a"])]
    out = plan_dict(*docs)
    assert "a" not in disrupted(out)
    assert "(in us-east-1a, where its pods' volumes can be attached)" in blocked_of(out, "a")["reason"]


@pytest.mark.parametrize(("volumes", "words"), [
    ((pvc("data", "v1"),), "its PersistentVolume v1 (of claim default/data) is not in the input"),
    ((pvc("data", "v1", deleting=True), pv("v1")), "its PersistentVolumeClaim default/data is being deleted"),
    ((pvc("data", "v1"), pv("v1", local_on="a")), "its volumes' node affinity"),
])
def test_why_a_node_stays_names_the_volume(volumes: tuple[Any, ...], words: str) -> None:
    out = plan_dict(*_cluster(*volumes))
    assert words in blocked_of(out, "a")["reason"]


def test_an_input_without_volumes_warns_about_pods_with_claims() -> None:
    warnings = input_warnings(snapshot(*_cluster()))
    assert any("1 pod(s) use PersistentVolumeClaims" in w and "pod default/db" in w for w in warnings), warnings
    assert not any("PersistentVolumeClaims" in w for w in input_warnings(snapshot(*_cluster(pvc("data", "v1"),
                                                                                           pv("v1")))))


def test_a_spread_s_domains_are_not_filtered_by_the_volume() -> None:
    """db-1 (volume in zone a) and db-2 are both in zone a, with nodes in zones b and c that stay (do-not-disrupt)
    and have room for either: moving db-1 to a2 keeps zone a
    at 2 against 0 in b and c, which its DoNotSchedule spread (maxSkew 1) refuses. The volume's zone narrows where db-1
    may go, not which zones its spread counts (kube-scheduler and Karpenter count every zone the pod's own affinity
    admits), so a1 stays."""
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "db"}}}]
    docs = [catalog([instance_type("m5.large", "2", "8Gi", 29, 0.096)]), nodepool(),
            node("a1"), pod("db-1", "a1", cpu="300m", labels={"app": "db"}, spread=spread, claims=("data",)),
            node("a2"), pod("db-2", "a2", cpu="300m", labels={"app": "db"}, spread=spread),
            node("b", zone="us-east-1b"), pod("web-b", "b", cpu="1500m", annotations=STAYS),
            node("c", zone="us-east-1c"), pod("web-c", "c", cpu="1500m", annotations=STAYS),
            pvc("data", "v1"), pv("v1", ["us-east-1a"])]
    out = plan_dict(*docs)
    assert "a1" not in disrupted(out)
    assert "topology spread" in blocked_of(out, "a1")["reason"]


EBS = "ebs.csi.aws.com"


def _attach_cluster(*extra: Any, b_claims: int = 1) -> list[Any]:
    """Nodes a and b in zone a; db on a has a claim of an EBS volume, web on b has `b_claims` of its own. b has room
    for db, so a goes unless b's attach limit (its CSINode, in `extra`) is full."""
    docs: list[Any] = [catalog([instance_type("m5.large", "2", "8Gi", 29, 0.096)]), nodepool(),
                       node("a"), pod("db", "a", cpu="300m", claims=("data",)), pvc("data", "v0"), pv("v0"),
                       node("b"), pod("web", "b", cpu="500m", claims=tuple(f"web-{i}" for i in range(b_claims)))]
    for i in range(b_claims):
        docs += [pvc(f"web-{i}", f"w{i}"), pv(f"w{i}")]
    return docs + list(extra)


# (case, the extra documents, web's claims on b, whether a goes: db moved to b)
ATTACH = [
    ("b at its limit (1 of 1) takes no more EBS volumes", (csi_node("b", {EBS: 1}),), 1, False),
    ("b below its limit (1 of 2) takes db's", (csi_node("b", {EBS: 2}),), 1, True),
    ("a limit of another driver does not count EBS volumes", (csi_node("b", {"efs.csi.aws.com": 1}),), 1, True),
    ("a driver without allocatable has no limit", (csi_node("b", {EBS: None, "other": 1}),), 1, True),
    ("b without a CSINode has no limit (a's CSINode limits EBS)", (csi_node("a", {EBS: 1}),), 3, True),
    ("an unbound claim counts by its StorageClass's provisioner (in-tree name)",
     (csi_node("b", {EBS: 1}), {**storage_class("gp2"), "provisioner": "kubernetes.io/aws-ebs"}), 1, False),
]


@pytest.mark.parametrize(("extra", "b_claims", "goes"), [c[1:] for c in ATTACH], ids=[c[0] for c in ATTACH])
def test_a_node_takes_no_more_volumes_than_its_csi_driver_attaches(extra: tuple[Any, ...], b_claims: int,
                                                                   goes: bool) -> None:
    docs = _attach_cluster(*extra, b_claims=b_claims)
    if any(d.get("metadata", {}).get("name") == "gp2" for d in extra):  # db's claim unbound, of class gp2
        docs = [pvc("data", None, storage_class="gp2") if d.get("kind") == "PersistentVolumeClaim"
                and d["metadata"]["name"] == "data" else d for d in docs]
    out = plan_dict(*docs)
    assert ("a" in disrupted(out)) is goes, out["blocked"]
    if not goes:
        assert f"attachable-volumes-csi-{EBS} 1" in blocked_of(out, "a")["reason"]


def test_a_node_past_its_attach_limit_is_named_as_why_it_takes_no_pod() -> None:
    """b's two claims are past its CSINode's count of 1 (lowered after they were attached): b takes no pod at all, as
    Karpenter's ``ExceedsLimits`` counts the node's volumes with the pod's, and a's reason names b's limit."""
    out = plan_dict(*_attach_cluster(csi_node("b", {EBS: 1}), b_claims=2))
    assert "a" not in disrupted(out)
    assert f"b's pods already ask more than it has of attachable-volumes-csi-{EBS}" in blocked_of(out, "a")["reason"]


def test_a_new_node_has_no_attach_limit() -> None:
    """a and b attach one EBS volume each, at their limit of 1, and one cheaper new node takes both db and web, with
    their two volumes: Karpenter checks no volume limit on a NodeClaim."""
    types = [instance_type("m5.large", "2", "8Gi", 29, 0.096), instance_type("t3.medium", "2", "4Gi", 17, 0.04)]
    docs = [d for d in _attach_cluster(csi_node("b", {EBS: 1}), csi_node("a", {EBS: 1})) if d.get("kind") !=
            "InstanceTypeCatalog"]
    out = plan_dict(catalog(types), *docs)
    [command] = out["commands"]
    assert sorted(command["nodes"]) == ["a", "b"] and len(command["replacements"]) == 1, command


# -- volume_requirements, table-driven --------------------------------------------------------------------------

def _pod(*claims: str) -> Pod:
    return Pod("db", "default", {}, {}, SchedulingSpec({"cpu": 100}), claims=claims)


def _in(*zones: str) -> tuple[Requirement, ...]:
    return (Requirement(ZONE, "In", zones),)


# (case, the pod's claims, claims, volumes, classes, the terms, the block's words)
REQUIREMENTS: list[tuple[str, tuple[str, ...], list[VolumeClaim], list[Volume], list[StorageClass],
                         tuple[tuple[Requirement, ...], ...] | None, str]] = [
    ("no claim asks nothing", (), [], [], [], None, ""),
    ("a bound claim asks its volume's terms", ("c",), [VolumeClaim("default", "c", "v")],
     [Volume("v", (_in("a"),))], [], (_in("a"),), ""),
    ("two claims: one term of each, ANDed (the cross product)", ("c", "d"),
     [VolumeClaim("default", "c", "v"), VolumeClaim("default", "d", "w")],
     [Volume("v", (_in("a"), _in("b"))), Volume("w", (_in("b"),))], [], (_in("a") + _in("b"), _in("b") + _in("b")), ""),
    ("an empty term asks nothing, as Karpenter skips it", ("c",), [VolumeClaim("default", "c", "v")],
     [Volume("v", ((),))], [], None, ""),
    ("a claim of another namespace is not the pod's", ("c",), [VolumeClaim("other", "c", "v")],
     [Volume("v", (_in("a"),))], [], (), "its PersistentVolumeClaim default/c is not in the input"),
    ("an unbound claim naming no class", ("c",), [VolumeClaim("default", "c")], [], [], (),
     "its PersistentVolumeClaim default/c is unbound and names no StorageClass"),
    ("an unbound claim of a class the input lacks", ("c",), [VolumeClaim("default", "c", storage_class="gp3")], [], [],
     (), "the StorageClass gp3 of its claim default/c is not in the input"),
    ("an unbound claim of a WaitForFirstConsumer class asks its topologies", ("c",),
     [VolumeClaim("default", "c", storage_class="gp3")], [], [StorageClass("gp3", "WaitForFirstConsumer", (_in("a"),))],
     (_in("a"),), ""),
]


@pytest.mark.parametrize(("claims", "pvcs", "pvs", "classes", "terms", "block"), [c[1:] for c in REQUIREMENTS],
                         ids=[c[0] for c in REQUIREMENTS])
def test_volume_requirements(claims: tuple[str, ...], pvcs: list[VolumeClaim], pvs: list[Volume],
                             classes: list[StorageClass], terms: Any, block: str) -> None:
    got = volume_requirements(_pod(*claims), {c.key: c for c in pvcs}, {v.name: v for v in pvs},
                              {c.name: c for c in classes})
    assert got == (terms, block)


# -- parsing ---------------------------------------------------------------------------------------------------

def test_the_parser_reads_volumes_claims_and_classes() -> None:
    snap = parse_documents([pod("db", "a", claims=("data",), ephemeral=("scratch",)), pvc("data", "v1"),
                            pv("v1", ["us-east-1a"], key="failure-domain.beta.kubernetes.io/zone"),
                            storage_class(zones=["us-east-1a"])])
    [parsed] = snap.pods
    assert parsed.claims == ("data", "db-scratch")
    assert snap.volume_claims == (VolumeClaim("default", "data", "v1", "gp3"),)
    assert snap.volumes == (Volume("v1", (_in("us-east-1a"),), driver=EBS),)
    assert snap.storage_classes == (StorageClass("gp3", "WaitForFirstConsumer", (_in("us-east-1a"),), EBS),)
    assert snap.ignored == ()


def test_the_parser_reads_csi_nodes() -> None:
    """A driver's count is its limit; a driver without allocatable has none; one whose count is missing has 0."""
    doc = csi_node("a", {EBS: 25, "efs.csi.aws.com": None})
    doc["spec"]["drivers"].append({"name": "other", "allocatable": {}})
    [parsed] = parse_documents([doc]).csi_nodes
    assert dict(parsed.limits) == {EBS: 25, "other": 0}


def test_a_pod_attaches_each_claim_once() -> None:
    """Two volumes of one claim attach it once (Karpenter's ``Volumes`` is a set of claims per driver)."""
    pods = [pod("db", "a", claims=("data", "data", "logs"))]
    snap = snapshot(node("a"), *pods, pvc("data", "v1"), pv("v1"), pvc("logs", "v2"), pv("v2"), csi_node("a", {EBS: 9}))
    [db] = snap.pods
    assert db.spec.requests[f"attachable-volumes-csi-{EBS}"] == 2
    [a] = snap.nodes
    assert a.allocatable[f"attachable-volumes-csi-{EBS}"] == 9


@pytest.mark.parametrize(("doc", "field"), [
    ({**storage_class(), "volumeBindingMode": "Later"}, "volumeBindingMode"),
    (pod("db", "a", claims=("",)), "spec.volumes[1].persistentVolumeClaim.claimName"),
    (csi_node("a", {EBS: -1}), "spec.drivers[0].allocatable.count"),
    ({**pv("v1"), "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": ZONE, "operator": "Near"}]}]}}}}, "spec.nodeAffinity.required"),
])
def test_bad_volume_input_is_an_error_naming_the_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(SnapshotError, match=field.replace(".", r"\.").replace("[", r"\[").replace("]", r"\]")):
        parse_documents([doc])


def test_a_regional_azure_disks_pod_is_replaced_in_zone_0() -> None:
    """An AKS cluster without availability zones: nodes in zone ``0``, the disk driver's label empty on them and on
    its volumes. A new node carries the label as the cluster's zone-0 nodes do, so the pod gets one, as Karpenter's
    Azure provider reads ``""`` as zone ``0``."""
    key = "topology.disk.csi.azure.com/zone"
    types = [instance_type("m5.large", "2", "8Gi", 29, 0.096, zones=["0"]),
             instance_type("t3.medium", "2", "4Gi", 17, 0.04, zones=["0"])]
    regional = node("a", zone="0")
    regional["metadata"]["labels"][key] = ""
    docs = [catalog(types), nodepool(), regional, pod("db", "a", cpu="300m", claims=("data",)), pvc("data", "v1"),
            pv("v1", [""], key=key)]
    out = plan_dict(*docs)
    [command] = [c for c in out["commands"] if c["nodes"] == ["a"]]
    assert [r["zones"] for r in command["replacements"]] == [["0"]]


@pytest.mark.parametrize(("annotated", "deleted"), [(True, False), (False, True)])
def test_a_pending_pod_whose_claim_is_not_bound_yet_keeps_no_room(annotated: bool, deleted: bool) -> None:
    """volumetopology.go ``ValidatePersistentVolumeClaims`` (suite_test.go, "when pv.kubernetes.io/bind-completed is
    missing"): a claim naming its volume without bind-completed is unbound for kube-scheduler, so Karpenter ignores
    the pending pod, and the empty node e that would have held it goes; with the annotation e is kept for it (the
    NodePool's cpu limit, which e reaches, leaves the pod no new node)."""
    claim = pvc("data", "v1")
    pool = nodepool()
    pool["spec"]["limits"] = {"cpu": "2"}
    docs = [pool, node("e"), pod("waiting", None, cpu="300m", claims=("data",), phase="Pending"),
            claim if annotated else _unannotated(claim), pv("v1", ["us-east-1a"])]
    out = plan_dict(*docs)
    assert (["e"] in [c["nodes"] for c in out["commands"]]) is deleted, out["commands"]
