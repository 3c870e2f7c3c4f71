"""What one pass keeps for the next over the same cluster, and how the next one knows it still holds.

Most of a consolidation pass simulates one node at a time: single-node consolidation's verdicts (and the
explanation of every node that waits for its budget), and multi-node consolidation's greedy runs, which step every
candidate alone before they take one. A planner makes pass after pass over a cluster that changed a little in
between, so it keeps what those simulations found (`single_node.AloneVerdicts`: the deletes; `KeptRefusals`: the
greedy runs' refusals of a node alone) with the start state they were found on (`Start`), and the next pass takes each
one that still holds on its own start state instead of simulating the node again.

What holds is decided for pods whose placement reads only the bins' room, openness and labels: one form (no preference),
no topology constraint (their own, or another pod's against them) and no host port. Such a pod goes to the first open
bin, in the start state's order, with room for it that admits it by its labels and taints, and what each bin answers
depends on that bin alone. So when the bins that did not change kept their order (`Start.changed_in`: an unchanged bin
whose place among them moved, as a node's does when a pending pod it kept room for is bound there, is asked again as a
changed one), a pod that went to an unchanged bin goes there again when no changed bin before it takes it, and a pod
that no existing bin took is still taken by none when no changed bin takes it (`ChangedBins`). A refusal's step is
replayed that way pod by pod (`ChangedBins.replay`): a pod a changed bin takes now moves there, and the bin it left is
asked from then on with the room it kept; the refusal holds while each pod still goes onto an existing node or still
onto none, the pods on its new node being the same. Whatever else a kept answer read (the NodePools, the usage of those
whose limits may refuse a launch, the options) is compared whole, and any difference drops every kept answer. Within a
pass, a node's step alone is also that of a node alike refused before it (the same NodePool, capacity type, price,
capacity and kinds of pods: a Deployment's replicas on nodes of one type), when neither takes the other's pods
(`RefusalSession.held`); and within a greedy run, between two nodes it takes, any step it does not take is that of a
node alike stepped before it (`StepsAlike`). A cache, not state: its answers are those evaluated afresh
(`tests/property/test_alone_verdicts_properties.py`).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter

import numpy as np

from ebb.core.causes import BlockCause, Cause
from ebb.core.model import Interned, Node, Pod
from ebb.core.simulator.arrays import BoolArray, IntArray
from ebb.core.simulator.scheduler import UNEXPLAINED, SimState

_CLASS_KEY = attrgetter("class_key")
_REQUESTS_KEY = attrgetter("requests_key")

#: past this many bins changed since the last pass, a kept answer is taken only when nothing it read changed (a
#: kept delete: every bin up to its reach is the same, `Start.same_up_to`), not checked against each changed bin
MAX_CHANGED = 64


@dataclass(frozen=True, slots=True, eq=False)
class Start:
    """What a simulation of one node reads of the state it starts from, for pods of one form with no topology
    constraint and no host port: per existing node in bin order, the node, its free room and whether it takes pods."""

    resources: tuple[str, ...]
    nodes: tuple[Node, ...]
    free: IntArray
    open: BoolArray

    @classmethod
    def of(cls, state: SimState) -> Start:
        s = state.s
        return cls(s.resources, tuple(s.nodes), state.free[:s.N].copy(), state.open[:s.N].copy())

    def same_up_to(self, other: Start) -> int:
        """How many bins from the first are the same in ``other`` (the same node, room and openness)."""
        if self.resources != other.resources:
            return 0
        same = min(len(self.nodes), len(other.nodes))
        for at, (mine, theirs) in enumerate(zip(self.nodes[:same], other.nodes[:same], strict=True)):
            if mine is not theirs and mine != theirs:
                same = at
                break
        differ = np.flatnonzero((self.free[:same] != other.free[:same]).any(axis=1)
                                | (self.open[:same] != other.open[:same]))
        return int(differ[0]) if len(differ) else same

    def changed_in(self, other: Start) -> list[int] | None:
        """The bins of ``other`` (its indexes, in order) to ask again: those not in this start state with the same
        node, room and openness, and the fewest of the others whose place among them moved (a node whose pending pod
        was bound goes up the utilization order with the same room: the pod had its room already), so that the bins
        not asked keep their order; None when the resources differ."""
        if self.resources != other.resources:
            return None
        old_at = {node.name: at for at, node in enumerate(self.nodes)}
        changed: list[int] = []
        pairs: list[tuple[int, int]] = []  # (other's index, this one's) of the same node
        for at, node in enumerate(other.nodes):
            was = old_at.get(node.name)
            if was is None or (self.nodes[was] is not node and self.nodes[was] != node):
                changed.append(at)
            else:
                pairs.append((at, was))
        if pairs:
            new, old = np.array(pairs, dtype=np.int64).T
            differ = (other.free[new] != self.free[old]).any(axis=1) | (other.open[new] != self.open[old])
            changed += new[differ].tolist()
            same_new, same_old = new[~differ], old[~differ]
            if len(same_old) > 1 and not bool(np.all(same_old[1:] > same_old[:-1])):
                keep = _longest_rising(same_old.tolist())  # the unchanged bins are in another order
                changed += [b for i, b in enumerate(same_new.tolist()) if i not in keep]
        return sorted(changed)


def _longest_rising(values: list[int]) -> frozenset[int]:
    """The positions in ``values`` (distinct) of a longest subsequence that rises (patience sorting, n log n)."""
    tails: list[int] = []  # per length, the last value of the rising run of that length ending lowest so far
    tail_at: list[int] = []  # where that value is in ``values``
    before: list[int] = []  # per position, the position before it in the run it ends (-1 for none)
    for i, value in enumerate(values):
        length = bisect.bisect_left(tails, value)
        if length == len(tails):
            tails.append(value)
            tail_at.append(i)
        else:
            tails[length], tail_at[length] = value, i
        before.append(tail_at[length - 1] if length else -1)
    run: set[int] = set()
    at = tail_at[-1] if tail_at else -1
    while at >= 0:
        run.add(at)
        at = before[at]
    return frozenset(run)


class ChangedBins:
    """The bins of a pass's start state that changed since the last pass's (`Start.changed_in`), the others in the same
    order, and which of them take a pod: open, with room for it at the start, admitting it by its labels and taints
    (found once per kind of pod)."""

    __slots__ = ("_taking", "at", "start", "state")

    def __init__(self, state: SimState, start: Start, at: list[int]) -> None:
        self.state, self.start, self.at = state, start, frozenset(at)
        self._taking: dict[tuple[Interned, Interned], tuple[int, ...]] = {}

    def _takers(self, pod: Pod) -> tuple[int, ...]:
        key = (pod.class_key, pod.requests_key)
        takers = self._taking.get(key)
        if takers is None:
            s, start = self.state.s, self.start
            node_ok, needs = s.classes(pod)[0].node_ok, s.pod_needs(pod)
            takers = self._taking[key] = tuple(
                b for b in sorted(self.at) if start.open[b] and node_ok[b]
                and all(start.free[b, r] >= amount for r, amount in needs))
        return takers

    def take_before(self, pod: Pod, before: int, own: int) -> bool:
        """A changed bin before bin ``before``, other than ``own`` (the node the pod leaves, taken out), takes it."""
        return any(b < before and b != own for b in self._takers(pod))

    def replay(self, refusal: Refusal, own: int) -> tuple[tuple[Pod, str], ...] | None:
        """Where the pods of ``refusal``'s step of node ``own`` (found on the last start state) go on this one, when
        each still goes onto an existing node or still onto none (the new node, or nowhere): the pods that went to an
        existing node, with it (``refusal.went`` itself when none moved); None when one's answer changed or is not
        known from the record.

        The step places its pods in order, each on the first bin that takes it. A bin whose start room and the pods
        the step put on it so far are the same as in the recorded step answers each pod as it did then; the others
        (the bins changed since, and those a pod left or joined in this replay) are asked. So a pod goes to the first
        of those that takes it, when that is before the bin it went to (a pod the record has on no existing node: any
        of them); else where it went, unless that bin is one of those asked and no longer takes it (then the bins
        after it would answer, and the record does not say how: None)."""
        state, start = self.state, self.start
        s, index = state.s, state.s.node_index
        went_to = {pod.key: node for pod, node in refusal.went}
        moved: set[int] = set()  # unchanged bins asked since this replay put a pod elsewhere than the record did
        room: dict[int, IntArray] = {}  # the room now of the asked bins this replay put a pod on, and of the moved
        spent: dict[int, IntArray] = {}  # what this replay (as the record) put on the unchanged bins not moved
        went: list[tuple[Pod, str]] = []
        for pod in refusal.leaving[:len(refusal.went) + len(refusal.nowhere)]:
            node = went_to.get(pod.key)
            was = None if node is None else index.get(node)
            if node is not None and was is None:
                return None  # the node it went to is gone
            needs = s.pod_needs(pod)
            first = next((b for b in self._takers(pod) if b != own
                          and (b not in room or all(room[b][r] >= amount for r, amount in needs))), None)
            if moved:
                node_ok = s.classes(pod)[0].node_ok
                first = min((b for b in moved if (first is None or b < first) and start.open[b] and node_ok[b]
                             and all(room[b][r] >= amount for r, amount in needs)), default=first)
            if was is None:
                if first is not None:
                    return None  # onto an existing node where it went onto none: another step
                continue
            asked = was in self.at or was in moved
            if asked and (first is None or first > was):
                return None  # the bin it went to does not take it now: the bins after it would answer, unrecorded
            now = first if first is not None and (asked or first < was) else was
            if now != was and not asked:  # its room is now the start's less what this replay put there before
                moved.add(was)
                room[was] = start.free[was] - spent.pop(was, 0)
            if now in self.at or now in moved:
                free = room.get(now)
                if free is None:
                    free = room[now] = start.free[now].copy()
                for r, amount in needs:
                    free[r] -= amount
            else:
                free = spent.get(now)
                if free is None:
                    free = spent[now] = np.zeros_like(start.free[now])
                for r, amount in needs:
                    free[r] += amount
            went.append((pod, s.nodes[now].name))
        same = all(mine[1] == theirs[1] for mine, theirs in zip(went, refusal.went, strict=True))
        return refusal.went if same else tuple(went)


def _takes_any(state: SimState, free: IntArray, b: int, pods: Sequence[Pod]) -> bool:
    """Whether bin ``b``, open with room ``free``, takes a pod of one of the kinds (class and requests) of ``pods`` by
    its room and labels."""
    s = state.s
    asked: set[tuple[Interned, Interned]] = set()
    for pod in pods:
        kind = (pod.class_key, pod.requests_key)
        if kind not in asked:
            asked.add(kind)
            if s.classes(pod)[0].node_ok[b] and all(free[r] >= amount for r, amount in s.pod_needs(pod)):
                return True
    return False


def one_per_class(pods: Sequence[Pod]) -> tuple[Pod, ...]:
    """One pod of each class among ``pods`` (the first of it), in the order of their classes' last pods: what `simple`
    is asked of a node's pods."""
    return tuple({pod.class_key: pod for pod in reversed(pods)}.values())


def simple(state: SimState, pods: tuple[Pod, ...], known: dict[Interned, bool], *, counted: bool = False) -> bool:
    """Every pod (a pod of each class) has one form, no topology constraint and no host port, as this pass compiles
    it; with ``counted``, nor does another pod's topology constraint count it (a new node's zone then reads the
    counts). ``known``: the answer per class, kept by the caller for its pass."""
    for pod in pods:
        answer = known.get(pod.class_key)
        if answer is None:
            forms = state.s.classes(pod)
            form = forms[0]
            answer = known[pod.class_key] = len(forms) == 1 and not form.constraints and not form.host_ports \
                and not (counted and (form.matched or form.owned))
        if not answer:
            return False
    return True


@dataclass(frozen=True, slots=True)
class Refusal:
    """A greedy run's step of a node alone that found it consolidates neither way (`multi_node._greedy`): deleted, its
    pod ``first`` found no room on the other nodes (the pods before it went to ``went``'s nodes); replaced, the pods
    from that one on were placed with one new node allowed and the step was refused: one of them fit nowhere
    (``fits_nowhere``) or the replacement was (``replacement``: why). ``nowhere``: the pods no existing node took (that
    first one, those on the new node, the one that fit nowhere); ``leaving``: the node's pods in placement order."""

    leaving: tuple[Pod, ...]
    kinds: tuple[Pod, ...]
    price: float
    went: tuple[tuple[Pod, str], ...]
    nowhere: tuple[Pod, ...]
    first: Pod
    fits_nowhere: bool
    replacement: BlockCause | None
    #: the replacement was refused by `filter_replacement` once its pods were placed (not given up on the way)
    filtered: bool = False
    #: refused so for a pod on the new node that a node not initialized yet has room for, at Karpenter's pace
    #: (`waiting_for_uninitialized`): which pod and node the sentence names is found again where the refusal is taken
    waiting: bool = False
    #: the pod that fit nowhere, not even on the new node, and why, as the step found it (`new_node_why`)
    new: NewNodeWhy | None = None

    def verdict(self, why: str) -> BlockCause | None:
        """Single-node consolidation's verdict on the node (`alone_verdict`; ``why``: the first pod's sentence on the
        state now, `RefusalSession.held`)."""
        return alone_verdict(self.first.key, why, fits_nowhere=self.fits_nowhere, replacement=self.replacement,
                             new=self.new)


def waiting_for_uninitialized(pod: str, node: str) -> BlockCause:
    """Why there is no replacement at Karpenter's pace when node ``node``, not initialized yet, has room for ``pod``,
    which the simulation put on the new node (`ebb.core.methods.base.uninitialized_room`)."""
    return BlockCause(Cause.PODS_FIT_NOWHERE, {"pod": pod, "why": (
        f"node {node} has room for it but is not initialized yet, where Karpenter's scheduler puts it before it opens "
        "a new node, and then does not consolidate")})


#: which pod did not fit even on a new node, and why (`new_node_why`)
NewNodeWhy = tuple[str, str]


def new_node_why(failures: Mapping[str, str], explained: bool, first: str = "", why: str = "") -> NewNodeWhy | None:
    """Which pod a step with one new node allowed found did not fit even so, and why, for `Cause.PODS_FIT_NOWHERE`
    ("pod default/web: no NodePool offers an instance type that fits it within its limits (...)"): of pod ``first``,
    whose sentence without the new node was ``why``, only what the new node adds; None when the step was not
    explained."""
    if not explained or not failures:
        return None
    pod, found = next(iter(failures.items()))
    if found == UNEXPLAINED:
        return None
    if pod == first and why and found.startswith(why + ", and "):
        found = found[len(why) + len(", and "):]
    return pod, found


def alone_verdict(first: str, why: str, *, fits_nowhere: bool, replacement: BlockCause | None,
                  new: NewNodeWhy | None = None) -> BlockCause | None:
    """Single-node consolidation's verdict on a node whose pod ``first`` found no room on the other nodes (``why``),
    when a step alone with a replacement allowed refused it: one of its pods fits nowhere, not even on a new node
    (`Cause.PODS_FIT_NOWHERE`, ``new``: why, `new_node_why`, when known), or the replacement was refused
    (``replacement``, `Cause.NO_REPLACEMENT`); None when neither was found."""
    if fits_nowhere:
        return fits_nowhere_cause(first, why, new)
    return None if replacement is None else BlockCause(Cause.NO_REPLACEMENT, {"pod": first, "why": why}, replacement)


def fits_nowhere_cause(first: str, why: str, new: NewNodeWhy | None) -> BlockCause:
    """`Cause.PODS_FIT_NOWHERE`: pod ``first`` found no room on the other nodes (``why``), and a pod found none on a
    new node either (``new``, when known)."""
    return BlockCause(Cause.PODS_FIT_NOWHERE,
                      {"pod": first, "why": why, "new": "" if new is None else f"pod {new[0]}: {new[1]}"})


@dataclass(frozen=True, slots=True, eq=False)
class _Launches:
    """What a refusal's new node read besides the bins: the compiled NodePools (the same object while nothing in them
    changed), what their nodes count against their limits (nothing of a NodePool whose limits refuse no type at that
    usage, `Placement.limits_may_refuse`: its launches never read it), the NodePools a new node may open in, in order
    (`Scheduler.pool_order`: one past its limits opens none, whatever its usage's row says), and the options and
    spot-to-spot settings that decide when a replacement is given up."""

    pools: object
    usage: tuple[bytes, ...]
    order: tuple[int, ...]
    settings: object

    def same(self, other: _Launches) -> bool:
        return (self.pools is other.pools and self.usage == other.usage and self.order == other.order
                and self.settings == other.settings)


@dataclass
class KeptRefusals:
    """The refusals of nodes alone the last pass's greedy runs found, with its start state (`Start`) and launch facts;
    a pass takes one when its node's pods, price and node are the same, each pod that went to a node goes to one again
    and each pod no node took finds none again (`ChangedBins.replay`). One pass at a time per instance."""

    _last: tuple[Start, _Launches, dict[str, Refusal]] | None = None
    #: steps answered from a kept refusal (for tests and benchmarks)
    hits: int = 0

    def on(self, state: SimState, settings: object, watched: Sequence[str] = ()) -> RefusalSession:
        """A pass's greedy runs on ``state`` (their start state: it is back to it after each step alone);
        ``settings``: what else decides a refusal (the engine options, the NodePools' spot-to-spot); ``watched``: nodes
        set aside that refuse a replacement when one has room for a pod of its (`RefusalSession.held`)."""
        start = Start.of(state)
        pools = state.s.pools
        # a NodePool past its limits says what its nodes counted when the pass began, whatever the state took out
        usage = tuple(row.tobytes() + (state.s.pool_usage()[p].tobytes() if state.s.over_limits(p) else b"")
                      if state.limits_may_refuse(p) else b"" for p, row in enumerate(state.pool_used))
        launches = _Launches(pools, usage, tuple(state.s.pool_order), settings)
        kept: dict[str, Refusal] = {}
        changed: list[int] | None = None
        last = self._last
        # a new node the state holds open (the explaining run places the commands' pods with their replacements, and
        # leaves those open) may take a pod no node took: the replay does not ask it, so nothing kept is taken then
        claims_open = bool(state.open[state.s.N:state.n_bins].any())
        if last is not None and not claims_open and last[1].same(launches):
            changed = last[0].changed_in(start)
            if changed is not None and len(changed) <= MAX_CHANGED:
                kept = last[2]
        return RefusalSession(self, start, launches, kept, ChangedBins(state, start, changed or []),
                              tuple(state.s.node_index[name] for name in watched))


@dataclass
class RefusalSession:
    """One pass's steps of nodes alone (`KeptRefusals.on`); `close` keeps the refusals found or held for the next."""

    owner: KeptRefusals
    start: Start
    launches: _Launches
    last: dict[str, Refusal]
    changed: ChangedBins
    #: bins of nodes set aside that refuse a replacement with a pod one of them has room for (at Karpenter's pace, the
    #: nodes not initialized yet, `ebb.core.methods.base.uninitialized_room`)
    watched: tuple[int, ...] = ()
    found: dict[str, Refusal] = field(default_factory=dict)
    _simple: dict[Interned, bool] = field(default_factory=dict)
    _why: dict[tuple[Interned, Interned, bool, bool, int], str] = field(default_factory=dict)
    #: per shape of a node alone (`_shape`), the first node of it refused on this start state, with its refusal
    _alike: dict[tuple[object, ...], tuple[int, Refusal]] = field(default_factory=dict)

    def held(self, name: str, price: float) -> tuple[Refusal, str] | None:
        """The refusal of node ``name`` (now of ``price``) alone on this start state, and why its first pod found no
        room: the one kept for it when it holds (with where its pods that went to a node go now), else that of a node
        alike refused on this start state when it holds for this one too (`_alike_refusal`); kept for the next pass."""
        state, changed = self.changed.state, self.changed
        own = state.s.node_index[name]
        leaving = state.leaving_ordered_of(name)
        found = self.last.get(name)
        if found is not None and own not in changed.at and found.price == price \
                and self.reads_bins_only(found.kinds) and len(leaving) == len(found.leaving) \
                and all(a is b or a == b for a, b in zip(found.leaving, leaving, strict=True)):
            went = changed.replay(found, own)
            refusal = None if went is None else self._still_refused(
                found if went is found.went else replace(found, went=went))
            if refusal is not None:
                return self._taken(name, own, refusal)
        alike = self._alike_refusal(own, price, leaving)
        refusal = None if alike is None else self._still_refused(alike)
        return None if refusal is None else self._taken(name, own, refusal)

    def _still_refused(self, refusal: Refusal) -> Refusal | None:
        """``refusal``, its pods going where they went, as `filter_replacement` would refuse it on this state, or None
        when it may not. At Karpenter's pace `filter_replacement` first refuses a replacement for a pod on the new node
        that a watched node (not initialized yet) has room for, the first such pod and node in the orders
        `uninitialized_room` asks them (the new node's pods in placement order, the nodes as the view lists them), the
        same question `SimState.first_with_room` answers here. A refusal for that (``waiting``) holds while one has
        room, naming the pod and node found now; any other refusal by `filter_replacement` holds while none has."""
        waits = self.changed.state.first_with_room(refusal.nowhere, self.watched) if refusal.filtered else None
        if not refusal.waiting:
            return refusal if waits is None else None
        if waits is None:
            return None
        replacement = waiting_for_uninitialized(waits[0].key, self.changed.state.s.nodes[waits[1]].name)
        return refusal if replacement == refusal.replacement else replace(refusal, replacement=replacement)

    def _taken(self, name: str, own: int, refusal: Refusal) -> tuple[Refusal, str]:
        self.keep(name, refusal)
        self.owner.hits += 1
        return refusal, self.why(refusal.first, own)

    def _shape(self, own: int, price: float, leaving: Sequence[Pod]) -> tuple[object, ...]:
        """What a step of node ``own`` reads of the node besides which bin it is: its NodePool, capacity type, instance
        type and price (a replacement's launch, the price it must beat, the options of its own type it drops), what it
        counts against its NodePool's limits (taken out, it leaves that room to a launch), and its pods' kinds in
        placement order."""
        s = self.changed.state.s
        node, charge = s.nodes[own], s.pool_charge(own)
        kinds = tuple(zip(map(_CLASS_KEY, leaving), map(_REQUESTS_KEY, leaving), strict=True))  # in C
        return (node.nodepool, node.capacity_type, node.instance_type, price,
                None if charge is None else charge[1].tobytes(), kinds)

    def _alike_refusal(self, own: int, price: float, leaving: list[Pod]) -> Refusal | None:
        """The refusal of node ``own`` alone (``leaving`` its pods in placement order) from that of a node of its shape
        (`_shape`) refused on this start state, when it holds: its pods, of the same kinds in the same order, go where
        that node's went, when none of them went onto this node and that node takes none of them (open now where it
        was taken out). Every other bin answers both steps alike: the first bin that takes each pod is the same, and so
        are the pods the new node gets, and what it launches and costs."""
        if not leaving:
            return None
        source = self._alike.get(self._shape(own, price, leaving))
        if source is None or not self.reads_bins_only(source[1].kinds):
            return None
        other, refusal = source
        state, start = self.changed.state, self.start
        s = state.s
        mine = s.nodes[own].name
        if any(node == mine for _, node in refusal.went):
            return None  # a pod of the other node went onto this one
        if start.open[other] and _takes_any(state, start.free[other], other, refusal.leaving):
            return None  # the other node may take one of this node's pods
        at = {pod.key: i for i, pod in enumerate(refusal.leaving)}
        ours = tuple(leaving)
        return Refusal(ours, one_per_class(ours), price,
                       tuple((ours[at[pod.key]], node) for pod, node in refusal.went),
                       tuple(ours[at[pod.key]] for pod in refusal.nowhere), ours[at[refusal.first.key]],
                       refusal.fits_nowhere, refusal.replacement, refusal.filtered, refusal.waiting,
                       None if refusal.new is None or refusal.new[0] not in at else
                       (ours[at[refusal.new[0]]].key, refusal.new[1]))

    def why(self, pod: Pod, own: int) -> str:
        """`SimState.why_no_room` of ``pod`` with node ``own`` taken out, once per kind of pod and what that node
        changes of the sentence (whether it takes pods and matches the pod, and which node set aside it is)."""
        state, start = self.changed.state, self.start
        key = (pod.class_key, pod.requests_key, bool(start.open[own]),
               bool(state.s.classes(pod)[-1].node_ok[own]), own if own in state.aside else -1)
        known = self._why.get(key)
        if known is None:
            known = self._why[key] = state.why_no_room(pod, own)
        return known

    def reads_bins_only(self, pods: tuple[Pod, ...]) -> bool:
        """`simple`, with ``counted``, for this pass."""
        return simple(self.changed.state, pods, self._simple, counted=True)

    def record(self, name: str, leaving: Sequence[Pod], at: int, price: float, why: str, *, fits_nowhere: bool,
               replacement: BlockCause | None, filtered: bool = False, waiting: bool = False,
               new: NewNodeWhy | None = None) -> None:
        """Keep the refusal of node ``name`` (of ``price``) alone just found, the state as its placements left it:
        the pods ``leaving`` it in placement order went onto the other nodes up to ``leaving[at]``, which found no room
        there (``why``), and from it on were placed with one new node allowed, refused (a pod that fits nowhere, or
        ``replacement``; ``filtered``: by `filter_replacement`, ``waiting``: for a pod a node not initialized yet has
        room for; ``new``: which pod fit nowhere and why, `new_node_why`). Kept with where each pod went when every
        pod reads only the bins' room, openness and labels and ``why`` is the sentence the bins make again (`why`)."""
        state = self.changed.state
        s = state.s
        own = s.node_index[name]
        went: list[tuple[Pod, str]] = []
        nowhere: list[Pod] = []
        for i, pod in enumerate(leaving):
            b = state.placed.get(pod.key)
            if b is None or b == own:  # not placed: the pod that fit nowhere, or (after a give-up) one not tried
                if i < at or (i == at and not fits_nowhere):
                    return
                if fits_nowhere:
                    nowhere.append(pod)
                break
            if b < s.N:  # onto an existing node: the pods before the first without room, and pods after it
                if i == at:
                    return
                went.append((pod, s.nodes[b].name))
            elif i < at:
                return
            else:  # onto the new node
                nowhere.append(pod)
        kinds = one_per_class(leaving)
        if not self.reads_bins_only(kinds) or self.why(leaving[at], own) != why:
            return
        self.keep(name, Refusal(tuple(leaving), kinds, price, tuple(went), tuple(nowhere), leaving[at], fits_nowhere,
                                replacement, filtered, waiting, new))

    def keep(self, name: str, refusal: Refusal) -> None:
        """Keep ``refusal``, found on this start state for node ``name`` alone, for the next pass, and for the nodes of
        its shape on this one (`_alike_refusal`)."""
        self.found[name] = refusal
        own = self.changed.state.s.node_index[name]
        self._alike.setdefault(self._shape(own, refusal.price, refusal.leaving), (own, refusal))

    def close(self) -> None:
        """Keep this pass's start state and the refusals found or held on it for the next pass."""
        self.owner._last = (self.start, self.launches, self.found)


@dataclass(frozen=True, slots=True)
class Stepped:
    """A greedy run's step of a node that was not taken (`StepsAlike`): the node's bin, the existing nodes its pods
    went onto, and for a step alone of the delete-only run whose replacement would be taken, its first pod without
    room (the index in the node's pods in placement order, and why)."""

    node: int
    went: frozenset[int]
    first: tuple[int, str] | None


@dataclass
class StepsAlike:
    """The steps of one greedy run (`multi_node._greedy`) between two nodes it takes, where each step starts from the
    same state (it is rolled back): a node's step is that of a node of its shape (`RefusalSession._shape`) stepped
    before it, when none of that node's pods went onto this one and that node, open, takes none of this one's pods,
    and their pods read only the bins' room, openness and labels. Every other bin, and the new nodes, answer both steps
    alike, as for a refusal of a node alike (`RefusalSession._alike_refusal`). Kept: the steps that were refused by
    the placement or the price (a pod without room, a replacement too dear or refused as spot, no more saved), and a
    step alone of the delete-only run that found a pod without room and a replacement that would be taken."""

    session: RefusalSession
    _steps: dict[tuple[object, ...], Stepped] = field(default_factory=dict)

    def clear(self) -> None:
        """The run took a node: the state the steps start from changed."""
        self._steps.clear()

    def like(self, name: str, price: float) -> tuple[tuple[str, str] | None] | None:
        """The step of node ``name`` (of ``price``) from a node alike stepped on this state: for a step alone that
        found a pod without room, that pod of this node and why, else None (in a one-tuple); None when there is no
        such node or the step may differ."""
        state, session = self.session.changed.state, self.session
        own = state.s.node_index[name]
        leaving = state.leaving_ordered_of(name)
        if not leaving:
            return None
        source = self._steps.get(session._shape(own, price, leaving))
        if source is None or own in source.went:
            return None
        if state.open[source.node] and _takes_any(state, state.free[source.node], source.node, leaving):
            return None
        if source.first is None:
            return (None,)
        pod = leaving[source.first[0]]
        return ((pod.key, session.why(pod, own)),)

    def note(self, name: str, price: float, leaving: Sequence[Pod], first: tuple[int, str] | None = None) -> None:
        """Keep the step of node ``name`` (of ``price``; ``leaving``: its pods in placement order) just made, the state
        as its placements left it; ``first``: for a step alone, its first pod without room (index, why), kept only when
        that sentence is the one the bins make again (`RefusalSession.why`)."""
        session = self.session
        state = session.changed.state
        own = state.s.node_index[name]
        if not leaving or not session.reads_bins_only(one_per_class(leaving)):
            return
        if first is not None and session.why(leaving[first[0]], own) != first[1]:
            return
        placed, n = state.placed, state.s.N
        went = frozenset(b for pod in leaving if (b := placed.get(pod.key)) is not None and b < n and b != own)
        self._steps.setdefault(session._shape(own, price, leaving), Stepped(own, went, first))
