"""A pass that takes the deletes kept from the last pass (``single_node.AloneVerdicts``) answers as one computed whole.

One cluster goes through a random sequence of changes: pods added (plain ones, DaemonSet pods, and pods with a hostname
anti-affinity, a zone spread, a host port, a preferred node affinity or a zone selector) and removed, pending pods,
nodes added, removed, cordoned, deleting (their pods placed first) and moved to another zone, an instance type's price
changed, the NodePool's budget changed, the clock moved (past consolidateAfter, which sets unsettled nodes aside), and a
pending pod bound where a pass keeps its room (its node's room stays, and its place in the utilization order moves:
`Start.changed_in` asks such bins again). The objects go through a ``SnapshotStore``, as the planner's do, so an
unchanged object is the same object pass after pass. After every step one pass runs with the kept verdicts and one
without, on views built apart, and the two results must be equal: commands with their placements, every blocked node's
cause with every value (the alone verdict of a node waiting for its budget included), budgets, costs and ``revisit_at``.

The budgets are small (a node or two), so most passes have nodes waiting for their budget, whose explanation is
what the verdicts keep. The comparison can fail: a cache blind to the state its deletes read, or to the bins that
changed, is caught (``test_a_blind_cache_is_caught``), and verdicts are answered from the kept ones (``hits``) on the
way."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ebb.adapters.snapshot_store import SnapshotStore
from ebb.core.engine import PassResult, run_pass
from ebb.core.methods import METHOD_ORDER, multi_node, single_node
from ebb.core.methods import kept as kept_module
from ebb.core.methods.base import EngineOptions, simulation
from ebb.core.methods.consolidation import kept_refusals
from ebb.core.methods.single_node import AloneSession, AloneVerdicts
from tests.kit.builders import NOW, ZONES, ago, catalog, node, nodepool, pod
from tests.kit.messages import cluster_object

TYPES = ("m5.large", "c5.large", "m5.xlarge", "t3.medium")
CPUS = ("100m", "250m", "600m", "1200m")
KINDS = ("plain", "plain", "plain", "plain", "plain", "anti", "spread", "port", "prefers", "zonal", "daemon")

Step = tuple[Any, ...]
#: the methods before multi-node consolidation: when one acts, the pass explains the others on the state it leaves
BEFORE_CONSOLIDATION = frozenset(method.name for method in itertools.takewhile(
    lambda method: method is not multi_node.METHOD, (method for method, _why in METHOD_ORDER)))


def shaped(name: str, on: str | None, cpu: str, kind: str, started: str) -> dict[str, Any]:
    """A pod of ``kind``: plain, or one whose placement reads more than the bins' room (topology, ports, forms)."""
    app = {"app": f"app-{kind}"}
    if kind == "anti":
        return pod(name, on, cpu=cpu, labels=app, started=started, affinity={"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": app}, "topologyKey": "kubernetes.io/hostname"}]}})
    if kind == "spread":
        return pod(name, on, cpu=cpu, labels=app, started=started, spread=[{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": app}}])
    if kind == "port":
        return pod(name, on, cpu=cpu, labels=app, started=started, host_port=8080)
    if kind == "prefers":
        return pod(name, on, cpu=cpu, labels=app, started=started, affinity={"nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "preference": {"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONES[0]]}]}}]}})
    if kind == "daemon":
        return pod(name, on, cpu=cpu, ns="kube-system", labels={"app": "agent"}, owner=("DaemonSet", "agent"),
                   started=started)
    if kind == "zonal":
        return pod(name, on, cpu=cpu, labels=app, started=started, node_selector={
            "topology.kubernetes.io/zone": ZONES[0]})
    return pod(name, on, cpu=cpu, started=started)


@st.composite
def starts(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A NodePool with a budget of one or two nodes and 3-10 nodes of 0-4 pods each, most of them plain."""
    docs: list[dict[str, Any]] = [catalog(), nodepool(
        consolidate_after=draw(st.sampled_from(["0s", "5m"])),
        budgets=[{"nodes": draw(st.sampled_from(["1", "2"]))}])]
    for i in range(draw(st.integers(3, 10))):
        docs.append(node(f"n{i}", itype=draw(st.sampled_from(TYPES)), zone=draw(st.sampled_from(ZONES[:2]))))
        for j in range(draw(st.integers(0, 4))):
            docs.append(shaped(f"p{i}-{j}", f"n{i}", draw(st.sampled_from(CPUS)), draw(st.sampled_from(KINDS)),
                               ago(minutes=draw(st.integers(0, 20)))))
    return docs


@st.composite
def packed_starts(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Nodes nearly full, most of them of the cheapest type: few consolidate alone either way, so multi-node
    consolidation's greedy runs refuse most steps alone, which the kept refusals answer on the next pass."""
    pool = nodepool(consolidate_after="0s", budgets=[{"nodes": draw(st.sampled_from(["1", "2"]))}])
    docs: list[dict[str, Any]] = [catalog(), pool]
    count = draw(st.integers(3, 10))
    for i in range(count):
        docs.append(node(f"n{i}", itype=draw(st.sampled_from(("t3.medium", "t3.medium", "t3.medium", "c5.large"))),
                         zone=draw(st.sampled_from(ZONES[:2]))))
        for j in range(draw(st.integers(2, 4))):
            docs.append(shaped(f"p{i}-{j}", f"n{i}", draw(st.sampled_from(("400m", "500m", "700m", "900m"))),
                               draw(st.sampled_from((*("plain",) * 8, *KINDS))), ago(minutes=30)))
    spare = draw(st.sampled_from((None, 0, 1, 2)))
    if spare is not None:  # a CPU limit at or just above what the nodes have (2 CPUs each): a replacement may exceed it
        pool["spec"]["limits"] = {"cpu": str(2 * count + spare)}
    return docs


@st.composite
def replacing_starts(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Nearly full nodes: t3.medium (the cheapest type) with two or three pods, and c5.large (dearer, of the same size)
    with one large pod that a t3.medium takes. Single-node consolidation replaces a c5.large first (its one pod makes it
    the cheapest to disrupt), and then asks of the t3.medium nodes refused alone on the state that leaves."""
    pool = nodepool(consolidate_after="0s", budgets=[{"nodes": draw(st.sampled_from(["2", "100%"]))}])
    docs: list[dict[str, Any]] = [catalog(), pool]
    for i in range(draw(st.integers(3, 10))):
        dear = draw(st.booleans())  # one large pod on a c5.large, else two or three on a t3.medium
        docs.append(node(f"n{i}", itype="c5.large" if dear else "t3.medium", zone=draw(st.sampled_from(ZONES[:2]))))
        for j in range(1 if dear else draw(st.integers(2, 3))):
            cpu = draw(st.sampled_from(("1200m", "1500m", "1800m") if dear else ("500m", "600m", "900m")))
            docs.append(shaped(f"p{i}-{j}", f"n{i}", cpu, draw(st.sampled_from((*("plain",) * 8, *KINDS))),
                               ago(minutes=30)))
    return docs


@st.composite
def moving_starts(draw: st.DrawFn) -> list[dict[str, Any]]:
    """t3.medium nodes (the cheapest type), each with a large pod that fits on no other node and no cheaper one, and
    small pods that do fit elsewhere, some nodes nearly full: a node's step alone is refused at its large pod, its
    small pods go to the first nodes with room, and a pod removed or added changes which node that is (a kept
    refusal then holds with its small pods on other nodes, `ChangedBins.replay`)."""
    pool = nodepool(consolidate_after="0s", budgets=[{"nodes": draw(st.sampled_from(["1", "2"]))}])
    docs: list[dict[str, Any]] = [catalog(), pool]
    for i in range(draw(st.integers(3, 8))):
        docs.append(node(f"n{i}", itype="t3.medium", zone=draw(st.sampled_from(ZONES[:2]))))
        docs.append(shaped(f"p{i}-0", f"n{i}", draw(st.sampled_from(("1300m", "1400m", "1500m"))), "plain",
                           ago(minutes=30)))
        for j in range(1, draw(st.integers(1, 4))):
            docs.append(shaped(f"p{i}-{j}", f"n{i}", draw(st.sampled_from(("100m", "200m", "300m"))),
                               draw(st.sampled_from((*("plain",) * 8, *KINDS))), ago(minutes=30)))
    return docs


@st.composite
def alike_starts(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Nodes of two or three shapes (a type and the same pods: a Deployment's replicas spread one way), nearly full,
    most of them refused alone: a node's refusal is that of the first node of its shape (`RefusalSession.held`), unless
    one took a pod of the other or may take one (a few nodes are drawn emptier, or with a pod fewer)."""
    pool = nodepool(consolidate_after="0s", budgets=[{"nodes": draw(st.sampled_from(["1", "2"]))}])
    docs: list[dict[str, Any]] = [catalog(), pool]
    shapes = draw(st.lists(st.tuples(st.sampled_from(("t3.medium", "t3.medium", "c5.large")),
                                     st.sampled_from((("1500m", "400m"), ("900m", "900m"), ("700m", "700m", "500m"),
                                                      ("1200m", "300m", "300m")))), min_size=2, max_size=3))
    for i in range(draw(st.integers(3, 9))):
        shape = draw(st.integers(0, len(shapes) - 1))
        itype, cpus = shapes[shape]
        docs.append(node(f"n{i}", itype=itype, zone=draw(st.sampled_from(ZONES[:2]))))
        for j, cpu in enumerate(cpus[:len(cpus) - draw(st.sampled_from((0, 0, 0, 1)))]):
            kind = draw(st.sampled_from((*("replica",) * 12, *KINDS)))
            docs.append(pod(f"p{i}-{j}", f"n{i}", cpu=cpu, labels={"app": f"shape{shape}-{j}"}, started=ago(minutes=30))
                        if kind == "replica" else shaped(f"p{i}-{j}", f"n{i}", cpu, kind, ago(minutes=30)))
    return docs


@st.composite
def taking_starts(draw: st.DrawFn) -> list[dict[str, Any]]:
    """`alike_starts` with larger budgets, a node or two with one small pod (deleted first: the delete-only run takes
    them, and steps the nodes alike after on the state that leaves) and an m5.xlarge partly full, where some pods of
    the others fit: a node's step after a take is that of the node alike stepped before it (`StepsAlike`), unless one
    took a pod of the other or may take one."""
    docs = draw(alike_starts())
    docs[1]["spec"]["disruption"]["budgets"] = [{"nodes": draw(st.sampled_from(["2", "3", "100%"]))}]
    docs += [node("r", itype="m5.xlarge"), pod("r-0", "r", cpu=draw(st.sampled_from(("2500m", "3000m", "3500m"))),
                                               labels={"app": "filler"}, started=ago(minutes=30))]
    for i in range(draw(st.integers(1, 2))):
        docs += [node(f"e{i}"), pod(f"e{i}-0", f"e{i}", cpu=draw(st.sampled_from(("10m", "100m", "300m"))),
                                    labels={"app": f"e{i}"}, started=ago(minutes=30))]
    return docs


@contextmanager
def replays() -> Iterator[list[tuple[str, tuple[tuple[str, str], ...] | None, bool]]]:
    """Each `ChangedBins.replay` made: the refusal's first pod, where its pods that went to a node go now, and whether
    one of them goes elsewhere than it went."""
    made: list[tuple[str, tuple[tuple[str, str], ...] | None, bool]] = []
    replay = kept_module.ChangedBins.replay

    def recorded(self: kept_module.ChangedBins, refusal: kept_module.Refusal, own: int) -> Any:
        went = replay(self, refusal, own)
        made.append((refusal.first.key, None if went is None else tuple((pod.key, node) for pod, node in went),
                     went is not None and went is not refusal.went))
        return went

    with patch.object(kept_module.ChangedBins, "replay", recorded):
        yield made


@contextmanager
def alike_refusals() -> Iterator[list[tuple[str, bool]]]:
    """Each node asked for the refusal of a node alike (`RefusalSession._alike_refusal`), and whether it got one."""
    asked: list[tuple[str, bool]] = []
    real = kept_module.RefusalSession._alike_refusal

    def recorded(self: kept_module.RefusalSession, own: int, price: float, leaving: list[Any]) -> Any:
        refusal = real(self, own, price, leaving)
        asked.append((self.changed.state.s.nodes[own].name, refusal is not None))
        return refusal

    with patch.object(kept_module.RefusalSession, "_alike_refusal", recorded):
        yield asked


@contextmanager
def steps_alike() -> Iterator[list[tuple[str, str]]]:
    """Each step of a greedy run asked of a node alike stepped since the run last took a node (`StepsAlike.like`): the
    node and the answer ("stepped": none, "refused": a step refused, "alone": a step alone carried on)."""
    asked: list[tuple[str, str]] = []
    real = kept_module.StepsAlike.like

    def recorded(self: kept_module.StepsAlike, name: str, price: float) -> Any:
        found = real(self, name, price)
        asked.append((name, "stepped" if found is None else "refused" if found[0] is None else "alone"))
        return found

    with patch.object(kept_module.StepsAlike, "like", recorded):
        yield asked


def steps_answered(asked: list[tuple[str, str]]) -> None:
    """Hypothesis events: whether greedy runs' steps were answered from a node alike (`steps_alike`), of each kind."""
    for answer in ("refused", "alone"):
        event(f"a step of a greedy run answered from a node alike: {answer}" if any(
            found == answer for _, found in asked) else f"no step of a greedy run answered {answer}")


steps = st.lists(st.one_of(
    st.tuples(st.just("add pod"), st.integers(0, 9), st.sampled_from(CPUS), st.sampled_from(KINDS)),
    st.tuples(st.just("remove pod"), st.integers(0, 60)),
    st.tuples(st.just("empty"), st.integers(0, 9)),
    st.tuples(st.just("add node"), st.sampled_from(TYPES), st.sampled_from(ZONES)),
    st.tuples(st.just("remove node"), st.integers(0, 9)),
    st.tuples(st.just("cordon"), st.integers(0, 9)),
    st.tuples(st.just("deleting"), st.integers(0, 9)),
    st.tuples(st.just("zone"), st.integers(0, 9), st.sampled_from(ZONES)),
    st.tuples(st.just("price"), st.sampled_from(TYPES), st.sampled_from([0.5, 0.9, 1.5])),
    st.tuples(st.just("budget"), st.sampled_from(["0", "1", "2", "100%"])),
    st.tuples(st.just("clock"), st.integers(1, 12)),
    st.tuples(st.just("bind pending"), st.integers(0, 9)),
    st.tuples(st.just("nothing")),
), min_size=1, max_size=10)
#: with nodes launched and not initialized yet, and initialized later (what Karpenter's pace reads of them)
booting_steps = st.lists(st.one_of(
    st.tuples(st.just("add booting node"), st.sampled_from(TYPES), st.sampled_from(ZONES)),
    st.tuples(st.just("initialize"), st.integers(0, 9)),
    st.tuples(st.just("add pod"), st.integers(0, 9), st.sampled_from(CPUS), st.sampled_from(KINDS)),
    st.tuples(st.just("remove pod"), st.integers(0, 60)),
    st.tuples(st.just("price"), st.sampled_from(TYPES), st.sampled_from([0.5, 0.9, 1.5])),
    st.tuples(st.just("clock"), st.integers(1, 12)),
    st.tuples(st.just("bind pending"), st.integers(0, 9)),
), min_size=1, max_size=10)

#: pending pods come and are bound where a pass kept their room, with pods removed and the clock moving: the bins'
#: room stays where a pod is bound, and their order moves (`Start.changed_in` asks those bins again)
binding_steps = st.lists(st.one_of(
    st.tuples(st.just("add pod"), st.sampled_from((8, 9)), st.sampled_from(CPUS), st.sampled_from(KINDS)),
    st.tuples(st.just("bind pending"), st.integers(0, 9)),
    st.tuples(st.just("bind pending"), st.integers(0, 9)),
    st.tuples(st.just("remove pod"), st.integers(0, 60)),
    st.tuples(st.just("clock"), st.integers(1, 12)),
), min_size=2, max_size=12)


@contextmanager
def reordered() -> Iterator[list[int]]:
    """How many unchanged bins each `Start.changed_in` asked again because their place among the others moved."""
    counts: list[int] = []
    real = kept_module._longest_rising

    def recorded(values: list[int]) -> frozenset[int]:
        rising = real(values)
        counts.append(len(values) - len(rising))
        return rising

    with patch.object(kept_module, "_longest_rising", recorded):
        yield counts


@dataclass
class World:
    """The cluster's objects (through a SnapshotStore), its clock and the documents applied so far."""

    objects: SnapshotStore = field(default_factory=SnapshotStore)
    now: datetime = NOW
    docs: dict[str, dict[str, Any]] = field(default_factory=dict)
    added: itertools.count[int] = field(default_factory=itertools.count)

    def put(self, doc: dict[str, Any]) -> None:
        self.docs[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
        self.objects.apply(cluster_object(doc))

    def remove(self, key: str) -> None:
        doc = self.docs.pop(key)
        self.objects.apply(cluster_object(doc).model_copy(update={"object": None}))

    def of(self, kind: str) -> list[str]:
        return sorted(k for k in self.docs if k.startswith(f"{kind}/"))

    def edited(self, key: str) -> dict[str, Any]:
        """A copy of the document at ``key`` to change and `put` again (the store sees a new object)."""
        return copy.deepcopy(self.docs[key])

    def change(self, step: Step) -> None:
        kind, nodes = step[0], self.of("Node")
        picked = nodes[step[1] % len(nodes)] if nodes and len(step) > 1 and isinstance(step[1], int) else None
        if kind == "add pod":
            on = picked.split("/")[1] if picked is not None and step[1] < 8 else None  # 8, 9: pending
            doc = shaped(f"q{next(self.added)}", on, step[2], step[3], self.now.isoformat())
            if on is None:
                doc["status"] = {"phase": "Pending"}
            self.put(doc)
        elif kind == "remove pod":
            pods = self.of("Pod")
            if pods:
                self.remove(pods[step[1] % len(pods)])
        elif kind in ("add node", "add booting node"):
            self.put(node(f"m{next(self.added)}", itype=step[1], zone=step[2], created=self.now.isoformat(),
                          initialized=kind == "add node"))
        elif kind == "initialize" and picked is not None:
            doc = self.edited(picked)
            doc["metadata"]["labels"]["karpenter.sh/initialized"] = "true"
            self.put(doc)
        elif kind == "empty" and picked is not None:  # the node stays, without pods: emptiness deletes it
            name = picked.split("/")[1]
            for key in self.of("Pod"):
                if self.docs[key]["spec"].get("nodeName") == name:
                    self.remove(key)
        elif kind == "remove node" and picked is not None:
            name = picked.split("/")[1]
            for key in self.of("Pod"):
                if self.docs[key]["spec"].get("nodeName") == name:
                    self.remove(key)
            self.remove(picked)
        elif kind == "cordon" and picked is not None:
            doc = self.edited(picked)
            doc["spec"]["unschedulable"] = not doc["spec"].get("unschedulable", False)
            self.put(doc)
        elif kind == "deleting" and picked is not None:  # its pods are placed first, on the others
            doc = self.edited(picked)
            doc["metadata"]["deletionTimestamp"] = self.now.isoformat()
            doc["metadata"]["finalizers"] = ["karpenter.sh/termination"]
            self.put(doc)
        elif kind == "zone" and picked is not None:
            doc = self.edited(picked)
            doc["metadata"]["labels"]["topology.kubernetes.io/zone"] = step[2]
            self.put(doc)
        elif kind == "price":
            doc = self.edited("InstanceTypeCatalog/test")
            for itype in doc["spec"]["instanceTypes"]:
                if itype["name"] == step[1]:
                    for offering in itype["offerings"]:
                        offering["price"] = round(offering["price"] * step[2], 6)
            self.put(doc)
        elif kind == "budget":
            doc = self.edited("NodePool/default")
            doc["spec"]["disruption"]["budgets"] = [{"nodes": step[1]}]
            self.put(doc)
        elif kind == "clock":
            self.now += timedelta(minutes=step[1])
        elif kind == "bind pending":  # kube-scheduler binds a pending pod where a pass keeps its room: the node's room
            # in the next pass's start state is the same, and its place in the utilization order moves up
            pending = [k for k in self.of("Pod") if not self.docs[k]["spec"].get("nodeName")]
            if pending:
                key = pending[step[1] % len(pending)]
                _, state = simulation(EngineOptions().view_of(self.objects.snapshot(), self.now))
                namespace = self.docs[key]["metadata"].get("namespace", "default")
                at = state.placed.get(f"{namespace}/{key.split('/')[1]}")
                if at is not None and at < state.s.N:
                    doc = self.edited(key)
                    doc["spec"]["nodeName"] = state.s.nodes[at].name
                    doc["status"] = {"phase": "Running", "startTime": self.now.isoformat(),
                                     "conditions": [{"type": "Ready", "status": "True"}]}
                    self.put(doc)


def answer(result: PassResult) -> Any:
    """Everything a pass decides, placements included (a command's equality leaves them out)."""
    return result, [c.placements for c in result.commands]


def compare(start: list[dict[str, Any]], sequence: list[Step], *, explain: bool = True,
            pace: bool = False) -> tuple[int, int, int, int, int]:
    """Run ``sequence``; after each step a pass with kept verdicts and one without must be equal. Returns how many
    verdicts were answered from kept ones, how many of them in passes after a step that changed something, how
    many kept deletes that reached past the first changed bin held against the changed bins, how many of
    multi-node consolidation's steps alone were answered from kept refusals after a step that changed something, and
    how many of those in passes where a method before consolidation acted (the run that explains the other nodes
    against the cluster its commands leave). ``pace``: the passes at Karpenter's (`EngineOptions.karpenter_pace`)."""
    held = 0
    holds = AloneSession._holds

    def counted(self: AloneSession, state: Any, name: str, found: Any) -> Any:
        nonlocal held
        result = holds(self, state, name, found)
        held += result is not None
        return result

    with patch.object(AloneSession, "_holds", counted):
        hits, after_change, refused, after_acting = _compare(start, sequence, explain, pace)
    return hits, after_change, held, refused, after_acting


def _compare(start: list[dict[str, Any]], sequence: list[Step], explain: bool,
             pace: bool) -> tuple[int, int, int, int]:
    world = World()
    for doc in start:
        world.put(doc)
    options = EngineOptions(explain=explain, karpenter_pace=pace)
    kept = AloneVerdicts()
    trail: list[str] = []
    after_change = refused = after_acting = 0
    for number, step in enumerate([("nothing",), *sequence]):
        world.change(step)
        snapshot = world.objects.snapshot()
        before, refused_before = kept.hits, kept.refusals.hits
        got = run_pass(options.view_of(snapshot, world.now), options, alone=kept)
        want = run_pass(options.view_of(snapshot, world.now), options)
        if step[0] != "nothing":
            after_change += kept.hits - before
            refused += kept.refusals.hits - refused_before
            if any(c.method in BEFORE_CONSOLIDATION for c in want.commands):
                after_acting += kept.refusals.hits - refused_before
        trail.append(f"step {number} {step}: kept answered {kept.hits}, refusals {kept.refusals.hits}, "
                     f"commands {[c.nodes for c in want.commands]}")
        assert answer(got) == answer(want), "\n".join(trail)
    return kept.hits, after_change, refused, after_acting


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(starts(), steps)
def test_kept_verdicts_answer_as_a_pass_computed_whole(start: list[dict[str, Any]], sequence: list[Step]) -> None:
    hits, after_change, held, refused, _ = compare(start, sequence)
    event("verdicts answered from kept ones after a change" if after_change else
          "verdicts answered from kept ones" if hits else "none answered from kept ones")
    if held:
        event("a kept delete held against the bins that changed")
    if refused:
        event("a multi-node step alone answered from a kept refusal after a change")


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(packed_starts(), steps, st.booleans())
def test_kept_refusals_answer_as_a_pass_computed_whole(start: list[dict[str, Any]], sequence: list[Step],
                                                       explain: bool) -> None:
    """The same comparison on packed clusters, where most of what is kept is multi-node's refusals of nodes alone,
    with explanations on and off (off, a replacement is given up as soon as it is known too dear)."""
    _, _, _, refused, after_acting = compare(start, sequence, explain=explain)
    event("a multi-node step alone answered from a kept refusal after a change" if refused else
          "no refusal answered after a change")
    if after_acting:
        event("a refusal answered in the explaining run of a pass where an earlier method acted")


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(packed_starts(), alike_starts(), moving_starts(), replacing_starts()),
       st.one_of(steps, booting_steps), st.booleans())
def test_refusals_at_karpenters_pace_answer_as_a_pass_computed_whole(start: list[dict[str, Any]],
                                                                     sequence: list[Step], explain: bool) -> None:
    """The same comparison with the passes at Karpenter's pace (the back-test's simulations of Karpenter): its
    multi-node search makes no step alone, and single-node consolidation, which makes one command a pass, takes the
    refusals kept from the last pass and of nodes alike before it evaluates a node, and keeps those it finds; nodes
    launched and not initialized yet refuse a replacement for a pod one of them has room for, and such a refusal is
    taken while one of them still has room for one of its pods, naming the pod and node found then."""
    waiting = 0
    still_refused = kept_module.RefusalSession._still_refused

    def counted(self: kept_module.RefusalSession, refusal: kept_module.Refusal) -> kept_module.Refusal | None:
        nonlocal waiting
        taken = still_refused(self, refusal)
        waiting += refusal.waiting and taken is not None
        return taken

    with patch.object(kept_module.RefusalSession, "_still_refused", counted):
        _, _, _, refused, _ = compare(start, sequence, explain=explain, pace=True)
    event("a refusal taken at Karpenter's pace after a change" if refused else
          "no refusal taken at Karpenter's pace after a change")
    if waiting:
        event("a refusal for a pod a node not initialized yet has room for taken")


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(alike_starts(), steps, st.booleans())
def test_refusals_of_nodes_alike_answer_as_a_pass_computed_whole(start: list[dict[str, Any]], sequence: list[Step],
                                                                 explain: bool) -> None:
    """The same comparison on clusters of a few shapes of node, where a node's step alone is answered from the refusal
    of a node alike on the same start state, in the first pass as in the next ones."""
    with alike_refusals() as asked, steps_alike() as stepped:
        compare(start, sequence, explain=explain)
    event("a refusal taken from a node alike" if any(taken for _, taken in asked) else
          "no refusal taken from a node alike")
    steps_answered(stepped)


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(taking_starts(), steps, st.booleans())
def test_steps_of_nodes_alike_answer_as_a_pass_computed_whole(start: list[dict[str, Any]], sequence: list[Step],
                                                              explain: bool) -> None:
    """The same comparison where greedy runs take nodes and then step nodes alike on the state that leaves: a node's
    step is answered from that of a node alike stepped since the run last took one."""
    with steps_alike() as asked:
        compare(start, sequence, explain=explain)
    steps_answered(asked)


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(moving_starts(), steps, st.booleans())
def test_refusals_whose_pods_move_answer_as_a_pass_computed_whole(start: list[dict[str, Any]], sequence: list[Step],
                                                                 explain: bool) -> None:
    """The same comparison where a kept refusal's pods that went to other nodes go to others after a change: the
    refusal is taken with where they go now when its other pods' answers are the same (`ChangedBins.replay`)."""
    with replays() as made:
        compare(start, sequence, explain=explain)
    event("a refusal taken with its pods moved" if any(moved for _, _, moved in made) else
          "no refusal taken with its pods moved")


@settings(max_examples=600, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(starts(), packed_starts(), moving_starts()), binding_steps, st.booleans(), st.booleans())
def test_kept_answers_after_pending_pods_are_bound_answer_as_a_pass_computed_whole(
        start: list[dict[str, Any]], sequence: list[Step], explain: bool, pace: bool) -> None:
    """The same comparison where pending pods are bound where a pass kept their room: a node's room in the start state
    is the same after, and it goes up the utilization order, so the unchanged bins are in another order; the bins that
    moved are asked again as changed ones, and the others answer from what was kept."""
    with reordered() as asked:
        _, _, held, refused, _ = compare(start, sequence, explain=explain, pace=pace)
    moved = any(asked)
    event("unchanged bins asked again for their place" if moved else "no unchanged bin moved")
    if moved and (held or refused):
        event("a kept answer taken after unchanged bins moved")


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(replacing_starts(), steps, st.booleans())
def test_refusals_taken_after_a_command_answer_as_a_pass_computed_whole(start: list[dict[str, Any]],
                                                                       sequence: list[Step], explain: bool) -> None:
    """The same comparison where single-node consolidation makes commands before it asks of nodes that multi-node
    consolidation refused alone, and takes those refusals where they hold on the state the commands leave."""
    taken = 0
    verdict = kept_module.Refusal.verdict

    def counted(self: kept_module.Refusal, why: str) -> Any:
        nonlocal taken
        taken += 1
        return verdict(self, why)

    with patch.object(kept_module.Refusal, "verdict", counted):
        compare(start, sequence, explain=explain)
    event("single-node took a refusal after a command" if taken else "no refusal taken after a command")


@contextmanager
def blind_to_the_start() -> Iterator[None]:
    """Kept deletes taken whatever changed in the state they read."""
    with patch.object(kept_module.Start, "same_up_to", lambda self, other: 10**9):
        yield


@contextmanager
def blind_to_changed_bins() -> Iterator[None]:
    """Kept deletes that reach past the first changed bin taken without looking at the changed bins."""
    with patch.object(single_node.AloneSession, "_holds", lambda self, state, name, found: found):
        yield


def _filling() -> list[dict[str, Any]]:
    """A budget of one node: x, the cheapest to disrupt (one pod), is deleted, its pod onto "big" (the fullest node,
    first in the order); c waits for the budget, and alone its two pods would go to big too (a delete)."""
    return [catalog(), nodepool(budgets=[{"nodes": "1"}]), node("big", itype="m5.xlarge"), node("c"), node("x"),
            pod("big-0", "big", cpu="1500m"), pod("big-1", "big", cpu="1500m"), pod("c-0", "c", cpu="200m"),
            pod("c-1", "c", cpu="200m"), pod("x-0", "x", cpu="100m")]


@contextmanager
def blind_to_what_changed_bins_take() -> Iterator[None]:
    """Kept refusals taken as they were, though a changed bin now takes a pod that no node took."""
    with patch.object(kept_module.ChangedBins, "replay", lambda self, refusal, own: refusal.went):
        yield


def test_a_refusal_blind_to_changed_bins_is_caught() -> None:
    """Two full t3.medium nodes: alone, neither's pods fit on the other and no cheaper node takes them (multi-node's
    greedy run refuses each step alone, and the next pass takes those refusals). Once a-0 leaves, b's first pod
    fits on a and b's verdict names its second pod; a cache that keeps b's refusal though a changed says the old one."""
    start = [catalog(), nodepool(budgets=[{"nodes": "1"}]), node("a", itype="t3.medium"), node("b", itype="t3.medium"),
             pod("a-0", "a", cpu="1500m"), pod("a-1", "a", cpu="300m"), pod("b-0", "b", cpu="1400m"),
             pod("b-1", "b", cpu="400m")]
    sequence: list[Step] = [("clock", 1), ("remove pod", 0)]
    assert compare(start, sequence[:1])[3] == 2  # both steps answered from kept refusals
    with blind_to_what_changed_bins_take(), pytest.raises(AssertionError, match=r"step 2 \('remove pod'"):
        compare(start, sequence)


@contextmanager
def blind_to_moved_bins() -> Iterator[None]:
    """Unchanged bins whose place among the others moved are not asked again (the rest taken as if in order)."""
    with patch.object(kept_module, "_longest_rising", lambda values: frozenset(range(len(values)))):
        yield


def test_a_cache_blind_to_bins_that_moved_up_is_caught() -> None:
    """No budget: every node waits for it, and its delete alone is kept for the next pass. c's larger pod (placed
    first) goes to d, the first other node that takes it, and its smaller one to x, the only node of its zone, which
    also keeps the room of a pending pod of that zone. Once that pod is bound on x, x has the same room in the next
    start state but comes first in the order: c's larger pod goes to x, and the smaller one no longer fits (a replace,
    not a delete). A cache that takes c's delete while x, unchanged, is not asked again still says delete."""
    zone_a = {"topology.kubernetes.io/zone": ZONES[0]}
    start = [catalog(), nodepool(budgets=[{"nodes": "0"}]), node("d", zone=ZONES[1]), node("x", zone=ZONES[0]),
             node("c", zone=ZONES[1]), pod("d-0", "d", cpu="1000m"), pod("x-0", "x", cpu="800m"),
             pod("c-0", "c", cpu="600m"), pod("c-1", "c", cpu="500m", node_selector=zone_a),
             pod("q", None, cpu="400m", phase="Pending", node_selector=zone_a)]
    sequence: list[Step] = [("clock", 1), ("bind pending", 0)]
    with reordered() as asked:
        compare(start, sequence)
    assert any(asked)  # x was asked again for its place
    with blind_to_moved_bins(), pytest.raises(AssertionError, match=r"step 2 \('bind pending'"):
        compare(start, sequence)


@pytest.mark.parametrize("blind", [blind_to_the_start, blind_to_changed_bins])
def test_a_blind_cache_is_caught(blind: Any) -> None:
    """Once big is filled (x's pod still fits there), c's pods no longer do: alone, c would be replaced, not deleted.
    A cache that keeps c's delete whatever changed says the old verdict, and the comparison fails; the real one
    evaluates c again."""
    sequence: list[Step] = [("nothing",), ("add pod", 0, "900m", "plain")]
    assert compare(_filling(), sequence[:1])[0] >= 1  # the unchanged pass answers c from the kept delete
    assert compare(_filling(), sequence)[0] >= 1
    with blind(), pytest.raises(AssertionError, match=r"step 2 \('add pod'"):
        compare(_filling(), sequence)


def test_the_explaining_run_of_a_pass_where_emptiness_acted_answers_from_kept_refusals() -> None:
    """Three full t3.medium nodes, a, b and e, no pod of one fitting on another: multi-node's greedy run refuses each
    step alone. Once e's pod leaves, emptiness deletes e, and the pass explains a and b against the cluster without
    e: their refusals, kept from the pass before (e changed, and it took none of their pods), answer those steps."""
    start = [catalog(), nodepool(budgets=[{"nodes": "1"}]), node("a", itype="t3.medium"), node("b", itype="t3.medium"),
             node("e", itype="t3.medium"), pod("a-0", "a", cpu="1500m"), pod("a-1", "a", cpu="300m"),
             pod("b-0", "b", cpu="1400m"), pod("b-1", "b", cpu="400m"), pod("e-0", "e", cpu="1800m")]
    assert compare(start, [("empty", 2)])[4] == 2


@contextmanager
def blind_to_the_pools_usage() -> Iterator[None]:
    """Kept refusals taken though what the NodePool's nodes count against its limits changed."""
    with patch.object(kept_module._Launches, "same",
                      lambda self, other: self.pools is other.pools and self.settings == other.settings):
        yield


def test_a_refusal_blind_to_the_pools_usage_is_caught() -> None:
    """A CPU limit of 5 with 6 CPUs of nodes: a c5.large's pods would fit on a cheaper t3.medium, but the NodePool
    may launch nothing, so each step alone is refused and kept. Once c is gone, the replacement is within the limit:
    a is replaced. A cache that holds a's refusal without looking at the NodePool's usage says the old verdict."""
    pool = nodepool(budgets=[{"nodes": "1"}])
    pool["spec"]["limits"] = {"cpu": "5"}
    start = [catalog(), pool, node("a", itype="c5.large"), node("b", itype="c5.large"), node("c", itype="t3.medium"),
             pod("a-0", "a", cpu="1500m"), pod("b-0", "b", cpu="1500m"), pod("c-0", "c", cpu="1500m")]
    sequence: list[Step] = [("clock", 1), ("remove node", 2)]
    assert compare(start, sequence[:1])[3] >= 2  # the steps alone answered from kept refusals
    assert compare(start, sequence)[3] >= 1
    with blind_to_the_pools_usage(), pytest.raises(AssertionError, match=r"step 2 \('remove node'"):
        compare(start, sequence)


def _replaced_first() -> list[dict[str, Any]]:
    """x (one pod, the cheapest type, no room for its pod elsewhere) and e (its first pod goes to x, its second finds
    no room, and a new node would cost what e costs) are refused alone both ways; c (a c5.large) is replaced by a
    cheaper t3.medium, its small pod onto x. Single-node consolidation replaces c, and then asks of e on the state
    that leaves."""
    return [catalog(), nodepool(), node("x", itype="t3.medium"), node("c", itype="c5.large"),
            node("e", itype="t3.medium"), pod("x-0", "x", cpu="1400m"), pod("c-0", "c", cpu="1700m"),
            pod("c-1", "c", cpu="300m"), pod("e-0", "e", cpu="500m"), pod("e-1", "e", cpu="400m"),
            pod("e-2", "e", cpu="300m")]


@contextmanager
def blind_to_what_a_command_changed() -> Iterator[None]:
    """Single-node consolidation takes multi-node's refusals after a command without looking at the bins it changed."""
    def sessions(ctx: Any) -> Any:
        session = kept_refusals(ctx)
        if session is not None:
            session.changed.at = frozenset()
        return session

    with patch.object(single_node, "kept_refusals", sessions):
        yield


def test_after_a_command_single_node_takes_the_refusals_that_hold() -> None:
    """Two full t3.medium nodes refused alone both ways, and c, replaced by a cheaper node: after c's command, the
    refusals of a and b hold on the state it leaves (c is closed, its pod on a new node), and single-node
    consolidation takes them instead of evaluating the nodes again."""
    start = [catalog(), nodepool(), node("a", itype="t3.medium"), node("b", itype="t3.medium"),
             node("c", itype="c5.large"), pod("a-0", "a", cpu="1500m"), pod("a-1", "a", cpu="300m"),
             pod("b-0", "b", cpu="1500m"), pod("b-1", "b", cpu="300m"), pod("c-0", "c", cpu="1800m")]
    assert compare(start, [("clock", 1)])[3] == 4  # a and b: multi-node's steps and single-node's verdicts


def test_a_refusal_blind_to_what_a_command_changed_is_caught() -> None:
    """After c's replace put c-1 on x, e's first pod no longer fits there: e is evaluated again and its verdict names
    e-0. A cache blind to the bins the command changed keeps e's refusal, which names e-1."""
    assert compare(_replaced_first(), [("clock", 1)])[3] >= 2  # x's steps, at least
    with blind_to_what_a_command_changed(), pytest.raises(AssertionError, match=r"step 0 \('nothing'"):
        compare(_replaced_first(), [])


def _moving(a_1: str) -> list[dict[str, Any]]:
    """a and b (not disrupted) take pods; x's step alone is refused at x-0 (no room, and no cheaper node holds it with
    x-2, which finds no room after x-1 took b's), and y's (one pod that fills it) as well. Removing a-1 (``a_1``) frees
    room on a, the first node, for x-1."""
    keep = {"karpenter.sh/do-not-disrupt": "true"}
    return [catalog(), nodepool(budgets=[{"nodes": "1"}]), node("a", itype="t3.medium", annotations=keep),
            node("b", itype="t3.medium", annotations=keep), node("x", itype="c5.xlarge"), node("y", itype="c5.xlarge"),
            pod("a-0", "a", cpu="1500m"), pod("a-1", "a", cpu=a_1), pod("b-0", "b", cpu="1500m"),
            pod("x-0", "x", cpu="1800m"), pod("x-1", "x", cpu="300m"), pod("x-2", "x", cpu="300m"),
            pod("y-0", "y", cpu="3900m")]


def test_a_refusal_holds_with_its_pod_on_the_room_freed_before_its_node() -> None:
    """x-1 went to b; once a-1 leaves, a (before b) takes it. x-2 still finds no room on b (x-0 and x-2 on a new node
    cost no less than x): the refusal holds, with x-1 on a."""
    start = _moving("400m")
    start[-2] = pod("x-2", "x", cpu="600m")  # more than b has left, even without x-1
    with replays() as made:
        compare(start, [("clock", 1), ("remove pod", 1)])
    assert ("default/x-0", (("default/x-1", "a"),), True) in made, made


def test_a_pod_moved_away_leaves_room_for_a_later_one() -> None:
    """x-1 went to b; once a-1 leaves, a takes it, and b's room it no longer takes holds x-2, which went onto the new
    node: x-0 alone is then replaced by a t3.medium, cheaper than x. The refusal does not hold (a replay that asked b as
    it was in the record would keep it), and the pass replaces x."""
    with replays() as made:
        compare(_moving("400m"), [("clock", 1), ("remove pod", 1)])
    assert ("default/x-0", (("default/x-1", "b"),), False) in made and ("default/x-0", None, False) in made, made


def _alike(names: tuple[str, ...], big: str, small: str) -> list[dict[str, Any]]:
    """Full node f, and t3.medium nodes ``names`` alike: the replicas of two Deployments, ``big`` and ``small``."""
    docs = [catalog(), nodepool(budgets=[{"nodes": "1"}]), node("f", itype="t3.medium"),
            pod("f-0", "f", cpu="1900m", labels={"app": "filler"})]
    for name in names:
        docs += [node(name, itype="t3.medium"), pod(f"{name}-0", name, cpu=big, labels={"app": "big"}),
                 pod(f"{name}-1", name, cpu=small, labels={"app": "small"})]
    return docs


def test_nodes_alike_take_the_refusal_of_the_first() -> None:
    """x, y and z are alike and full: alone, none's pods fit on another node, and a new node costs what each does. The
    first pass steps x and takes its refusal for y and z, and so does every pass after (their kept refusals hold)."""
    with alike_refusals() as asked:
        compare(_alike(("x", "y", "z"), "1500m", "400m"), [("clock", 1)])
    assert [name for name, taken in asked[:4] if taken] == ["y", "z"], asked  # the first pass asks of f, x, y, z


@pytest.mark.parametrize("case", ["a pod of x went onto y", "x has room for a pod of y"])
def test_a_node_alike_whose_step_may_differ_is_stepped(case: str) -> None:
    """x and y are alike, and one has a DaemonSet pod that leaves it no room for a small pod. On x: x's small pod goes
    onto y, so y's step cannot be x's (y is taken out in it). On y: x's small pod goes onto the new node, but x, open in
    y's step, takes y's small pod: not x's step either. y is stepped, and the passes answer as ones computed whole."""
    start = _alike(("x", "y"), "1200m", "300m")
    fuller = "x" if case == "a pod of x went onto y" else "y"
    start.append(pod(f"{fuller}-d", fuller, cpu="400m", ns="kube-system", labels={"app": "agent"},
                     owner=("DaemonSet", "agent")))
    with alike_refusals() as asked:
        compare(start, [("clock", 1)])
    assert ("y", False) in asked and ("y", True) not in asked, asked


def test_refusals_are_not_taken_beside_a_replacement_left_open() -> None:
    """Three t3.medium nodes alike and two c5.large alike, full, refused alone. Once m5.xlarge costs half as much,
    multi-node consolidation replaces both c5.large nodes by one; the run that explains the others places the command
    on its replacement and leaves it open. Once that run's single-node consolidation makes a command, it asks of n1
    and n2 on a state where the open replacement has room for their pods (their verdicts are deletes). Their kept
    refusals, replayed against the existing nodes only, would say they fit nowhere: none is taken beside an open new
    node."""
    start: list[dict[str, Any]] = [catalog(), nodepool(budgets=[{"nodes": "1"}])]
    for i, (itype, shape) in enumerate((("t3.medium", 0),) * 3 + (("c5.large", 2),) * 2):
        start += [node(f"n{i}", itype=itype), pod(f"p{i}-0", f"n{i}", cpu="1500m", labels={"app": f"shape{shape}-0"}),
                  pod(f"p{i}-1", f"n{i}", cpu="400m", labels={"app": f"shape{shape}-1"})]
    compare(start, [("budget", "2"), ("price", "m5.xlarge", 0.5)])


def _after_a_take(names: tuple[str, ...], fuller: str | None = None, *, big: str = "1500m",
                  small: str = "450m", itype: str = "t3.medium", daemon: str = "2000m") -> list[dict[str, Any]]:
    """Node e, whose one tiny pod selects r (an m5.xlarge with 500m left), and nodes ``names`` alike: the replicas of
    two Deployments, ``big`` and ``small``, on ``itype``; ``fuller`` one of them with a DaemonSet pod of ``daemon``.
    Multi-node consolidation's delete-only run takes e first, and then steps the others on the state that leaves."""
    docs = [catalog(), nodepool(budgets=[{"nodes": "100%"}]), node("r", itype="m5.xlarge"),
            pod("r-0", "r", cpu="3500m", labels={"app": "filler"}), node("e"),
            pod("e-0", "e", cpu="10m", labels={"app": "e"}, node_selector={"kubernetes.io/hostname": "r"})]
    for name in names:
        docs += [node(name, itype=itype), pod(f"{name}-0", name, cpu=big, labels={"app": "big"}),
                 pod(f"{name}-1", name, cpu=small, labels={"app": "small"})]
    if fuller is not None:
        docs.append(pod(f"{fuller}-d", fuller, cpu=daemon, ns="kube-system", labels={"app": "agent"},
                        owner=("DaemonSet", "agent")))
    return docs


def test_steps_of_nodes_alike_after_a_take_answer_from_the_first() -> None:
    """x, y and z are alike and full. Once the delete-only run has taken e, x's big pod finds no room: the run goes on
    without x, and so it does without y and z, whose steps are x's."""
    with steps_alike() as asked:
        compare(_after_a_take(("x", "y", "z")), [("clock", 1)])
    assert ("y", "refused") in asked and ("z", "refused") in asked, asked


def test_steps_alone_of_nodes_alike_answer_from_the_first() -> None:
    """x, y and z are c5.large nodes alike, full: alone, the big pod of each finds no room, and a t3.medium, cheaper,
    takes both its pods. The delete-only run carries x on to that replacement, and takes x's step for y and z."""
    start = [catalog(), nodepool(budgets=[{"nodes": "1"}]), node("f", itype="t3.medium"),
             pod("f-0", "f", cpu="1900m", labels={"app": "filler"})]
    for name in ("x", "y", "z"):
        start += [node(name, itype="c5.large"), pod(f"{name}-0", name, cpu="1500m", labels={"app": "big"}),
                  pod(f"{name}-1", name, cpu="300m", labels={"app": "small"})]
    with steps_alike() as asked:
        compare(start, [("clock", 1)])
    assert ("y", "alone") in asked and ("z", "alone") in asked, asked


@pytest.mark.parametrize("case", ["a pod of a went onto b", "a has room for the pods of b"])
def test_a_step_alike_that_may_differ_is_made(case: str) -> None:
    """a and b are c5.xlarge nodes alike, one with a DaemonSet pod besides. Once e is taken: with a fuller, a's big pod
    goes onto b and its small one finds no room, so b's step cannot be a's (b is taken out in it); with b fuller, a's
    pods find no room, but a, open in b's step, takes both of b's pods (b is then taken). b is stepped, and the passes
    answer as ones computed whole."""
    if case == "a pod of a went onto b":
        start = _after_a_take(("a", "b"), "a", big="1200m", small="1000m", itype="c5.xlarge", daemon="1400m")
    else:
        start = _after_a_take(("a", "b"), "b", big="1000m", small="500m", itype="c5.xlarge", daemon="2000m")
    with steps_alike() as asked:
        compare(start, [("clock", 1)])
    assert ("b", "stepped") in asked and ("b", "refused") not in asked, asked


@contextmanager
def waiting_refusals() -> Iterator[list[tuple[str, str | None]]]:
    """Each refusal for a pod a node not initialized yet has room for asked whether it is refused still
    (`RefusalSession._still_refused`): its first pod, and the sentence of the refusal taken (None: not taken)."""
    asked: list[tuple[str, str | None]] = []
    real = kept_module.RefusalSession._still_refused

    def recorded(self: kept_module.RefusalSession, refusal: kept_module.Refusal) -> kept_module.Refusal | None:
        taken = real(self, refusal)
        if refusal.waiting:
            asked.append((refusal.first.key, None if taken is None or taken.replacement is None
                          else taken.replacement.text))
        return taken

    with patch.object(kept_module.RefusalSession, "_still_refused", recorded):
        yield asked


def test_a_refusal_for_a_node_not_initialized_yet_holds_while_that_node_has_room() -> None:
    """At Karpenter's pace x (a c5.large) is not replaced by a cheaper t3.medium while m0, launched and not initialized
    yet, has room for x-0: the refusal is taken on the next pass, naming m0 again. Once a pending pod takes m0's room,
    it no longer holds (a cache that kept it would keep x), and the pass replaces x."""
    start = [catalog(), nodepool(consolidate_after="0s", budgets=[{"nodes": "1"}]),
             node("f", itype="t3.medium"), pod("f-0", "f", cpu="1900m", started=ago(minutes=30)),
             node("x", itype="c5.large"), pod("x-0", "x", cpu="1200m", started=ago(minutes=30))]
    sequence: list[Step] = [("add booting node", "t3.medium", ZONES[0]), ("clock", 1), ("add pod", 8, "1500m", "plain")]
    with waiting_refusals() as asked:
        compare(start, sequence, pace=True)
    held = [text for pod_key, text in asked if pod_key == "default/x-0"]
    assert held and held[0] is not None and "node m0 has room for it" in held[0], asked
    assert held[-1] is None, asked  # m0 full: asked again, not taken
