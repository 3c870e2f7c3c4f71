"""`input_warnings`: what `ebb plan` tells a user about input it reads but will not plan as they may think."""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core.snapshot import input_warnings, parse_documents
from tests.kit.builders import catalog, hold, instance_type, node, nodepool, pod


def _arch(doc: dict[str, Any], arch: str) -> dict[str, Any]:
    return {**doc, "metadata": {**doc["metadata"], "labels": {**doc["metadata"]["labels"], "kubernetes.io/arch": arch}}}


# (case, the documents, the start of the warning expected, or None for none)
CASES: list[tuple[str, list[Any], str | None]] = [
    ("a node of a type the input's catalog lists: nothing to say",
     [nodepool(), node("a", itype="m5.large"), pod("web", "a"), catalog()], None),
    ("a node of a type the input's catalog does not list costs 0",
     [nodepool(), node("a", itype="Standard_D4s_v5"), pod("web", "a"),
      catalog([instance_type("m5.large", "2", "8Gi", 29, 0.096)])],
     "1 node(s) are of instance types the input catalog does not list, so they cost 0 in the plan and no "
     "replacement is cheaper (give an InstanceTypeCatalog with your types and prices, docs/catalog.md): "
     "node a (Standard_D4s_v5)"),
    ("an active pod bound to a node the input does not hold",
     [nodepool(), node("a"), pod("web", "a"), pod("lost", "gone"), catalog()],
     "1 pod(s) are bound to nodes the input does not hold and are left out of the plan (a dump of some nodes "
     "only?): pod default/lost on gone"),
    ("Holds of a NodePool and a node the input does not hold pause nothing",
     [nodepool(), node("a"), pod("web", "a"), hold("freeze", "nodePool", "defualt"), hold("keep", "node", "b"),
      hold("ok", "node", "a"), hold("all"), catalog()],
     "2 Hold(s) name a NodePool or Node the input does not hold and pause nothing: Hold freeze (nodePool defualt), "
     "Hold keep (node b)"),
    ("a node whose architecture label its catalog type contradicts",
     [nodepool(), _arch(node("a", itype="t4g.medium"), "arm64"), pod("web", "a"),
      catalog([{**instance_type("t4g.medium", "2", "4Gi", 17, 0.0336), "labels": {"kubernetes.io/arch": "amd64"}}])],
     "1 node(s) carry an architecture or OS label their instance type's catalog entry does not: a new node of the "
     "type is planned with the catalog's, so pods that select the node's may be given a node they cannot run on (fix "
     "the catalog's labels): node a (t4g.medium: kubernetes.io/arch=arm64, the catalog says amd64)"),
    ("a catalog type without an architecture label takes its node's: nothing to say",
     [nodepool(), _arch(node("a", itype="t4g.medium"), "arm64"), pod("web", "a"),
      catalog([instance_type("t4g.medium", "2", "4Gi", 17, 0.0336)])], None),
    ("a NodePool requirement on a provider's instance type label no catalog type carries",
     [nodepool(requirements=[{"key": "karpenter.azure.com/sku-family", "operator": "In", "values": ["D"]}]),
      node("a"), pod("web", "a"), catalog([instance_type("m5.large", "2", "8Gi", 29, 0.096)])],
     "1 NodePool requirement(s) are on a cloud provider's instance type label that no type of the input catalog "
     "carries: ebb reads such a key as the NodePool's own (any type may launch, labelled with its value), where the "
     "provider launches only the types it names, so the types and prices planned may not be those launched (add the "
     "label to the catalog's types, docs/catalog.md): NodePool default (karpenter.azure.com/sku-family)"),
    ("a finished pod there is no matter",
     [nodepool(), node("a"), pod("web", "a"), pod("done", "gone", phase="Succeeded"), catalog()], None),
]


@pytest.mark.parametrize(("docs", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_input_warnings(docs: list[Any], expected: str | None) -> None:
    warnings = input_warnings(parse_documents(docs))
    assert warnings == ([] if expected is None else [expected])


def test_a_catalog_type_without_architecture_or_os_labels_takes_those_of_its_nodes() -> None:
    """A user's catalog may leave out a type's labels (docs/catalog.md): a new node of it would be planned as amd64
    and linux, and an arm64 type offered to an amd64 pod. Its nodes tell what it is; the bundled catalog says it."""
    docs = [nodepool(), _arch(node("a", itype="t4g.medium"), "arm64"), pod("web", "a"),
            catalog([instance_type("t4g.medium", "2", "4Gi", 17, 0.0336), instance_type("t3.medium", "2", "4Gi", 17,
                                                                                        0.0416)])]
    types = {t.name: t for t in parse_documents(docs).instance_types}
    assert types["t4g.medium"].labels.get("kubernetes.io/arch") == "arm64"
    assert "kubernetes.io/arch" not in types["t3.medium"].labels  # no node of it: the default stays
