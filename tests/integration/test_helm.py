"""charts/ebb on a real kube-apiserver (authorization Node,RBAC) with KWOK running the pods.

- `helm template` with the default values and with charts/ebb/ci/nondefault-values.yaml is applied server-side
  (strict field validation, dry run) in a namespace of this run: every object is accepted.
- `helm install` (release and namespace of this run, `--wait --wait-for-jobs`) on KWOK nodes: every Deployment's
  pods are Running and Ready, the migrations Job completes, and ebb's pods keep off the nodes of a NodePool (label
  karpenter.sh/nodepool) although those nodes match the node selector and are free: the chart's affinity. Each
  pod is annotated karpenter.sh/do-not-disrupt, the executor's is system-cluster-critical, every Deployment has a
  PodDisruptionBudget the disruption controller computes.
- The release's RBAC, asked of the API server's authorizer (SubjectAccessReview): what each service account needs is
  allowed, a list of what it must not do is denied.
- `helm upgrade` (a new image tag, provider kwok, one replica, the pods moved onto a NodePool's node by values):
  the Deployments roll to the new image, the new version's migrations Job replaces the old one, the executor may
  now delete and create Nodes (SubjectAccessReview). A second upgrade to mode shadow takes every write verb away
  but the planner's Lease.
- `ebb plan` on a dump of that cluster (its Nodes, Pods and PodDisruptionBudgets as the API server has them, and a
  NodePool document for the nodes labelled with it): the node that holds ebb's own pods is blocked (their
  karpenter.sh/do-not-disrupt), the empty node of the same NodePool is disrupted.

Everything this module creates is removed at its end (nodes, namespace, release; the ebb.sh CRDs if Helm
installed them here).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kit.helm import CHART, helm, of_kind, render, values_file
from tests.kit.kube_raw import call
from tests.kit.servers import KubernetesCluster
from tests.kit.waiting import eventually

pytestmark = pytest.mark.integration

RUN = uuid.uuid4().hex[:6]
RELEASE = f"ebb-{RUN}"
NAMESPACE = f"ebb-helm-{RUN}"
TEST_LABEL = "ebb.sh/helm-test"
KWOK = "kwok.x-k8s.io/node"
POOL = f"pool-{RUN}"
SYSTEM_NODES = [f"ebb-helm-{RUN}-system-{i}" for i in "ab"]
POOL_NODES = [f"ebb-helm-{RUN}-pool-{i}" for i in "ab"]
CRDS = ["disruptionpolicies.ebb.sh", "holds.ebb.sh", "instancetypecatalogs.ebb.sh"]
SERVICES = ["cluster-watcher", "consolidation-planner", "decisions-api", "termination-executor"]
#: the `ebb` command of the virtualenv running the tests
EBB = [str(Path(sys.executable).parent / "ebb")]


def name(part: str) -> str:
    return f"{RELEASE}-{part}"


# ------------------------------------------------------------------------------------------- the API, raw


async def ok(api: Any, method: str, path: str, **kwargs: Any) -> Any:
    status, body = await call(api, method, path, **kwargs)
    assert 200 <= status < 300, f"{method} {path}: HTTP {status}: {body}"
    return body


async def resource_path(api: Any, doc: dict[str, Any]) -> str:
    """The collection path serving ``doc``'s kind, from discovery."""
    version = doc["apiVersion"]
    base = f"/api/{version}" if "/" not in version else f"/apis/{version}"
    for resource in (await ok(api, "GET", base))["resources"]:
        if resource["kind"] == doc["kind"] and "/" not in resource["name"]:
            namespace = doc["metadata"].get("namespace")
            return f"{base}/namespaces/{namespace}/{resource['name']}" if resource["namespaced"] and namespace \
                else f"{base}/{resource['name']}"
    raise AssertionError(f"{version} serves no {doc['kind']}")


async def items(api: Any, path: str, kind: str, api_version: str = "v1", **query: str) -> list[dict[str, Any]]:
    """A list's items as `kubectl get -o yaml` writes them (with apiVersion and kind)."""
    body = await ok(api, "GET", path, query=list(query.items()))
    return [{"apiVersion": api_version, "kind": kind, **item} for item in body["items"]]


# ------------------------------------------------------------------------------------------- the cluster


def kwok_node(node: str, pool: str | None) -> dict[str, Any]:
    """A KWOK node the size of an m5.2xlarge; a NodePool's (labelled karpenter.sh/nodepool) when ``pool``."""
    labels = {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
              "node.kubernetes.io/instance-type": "m5.2xlarge", "topology.kubernetes.io/zone": "us-east-1a",
              "topology.kubernetes.io/region": "us-east-1", TEST_LABEL: RUN}
    if pool:
        labels |= {"karpenter.sh/nodepool": pool, "karpenter.sh/capacity-type": "on-demand",
                   "karpenter.sh/initialized": "true", "karpenter.sh/registered": "true"}
    resources = {"cpu": "8", "memory": "32Gi", "pods": "58"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node, "labels": labels, "annotations": {KWOK: "fake"}},
            "spec": {"taints": [{"key": KWOK, "value": "fake", "effect": "NoSchedule"}]},
            "status": {"capacity": resources, "allocatable": resources}}


#: the values of this run's release: its nodes (the KWOK taint tolerated), its Events in its own namespace
BASE_VALUES: dict[str, Any] = {
    "nodeSelector": {"kubernetes.io/os": "linux", TEST_LABEL: RUN},
    "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"},
                    {"key": KWOK, "operator": "Exists", "effect": "NoSchedule"}],
    "settings": {"eventsNamespace": NAMESPACE},
}
UPGRADE_VALUES: dict[str, Any] = {
    **BASE_VALUES,
    "image": {"tag": "0.1.1"},
    "provider": "kwok",
    "replicas": 1,
    # what an operator could do: drop the chart's node affinity and pin ebb onto a NodePool's node
    "affinity": {"nodeAffinity": None},
    "nodeSelector": {**BASE_VALUES["nodeSelector"], "kubernetes.io/hostname": POOL_NODES[0]},
}


@dataclass
class Release:
    api: Any
    kubeconfig: Path
    directory: Path
    #: what `helm install` printed (its NOTES)
    installed: str


async def run_helm(*args: str, kubeconfig: Path) -> str:
    done = await asyncio.to_thread(helm, *args, kubeconfig=kubeconfig, timeout=600)
    return done.stdout


async def pods_of(api: Any, part: str) -> list[dict[str, Any]]:
    return await items(api, f"/api/v1/namespaces/{NAMESPACE}/pods", "Pod",
                       labelSelector=f"app.kubernetes.io/name={name(part)}")


def running_and_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
    return status.get("phase") == "Running" and conditions.get("Ready") == "True" and \
        not pod["metadata"].get("deletionTimestamp")


@pytest.fixture(scope="module")
async def release(kube_api: Any, kubernetes_cluster: KubernetesCluster,
                  tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Release]:
    directory = tmp_path_factory.mktemp("helm")
    crds_before = {crd for crd in CRDS if (await call(
        kube_api, "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}"))[0] == 200}
    try:
        for node in SYSTEM_NODES:
            await ok(kube_api, "POST", "/api/v1/nodes", body=kwok_node(node, None))
        for node in POOL_NODES:
            await ok(kube_api, "POST", "/api/v1/nodes", body=kwok_node(node, POOL))
        await ok(kube_api, "POST", "/api/v1/namespaces", body={
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE, "labels": {
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest"}}})
        # the existing Secret the chart names (database.existingSecret, decisionsApi.existingSecret)
        await ok(kube_api, "POST", f"/api/v1/namespaces/{NAMESPACE}/secrets", body={
            "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ebb"}, "stringData": {
                "database-url": "postgresql+asyncpg://ebb:secret@postgres.example:5432/ebb", "api-token": "t" * 32}})
        installed = await run_helm("install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--values",
                       str(values_file(BASE_VALUES, directory, "install.yaml")), "--wait", "--wait-for-jobs",
                       "--timeout", "5m", kubeconfig=kubernetes_cluster.kubeconfig)
        yield Release(kube_api, kubernetes_cluster.kubeconfig, directory, installed)
    finally:
        await asyncio.to_thread(helm, "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "2m",
                                kubeconfig=kubernetes_cluster.kubeconfig, check=False)
        await call(kube_api, "DELETE", f"/api/v1/namespaces/{NAMESPACE}")
        for node in SYSTEM_NODES + POOL_NODES:
            await call(kube_api, "DELETE", f"/api/v1/nodes/{node}")
        for crd in set(CRDS) - crds_before:  # Helm installs crds/ but never removes them
            await call(kube_api, "DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")


# ------------------------------------------------------------------------------------------- helm template, applied


@pytest.mark.parametrize("which", ["default", "nondefault"])
async def test_the_rendered_chart_is_accepted_server_side(kube_api: Any, tmp_path: Path, which: str) -> None:
    """Every object of `helm template` (the CRDs aside: the install below creates them for real), applied with
    server-side apply, strict field validation and dryRun=All in a namespace of this test."""
    namespace = f"ebb-template-{which}-{RUN}"
    files = [CHART / "ci" / "nondefault-values.yaml"] if which == "nondefault" else []
    docs = render(release="ebb", namespace=namespace, value_files=files)
    await ok(kube_api, "POST", "/api/v1/namespaces", body={"apiVersion": "v1", "kind": "Namespace",
                                                           "metadata": {"name": namespace}})
    try:
        refused = {}
        for doc in docs:
            path = await resource_path(kube_api, doc)
            status, body = await call(
                kube_api, "PATCH", f"{path}/{doc['metadata']['name']}", body=doc, query=[
                    ("fieldManager", "ebb-helm-tests"), ("fieldValidation", "Strict"), ("force", "true"),
                    ("dryRun", "All")], content_type="application/apply-patch+yaml")
            if status not in (200, 201):
                refused[f"{doc['kind']} {doc['metadata']['name']}"] = (body or {}).get("message", body)
        assert not refused, refused
        kinds = {d["kind"] for d in docs}
        assert kinds >= {"Deployment", "ConfigMap", "ServiceAccount", "ClusterRole", "Role", "PodDisruptionBudget",
                         "Service"}
    finally:
        await call(kube_api, "DELETE", f"/api/v1/namespaces/{namespace}")


# ------------------------------------------------------------------------------------------- helm install


async def test_install_runs_every_pod_off_the_nodepools_nodes(release: Release) -> None:
    api = release.api
    for part in SERVICES:
        deployment = await ok(api, "GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name(part)}")
        pods = [p for p in await pods_of(api, part) if running_and_ready(p)]
        assert len(pods) == deployment["spec"]["replicas"] > 0, part
        for pod in pods:
            # the node selector matches the NodePool's nodes too, which are free: the chart's affinity keeps ebb off
            assert pod["spec"]["nodeName"] in SYSTEM_NODES, (part, pod["spec"]["nodeName"])
            assert pod["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
        if part == "termination-executor":
            assert {p["spec"]["priorityClassName"] for p in pods} == {"system-cluster-critical"}
            assert {p["spec"]["priority"] for p in pods} == {2000000000}
    jobs = await items(api, f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", "Job", "batch/v1")
    assert [(j["metadata"]["name"], j["status"].get("succeeded")) for j in jobs] == [(name("db-upgrade-0-1-0"), 1)]
    assert f"installed as {RELEASE} in {NAMESPACE}: mode enforce, provider karpenter" in release.installed


async def test_every_deployment_has_a_disruption_budget_in_force(release: Release) -> None:
    async def budgets() -> dict[str, Any] | None:
        found = {b["metadata"]["name"]: b for b in await items(
            release.api, f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets", "PodDisruptionBudget",
            "policy/v1")}
        computed = all((b.get("status") or {}).get("expectedPods") for b in found.values())
        return found if len(found) == len(SERVICES) and computed else None

    found = await eventually("the disruption controller to count the pods of every PodDisruptionBudget", budgets)
    assert sorted(found) == sorted(name(part) for part in SERVICES)
    for budget in found.values():
        assert budget["status"]["currentHealthy"] == budget["status"]["expectedPods"]


# ------------------------------------------------------------------------------------------- RBAC


@dataclass(frozen=True)
class Access:
    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""


async def allowed(api: Any, account: str, access: Access) -> bool:
    attributes = {k: v for k, v in vars(access).items() if v}
    review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {
        "user": f"system:serviceaccount:{NAMESPACE}:{account}",
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"],
        "resourceAttributes": attributes}}
    body = await ok(api, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=review)
    return bool(body["status"].get("allowed"))


async def verdicts(api: Any, expected: dict[tuple[str, Access], bool]) -> dict[str, bool]:
    """The accesses whose verdict differs from ``expected`` (empty: all as expected)."""
    wrong = {}
    for (account, access), want in expected.items():
        if await allowed(api, account, access) is not want:
            wrong[f"{account}: {access}"] = want
    return wrong


async def assert_verdicts(api: Any, expected: dict[tuple[str, Access], bool]) -> None:
    """The authorizer's informers lag the bindings a little: wait until every verdict is as expected."""
    last: dict[str, bool] = {}

    async def settled() -> bool:
        nonlocal last
        last = await verdicts(api, expected)
        return not last

    await eventually("the release's RBAC in force", settled, within=30,
                     on_timeout=lambda: f"wrong verdicts (expected): {last}")


def rules(allow: dict[str, list[Access]], deny: dict[str, list[Access]]) -> dict[tuple[str, Access], bool]:
    return {**{(name(a), x): True for a, xs in allow.items() for x in xs},
            **{(name(a), x): False for a, xs in deny.items() for x in xs}}


LEASE = Access("update", "leases", "coordination.k8s.io", namespace=NAMESPACE, name="ebb-consolidation-planner")


async def test_the_release_grants_what_each_service_needs_and_nothing_more(release: Release) -> None:
    await assert_verdicts(release.api, rules(allow={
        "cluster-watcher": [Access(v, r, g) for g, r in [("", "nodes"), ("", "pods"), ("karpenter.sh", "nodeclaims"),
                                                         ("ebb.sh", "disruptionpolicies"), ("ebb.sh", "holds")]
                            for v in ("list", "watch")],
        "consolidation-planner": [LEASE, Access("create", "leases", "coordination.k8s.io", namespace=NAMESPACE),
                                  Access("create", "events", namespace=NAMESPACE), Access("patch", "nodes"),
                                  Access("list", "pods"),
                                  Access("patch", "disruptionpolicies", "ebb.sh", subresource="status")],
        "termination-executor": [Access("get", "nodes"), Access("patch", "nodes"),
                                 Access("create", "pods", subresource="eviction", namespace="default"),
                                 Access("delete", "pods", namespace="default"),
                                 Access("create", "nodeclaims", "karpenter.sh"),
                                 Access("delete", "nodeclaims", "karpenter.sh"),
                                 Access("create", "events", namespace="kube-system")],
        "plan": [Access("list", "nodes"), Access("list", "holds", "ebb.sh")],
    }, deny={
        "cluster-watcher": [Access("patch", "nodes"), Access("get", "secrets", namespace=NAMESPACE)],
        "consolidation-planner": [Access("update", "leases", "coordination.k8s.io", namespace=NAMESPACE,
                                         name="another-lease"), Access("delete", "nodes"),
                                  Access("create", "events", namespace="default")],
        "termination-executor": [Access("delete", "nodes"), Access("create", "nodes"),
                                 Access("patch", "nodeclaims", "karpenter.sh"),
                                 Access("get", "secrets", namespace=NAMESPACE)],
        "decisions-api": [Access("list", "nodes"), Access("get", "secrets", namespace=NAMESPACE)],
        "db-upgrade": [Access("list", "nodes")],
        "plan": [Access("watch", "pods"), Access("patch", "nodes")],
    }))
    # the services that never call the API server get no token
    for part in ("decisions-api",):
        for pod in await pods_of(release.api, part):
            assert pod["spec"]["automountServiceAccountToken"] is False
            assert not [m for c in pod["spec"]["containers"] for m in c.get("volumeMounts") or []
                        if "serviceaccount" in m["mountPath"]]


# ------------------------------------------------------------------------------------------- helm upgrade


@pytest.fixture(scope="module")
async def upgraded(release: Release) -> Release:
    await run_helm("upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--values",
                   str(values_file(UPGRADE_VALUES, release.directory, "upgrade.yaml")), "--wait", "--wait-for-jobs",
                   "--timeout", "5m", kubeconfig=release.kubeconfig)
    return release


async def test_upgrade_rolls_the_new_version_and_its_migrations(upgraded: Release) -> None:
    api = upgraded.api

    async def rolled() -> bool:
        for part in SERVICES:
            pods = [p for p in await pods_of(api, part) if not p["metadata"].get("deletionTimestamp")]
            if len(pods) != 1 or not running_and_ready(pods[0]):
                return False
            if pods[0]["spec"]["containers"][0]["image"] != "ghcr.io/ebb-sh/ebb:0.1.1":
                return False
            if pods[0]["spec"]["nodeName"] != POOL_NODES[0]:
                return False
        return True

    await eventually("one pod of each service, the new image, on the NodePool's node", rolled, within=120)
    jobs = await items(api, f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", "Job", "batch/v1")
    assert [(j["metadata"]["name"], j["status"].get("succeeded")) for j in jobs] == [(name("db-upgrade-0-1-1"), 1)]
    options = await ok(api, "GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/{name('engine-options')}")
    assert options["data"]["provider"] == "kwok"
    await assert_verdicts(api, rules(
        allow={"termination-executor": [Access("delete", "nodes"), Access("create", "nodes"), Access("list", "nodes")]},
        deny={"termination-executor": [Access("create", "nodeclaims", "karpenter.sh")]}))


async def test_ebb_plan_on_a_dump_with_ebbs_own_pods_blocks_their_node(upgraded: Release, tmp_path: Path) -> None:
    """The dump holds the cluster as the API server has it after the upgrade (ebb's pods on POOL_NODES[0], nothing
    on POOL_NODES[1]) and a NodePool document for both nodes; `ebb plan` leaves the first alone, naming a pod's
    karpenter.sh/do-not-disrupt, and deletes the second."""
    api = upgraded.api
    nodes = await items(api, "/api/v1/nodes", "Node", labelSelector=f"karpenter.sh/nodepool={POOL}")
    pods = [p for node in POOL_NODES for p in await items(api, "/api/v1/pods", "Pod",
                                                          fieldSelector=f"spec.nodeName={node}")]
    budgets = await items(api, f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets",
                          "PodDisruptionBudget", "policy/v1")
    assert sorted(n["metadata"]["name"] for n in nodes) == POOL_NODES
    assert {p["metadata"]["labels"].get("app.kubernetes.io/name") for p in pods if p["status"]["phase"] == "Running"} \
        >= {name(part) for part in SERVICES}
    nodepool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": POOL}, "spec": {
        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s",
                       "budgets": [{"nodes": "100%"}]},
        "template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                              "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                                "values": ["on-demand"]}]}}}}
    dump = tmp_path / "cluster.yaml"
    dump.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [nodepool, *nodes, *pods, *budgets]}))
    done = await asyncio.to_thread(subprocess.run, [*EBB, "plan", "-f", str(dump), "-o", "json"],
                                   capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    disrupted = {node for command in plan["commands"] for node in command["nodes"]}
    assert POOL_NODES[1] in disrupted, plan
    assert POOL_NODES[0] not in disrupted, plan
    reasons = [b["reason"] for b in plan["blocked"] if b["node"] == POOL_NODES[0]]
    assert reasons and all("karpenter.sh/do-not-disrupt" in r for r in reasons), plan["blocked"]


async def test_upgrade_to_shadow_mode_takes_every_write_away(upgraded: Release) -> None:
    await run_helm("upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reuse-values", "--set", "mode=shadow",
                   "--wait", "--timeout", "5m", kubeconfig=upgraded.kubeconfig)
    planner = await ok(upgraded.api, "GET",
                       f"/api/v1/namespaces/{NAMESPACE}/configmaps/{name('consolidation-planner')}")
    assert planner["data"]["EBB_CONSOLIDATION_PLANNER_MODE"] == "shadow"
    await assert_verdicts(upgraded.api, rules(allow={"consolidation-planner": [LEASE]}, deny={
        "consolidation-planner": [Access("patch", "nodes"), Access("create", "events", namespace=NAMESPACE),
                                  Access("patch", "disruptionpolicies", "ebb.sh", subresource="status")],
        "termination-executor": [Access("patch", "nodes"), Access("delete", "nodes"), Access("get", "nodes"),
                                 Access("create", "pods", subresource="eviction", namespace="default")]}))
    assert of_kind(render(sets=["mode=shadow"]), "ClusterRole").get("ebb-termination-executor") is None
