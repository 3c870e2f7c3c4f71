"""ebb_embedded.volumes: the volumes the simulated cluster's provisioner makes, as the real provisioners make them
(table-driven), and the claims the ephemeral volume controller and the DefaultStorageClass admission plugin write."""

from __future__ import annotations

from typing import Any

import pytest

from ebb_embedded.volumes import admitted, claim_names, ephemeral_claims, owned_by, provision
from tests.kit.builders import node, pod, pvc, storage_class

ZONE = "topology.kubernetes.io/zone"
ON_B = node("b", zone="us-east-1b")


def _class(provisioner: str, **fields: Any) -> dict[str, Any]:
    return {**storage_class(), "provisioner": provisioner, **fields}


def _affinity(made: tuple[dict[str, Any], dict[str, Any]] | None) -> list[tuple[str, list[str]]] | None:
    assert made is not None
    affinity = made[0]["spec"].get("nodeAffinity")
    if affinity is None:
        return None
    [term] = affinity["required"]["nodeSelectorTerms"]
    return [(e["key"], e["values"]) for e in term["matchExpressions"]]


# (case, the class, the node its pod was bound to (None: Immediate), the cluster's zones, the volume's affinity)
PROVISIONED = [
    ("EBS: the zone of the pod's node", _class("ebs.csi.aws.com"), ON_B, (), [(ZONE, ["us-east-1b"])]),
    ("in-tree EBS too", _class("kubernetes.io/aws-ebs"), ON_B, (), [(ZONE, ["us-east-1b"])]),
    ("a persistent disk too", _class("pd.csi.storage.gke.io"), ON_B, (), [(ZONE, ["us-east-1b"])]),
    ("a local-path volume: the node itself", _class("rancher.io/local-path"), ON_B, (),
     [("kubernetes.io/hostname", ["b"])]),
    ("EFS attaches anywhere", _class("efs.csi.aws.com"), ON_B, (), None),
    ("the keys of the allowedTopologies term the node meets, with its values",
     _class("ebs.csi.aws.com", allowedTopologies=[
         {"matchLabelExpressions": [{"key": ZONE, "values": ["us-east-1a"]}]},
         {"matchLabelExpressions": [{"key": ZONE, "values": ["us-east-1b", "us-east-1c"]}]}]),
     ON_B, (), [(ZONE, ["us-east-1b"])]),
    ("Immediate: the first zone the class allows",
     _class("ebs.csi.aws.com", volumeBindingMode="Immediate", allowedTopologies=[
         {"matchLabelExpressions": [{"key": ZONE, "values": ["us-east-1c"]}]}]), None, ("us-east-1a",),
     [(ZONE, ["us-east-1c"])]),
    ("Immediate without allowedTopologies: the first of the cluster's zones",
     _class("ebs.csi.aws.com", volumeBindingMode="Immediate"), None, ("us-east-1a", "us-east-1b"),
     [(ZONE, ["us-east-1a"])]),
]


@pytest.mark.parametrize(("storage", "on", "zones", "affinity"), [c[1:] for c in PROVISIONED],
                         ids=[c[0] for c in PROVISIONED])
def test_a_provisioned_volume_attaches_where_its_driver_makes_it(storage: dict[str, Any], on: dict[str, Any] | None,
                                                                 zones: tuple[str, ...],
                                                                 affinity: list[tuple[str, list[str]]] | None) -> None:
    made = provision(pvc("data", None), storage, node=on, zones=zones, serial=3)
    assert _affinity(made) == affinity
    assert made is not None
    volume, bound = made
    assert bound["spec"]["volumeName"] == volume["metadata"]["name"] and bound["status"]["phase"] == "Bound"
    assert volume["spec"]["claimRef"]["name"] == "data" and volume["spec"]["capacity"] == {"storage": "10Gi"}


@pytest.mark.parametrize(("claim", "storage"), [
    (pvc("data", "v1"), storage_class()),  # bound already
    (pvc("data", None), None),  # its class is not held
    (pvc("data", None), _class("kubernetes.io/no-provisioner")),  # static volumes only
])
def test_no_volume_is_made_for_a_bound_claim_or_one_no_provisioner_serves(claim: dict[str, Any],
                                                                          storage: dict[str, Any] | None) -> None:
    assert provision(claim, storage, node=ON_B) is None


def test_two_claims_of_one_name_get_volumes_of_their_own() -> None:
    first, second = (provision(pvc("data", None), storage_class(), node=ON_B, serial=s) for s in (1, 2))
    assert first is not None and second is not None
    assert first[0]["metadata"]["name"] != second[0]["metadata"]["name"]


def test_an_ephemeral_volume_gets_its_claim_owned_by_its_pod() -> None:
    cache = pod("cache", None, ephemeral=("scratch",))
    [claim] = ephemeral_claims(cache)
    assert claim["metadata"]["name"] == "cache-scratch" and owned_by(claim, cache)
    assert not owned_by(claim, pod("other", None))
    assert claim_names(cache) == ["cache-scratch"]
    assert claim_names(pod("db", None, claims=("data-db-0",))) == ["data-db-0"]


def test_the_default_class_is_written_into_a_claim_that_names_none() -> None:
    default = {**storage_class("gp3"), "metadata": {"name": "gp3", "annotations": {
        "storageclass.kubernetes.io/is-default-class": "true"}}}
    given = admitted(pvc("data", None, storage_class=None), [storage_class("io2"), default])
    assert given is not None and given["spec"]["storageClassName"] == "gp3"
    assert admitted(pvc("data", None, storage_class=""), [default]) is None  # "": no class, on purpose
    assert admitted(pvc("data", None, storage_class=None), [storage_class("io2")]) is None  # no default
