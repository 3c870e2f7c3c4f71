"""``ebb plan --live`` against the real kube-apiserver: the objects it lists (Karpenter's NodePool CRD installed,
KWOK nodes, a pod KWOK runs) give the plan a dump of them would, for the nodes asked about with ``--node``, and
``ebb run --live`` starts its simulated cluster from them. (A cluster that cannot be read:
tests/cli/test_cli_plan.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from ebb.adapters.kube.kinds import KINDS, KindSpec
from ebb.adapters.kube.read import read_cluster
from tests.kit.servers import KubernetesCluster
from tests.kit.system import (
    KWOK,
    RUN_LABEL,
    create_namespace,
    create_nodepool,
    delete_nodepool,
    delete_nodes,
    install_karpenter_crds,
    kwok_node,
    nodepool,
    remove_crds,
)
from tests.kit.waiting import eventually

EBB = str(Path(sys.executable).parent / "ebb")
REPO = Path(__file__).resolve().parents[2]


def _pod(name: str, node: str, run: str, cpu: str) -> client.V1Pod:
    """A pod bound to ``node`` that may run only on this run's nodes (the shared cluster has others)."""
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"app": name}),
        spec=client.V1PodSpec(
            node_name=node, node_selector={RUN_LABEL: run},
            containers=[client.V1Container(name="app", image="registry.k8s.io/pause:3.10",
                                           resources=client.V1ResourceRequirements(
                                               requests={"cpu": cpu, "memory": "1Gi"}))],
            tolerations=[client.V1Toleration(key=KWOK, operator="Exists", effect="NoSchedule")],
            automount_service_account_token=False, termination_grace_period_seconds=0,
        ),
    )


async def _ebb_plan(*args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(subprocess.run, [EBB, "plan", *args], capture_output=True, text=True,
                                   timeout=300, check=False)


async def test_plan_live_reads_the_cluster(kube_api: Any, kubernetes_cluster: KubernetesCluster) -> None:
    run = uuid.uuid4().hex[:8]
    pool, namespace = f"live-{run}", f"live-{run}"
    idle, busy = f"live-idle-{run}", f"live-busy-{run}"
    core = client.CoreV1Api(kube_api)
    crds = await install_karpenter_crds(kube_api)
    try:
        await create_nodepool(kube_api, nodepool(pool, run))
        await create_namespace(kube_api, namespace)
        for name in (idle, busy):
            await core.create_node(kwok_node(name, pool, run))
        await core.create_namespaced_pod(namespace, _pod(f"db-{run}", busy, run, cpu="3"))

        async def running() -> bool:
            pod = await core.read_namespaced_pod(f"db-{run}", namespace)
            return bool(pod.status.phase == "Running")

        await eventually("the pod Running on its KWOK node", running)
        # page by page: one object a request reads what one request of 500 does; a kind not served is named
        widget = KindSpec("Widget", "widgets.example.com", "v1", "widgets", namespaced=False, custom=True)
        told: list[tuple[str, int]] = []
        paged = await read_cluster(kube_api, [KINDS["Node"], widget], page_size=1,
                                   progress=lambda kind, count: told.append((kind, count)))
        whole = await read_cluster(kube_api, [KINDS["Node"]])
        names = [d["metadata"]["name"] for d in paged.documents]
        assert {idle, busy} <= set(names) and names == [d["metadata"]["name"] for d in whole.documents]
        assert paged.not_served == ["Widget"] and paged.counts == whole.counts == {"Node": len(names)}
        assert told == [("Node", n) for n in range(1, len(names) + 1)]  # one page at a time
        done = await _ebb_plan("--live", "--kubeconfig", str(kubernetes_cluster.kubeconfig),
                               "--node", idle, "--node", busy, "-o", "json")
        assert done.returncode == 0, done.stderr
        summary = next(line for line in done.stderr.splitlines() if line.startswith("read "))
        assert summary.startswith("read https://127.0.0.1:"), summary
        for kind in ("Node", "Pod", "NodePool", "NodeClaim"):
            assert f" {kind}" in summary, summary
        out = json.loads(done.stdout)
        assert [(c["method"], c["nodes"]) for c in out["commands"]] == [("emptiness", [idle])]
        (kept,) = out["blocked"]
        assert kept["node"] == busy and kept["reason"], kept
        assert {b["nodePool"] for b in out["budgets"]} == {pool}

        # the same plan from a file holding what --live read: the objects of this test, as a dump has them
        nodes = [kube_api.sanitize_for_serialization(await core.read_node(n)) for n in (idle, busy)]
        pod = kube_api.sanitize_for_serialization(await core.read_namespaced_pod(f"db-{run}", namespace))
        pool_doc = await client.CustomObjectsApi(kube_api).get_cluster_custom_object("karpenter.sh", "v1",
                                                                                      "nodepools", pool)
        dump = Path(kubernetes_cluster.kubeconfig).parent / f"dump-{run}.yaml"
        dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Node", **n} for n in nodes] + [
            {"apiVersion": "v1", "kind": "Pod", **pod}, pool_doc]}), encoding="utf-8")
        try:
            from_file = await _ebb_plan("-f", str(dump), "--now", out["now"], "--node", idle, "--node", busy,
                                        "-o", "json")
        finally:
            dump.unlink()
        assert from_file.returncode == 0, from_file.stderr
        again = await _ebb_plan("--live", "--kubeconfig", str(kubernetes_cluster.kubeconfig), "--now", out["now"],
                                "--node", idle, "--node", busy, "-o", "json")
        assert again.returncode == 0, again.stderr
        # the cost is the pass's over the whole cluster, which may hold other tests' nodes
        live_plan, file_plan = json.loads(again.stdout), json.loads(from_file.stdout)
        assert live_plan.pop("cost")["before"] >= file_plan.pop("cost")["before"] > 0
        assert live_plan == file_plan

        # ebb's Hold objects are read too (as the cluster-watcher watches them): a hold on the idle node
        hold_crd = yaml.safe_load((REPO / "deploy/kubernetes/crds/ebb.sh_holds.yaml").read_text(encoding="utf-8"))
        extensions = client.ApiextensionsV1Api(kube_api)
        try:
            await extensions.create_custom_resource_definition(hold_crd)
            crds.append(hold_crd["metadata"]["name"])
        except ApiException as error:
            if error.status != 409:
                raise
        custom = client.CustomObjectsApi(kube_api)

        async def held() -> bool:
            try:
                await custom.create_cluster_custom_object("ebb.sh", "v1", "holds", {
                    "apiVersion": "ebb.sh/v1", "kind": "Hold", "metadata": {"name": f"live-{run}"},
                    "spec": {"scope": "node", "node": idle, "reason": "looking into it"}})
            except ApiException as error:
                if error.status == 404:  # the CRD is not served yet
                    return False
                raise
            return True

        await eventually("the Hold created", held)
        try:
            paused = await _ebb_plan("--live", "--kubeconfig", str(kubernetes_cluster.kubeconfig), "--node", idle,
                                     "-o", "json")
        finally:
            await custom.delete_cluster_custom_object("ebb.sh", "v1", "holds", f"live-{run}")
        assert paused.returncode == 0, paused.stderr
        (blocked,) = json.loads(paused.stdout)["blocked"]
        assert f"hold live-{run} (node {idle})" in blocked["reason"] and "looking into it" in blocked["reason"]

        # the embedded mode starts from the same read: the cluster's nodes, and the idle one emptied
        ran = await asyncio.to_thread(subprocess.run, [
            EBB, "run", "--live", "--kubeconfig", str(kubernetes_cluster.kubeconfig), "--duration", "2m",
            "-o", "json"], capture_output=True, text=True, timeout=300, check=False)
        assert ran.returncode == 0, ran.stderr[-3000:]
        nodes_read = int(next(line for line in ran.stderr.splitlines() if line.startswith("read "))
                         .split(": ", 1)[1].split(" Node")[0].replace(",", ""))
        summary_of_run = json.loads(ran.stdout)
        assert summary_of_run["start"]["nodes"] == nodes_read >= 2
        assert summary_of_run["decisions"]["emptiness"]["succeeded"] >= 1, summary_of_run
    finally:
        await delete_nodes(kube_api, [idle, busy])
        with contextlib.suppress(ApiException):
            await core.delete_namespace(namespace)
        await delete_nodepool(kube_api, pool)
        await remove_crds(kube_api, crds)


async def test_plan_live_sees_karpenters_interruption_queue(kube_api: Any,
                                                            kubernetes_cluster: KubernetesCluster) -> None:
    """A Deployment labelled as Karpenter's chart labels it, with an interruption queue in its environment: ``ebb plan
    --live`` lists it and warns that Karpenter's queue is set while ebb's interruption-ingester runs."""
    run = uuid.uuid4().hex[:8]
    namespace = f"karpenter-{run}"
    apps = client.AppsV1Api(kube_api)
    await create_namespace(kube_api, namespace)
    labels = {"app.kubernetes.io/name": "karpenter", "run": run}
    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="karpenter", labels=labels),
        spec=client.V1DeploymentSpec(
            replicas=0, selector=client.V1LabelSelector(match_labels=labels),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=client.V1PodSpec(containers=[client.V1Container(
                    name="controller", image="registry.k8s.io/pause:3.10",
                    env=[client.V1EnvVar(name="INTERRUPTION_QUEUE", value=f"queue-{run}")])]))))
    try:
        await apps.create_namespaced_deployment(namespace, deployment)
        done = await _ebb_plan("--live", "--kubeconfig", str(kubernetes_cluster.kubeconfig), "-o", "json")
        assert done.returncode == 0, done.stderr
        warnings = json.loads(done.stdout)["warnings"]
        queue = [w for w in warnings if w["kind"] == "InterruptionQueue"
                 and w["object"] == f"Deployment {namespace}/karpenter"]
        assert len(queue) == 1, warnings
        assert f"queue-{run}" in queue[0]["message"] and queue[0]["nodePool"] is None
        assert "Karpenter's Deployment not read" not in done.stderr
    finally:
        with contextlib.suppress(ApiException):
            await client.CoreV1Api(kube_api).delete_namespace(namespace)
