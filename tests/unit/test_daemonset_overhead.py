"""The room a replacement loses to DaemonSets is counted per instance type, for the DaemonSets that would run there.

Karpenter counts a DaemonSet's overhead on a new node of an instance type only when its pod is compatible with the
NodePool's template and the type (``buildDaemonOverheadGroups``): its tolerations, nodeSelector and required node
affinity. A DaemonSet for arm64 nodes, for spot nodes, for another zone, for one instance type, or selecting a label
the NodePool does not define takes no room on a new node that would not run it. Counted anyway, it made the
replacement of an oversized node dearer than Karpenter's: a c5.xlarge where a t3.medium does.
"""

from __future__ import annotations

from typing import Any

import pytest

from ebb.core import snapshot as parser
from ebb.core.labels import daemonset_runs_on_type
from tests.kit.builders import OLD, ago, blocked_of, daemonset, node, nodepool, plan_dict, pod, snapshot

ZONE = "topology.kubernetes.io/zone"


def _agent(**spec: Any) -> dict[str, Any]:
    ds = daemonset("agent", cpu="1600m")
    ds["spec"]["template"]["spec"].update(spec)
    return ds


def _requiring(key: str, operator: str, *values: str) -> dict[str, Any]:
    expression: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [expression]}]}}}}


ON_DEMAND_AB = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": ZONE, "operator": "In", "values": ["us-east-1a", "us-east-1b"]}]

# (id, the DaemonSet's pod spec, whether it runs on a new t3.medium of the on-demand NodePool in zones a and b)
CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("no selector: everywhere", {}, True),
    ("affinity to arm64, the types amd64", _requiring("kubernetes.io/arch", "In", "arm64"), False),
    ("affinity to amd64", _requiring("kubernetes.io/arch", "In", "amd64"), True),
    ("affinity to spot, the NodePool on-demand", _requiring("karpenter.sh/capacity-type", "In", "spot"), False),
    ("nodeSelector on a zone the NodePool does not offer", {"nodeSelector": {ZONE: "us-east-1c"}}, False),
    ("nodeSelector on a zone it offers", {"nodeSelector": {ZONE: "us-east-1b"}}, True),
    ("nodeSelector on a label the NodePool does not define", {"nodeSelector": {"gpu": "true"}}, False),
    ("nodeSelector on another instance type", {"nodeSelector": {"node.kubernetes.io/instance-type": "c5.large"}},
     False),
    ("nodeSelector on this instance type", {"nodeSelector": {"node.kubernetes.io/instance-type": "t3.medium"}}, True),
    ("a custom key the NodePool does not have, DoesNotExist", _requiring("gpu", "DoesNotExist"), True),
    # the labels Karpenter's NodeClaim template gives every node (``NewNodeClaimTemplate``): counted, as Karpenter does
    ("nodeSelector on karpenter.sh/initialized", {"nodeSelector": {"karpenter.sh/initialized": "true"}}, True),
    ("affinity: karpenter.sh/registered Exists", _requiring("karpenter.sh/registered", "Exists"), True),
    ("nodeSelector on the NodePool's NodeClass", {"nodeSelector": {"karpenter.k8s.aws/ec2nodeclass": "default"}}, True),
    ("nodeSelector on another NodeClass", {"nodeSelector": {"karpenter.k8s.aws/ec2nodeclass": "gpu"}}, False),
]


@pytest.mark.parametrize(("spec", "runs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_daemonset_runs_on_a_new_node_its_selectors_admit(spec: dict[str, Any], runs: bool) -> None:
    snap = snapshot(nodepool(requirements=ON_DEMAND_AB), _agent(**spec))
    [pool], [ds] = snap.nodepools, snap.daemonsets
    t3 = next(t for t in snap.instance_types if t.name == "t3.medium")
    assert daemonset_runs_on_type(ds, pool, t3) is runs


@pytest.mark.parametrize(("spec", "runs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_an_oversized_node_is_replaced_by_what_its_pod_and_the_agents_that_run_there_need(spec: dict[str, Any],
                                                                                            runs: bool) -> None:
    # a 500m pod on an m5.2xlarge: a t3.medium (2 cpu) holds it, unless 1.6 cpu of agent runs there too
    out = plan_dict(nodepool(requirements=ON_DEMAND_AB), _agent(**spec), node("n1", itype="m5.2xlarge"),
                    pod("p", "n1", cpu="500m", memory="256Mi"))
    [command] = out["commands"]
    cheapest = command["replacements"][0]["instanceTypes"][0]
    assert (cheapest != "t3.medium") is runs, command


# -- what a DaemonSet's pods ask: its newest pod's needs, else its template's -----------------------------------------

def _agent_pod(name: str, node_name: str, cpu: str | None, *, created: str = OLD, phase: str = "Running",
               owner: str = "agent", **kwargs: Any) -> dict[str, Any]:
    """A pod of DaemonSet ``owner`` created at ``created`` (its template asks 1600m: `_agent`)."""
    doc = pod(name, node_name, ns="kube-system", cpu=cpu, memory="128Mi", labels={"app": "agent"},
              owner=("DaemonSet", owner), phase=phase, **kwargs)
    doc["metadata"]["creationTimestamp"] = created
    return doc


# (id, the pods of the input, the cpu the agent DaemonSet's pods are taken to ask)
LIVE_CASES: list[tuple[str, list[dict[str, Any]], int]] = [
    ("no pod: the template's", [], 1600),
    ("its pod asks less (a VPA)", [_agent_pod("a1", "n1", "100m")], 100),
    ("its pod asks more (a LimitRange default)", [_agent_pod("a1", "n1", "2")], 2000),
    ("the newest pod's, listed last", [_agent_pod("a1", "n1", "100m", created=ago(days=2)),
                                       _agent_pod("a2", "n2", "300m", created=ago(hours=1))], 300),
    ("the newest pod's, listed first", [_agent_pod("a1", "n1", "300m", created=ago(hours=1)),
                                        _agent_pod("a2", "n2", "100m", created=ago(days=2))], 300),
    ("a finished pod is not read", [_agent_pod("a1", "n1", "100m", phase="Failed")], 1600),
    ("another DaemonSet's pod is not read", [_agent_pod("o1", "n1", "100m", owner="other")], 1600),
    ("a pod of the same name in another namespace is not read",
     [{**_agent_pod("a1", "n1", "100m"), "metadata": {**_agent_pod("a1", "n1", "100m")["metadata"],
                                                      "namespace": "default"}}], 1600),
]


@pytest.mark.parametrize(("pods", "cpu"), [c[1:] for c in LIVE_CASES], ids=[c[0] for c in LIVE_CASES])
def test_a_daemonset_asks_what_its_newest_pod_asks(pods: list[dict[str, Any]], cpu: int) -> None:
    snap = snapshot(nodepool(), _agent(), node("n1"), node("n2"), *pods)
    [ds] = snap.daemonsets
    assert ds.spec.requests["cpu"] == cpu


def test_a_daemonset_whose_pod_asks_what_its_template_does_stays_the_same_object() -> None:
    """The simulator knows DaemonSets by identity pass after pass (`cached_pools`): a DaemonSet is made again only
    when its newest pod asks otherwise, and once per DaemonSet and pod spec objects."""
    snap = snapshot(nodepool(), _agent(), node("n1"), _agent_pod("a1", "n1", "1600m"), _agent_pod("a2", "n1", "100m"))
    template = snapshot(nodepool(), _agent()).daemonsets
    same, smaller = ({p.name: p for p in snap.pods}[name] for name in ("a1", "a2"))
    assert parser.live_daemonsets(template, [same]) == template
    assert parser.live_daemonsets(template, [same])[0] is template[0]
    [made] = parser.live_daemonsets(template, [smaller])
    assert made.spec.requests["cpu"] == 100
    assert parser.live_daemonsets(template, [smaller])[0] is made


# (id, the agent pod's cpu, its template's, where the 500m pod p of an m5.2xlarge goes: the cheapest type of its
# replacement). Karpenter sizes a new node with the DaemonSet's newest pod (provisioning suite 'should account for
# overhead using daemonset pod spec instead of daemonset spec')
NEW_NODE_CASES: list[tuple[str, str | None, str | None, str]] = [
    ("template 1600m, pod 100m (a VPA): a t3.medium holds p and the agent", "100m", "1600m", "t3.medium"),
    ("template 1600m, pod 1600m: a t3.medium does not", "1600m", "1600m", "c5.xlarge"),
    ("template asks nothing, pod 1600m (a LimitRange): a t3.medium does not", "1600m", None, "c5.xlarge"),
]


@pytest.mark.parametrize(("pod_cpu", "template_cpu", "cheapest"), [c[1:] for c in NEW_NODE_CASES],
                         ids=[c[0] for c in NEW_NODE_CASES])
def test_a_new_node_keeps_room_for_what_the_daemonsets_pods_ask(pod_cpu: str | None, template_cpu: str | None,
                                                                 cheapest: str) -> None:
    agent = _agent()
    agent["spec"]["template"]["spec"]["containers"][0]["resources"] = (
        {"requests": {"cpu": template_cpu}} if template_cpu else {})
    out = plan_dict(nodepool(), agent, node("n1", itype="m5.2xlarge"), pod("p", "n1", cpu="500m", memory="256Mi"),
                    _agent_pod("a1", "n1", pod_cpu))
    [command] = out["commands"]
    assert command["replacements"][0]["instanceTypes"][0] == cheapest, command


# (id, the agent's pods on n1 and n2, whether n1 is deleted: its p, 1200m, moved onto n2). n2 runs q (300m); the
# agent's template asks 1 cpu. An existing node keeps room for the pods of the DaemonSets that would run there, less
# what their pods there ask (Karpenter's ``ExistingNode``), each DaemonSet's pods taken as its newest pod asks
EXISTING_CASES: list[tuple[str, list[dict[str, Any]], bool]] = [
    ("its pods (200m) run on both: none kept", [_agent_pod("a1", "n1", "200m"), _agent_pod("a2", "n2", "200m")],
     True),
    ("missing on n2: its pod's 200m kept, 1500m free", [_agent_pod("a1", "n1", "200m")], True),
    ("missing on n2: its pod's 900m kept, 800m free", [_agent_pod("a1", "n1", "900m")], False),
]


@pytest.mark.parametrize(("pods", "deleted"), [c[1:] for c in EXISTING_CASES], ids=[c[0] for c in EXISTING_CASES])
def test_an_existing_node_keeps_room_for_a_daemonset_as_its_pods_ask(pods: list[dict[str, Any]],
                                                                     deleted: bool) -> None:
    agent = _agent()
    agent["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    out = plan_dict(nodepool(), agent, node("n1"), pod("p", "n1", cpu="1200m", memory="1Gi"),
                    node("n2", annotations={"karpenter.sh/do-not-disrupt": "true"}),
                    pod("q", "n2", cpu="300m", memory="1Gi"), *pods)
    assert (("delete", ["n1"]) in [(c["action"], c["nodes"]) for c in out["commands"]]) is deleted, out["commands"]


def test_a_daemonsets_pod_keeps_its_templates_node_affinity() -> None:
    """The DaemonSet controller replaces a pod's required node affinity by its own node (``matchFields``
    metadata.name); which new nodes the DaemonSet runs on is still its template's (Karpenter's
    ``getDaemonSetPods``)."""
    arm_only = _requiring("kubernetes.io/arch", "In", "arm64")
    own_node = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}
    out = plan_dict(nodepool(), _agent(**arm_only), node("n1", itype="m5.2xlarge"),
                    pod("p", "n1", cpu="500m", memory="256Mi"), _agent_pod("a1", "n1", "1600m", affinity=own_node))
    [command] = out["commands"]
    assert command["replacements"][0]["instanceTypes"][0] == "t3.medium", command


def test_a_daemonsets_pod_keeps_its_templates_node_selector() -> None:
    """The DaemonSet controller copies the template's nodeSelector into every pod; a pod without it is written by
    hand, and where the DaemonSet runs is still its template's: an agent for arm64 nodes only keeps no room on an
    amd64 node whatever its pod says, so p moves onto n2 (2 cpu, 1 taken by another pod)."""
    out = plan_dict(nodepool(), _agent(nodeSelector={"kubernetes.io/arch": "arm64"}),
                    node("n1", itype="t3.medium"), pod("p", "n1", cpu="800m", memory="256Mi"),
                    node("n2", itype="t3.medium", annotations={"karpenter.sh/do-not-disrupt": "true"}),
                    pod("q", "n2", cpu="1", memory="256Mi"), _agent_pod("a1", "elsewhere", "1600m"))
    assert [(c["action"], c["nodes"]) for c in out["commands"]] == [("delete", ["n1"])], out["commands"]


# -- the host ports of a new node's DaemonSet pods -------------------------------------------------------------------

def _port(port: int, protocol: str = "TCP", host_ip: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"containerPort": port, "hostPort": port, "protocol": protocol}
    if host_ip is not None:
        found["hostIP"] = host_ip
    return found


# (id, the exporter DaemonSet's host ports and pod spec, p's host ports, whether p may go on a new node). p (500m,
# on an m5.2xlarge) is replaced by a t3.medium unless the exporter's pod holds one of its ports there: a new node's
# DaemonSet pods take their ports first (Karpenter's daemon overhead groups carry their ``HostPortUsage``), so p
# would not go there
PORT_CASES: list[tuple[str, list[dict[str, Any]], dict[str, Any], list[dict[str, Any]], bool]] = [
    ("the same port", [_port(9100)], {}, [_port(9100)], False),
    ("another port", [_port(9100)], {}, [_port(9101)], True),
    ("the same port, UDP and TCP", [_port(9100, "UDP")], {}, [_port(9100)], True),
    ("the same port, on every address and on one", [_port(9100)], {}, [_port(9100, host_ip="10.0.0.1")], False),
    ("the same port, on two addresses", [_port(9100, host_ip="10.0.0.2")], {}, [_port(9100, host_ip="10.0.0.1")],
     True),
    ("the same port, the DaemonSet runs on arm64 nodes only", [_port(9100)],
     {"nodeSelector": {"kubernetes.io/arch": "arm64"}}, [_port(9100)], True),
]


@pytest.mark.parametrize(("ds_ports", "ds_spec", "p_ports", "launches"), [c[1:] for c in PORT_CASES],
                         ids=[c[0] for c in PORT_CASES])
def test_a_new_node_holds_the_host_ports_of_its_daemonsets_pods(ds_ports: list[dict[str, Any]],
                                                                ds_spec: dict[str, Any],
                                                                p_ports: list[dict[str, Any]], launches: bool) -> None:
    exporter = daemonset("exporter", cpu="10m", memory="32Mi")
    exporter["spec"]["template"]["spec"]["containers"][0]["ports"] = ds_ports
    exporter["spec"]["template"]["spec"].update(ds_spec)
    p = pod("p", "n1", cpu="500m", memory="256Mi")
    p["spec"]["containers"][0]["ports"] = p_ports
    out = plan_dict(nodepool(), exporter, node("n1", itype="m5.2xlarge"), p)
    if launches:
        [command] = out["commands"]
        assert command["replacements"][0]["instanceTypes"][0] == "t3.medium", command
    else:
        assert out["commands"] == []
        assert "runs a DaemonSet that holds one of its host ports" in blocked_of(out, "n1")["reason"]


def test_a_pod_goes_on_the_new_node_types_whose_daemonsets_leave_its_port_free() -> None:
    """Karpenter skips only the instance types whose DaemonSets hold the port: an exporter on t3.medium nodes only
    sends p, which needs its port, to the next cheapest type."""
    exporter = daemonset("exporter", cpu="10m", memory="32Mi")
    exporter["spec"]["template"]["spec"]["containers"][0]["ports"] = [_port(9100)]
    exporter["spec"]["template"]["spec"]["nodeSelector"] = {"node.kubernetes.io/instance-type": "t3.medium"}
    p = pod("p", "n1", cpu="500m", memory="256Mi", host_port=9100)
    out = plan_dict(nodepool(), exporter, node("n1", itype="m5.2xlarge"), p)
    [command] = out["commands"]
    assert command["replacements"][0]["instanceTypes"][0] == "c5.large", command


def test_a_pod_no_type_holds_once_the_daemonsets_are_counted_is_told_so() -> None:
    """suite_test.go (provisioning/scheduling), a compatible DaemonSet's overhead on every type: a 100-cpu DaemonSet
    runs on every node, so no new node has room for the drifted node's pod, although many types are large enough
    for it alone. The reason says the DaemonSets are why, not only that no type fits."""
    out = plan_dict(nodepool(node_hash="h1"), node("src", node_hash="h0"), pod("web", "src", cpu="500m"),
                    daemonset("huge", cpu="100"))
    assert out["commands"] == []
    reason = blocked_of(out, "src")["reason"]
    assert ("no NodePool offers an instance type that fits it (its instance types large enough for it have too "
            "little left once their own overhead and the DaemonSets that would run on them are counted)") in reason, \
        reason
