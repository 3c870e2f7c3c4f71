"""deploy/kubernetes/ against a real kube-apiserver (authorization mode Node,RBAC).

- The ebb.sh/v1 CRDs are installed for real and must become Established; DisruptionPolicy, Hold and
  InstanceTypeCatalog objects are then created against their schemas: valid ones (including the example
  DisruptionPolicy and the bundled catalog) are accepted with their defaults filled in (a stored
  DisruptionPolicy parses to the parser's defaults), invalid ones are refused with the field named.
- Every other manifest is server-side applied with strict field validation: the RBAC objects
  (ServiceAccounts, Roles, ClusterRoles and their bindings) for real, moved into a namespace of this run
  (cluster-scoped names get the run's suffix), the rest (Namespace, ConfigMaps, the Secret template,
  Deployments, Services, the Job, ServiceMonitors) as a dry run in that namespace.
- The RBAC rules are checked by the API server's own RBAC authorizer: a SubjectAccessReview per verb
  each service needs (allowed) and per verb it must not have (denied).

The test cluster has no Prometheus Operator: the ServiceMonitors are applied against a stand-in
ServiceMonitor CRD whose strict schema covers only the fields of monitoring.coreos.com/v1 that
deploy/kubernetes/monitoring uses (installed only when the real CRD is absent, removed afterwards).
Everything this module creates is deleted at its end (CRDs that existed before are updated and kept).
"""

from __future__ import annotations

import asyncio
import copy
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from ebb.core.model import DisruptionPolicy
from ebb.core.snapshot import parse_object
from tests.kit.kube_raw import call

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "deploy" / "kubernetes"
NAMESPACE = "ebb-system"
FIELD_MANAGER = "ebb-manifest-tests"
#: applied for real (so that the RBAC authorizer can evaluate them); everything else is a dry run
REAL_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
SM_CRD = "servicemonitors.monitoring.coreos.com"


# ------------------------------------------------------------------------------------------- helpers


def manifest_documents() -> list[tuple[str, dict[str, Any]]]:
    """(file relative to deploy/kubernetes, document) for every manifest, kustomizations excepted."""
    out = []
    for path in sorted(MANIFESTS.rglob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out.append((str(path.relative_to(MANIFESTS)), doc))
    return out


def ref(doc: dict[str, Any]) -> str:
    meta = doc.get("metadata") or {}
    return f"{doc['kind']} {meta.get('namespace', '')}/{meta.get('name')}".replace(" /", " ")


@dataclass(frozen=True)
class Resource:
    group_version: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        base = f"/api/{self.group_version}" if "/" not in self.group_version else f"/apis/{self.group_version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


async def discover(api: Any, api_version: str, kind: str) -> Resource:
    """The resource serving ``kind`` in ``api_version``, from the API server's discovery documents."""
    path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    status, body = await call(api, "GET", path)
    assert status == 200, f"discovery of {api_version}: HTTP {status}: {body}"
    for r in body["resources"]:
        if r["kind"] == kind and "/" not in r["name"]:
            return Resource(api_version, r["name"], bool(r["namespaced"]))
    raise AssertionError(f"{api_version} serves no {kind}")


async def apply(api: Any, doc: dict[str, Any], *, dry_run: bool) -> tuple[int, Any]:
    """Server-side apply ``doc`` with strict field validation (unknown or duplicate fields are errors)."""
    resource = await discover(api, doc["apiVersion"], doc["kind"])
    meta = doc["metadata"]
    query = [("fieldManager", FIELD_MANAGER), ("fieldValidation", "Strict"), ("force", "true")]
    if dry_run:
        query.append(("dryRun", "All"))
    return await call(api, "PATCH", resource.path(meta.get("namespace"), meta["name"]), body=doc, query=query,
                      content_type="application/apply-patch+yaml")


async def create(api: Any, doc: dict[str, Any], *, dry_run: bool = False) -> tuple[int, Any]:
    resource = await discover(api, doc["apiVersion"], doc["kind"])
    query = [("fieldValidation", "Strict")] + ([("dryRun", "All")] if dry_run else [])
    return await call(api, "POST", resource.path(doc["metadata"].get("namespace")), body=doc, query=query)


async def delete(api: Any, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
    resource = await discover(api, api_version, kind)
    status, body = await call(api, "DELETE", resource.path(namespace, name))
    assert status in (200, 202, 404), f"deleting {kind} {name}: HTTP {status}: {body}"


async def wait_established(api: Any, name: str, within: float = 60) -> None:
    crds = Resource("apiextensions.k8s.io/v1", "customresourcedefinitions", namespaced=False)
    deadline = asyncio.get_running_loop().time() + within
    while True:
        status, body = await call(api, "GET", crds.path(name=name))
        conditions = {c["type"]: c["status"] for c in ((body or {}).get("status") or {}).get("conditions") or []}
        if status == 200 and conditions.get("Established") == "True" and conditions.get("NamesAccepted") == "True":
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"CRD {name} not Established after {within:.0f}s: {conditions or body}")
        await asyncio.sleep(0.25)


def into_namespace(doc: dict[str, Any], namespace: str, suffix: str) -> dict[str, Any]:
    """``doc`` moved from ebb-system into ``namespace``; ClusterRoles and ClusterRoleBindings renamed with
    ``suffix`` so that this run never touches an installation's (or another run's) objects."""
    doc = copy.deepcopy(doc)
    meta = doc["metadata"]
    if meta.get("namespace") == NAMESPACE:
        meta["namespace"] = namespace
    shared = doc["kind"] in ("ClusterRole", "ClusterRoleBinding") or (
        doc["kind"] in ("Role", "RoleBinding") and meta["namespace"] != namespace)
    if shared:  # cluster-scoped, or in another namespace (the events Roles in `default`)
        meta["name"] = f"{meta['name']}-{suffix}"
    if doc["kind"] in ("RoleBinding", "ClusterRoleBinding"):
        for subject in doc.get("subjects") or []:
            if subject.get("namespace") == NAMESPACE:
                subject["namespace"] = namespace
        if shared:
            doc["roleRef"]["name"] = f"{doc['roleRef']['name']}-{suffix}"
    if doc["kind"] == "ServiceMonitor":
        selector = doc["spec"].get("namespaceSelector") or {}
        selector["matchNames"] = [namespace if n == NAMESPACE else n for n in selector.get("matchNames") or []]
    return doc


#: the stand-in for the Prometheus Operator's CRD: a strict schema of the fields ebb's ServiceMonitors use
STAND_IN_SERVICEMONITOR_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": SM_CRD, "labels": {"ebb.sh/test-stand-in": "true"}},
    "spec": {
        "group": "monitoring.coreos.com",
        "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList", "plural": "servicemonitors",
                  "singular": "servicemonitor"},
        "scope": "Namespaced",
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
            "type": "object",
            "required": ["spec"],
            "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                "spec": {"type": "object", "required": ["selector", "endpoints"], "properties": {
                    "selector": {"type": "object", "properties": {
                        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}}}},
                    "namespaceSelector": {"type": "object", "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}}}},
                    "endpoints": {"type": "array", "items": {"type": "object", "properties": {
                        "port": {"type": "string"},
                        "path": {"type": "string"},
                        "scheme": {"type": "string", "enum": ["http", "https"]},
                        "interval": {"type": "string", "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?"
                                     "(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"},
                        "scrapeTimeout": {"type": "string", "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?"
                                          "(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"}}}},
                }},
            },
        }}}],
    },
}


# ------------------------------------------------------------------------------------------- fixtures


@dataclass
class Installed:
    namespace: str
    suffix: str
    #: ref → (file, status, body) of every manifest applied
    results: dict[str, tuple[str, int, Any]]


@pytest.fixture(scope="module")
async def installed(kube_api: Any) -> AsyncIterator[Installed]:
    suffix = uuid.uuid4().hex[:8]
    namespace = f"ebb-manifests-{suffix}"
    docs = manifest_documents()
    crds = [doc for _, doc in docs if doc["kind"] == "CustomResourceDefinition"]
    stand_in = False
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
    status, _ = await call(kube_api, "GET", crd_path + SM_CRD)
    #: CRDs this run creates, and so deletes (one that was there before is updated and left in place)
    created = [c["metadata"]["name"] for c in crds
               if (await call(kube_api, "GET", crd_path + c["metadata"]["name"]))[0] == 404]
    #: (kind, name, namespace) of the RBAC objects created outside the run's namespace
    shared_rbac: list[tuple[str, str, str | None]] = []
    try:
        for crd in crds:
            code, body = await apply(kube_api, crd, dry_run=False)
            assert code in (200, 201), f"{ref(crd)}: HTTP {code}: {body}"
        if status == 404:
            code, body = await apply(kube_api, STAND_IN_SERVICEMONITOR_CRD, dry_run=False)
            assert code in (200, 201), f"stand-in ServiceMonitor CRD: HTTP {code}: {body}"
            stand_in = True
        for name in [c["metadata"]["name"] for c in crds] + ([SM_CRD] if stand_in else []):
            await wait_established(kube_api, name)
        code, body = await call(kube_api, "POST", "/api/v1/namespaces",
                                body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        assert code == 201, f"namespace {namespace}: HTTP {code}: {body}"
        results: dict[str, tuple[str, int, Any]] = {}
        for file, doc in docs:
            if doc["kind"] == "CustomResourceDefinition":
                continue
            moved = into_namespace(doc, namespace, suffix)
            real = doc["kind"] in REAL_KINDS
            if real and moved["metadata"]["name"] != doc["metadata"]["name"]:
                shared_rbac.append((doc["kind"], moved["metadata"]["name"], moved["metadata"].get("namespace")))
            code, body = await apply(kube_api, moved, dry_run=not real)
            results[ref(doc)] = (file, code, body)
        yield Installed(namespace, suffix, results)
    finally:
        for kind, name, in_namespace in shared_rbac:
            await delete(kube_api, "rbac.authorization.k8s.io/v1", kind, name, in_namespace)
        await call(kube_api, "DELETE", f"/api/v1/namespaces/{namespace}")
        for name in created + ([SM_CRD] if stand_in else []):
            await delete(kube_api, "apiextensions.k8s.io/v1", "CustomResourceDefinition", name)


# ------------------------------------------------------------------------------------------- manifests


async def test_every_manifest_is_accepted(installed: Installed) -> None:
    failed = {r: f"{file}: HTTP {code}: {(body or {}).get('message', body) if isinstance(body, dict) else body}"
              for r, (file, code, body) in installed.results.items() if code not in (200, 201)}
    assert not failed, "\n".join(f"{r}: {why}" for r, why in failed.items())
    kinds = {r.split(" ")[0] for r in installed.results}
    assert kinds >= {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                     "ConfigMap", "Secret", "Deployment", "Service", "Job", "ServiceMonitor"}
    deployments = sorted(r for r in installed.results if r.startswith("Deployment "))
    assert deployments == [f"Deployment {NAMESPACE}/ebb-{s}" for s in (
        "cluster-watcher", "consolidation-planner", "decisions-api", "interruption-ingester", "termination-executor")]


async def test_dry_run_deployment_keeps_its_security_context(installed: Installed) -> None:
    """What the API server would store (after defaulting) still runs as non-root, read-only, no privileges."""
    for r, (_, _, body) in installed.results.items():
        if not r.startswith("Deployment "):
            continue
        pod = body["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, r
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, r
            assert context["allowPrivilegeEscalation"] is False, r
            assert context["capabilities"]["drop"] == ["ALL"], r


async def test_crds_are_established(kube_api: Any, installed: Installed) -> None:
    for name in ("disruptionpolicies.ebb.sh", "holds.ebb.sh", "instancetypecatalogs.ebb.sh"):
        status, body = await call(kube_api, "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        assert status == 200
        assert {c["type"]: c["status"] for c in body["status"]["conditions"]}["Established"] == "True"
        assert body["spec"]["scope"] == "Cluster"
        assert [v["name"] for v in body["spec"]["versions"]] == ["v1"]


# ------------------------------------------------------------------------------------------- CRD schemas


def disruption_policy(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "ebb.sh/v1", "kind": "DisruptionPolicy", "metadata": {"name": name}, "spec": spec}


async def test_a_disruption_policy_is_stored_with_its_defaults_and_parses_to_the_parsers(
        kube_api: Any, installed: Installed) -> None:
    """An empty spec gets the CRD's defaults (no expireAfter: no expiry), and what the API server stores
    parses to the parser's defaults: the CRD and ebb.core.snapshot mean the same by an absent field."""
    name = f"ebb-test-{installed.suffix}"
    status, body = await create(kube_api, disruption_policy(name))
    assert status == 201, body
    try:
        status, stored = await call(kube_api, "GET", f"/apis/ebb.sh/v1/disruptionpolicies/{name}")
        assert status == 200
        assert stored["spec"] == {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                                  "minimumSavingPerEvictedPod": 0.005, "budgets": [{"nodes": "10%"}]}
        assert parse_object(stored).value == DisruptionPolicy(name)
    finally:
        await delete(kube_api, "ebb.sh/v1", "DisruptionPolicy", name)


async def test_disruption_policies_are_served_as_edp_in_category_ebb(kube_api: Any, installed: Installed) -> None:
    status, body = await call(kube_api, "GET", "/apis/ebb.sh/v1")
    assert status == 200
    (policies,) = [r for r in body["resources"] if r["name"] == "disruptionpolicies"]
    assert (policies["kind"], policies["namespaced"], policies["shortNames"], policies["categories"]) == (
        "DisruptionPolicy", False, ["edp"], ["ebb"])


async def test_a_disruption_policy_with_every_field(kube_api: Any, installed: Installed) -> None:
    doc = disruption_policy(
        f"ebb-full-{installed.suffix}", consolidationPolicy="WhenEmpty", consolidateAfter="5m", expireAfter="720h",
        stabilizationWindow="10m", minimumPriceImprovementPercent=30, demandWindow="35m",
        minimumSavingPerEvictedPod=0.01, budgets=[
            {"nodes": "20%", "reasons": ["Empty", "Drifted", "Expired"]},
            {"nodes": "0", "schedule": "0 9 * * mon-fri", "duration": "8h", "reasons": ["Underutilized"]},
            {"nodes": "3", "schedule": "@daily", "duration": "1h30m"},
        ])
    status, body = await create(kube_api, doc, dry_run=True)
    assert status == 201, body
    assert body["spec"] == doc["spec"]
    never = disruption_policy(f"ebb-never-{installed.suffix}", consolidateAfter="Never", expireAfter="Never")
    status, body = await create(kube_api, never, dry_run=True)
    assert status == 201, body


INVALID_POLICIES: list[tuple[str, dict[str, Any], str]] = [
    ("unknown policy", {"consolidationPolicy": "WhenUnderused"}, "consolidationPolicy"),
    ("budget nodes not a count or percentage", {"budgets": [{"nodes": "ten"}]}, "nodes"),
    ("budget nodes over 100%", {"budgets": [{"nodes": "150%"}]}, "nodes"),
    ("schedule without duration", {"budgets": [{"nodes": "1", "schedule": "@daily"}]},
     "'schedule' must be set with 'duration'"),
    ("unknown budget reason", {"budgets": [{"nodes": "1", "reasons": ["Bored"]}]}, "reasons"),
    ("consolidateAfter not a duration", {"consolidateAfter": "soon"}, "consolidateAfter"),
    ("expireAfter not a duration", {"expireAfter": "30d"}, "expireAfter"),
    ("stabilizationWindow Never", {"stabilizationWindow": "Never"}, "stabilizationWindow"),
    ("demandWindow not a duration", {"demandWindow": "an hour"}, "demandWindow"),
    ("misspelt field", {"consolidateAftr": "1m"}, "consolidateAftr"),
    ("a NodePool's disruption block nested", {"disruption": {"consolidateAfter": "1m"}}, "disruption"),
]


@pytest.mark.parametrize(("case", "spec", "message"), INVALID_POLICIES, ids=[c[0] for c in INVALID_POLICIES])
async def test_an_invalid_disruption_policy_is_refused(
    kube_api: Any, installed: Installed, case: str, spec: dict[str, Any], message: str
) -> None:
    name = f"ebb-bad-{installed.suffix}"
    status, body = await create(kube_api, disruption_policy(name, **spec))
    if status == 201:
        await delete(kube_api, "ebb.sh/v1", "DisruptionPolicy", name)
    assert status in (400, 422), f"{case}: accepted (HTTP {status})"
    assert message in body["message"], body["message"]


async def test_the_example_disruption_policy_validates(kube_api: Any, installed: Installed) -> None:
    """examples/karpenter.yaml's DisruptionPolicy is accepted as written (strict field validation)."""
    docs = [d for d in yaml.safe_load_all((REPO / "examples" / "karpenter.yaml").read_text()) if d]
    policies = [d for d in docs if d["kind"] == "DisruptionPolicy"]
    assert len(policies) == 1
    status, body = await create(kube_api, policies[0], dry_run=True)
    assert status == 201, body


async def test_hold_schema(kube_api: Any, installed: Installed) -> None:
    def hold(**spec: Any) -> dict[str, Any]:
        return {"apiVersion": "ebb.sh/v1", "kind": "Hold", "metadata": {"name": f"hold-{installed.suffix}"},
                "spec": spec}

    for ok in (hold(scope="nodePool", nodePool="general", expiresAt="2026-11-24T09:00:00Z", reason="release 4.2"),
               hold(scope="node", node="ip-10-0-1-17.ec2.internal", reason="debugging"),
               hold(reason="change freeze")):
        status, body = await create(kube_api, ok, dry_run=True)
        assert status == 201, body
    status, body = await create(kube_api, hold(reason="change freeze"), dry_run=True)
    assert body["spec"]["scope"] == "cluster"
    refused = [
        (hold(scope="nodePool", reason="x"), "a nodePool hold names its nodePool"),
        (hold(scope="cluster", node="n1", reason="x"), "a node hold names its node"),
        (hold(scope="namespace", reason="x"), "scope"),
        (hold(scope="cluster"), "reason"),
        (hold(scope="cluster", reason="x", expiresAt="tomorrow"), "expiresAt"),
    ]
    for doc, message in refused:
        status, body = await create(kube_api, doc, dry_run=True)
        assert status == 422, f"{doc['spec']}: HTTP {status}"
        assert message in body["message"], body["message"]


async def test_bundled_catalog_validates_as_an_instance_type_catalog(kube_api: Any, installed: Installed) -> None:
    text = resources.files("ebb.data").joinpath("aws-us-east-1.yaml").read_text(encoding="utf-8")
    docs = [d for d in yaml.safe_load_all(text) if d]
    assert [d["kind"] for d in docs] == ["InstanceTypeCatalog"]
    catalog = docs[0]
    catalog["metadata"] = {"name": catalog["metadata"]["name"]}
    status, body = await create(kube_api, catalog, dry_run=True)
    assert status == 201, body if status != 422 else body["message"][:2000]
    assert len(body["spec"]["instanceTypes"]) == len(catalog["spec"]["instanceTypes"]) > 100
    bad = copy.deepcopy(catalog)
    bad["spec"]["instanceTypes"] = [{"name": "x1.weird", "capacity": {"cpu": "4"},
                                     "offerings": [{"zone": "us-east-1a", "capacityType": "dedicated", "price": -1}]}]
    status, body = await create(kube_api, bad, dry_run=True)
    assert status == 422, body
    for field in ("memory", "capacityType", "price"):
        assert field in body["message"], body["message"]


# ------------------------------------------------------------------------------------------- RBAC


@dataclass(frozen=True)
class Access:
    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    #: "" = all namespaces / cluster-scoped; "<own>" = the installation's namespace
    namespace: str = ""
    name: str = ""

    def __str__(self) -> str:
        res = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        where = f" in {self.namespace}" if self.namespace else ""
        named = f" {self.name}" if self.name else ""
        return f"{self.verb} {self.group or 'core'}/{res}{named}{where}"


OWN = "<own>"
WATCHED = [("", "nodes"), ("", "pods"), ("policy", "poddisruptionbudgets"), ("apps", "daemonsets"),
           ("", "persistentvolumeclaims"), ("", "persistentvolumes"), ("storage.k8s.io", "storageclasses"),
           ("storage.k8s.io", "csinodes"), ("", "namespaces"),
           ("karpenter.sh", "nodepools"), ("karpenter.sh", "nodeclaims"), ("ebb.sh", "disruptionpolicies")]
#: ebb.adapters.kube.events: core/v1 Events of cluster-scoped objects, created in `default`
EVENTS = [Access("create", "events", namespace="default")]
NOT_EVENTS = [Access("patch", "events", namespace="default"), Access("delete", "events", namespace="default"),
              Access("create", "events", namespace="kube-system"),
              Access("create", "events", "events.k8s.io", namespace="kube-system")]

ALLOWED: dict[str, list[Access]] = {
    "ebb-cluster-watcher": [Access(verb, resource, group) for group, resource in WATCHED
                            for verb in ("list", "watch", "get")],
    "ebb-consolidation-planner": [
        Access("create", "leases", "coordination.k8s.io", namespace=OWN),
        Access("get", "leases", "coordination.k8s.io", namespace=OWN, name="ebb-consolidation-planner"),
        Access("update", "leases", "coordination.k8s.io", namespace=OWN, name="ebb-consolidation-planner"),
        *EVENTS,
        # ebb.sh/drifted (annotator.KubeNodeAnnotator)
        Access("patch", "nodes"), Access("patch", "nodes", name="ip-10-0-1-17.ec2.internal"),
        # the pods on a command's nodes, compared with the view before approving (app._live_pods)
        Access("list", "pods"),
        # the ConflictFree condition of the DisruptionPolicies (policy_status.KubePolicyStatus)
        Access("patch", "disruptionpolicies", "ebb.sh", subresource="status"),
        Access("patch", "disruptionpolicies", "ebb.sh", subresource="status", name="general"),
    ],
    "ebb-termination-executor": [
        Access("get", "nodes"), Access("patch", "nodes"),
        Access("list", "pods"), Access("get", "pods", namespace="default"),
        Access("create", "pods", subresource="eviction", namespace="default"),
        Access("create", "pods", subresource="eviction", namespace="kube-system"),
        # a node's terminationGracePeriod: its pods deleted, with grace, at the deadline (ebb.adapters.kube.drain)
        Access("delete", "pods", namespace="default"),
        # the karpenter provider (ebb.adapters.kube.karpenter.KubeNodeClaimApi)
        *[Access(verb, "nodeclaims", "karpenter.sh") for verb in ("get", "list", "create", "delete")],
        Access("get", "nodepools", "karpenter.sh"),
        *EVENTS,
        # the Evicted event of a pod, in the pod's namespace
        Access("create", "events", namespace="kube-system"),
    ],
    "ebb-interruption-ingester": [],
    "ebb-decisions-api": [],
    "ebb-db-upgrade": [],
    # plan-reader.yaml: `ebb plan --live` (ebb.adapters.kube.read lists every kind ebb reads)
    "ebb-plan": [Access("list", resource, group) for group, resource in
                 [*WATCHED, ("ebb.sh", "instancetypecatalogs"), ("ebb.sh", "holds")]],
}

DENIED: dict[str, list[Access]] = {
    "ebb-cluster-watcher": [Access("delete", "nodes"), Access("patch", "nodes"), Access("update", "nodes"),
                            Access("create", "events", namespace="default"),
                            Access("create", "pods", subresource="eviction", namespace="default"),
                            Access("get", "secrets", namespace="default"),
                            Access("list", "nodepools", "ebb.sh"),
                            Access("patch", "nodeclaims", "karpenter.sh"),
                            Access("patch", "disruptionpolicies", "ebb.sh"),
                            Access("delete", "disruptionpolicies", "ebb.sh")],
    "ebb-consolidation-planner": [
        Access("get", "leases", "coordination.k8s.io", namespace=OWN, name="somebody-elses-lease"),
        Access("update", "leases", "coordination.k8s.io", namespace=OWN, name="somebody-elses-lease"),
        Access("delete", "leases", "coordination.k8s.io", namespace=OWN, name="ebb-consolidation-planner"),
        Access("create", "leases", "coordination.k8s.io", namespace="kube-system"),
        Access("update", "leases", "coordination.k8s.io", namespace="kube-node-lease", name="any-node"),
        *NOT_EVENTS,
        Access("delete", "nodes"), Access("update", "nodes"), Access("list", "nodes"),
        Access("patch", "pods", namespace="default"), Access("patch", "nodeclaims", "karpenter.sh"),
        Access("create", "pods", subresource="eviction", namespace="default"),
        Access("watch", "pods"), Access("get", "pods", namespace="default"),
        # the condition only: never a policy's spec
        Access("patch", "disruptionpolicies", "ebb.sh"), Access("update", "disruptionpolicies", "ebb.sh"),
        Access("update", "disruptionpolicies", "ebb.sh", subresource="status"),
    ],
    "ebb-termination-executor": [
        Access("update", "nodes"), Access("create", "nodes"), Access("list", "nodes"),
        Access("delete", "nodes"),  # Karpenter deletes them (the karpenter provider deletes the NodeClaim)
        Access("get", "secrets", namespace="default"),
        Access("patch", "nodeclaims", "karpenter.sh"), Access("update", "nodeclaims", "karpenter.sh"),
        Access("update", "nodeclaims", "karpenter.sh", subresource="status"),
        Access("patch", "nodepools", "karpenter.sh"), Access("list", "nodepools", "karpenter.sh"),
        *[access for access in NOT_EVENTS if access.namespace == "default" or access.group],
    ],
    "ebb-interruption-ingester": [Access("get", "nodes"), Access("list", "nodes"),
                                  Access("list", "nodeclaims", "karpenter.sh")],
    "ebb-decisions-api": [Access("create", "pods", subresource="eviction", namespace="default"),
                          Access("list", "nodes"), Access("get", "secrets", namespace=OWN)],
    "ebb-db-upgrade": [Access("list", "nodes"), Access("get", "secrets", namespace=OWN)],
    "ebb-plan": [Access("watch", "pods"), Access("patch", "nodes"), Access("delete", "nodes"),
                 Access("create", "pods", subresource="eviction", namespace="default"),
                 Access("delete", "nodeclaims", "karpenter.sh"), Access("list", "secrets"),
                 Access("create", "events", namespace="default"), Access("list", "nodepools", "ebb.sh")],
}


async def allowed(kube_api: Any, namespace: str, account: str, access: Access) -> tuple[bool, str]:
    """The API server's verdict (SubjectAccessReview) on ``account`` of ``namespace`` doing ``access``."""
    attributes = {"verb": access.verb, "group": access.group, "resource": access.resource}
    if access.subresource:
        attributes["subresource"] = access.subresource
    if access.namespace:
        attributes["namespace"] = namespace if access.namespace == OWN else access.namespace
    if access.name:
        attributes["name"] = access.name
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": f"system:serviceaccount:{namespace}:{account}",
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"],
        "resourceAttributes": attributes}}
    status, body = await call(kube_api, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=review)
    assert status == 201, body
    return bool(body["status"].get("allowed")), str(body["status"].get("reason", ""))


@pytest.fixture(scope="module")
async def rbac_in_force(kube_api: Any, installed: Installed) -> str:
    """The namespace, once the RBAC authorizer has seen this run's bindings (its informers lag a little)."""
    failed = {r: code for r, (_, code, _) in installed.results.items() if code not in (200, 201)}
    assert not failed, f"manifests refused: {failed}"
    deadline = asyncio.get_running_loop().time() + 30
    probe = Access("update", "leases", "coordination.k8s.io", namespace=OWN, name="ebb-consolidation-planner")
    while not (await allowed(kube_api, installed.namespace, "ebb-consolidation-planner", probe))[0]:
        assert asyncio.get_running_loop().time() < deadline, "the planner's Role never took effect"
        await asyncio.sleep(0.5)
    deadline = asyncio.get_running_loop().time() + 30
    probe = Access("create", "nodeclaims", "karpenter.sh")
    while not (await allowed(kube_api, installed.namespace, "ebb-termination-executor", probe))[0]:
        assert asyncio.get_running_loop().time() < deadline, "the executor's ClusterRole never took effect"
        await asyncio.sleep(0.5)
    return installed.namespace


@pytest.mark.parametrize("account", sorted(ALLOWED))
async def test_service_account_has_what_its_service_needs(kube_api: Any, rbac_in_force: str, account: str) -> None:
    refused = [f"{a}: {why}" for a in ALLOWED[account]
               for ok, why in [await allowed(kube_api, rbac_in_force, account, a)] if not ok]
    assert not refused, f"{account} lacks: {refused}"


@pytest.mark.parametrize("account", sorted(DENIED))
async def test_service_account_has_nothing_more(kube_api: Any, rbac_in_force: str, account: str) -> None:
    granted = [f"{a}: {why}" for a in DENIED[account]
               for ok, why in [await allowed(kube_api, rbac_in_force, account, a)] if ok]
    assert not granted, f"{account} may: {granted}"


async def test_the_authorizer_is_rbac(kube_api: Any, rbac_in_force: str) -> None:
    """The denials above mean something only if the API server enforces RBAC (not AlwaysAllow): an
    account without any binding is refused, and the same account is allowed once bound."""
    account = f"nobody-{uuid.uuid4().hex[:6]}"
    ok, _ = await allowed(kube_api, rbac_in_force, account, Access("list", "nodes"))
    assert not ok
    ok, _ = await allowed(kube_api, rbac_in_force, "ebb-cluster-watcher", Access("list", "nodes"))
    assert ok
