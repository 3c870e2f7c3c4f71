"""A planner that answers passes from the last one (``PassInputs``) decides as one that computes every pass.

Two planners watch the same cluster objects, each with its own decision store, and go through the same random
sequence of changes: pods added and removed, nodes added and removed (with their pods), an instance type's price and
the NodePool's budget changed, decisions written and ended in the store, holds created there, and the clock moved (a
few minutes, to just before the last pass's ``revisit_at``, to it exactly, or far past it). One reuses
(``PassInputs``, as the distributed planner does by default: the store read at every pass; or counting the store's
writes, as the embedded mode does; a pass it computes takes the alone verdicts kept from the last,
``PassInputs.alone``), the other computes every pass whole (``reuse=False``). After every step both plan once and
must give the same commands (their explanations included), the same nodes left alone for the same causes, the same
budgets and the same findings (with their first-seen times); their own proposals then make their stores alike again.

What is compared of a node left alone is its cause, not its sentence: a reused answer keeps the words of the pass
it came from (a stabilization window's "launched 3m ago"; ``ebb.core.revisit``). The alone verdicts' every value is
compared by ``test_alone_verdicts_properties.py``, pass by pass. The test can fail: planners whose
collaborator misses a change of the store, or ignores ``revisit_at``, are caught by the same comparison
(``test_a_stale_input_is_caught``)."""

from __future__ import annotations

import asyncio
import copy
import itertools
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ebb.adapters.bus import InMemoryBus
from ebb.adapters.snapshot_store import SnapshotStore
from ebb.adapters.store.decision_store import DecisionStore
from ebb.adapters.store.models import metadata
from ebb.core.engine import PassResult
from ebb.core.methods.base import EngineOptions
from ebb.core.plan import command_json
from ebb_consolidation_planner.leadership import AlwaysLeader
from ebb_consolidation_planner.metrics import Metrics
from ebb_consolidation_planner.pass_inputs import PassInputs, PassRead
from ebb_consolidation_planner.planner import Planner
from ebb_embedded.store import WriteCount
from tests.kit.builders import NOW, ago, catalog, node, nodepool, pod, proposed
from tests.kit.messages import cluster_object

TYPES = ("m5.large", "c5.large", "m5.xlarge", "t3.medium")
CPUS = ("100m", "300m", "700m", "1200m")

Step = tuple[Any, ...]
#: makes the reusing planner's collaborator from the objects, its store and the count of that store's writes
Inputs = Callable[[SnapshotStore, DecisionStore, WriteCount], PassInputs[Any]]


@st.composite
def starts(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A NodePool whose answers move with time (consolidateAfter, expireAfter, a stabilization window), with a budget
    of one node (the others wait for it) or of all, and 2-5 nodes with 0-3 pods each."""
    docs: list[dict[str, Any]] = [catalog(), nodepool(
        consolidate_after=draw(st.sampled_from(["0s", "2m", "10m"])),
        expire_after=draw(st.sampled_from([None, "3h", "100h"])),
        stabilization_window=draw(st.sampled_from([None, "5m"])),
        budgets=[{"nodes": draw(st.sampled_from(["1", "100%"]))}])]
    for i in range(draw(st.integers(2, 5))):
        docs.append(node(f"n{i}", itype=draw(st.sampled_from(TYPES)), created=ago(minutes=draw(st.integers(0, 300)))))
        docs.extend(pod(f"p{i}-{j}", f"n{i}", cpu=draw(st.sampled_from(CPUS)),
                        started=ago(minutes=draw(st.integers(0, 30)))) for j in range(draw(st.integers(0, 3))))
    return docs


steps = st.lists(st.one_of(
    st.tuples(st.just("add pod"), st.integers(0, 7), st.sampled_from(CPUS)),
    st.tuples(st.just("remove pod"), st.integers(0, 50)),
    st.tuples(st.just("add node"), st.sampled_from(TYPES)),
    st.tuples(st.just("remove node"), st.integers(0, 7)),
    st.tuples(st.just("write decision"), st.integers(0, 7)),
    st.tuples(st.just("end decision"), st.integers(0, 7)),
    st.tuples(st.just("hold"), st.integers(0, 7), st.integers(1, 90)),
    st.tuples(st.just("price"), st.sampled_from(TYPES), st.sampled_from([0.5, 1.5])),
    st.tuples(st.just("budget"), st.sampled_from(["0", "1", "100%"])),
    st.tuples(st.just("clock"), st.sampled_from(["minutes", "before revisit", "at revisit", "far"]),
              st.integers(1, 20)),
    st.tuples(st.just("nothing")),
), min_size=1, max_size=12)


@dataclass
class World:
    """The cluster objects both planners read, their clock, and the objects added so far."""

    objects: SnapshotStore
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


def answer(planner: Planner, result: PassResult | None) -> Any:
    """What a pass decides, as the comparison reads it."""
    if result is None:
        return None
    blocked = [(b.node, b.method, b.cause.kind, b.cause.inner.kind if b.cause.inner else None) for b in result.blocked]
    found = sorted((f.node, f.kind, f.since) for fs in planner.findings.values() for f in fs)
    return [command_json(c) for c in result.commands], blocked, result.budgets, found


async def store_at(path: Path) -> tuple[DecisionStore, WriteCount]:
    store = DecisionStore.from_url(f"sqlite:///{path}", "prop")
    async with store.engine.begin() as connection:
        await connection.run_sync(metadata.create_all)
    return store, WriteCount(store.engine)


def planner(objects: SnapshotStore, store: DecisionStore, world: World, inputs: PassInputs[Any]) -> Planner:
    ids = itertools.count()
    return Planner(InMemoryBus(), objects, store, AlwaysLeader(), metrics=Metrics(), clock=lambda: world.now,
                   options=EngineOptions(), decision_ids=lambda: f"dec-{next(ids)}", inputs=inputs)


async def change(world: World, stores: list[DecisionStore], step: Step, last: PassResult | None) -> None:
    kind = step[0]
    nodes = world.of("Node")
    if kind == "add pod":
        on = nodes[step[1] % len(nodes)].split("/")[1] if nodes and step[1] < 6 else None  # 6, 7: pending
        world.put(pod(f"q{next(world.added)}", on, cpu=step[2], started=world.now.isoformat()))
    elif kind == "remove pod":
        pods = world.of("Pod")
        if pods:
            world.remove(pods[step[1] % len(pods)])
    elif kind == "add node":
        world.put(node(f"m{next(world.added)}", itype=step[1], created=world.now.isoformat()))
    elif kind == "remove node" and nodes:
        name = nodes[step[1] % len(nodes)].split("/")[1]
        for key in world.of("Pod"):
            if world.docs[key]["spec"].get("nodeName") == name:
                world.remove(key)
        world.remove(f"Node/{name}")
    elif kind == "price":
        doc = copy.deepcopy(world.docs["InstanceTypeCatalog/test"])
        for itype in doc["spec"]["instanceTypes"]:
            if itype["name"] == step[1]:
                for offering in itype["offerings"]:
                    offering["price"] = round(offering["price"] * step[2], 6)
        world.put(doc)
    elif kind == "budget":
        doc = copy.deepcopy(world.docs["NodePool/default"])
        doc["spec"]["disruption"]["budgets"] = [{"nodes": step[1]}]
        world.put(doc)
    elif kind == "write decision" and nodes:
        name = nodes[step[1] % len(nodes)].split("/")[1]
        for store in stores:
            if name not in await store.live_nodes():
                await store.propose(proposed(f"w{next(world.added)}-{name}", name, now=world.now))
    elif kind == "end decision":
        for store in stores:
            live = sorted(set((await store.live_nodes()).values()))
            if live:
                await store.reject(live[step[1] % len(live)], "ended by the test", world.now)
    elif kind == "hold" and nodes:
        name = nodes[step[1] % len(nodes)].split("/")[1]
        for store in stores:
            await store.create_hold(scope_kind="node", scope=name, reason="test", now=world.now,
                                    expires_at=world.now + timedelta(minutes=step[2]), hold_id=f"h{next(world.added)}")
    elif kind == "clock":
        revisit = last.revisit_at if last is not None else None
        if step[1] == "minutes" or revisit is None or revisit <= world.now:
            world.now += timedelta(minutes=step[2])
        elif step[1] == "before revisit":
            world.now = revisit - timedelta(microseconds=1)
        elif step[1] == "at revisit":
            world.now = revisit
        else:
            world.now = revisit + timedelta(hours=step[2])


def shared(objects: SnapshotStore, store: DecisionStore, _writes: WriteCount) -> PassInputs[Any]:
    """The distributed planner's collaborator: the store read at every pass."""
    return PassInputs(objects, store)


def sole(objects: SnapshotStore, store: DecisionStore, writes: WriteCount) -> PassInputs[Any]:
    """The embedded mode's: the store's writes counted."""
    return PassInputs(objects, store, writes=writes)


async def compare(start: list[dict[str, Any]], sequence: list[Step], reusing: Inputs = shared) -> int:
    """Run ``sequence`` on a reusing planner (its collaborator made by ``reusing``) and on one computing every pass;
    assert they answer alike after every step. Returns the passes the reusing planner answered from the last one."""
    with tempfile.TemporaryDirectory() as tmp:
        objects = SnapshotStore()
        world = World(objects)
        for doc in start:
            world.put(doc)
        (mine, writes), (theirs, _) = await store_at(Path(tmp) / "a.db"), await store_at(Path(tmp) / "b.db")
        try:
            fast = planner(objects, mine, world, reusing(objects, mine, writes))
            full = planner(objects, theirs, world, PassInputs(objects, theirs, reuse=False))
            last: PassResult | None = None
            trail: list[str] = []
            for number, step in enumerate([("nothing",), *sequence]):
                await change(world, [mine, theirs], step, last)
                got, want = await fast.plan_once(), await full.plan_once()
                trail.append(f"step {number} {step} at {world.now.isoformat()}: reused {fast.passes_reused}, "
                             f"commands {[c.nodes for c in want.commands] if want else None}")
                assert answer(fast, got) == answer(full, want), "\n".join(trail)
                last = want
            assert full.passes_reused == 0
            kept = fast.inputs.alone
            if kept is not None and kept.hits:
                event("alone verdicts taken from the last pass")
            return fast.passes_reused
        finally:
            await mine.close()
            await theirs.close()


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(starts(), steps, st.booleans())
def test_a_reusing_planner_answers_as_a_planner_computing_every_pass(start: list[dict[str, Any]], sequence: list[Step],
                                                                    counted: bool) -> None:
    reused = asyncio.run(compare(start, sequence, sole if counted else shared))
    event("passes reused" if reused else "no pass reused")


class StoreBlind(PassInputs[Any]):
    """A collaborator that misses every change of the store: its key is the objects' version and the options."""

    async def read(self, now: datetime, options: EngineOptions) -> PassRead:
        read = await super().read(now, options)
        return PassRead(read.version, None, options, read.busy, read.launched, read.holds)


class ClockBlind(PassInputs[Any]):
    """A collaborator that reuses past ``revisit_at``."""

    def reusable(self, read: PassRead, now: datetime, snapshot: Any = None) -> Any:
        last = self._last
        if last is None or last.result.commands or last.key != read.key:
            return None
        return last.answer


def _ripening() -> list[dict[str, Any]]:
    """Two m5.large whose pods started a minute ago under consolidateAfter 10m: nothing to do until they settle
    (the pass's revisit_at), then n0's small pod moves to n1 and n0 is deleted."""
    return [catalog(), nodepool(consolidate_after="10m"), node("n0", created=ago(hours=5)),
            node("n1", created=ago(hours=5)), pod("p0-0", "n0", cpu="100m", started=ago(minutes=1)),
            pod("p1-0", "n1", cpu="1200m", started=ago(minutes=1))]


@pytest.mark.parametrize(("blind", "sequence"), [
    # a hold written on n0 before the pods settle: a pass must say n0 is held, not merely unsettled
    (StoreBlind, [("hold", 0, 60)]),
    # nothing changes but the clock: at revisit_at n0 is deleted
    (ClockBlind, [("clock", "at revisit", 1)]),
])
def test_a_stale_input_is_caught(blind: type[PassInputs[Any]], sequence: list[Step]) -> None:
    with pytest.raises(AssertionError, match=r"step 1 \("):
        asyncio.run(compare(_ripening(), sequence, lambda objects, store, _writes: blind(objects, store)))


def test_the_comparison_sees_reused_passes_and_commands() -> None:
    """The comparison is not vacuous: passes are reused before revisit_at, and a command comes at it."""
    reused = asyncio.run(compare(_ripening(), [("nothing",), ("clock", "before revisit", 1), ("nothing",),
                                               ("clock", "at revisit", 1)]))
    assert reused == 3
